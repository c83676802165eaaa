"""What a command writes and what it is told (issue 22): ``report -o r.md`` replaces ``r_files/`` only
when it holds nothing but an earlier report's figures (a user's ``r_files/notes.txt`` was deleted);
a single-valued option given twice is refused everywhere (was: the last one won silently); a TOML
``steps = 2^70`` is refused (was: a run that never ends); ``COLUMNS=5`` prints readable cells."""

from __future__ import annotations

import pytest
from helpers import geoanalyze_process

from .harness import Sandbox, invoke

QUICK = ["-t", "whitespace", "--null-draws", "2", "--compare", "", "--no-cache"]
REPORT = ["report", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", "r.md"]


# --- the report's figure folder ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ("r_files/notes.txt", "notes.txt"),
        ("r_files/0-mine.png", "0-mine.png"),
        ("r_files/sub/0-mds.png", "sub"),
        ("r_files/.keep", ".keep"),
    ],
    ids=["notes", "own-png", "subfolder", "hidden"],
)
def test_a_report_never_deletes_a_file_it_did_not_write(sandbox: Sandbox, entry: str, named: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("r.md", "# an earlier report\n")
    sandbox.write("r_files/0-hellinger.png", b"an earlier report's figure")
    sandbox.write(entry, "the user's own")
    sandbox.refused(*REPORT, words=(named, "not written by a report", "r_files", "-o"))


def test_a_report_replaces_a_folder_of_only_an_earlier_reports_figures(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("r.md", "# an earlier report of two targets\n")
    for index in (0, 1):
        for name in ("hellinger", "mds", "null", "shepard", "layers"):
            sandbox.write(f"r_files/{index}-{name}.png", b"an earlier report's figure")
    run = invoke(REPORT, sandbox.root)  # (the harness's unchanged-inputs check would refuse the replacement)
    assert run.code == 0 and not run.errors, str(run)
    figures = sorted(p.name for p in sandbox.path("r_files").iterdir())
    assert figures == [f"0-{name}.png" for name in ("hellinger", "mds", "null", "shepard")]
    assert all(sandbox.path(f"r_files/{name}").read_bytes().startswith(b"\x89PNG") for name in figures)


# --- single-valued options given twice ---------------------------------------------------------------------

TWICE = {
    "limit": ["marginals", "drift.txt", "-t", "whitespace", "--limit", "1", "--limit", "2"],
    "output": ["marginals", "drift.txt", "-t", "whitespace", "-o", "a.safetensors", "-o", "b.safetensors"],
    "output-long-and-short": [
        "marginals",
        "drift.txt",
        "-t",
        "whitespace",
        "--output",
        "a.safetensors",
        "-o",
        "b.safetensors",
    ],
    "max-length": ["marginals", "drift.txt", "-t", "whitespace", "--max-length", "8", "--max-length", "9"],
    "max-length=": ["distances", "drift.txt", "-t", "whitespace", "--max-length=8", "--max-length=9"],
    "tokenizer": ["marginals", "drift.txt", "-t", "whitespace", "-t", "char"],
    "format": ["marginals", "drift.txt", "-t", "whitespace", "-f", "json", "-f", "table"],
    "scale": ["mds", "drift.txt", "-t", "whitespace", "--scale", "2", "--scale", "3"],
    "metric": ["distances", "drift.txt", "-t", "whitespace", "--metric", "hellinger", "--metric", "fisher-rao"],
    "stress-null-draws": ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "--null-draws", "3"],
    "stress-compare": ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "--compare", "sinusoidal"],
    "train-steps": ["train", "-o", "run", "--steps", "1", "--steps", "2"],
    "train-output": ["train", "-o", "run", "-o", "run2"],
    "verify-preset": ["verify", "necessity", "-p", "ci", "-p", "paper", "-o", "out"],
    "synthesize-n": ["datasets", "synthesize", "drift", "-o", "out", "--n", "5", "--n", "6"],
}


@pytest.mark.parametrize("case", list(TWICE))
def test_a_single_valued_option_given_twice_is_refused(sandbox: Sandbox, case: str) -> None:
    sandbox.copy_sample("drift.txt")
    run = sandbox.refused(*TWICE[case], words=("given more than once", "give it once"))
    assert "--help" in run.errors[0]


@pytest.mark.parametrize(
    "sets",
    [["--set", "steps=1", "--set", "steps=2"], ["-s", "model.pe=rope", "-s", " model.pe = alibi"]],
    ids=["steps", "model.pe"],
)
def test_a_setting_given_twice_is_refused(sandbox: Sandbox, sets: list[str]) -> None:
    key = sets[1].partition("=")[0].strip()
    sandbox.refused("train", "-o", "run", *sets, words=(f"{key} is set twice", "set each key once"))
    sandbox.refused("verify", "necessity", "-o", "out", *sets, words=("set twice",))


def test_settings_of_different_keys_pass(sandbox: Sandbox) -> None:
    run = sandbox.accepted("train", "--set", "steps=3", "--set", "seed=2", "--list-keys", "-f", "json")
    assert run.stdout


# --- sizes in a config file ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("steps = 1180591620717411303424", ("steps must be at most 10,000,000", "never end")),  # 2^70
        ("steps = 10000001", ("steps must be at most 10,000,000",)),
        ("eval_every = 1180591620717411303424", ("eval_every must be at most",)),
        ("eval_batches = 1180591620717411303424", ("eval_batches must be at most",)),
        ("warmup_steps = 1180591620717411303424", ("warmup_steps must be at most",)),
        ("seed = 4294967296", ("seed must be at most 4,294,967,295",)),
    ],
    ids=["steps-2^70", "steps-1e7+1", "eval_every", "eval_batches", "warmup", "seed-2^32"],
)
def test_a_config_size_no_run_could_reach_is_refused(sandbox: Sandbox, setting: str, words: tuple[str, ...]) -> None:
    sandbox.write("big.toml", setting + "\n")
    sandbox.refused("train", "--config", "big.toml", "-o", "run", words=words)


def test_the_largest_steps_allowed_is_accepted_by_the_config() -> None:
    from geoanalyze.train.config import MAX_STEPS, resolve_config

    assert resolve_config(overrides=[f"steps={MAX_STEPS}"]).steps == MAX_STEPS


# --- a narrow COLUMNS -------------------------------------------------------------------------------------------


def test_a_tiny_columns_still_prints_readable_cells(sandbox: Sandbox) -> None:
    # was: COLUMNS=5 folded every cell to one or two characters, some empty
    sandbox.copy_sample("drift.txt")
    run = geoanalyze_process(
        "marginals", "drift.txt", "-t", "whitespace", "--no-cache", cwd=sandbox.root, env={"COLUMNS": "5"}
    )
    assert run.code == 0, str(run)
    lines = run.stdout.splitlines()
    assert any(line.split() == ["sequences", "2000"] for line in lines), run.stdout
    assert any("drift.txt" in line for line in lines), run.stdout
