"""Campaign 3's follow-up: the defects its closing note listed as noted, not changed.

* ``./~/x`` given to an option typed as a path (``--config``, ``-o``, ``--plot-dir``, ``--data-dir``,
  ``--into-checkpoint``...) reached the command as ``~/x`` (pathlib drops the ``./``), which was then
  expanded to $HOME/x wherever the path was read or written: another file, silently. It is the folder
  ``~`` in the working folder now; a bare ``~/x`` means what it meant.
* A checkpoint target ``./~/ckpt`` was $HOME/ckpt: test_campaign3_followup_targets.py.
* Three one-line messages that named no fix: every target distance 0, ``-t /dev/zero`` (the hub's
  "Repo id must be..."), and texts of one token (which were told to raise --max-length).
* A file option's trailing slash (``-o c.safetensors/``) was read from ``sys.argv``, so an in-process
  run with other arguments (typer's CliRunner) saw the wrong words: now the parser's record.

Every case runs as a user types it (harness.py): the exit code, one ``error:`` line, nothing written
on a refusal, and here also nothing written into $HOME.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import TINY_TRAIN, train_sets
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from geoanalyze.cli.app import app
from geoanalyze.cli.options import literal_path

from .harness import Sandbox, tree

WS = ["-t", "whitespace"]
QUICK = ["--compare", "", "--null-draws", "2"]




def written(home: Path) -> list[str]:
    """What a run left in $HOME, the caches and matplotlib's settings aside."""
    return sorted(name for name in tree(home) if not name.startswith((".cache", ".config")))


# --- 1. options typed as paths ---------------------------------------------------------------

#: (id, command line, what it must have written under ./~ in the sandbox)
OUTPUTS: list[tuple[str, list[str], list[str]]] = [
    ("marginals-o", ["marginals", "drift.txt", *WS, "-o", "./~/c.safetensors"], ["c.safetensors"]),
    ("distances-plot-dir", ["distances", "drift.txt", *WS, "--plot-dir", "./~/figs"], ["figs/hellinger.png"]),
    ("mds-o", ["mds", "drift.txt", *WS, "-o", "./~/m.safetensors"], ["m.safetensors"]),
    ("stress-o", ["stress", "rope:d=16", "--dataset", "drift.txt", *WS, *QUICK, "-o", "./~/r.json"], ["r.json"]),
    (
        "synthesize-o",
        ["datasets", "synthesize", "drift", "-o", "./~/syn", "--n", "10", "--length", "4"],
        ["syn/drift.txt"],
    ),
    (
        "train-o",
        ["train", "--task", "order", *train_sets(*TINY_TRAIN, "steps=1"), "-o", "./~/run"],
        ["run/metrics.jsonl", "run/checkpoint"],
    ),
]


@pytest.mark.parametrize(("args", "made"), [c[1:] for c in OUTPUTS], ids=[c[0] for c in OUTPUTS])
def test_an_output_under_dot_slash_tilde_is_written_here(
    sandbox: Sandbox, home: Path, args: list[str], made: list[str]
) -> None:
    """train -o ./~/run once wrote $HOME/run; the others wrote here already and must stay so."""
    sandbox.copy_sample("drift.txt")
    sandbox.accepted(*args, env={"HOME": str(home)})
    assert written(home) == []
    for name in made:
        assert sandbox.path("~").joinpath(name).exists(), name


def test_a_config_under_dot_slash_tilde_is_not_the_homes(sandbox: Sandbox, home: Path) -> None:
    """--config ./~/c.toml once read $HOME/c.toml: another file, silently."""
    (home / "c.toml").write_text("steps = 1\n", encoding="utf-8")
    run = sandbox.refused("train", "--task", "order", "--config", "./~/c.toml", "-o", "run", env={"HOME": str(home)})
    assert str(sandbox.path("~") / "c.toml") in run.errors[0] and "not found" in run.errors[0]
    sandbox.write("~/c.toml", "steps = 1\nsteps = 2\n")  # the folder ~ here: read, and refused for its content
    run = sandbox.refused("train", "--task", "order", "--config", "./~/c.toml", "-o", "run", env={"HOME": str(home)})
    assert str(sandbox.path("~") / "c.toml") in run.errors[0] and "TOML" in run.errors[0]


def test_a_bare_tilde_config_is_still_the_homes(sandbox: Sandbox, home: Path) -> None:
    (home / "c.toml").write_text("steps = 1\nsteps = 2\n", encoding="utf-8")
    # read from $HOME (the sandbox holds no ~), and refused for its content
    sandbox.refused(
        "train",
        "--task",
        "order",
        "--config",
        "~/c.toml",
        "-o",
        "run",
        env={"HOME": str(home)},
        words=("~/c.toml", "TOML"),
    )


def _data_dir(root: Path, lines: int) -> None:
    (root / "sst2").mkdir(parents=True)
    (root / "sst2" / "train.txt").write_text("a b c d\n" * lines, encoding="utf-8")


def test_a_data_dir_under_dot_slash_tilde_is_not_the_homes(sandbox: Sandbox, home: Path) -> None:
    """--data-dir ./~/d once read $HOME/d."""
    _data_dir(home / "d", 3)
    _data_dir(sandbox.path("~") / "d", 7)
    env = {"HOME": str(home)}
    run = sandbox.accepted("marginals", "sst2", "--data-dir", "./~/d", *WS, "-f", "json", env=env)
    assert json.loads(run.stdout)["n_sequences"] == 7
    run = sandbox.accepted("marginals", "sst2", "--data-dir", "~/d", *WS, "-f", "json", env=env)
    assert json.loads(run.stdout)["n_sequences"] == 3


