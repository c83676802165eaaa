"""Campaign 3, path forms: names of non-UTF-8 bytes, a leading dash, a path through a file, a
symbolic-link loop, devices (/dev/null, /dev/zero, /dev/stdin) where a file or folder is expected,
trailing dots and ``..`` chains. Each is one ``error:`` line or the plain numbers, never a hang."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .harness import Sandbox

WS = ["-t", "whitespace"]
QUICK = ["--compare", "", "--null-draws", "2"]
LATIN1 = os.fsdecode(b"caf\xe9.txt")  # a Latin-1 name from an old archive: not UTF-8


def n_sequences(stdout: str) -> int:
    return int(json.loads(stdout)["n_sequences"])


NOT_UTF8: list[tuple[str, list[str]]] = [
    ("marginals-file", ["marginals", LATIN1, *WS]),
    ("marginals-json", ["marginals", LATIN1, *WS, "-f", "json"]),
    ("marginals-glob", ["marginals", "*.txt", *WS]),
    ("marginals-folder-member", ["marginals", "corp", *WS]),
    ("distances-file", ["distances", LATIN1, *WS]),
    ("mds-file", ["mds", LATIN1, *WS]),
    ("stress-dataset", ["stress", "rope:d=16", "--dataset", LATIN1, *WS, *QUICK]),
    ("marginals-output-too", ["marginals", LATIN1, *WS, "-o", "c.safetensors"]),
]


@pytest.mark.parametrize("args", [c[1] for c in NOT_UTF8], ids=[c[0] for c in NOT_UTF8])
def test_a_name_of_non_utf8_bytes_is_named_escaped(sandbox: Sandbox, args: list[str]) -> None:
    """Once exit 3 (UnicodeEncodeError in the cache key): now one line with the bytes escaped."""
    sandbox.copy_sample("drift.txt", LATIN1)
    sandbox.copy_sample("drift.txt", "corp/ok.txt")
    shutil.copy(sandbox.path(LATIN1), sandbox.path("corp") / LATIN1)
    run = sandbox.refused(*args, words=("not valid UTF-8", "caf\\xe9.txt", "convmv"))
    assert "internal error" not in run.errors[0]


def test_an_output_name_of_non_utf8_bytes_is_written(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    out = os.fsdecode(b"o\xff.safetensors")
    sandbox.accepted("marginals", "drift.txt", *WS, "-o", out)
    assert n_sequences(sandbox.accepted("marginals", out, "-f", "json").stdout) == 2000


def test_a_leading_dash_name_is_taken_for_an_option(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt", "-x.txt")
    sandbox.refused("marginals", "-x.txt", *WS, words=("-x",))


@pytest.mark.parametrize("form", [["--", "-x.txt"], ["./-x.txt"]], ids=["double-dash", "dot-slash"])
def test_a_leading_dash_name_after_double_dash_or_dot_slash(sandbox: Sandbox, form: list[str]) -> None:
    sandbox.copy_sample("drift.txt", "-x.txt")
    assert n_sequences(sandbox.accepted("marginals", *WS, "-f", "json", *form).stdout) == 2000


def test_a_folder_named_tilde_is_reached_by_dot_slash(sandbox: Sandbox) -> None:
    """Once read as $HOME/c.txt (pathlib drops the "./", then ~ was expanded): another file."""
    sandbox.copy_sample("drift.txt", "~/c.txt")
    home = sandbox.root.parent / "home"
    (home).mkdir()
    (home / "c.txt").write_text("a b\n", encoding="utf-8")
    run = sandbox.accepted("marginals", "./~/c.txt", *WS, "-f", "json", env={"HOME": str(home)})
    assert n_sequences(run.stdout) == 2000


def test_a_leading_tilde_is_still_the_home_folder(sandbox: Sandbox) -> None:
    home = sandbox.root.parent / "home"
    home.mkdir()
    (home / "c.txt").write_text("a b\nc d\n", encoding="utf-8")
    assert n_sequences(sandbox.accepted("marginals", "~/c.txt", *WS, "-f", "json", env={"HOME": str(home)}).stdout) == 2


@pytest.mark.parametrize(
    ("source", "word"),
    [("drift.txt/b", "drift.txt/b"), ("drift.txt.", "drift.txt."), ("nowhere/../drift.txt", "nowhere/../drift.txt")],
    ids=["through-a-file", "trailing-dot", "dotdot-through-a-missing-folder"],
)
def test_a_path_that_cannot_be_is_one_line(sandbox: Sandbox, source: str, word: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused("marginals", source, *WS, words=(word,))


def test_a_dotdot_chain_back_into_the_folder_is_the_file(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    chain = f"../{sandbox.root.name}/./drift.txt"
    assert n_sequences(sandbox.accepted("marginals", chain, *WS, "-f", "json").stdout) == 2000


@pytest.mark.parametrize("command", ["marginals", "distances", "mds", "stress"])
def test_a_loop_of_symbolic_links_is_named(sandbox: Sandbox, command: str) -> None:
    sandbox.copy_sample("drift.txt")
    os.symlink("loopb", sandbox.path("loopa"))
    os.symlink("loopa", sandbox.path("loopb"))
    args = ["rope:d=16", "--dataset", "loopa", *WS, *QUICK] if command == "stress" else ["loopa", *WS]
    sandbox.refused(command, *args, words=("loopa", "loop of symbolic links"))


DEVICES = [
    (command, device)
    for command in ("marginals", "distances", "mds", "stress")
    for device in ("/dev/null", "/dev/zero", "/dev/stdin")
]


@pytest.mark.parametrize(("command", "device"), DEVICES, ids=[f"{c}-{d[5:]}" for c, d in DEVICES])
def test_a_device_as_corpus_is_refused_without_reading_it(sandbox: Sandbox, command: str, device: str) -> None:
    """/dev/zero never ends: it must be refused by its kind, before a byte is read."""
    sandbox.copy_sample("drift.txt")
    args = ["rope:d=16", "--dataset", device, *WS, *QUICK] if command == "stress" else [device, *WS]
    sandbox.refused(command, *args, words=(device, "not a regular file"))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["distances", "drift.txt", *WS, "-o", "/dev/null/x.safetensors"], ("/dev/null", "is a file")),
        (["stress", "rope:d=16", "--dataset", "drift.txt", *WS, *QUICK, "--plot-dir", "/dev/null"], ("/dev/null",)),
        (["marginals", "drift.txt", *WS, "-o", "/dev/full"], (".safetensors",)),
    ],
    ids=["under-dev-null", "plot-dir-dev-null", "dev-full"],
)
def test_a_device_as_output_is_refused(sandbox: Sandbox, args: list[str], words: tuple[str, ...]) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(*args, words=words)


def _home_with(sandbox: Sandbox) -> tuple[Path, dict[str, str]]:
    home = sandbox.root.parent / "home"
    home.mkdir()
    return home, {"HOME": str(home)}


def test_a_table_under_a_folder_named_tilde_is_not_the_homes(sandbox: Sandbox) -> None:
    """``file:./~/m.safetensors`` once scored $HOME/m.safetensors: another file, silently."""
    sandbox.copy_sample("drift.txt")
    home, env = _home_with(sandbox)
    sandbox.accepted("mds", "drift.txt", *WS, "-o", str(home / "m.safetensors"))
    args = ["stress", "file:./~/m.safetensors", "--dataset", "drift.txt", *WS, *QUICK]
    sandbox.refused(*args, env=env, words=("not found", "m.safetensors"))
    assert json.loads(sandbox.accepted(*args[:1], "file:~/m.safetensors", *args[2:], "-f", "json", env=env).stdout)


@pytest.mark.slow  # loads a real tokenizer, looks in the hub's cache (9 s)
def test_a_tokenizer_under_a_folder_named_tilde_is_not_the_homes(sandbox: Sandbox, minilm_path: Path) -> None:
    """``-t ./~/tok`` once loaded $HOME/tok."""
    sandbox.copy_sample("drift.txt")
    home, env = _home_with(sandbox)
    shutil.copytree(minilm_path, home / "tok", ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx"))
    sandbox.refused("marginals", "drift.txt", "-t", "./~/tok", env=env, words=("./~/tok", "not found"))
    run = sandbox.accepted("marginals", "drift.txt", "-t", "~/tok", "--limit", "5", "-f", "json", env=env)
    assert json.loads(run.stdout)["n_sequences"] == 5