def test_a_checkpoint_to_copy_under_dot_slash_tilde_is_not_the_homes(sandbox: Sandbox, home: Path) -> None:
    """mds --into-checkpoint ./~/ck once looked for $HOME/ck."""
    sandbox.copy_sample("drift.txt")
    (home / "ck").mkdir()
    (home / "ck" / "config.json").write_text("{}", encoding="utf-8")
    args = ["mds", "drift.txt", *WS, "--into-checkpoint", "./~/ck", "--checkpoint-output", "./~/out"]
    run = sandbox.refused(*args, env={"HOME": str(home), "HF_HUB_OFFLINE": "1"}, words=("not found",))
    assert str(sandbox.path("~") / "ck") in run.errors[0] and str(home) not in run.errors[0]


def test_a_trailing_slash_after_dot_slash_tilde_is_still_seen(sandbox: Sandbox, home: Path) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(
        "marginals", "drift.txt", *WS, "-o", "./~/c.safetensors/", env={"HOME": str(home)}, words=("slash",)
    )


TEXTS = st.lists(st.sampled_from(["~", "~x", "~~", ".", "..", "a", "b.txt", ""]), min_size=1, max_size=5)


@given(parts=TEXTS, prefix=st.sampled_from(["./", ".//", "././", "", "a/../"]))
def test_literal_path_names_what_os_path_names(parts: list[str], prefix: str) -> None:
    """Against os.path (which keeps ``./~`` as typed): the same place, and never $HOME's."""
    text = prefix + "/".join(parts)
    if not text or text.startswith("~"):
        return
    path = literal_path(text)
    assert os.path.abspath(path) == os.path.abspath(text)
    assert os.path.abspath(path.expanduser()) == os.path.abspath(text)


@pytest.mark.parametrize("text", ["~", "~/x", "~x/y", "~/./a"])
def test_literal_path_leaves_a_bare_tilde_as_it_was(text: str) -> None:
    assert literal_path(text) == Path(text)


# --- 3. messages that name the problem and the fix --------------------------------------------


def test_all_zero_targets_say_why_and_what_to_do(sandbox: Sandbox) -> None:
    sandbox.write("v1.txt", "w w w w w w w w\n" * 300)
    run = sandbox.refused("stress", "rope:d=16", "--dataset", "v1.txt", *WS, *QUICK)
    for word in ("every target distance is 0", "undefined", "one repeated word", "--min-count", "larger corpus"):
        assert word in run.errors[0], word


def test_a_device_as_tokenizer_is_no_tokenizer_folder_or_hub_id(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    run = sandbox.refused("marginals", "drift.txt", "-t", "/dev/zero", words=("/dev/zero is not a folder", "hub id"))
    assert "Repo id" not in run.errors[0] and "tokenizer.json" in run.errors[0]


def test_a_text_file_as_tokenizer_is_no_tokenizer_folder(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused("marginals", "drift.txt", "-t", "drift.txt", words=("drift.txt is not a folder",))


@pytest.mark.parametrize("command", ["distances", "mds"])
def test_texts_of_one_token_are_told_to_be_longer_not_max_length(sandbox: Sandbox, command: str) -> None:
    """The hint was "raise --max-length to 2 or more", which changes nothing for texts of one token."""
    sandbox.write("tok.txt", "a\nb\n" * 150)
    run = sandbox.refused(command, "tok.txt", *WS, words=("every text is 1 token", "texts of 2 or more tokens"))
    assert "raise --max-length" not in run.errors[0]


def test_a_max_length_of_one_is_told_to_raise_it(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(
        "distances", "drift.txt", *WS, "--max-length", "1", words=("--max-length 1 cut", "raise --max-length")
    )


# --- 4. a trailing slash, read from the parser, not sys.argv ------------------------------------


def _run_app(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, argv: list[str], args: list[str]) -> int:
    sandbox.copy_sample("drift.txt")
    monkeypatch.chdir(sandbox.root)
    monkeypatch.setattr(sys, "argv", argv)
    return CliRunner().invoke(app, args).exit_code


def test_an_in_process_run_reads_its_own_slash(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.argv (another command line) has no slash; the run's own -o has one: refused."""
    argv = ["geoanalyze", "marginals", "drift.txt", "-o", "c.safetensors"]
    assert _run_app(sandbox, monkeypatch, argv, ["marginals", "drift.txt", *WS, "-o", "c.safetensors/"]) == 2
    assert not sandbox.path("c.safetensors").exists()


def test_an_in_process_run_ignores_a_slash_in_sys_argv(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["geoanalyze", "marginals", "drift.txt", "-o", "c.safetensors/"]
    assert _run_app(sandbox, monkeypatch, argv, ["marginals", "drift.txt", *WS, "-o", "c.safetensors"]) == 0
    assert sandbox.path("c.safetensors").is_file()


def test_a_slash_is_not_remembered_by_the_next_run(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["geoanalyze"]
    assert _run_app(sandbox, monkeypatch, argv, ["marginals", "drift.txt", *WS, "-o", "c.safetensors/"]) == 2
    assert _run_app(sandbox, monkeypatch, argv, ["marginals", "drift.txt", *WS, "-o", "c.safetensors"]) == 0
    assert _run_app(sandbox, monkeypatch, argv, ["distances", "drift.txt", *WS, "-o", "d.safetensors"]) == 0
