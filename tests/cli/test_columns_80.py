"""Every command of README and docs that prints a table, at 80 columns and in a pipe (160).

Done when (issue 23): no line is wider than the output, no line ends in a space, and every score of
every encoding is on one line per row: the score tables are read back cell by cell (columns are two
or more spaces apart) and compared with the JSON document of the same run, row by row, whether the
table is laid out one row per encoding or, where that does not fit, transposed (one row per score,
the encodings side by side). Inputs are small: the sample corpora and the packaged MiniLM.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import DRIFT, DRIFT_WORDS, geoanalyze, ok

from geoanalyze.report.render import fmt
from geoanalyze.results import SCORE_COLUMNS, category_code, shown_score

WIDTHS = {"80 columns": {"COLUMNS": "80"}, "a pipe": {}}
FAST = ("--null-draws", 2)
LAYERS = ("--layers", "0,1", "--max-sequences", 16)
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the sample corpus and a counts file (for distances and mds), as the docs have."""
    folder = tmp_path_factory.mktemp("columns")
    ok(geoanalyze("marginals", DRIFT, "-t", "whitespace", "-o", "counts.safetensors", cwd=folder))
    return folder


#: name -> the command's words (run in ``work``); the ones with a score table also run with -f json
COMMANDS: dict[str, tuple[Any, ...]] = {
    "stress an encoding": (
        "stress",
        "rope:d=64,base=10000",
        "--dataset",
        DRIFT_WORDS,
        *FAST,
        "--bootstrap",
        2,
        "--fail-above",
        "scaled=0.9",
    ),
    "stress the checkpoint": ("stress", MINILM, "--dataset", DRIFT_WORDS, *LAYERS, *FAST),
    "report": (
        "report",
        MINILM,
        "sinusoidal",
        "--dataset",
        DRIFT_WORDS,
        "--layers",
        "none",
        *FAST,
        "-o",
        "r.md",
        "--fail-above",
        "scaled=0.99",
    ),
    "distances": ("distances", "counts.safetensors"),
    "distances of a noisy corpus": ("distances", DRIFT.parent / "stationary.txt", "-t", "whitespace"),
    "marginals": ("marginals", DRIFT_WORDS, "-t", "whitespace", "-o", "words.safetensors"),
    "mds": ("mds", "counts.safetensors", "--dim", 16, "--rank", 4, "-o", "pe.safetensors"),
    "encodings list": ("encodings", "list"),
    "datasets list": ("datasets", "list"),
    "verify list": ("verify", "list"),
}


_RUNS: dict[tuple[Any, ...], str] = {}


def run(work: Path, words: tuple[Any, ...], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The command's stdout with ``env`` (no COLUMNS: the width of a pipe); each run once a module."""
    key = (work, *words, *sorted(env.items()))
    if key not in _RUNS:
        monkeypatch.delenv("COLUMNS", raising=False)
        result = geoanalyze(*words, cwd=work, env=env)
        assert result.code == 0, str(result)
        _RUNS[key] = result.stdout
    return _RUNS[key]


def cells(line: str) -> list[str]:
    """A table line's cells: columns are two or more spaces apart, a label has single spaces."""
    return re.split(r" {2,}", line.strip())


def tables(text: str) -> list[list[list[str]]]:
    """Every table of the one style in ``text``: the header above its rule, then the rows below it
    that have as many cells as the header."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        if index and line and set(line) == {"─"}:
            header = cells(lines[index - 1])
            rows = []
            for row in lines[index + 1 :]:
                if not row.strip() or len(cells(row)) != len(header):
                    break
                rows.append(cells(row))
            found.append([header, *rows])
    return found


def expected_scores(scores: dict[str, Any]) -> list[str]:
    """One encoding's cells after its name, as the JSON document says: d, each score, null."""
    shown = [fmt(shown_score(scores[column.key])) for column in SCORE_COLUMNS]
    return [str(scores["dim"]), *shown, category_code(scores["categories"])]


def score_columns(found: list[list[list[str]]], first: str) -> list[list[str]]:
    """The score table's cells per encoding (its name left out), one row per encoding or transposed."""
    wide = [table for table in found if table[0][0] == first]
    if wide:
        (table,) = wide
        return [row[1:] for row in table[1:]]
    intervals = ["score", "value", "low", "high", "bias"]
    transposed = [table for table in found if table[0][0] == "score" and table[0] != intervals]
    assert transposed, f"no score table in {found}"
    return [[row[j] for row in table[1:]] for table in transposed for j in range(1, len(table[0]))]


def check_lines(text: str, width: int) -> None:
    for line in text.splitlines():
        assert len(line) <= width, f"{len(line)} > {width}: {line!r}"
        assert line == line.rstrip(), f"a trailing space: {line!r}"


#: the report draws its figures (seconds a target): in a pipe only with the slow tests
SLOW = {("report", "a pipe")}
CASES = [
    pytest.param(name, where, marks=[pytest.mark.slow] if (name, where) in SLOW else [])
    for name in COMMANDS
    for where in WIDTHS
]


@pytest.mark.parametrize(("name", "where"), CASES)
def test_every_table_fits_the_width_without_trailing_spaces(
    name: str, where: str, work: Path, monkeypatch: pytest.MonkeyPatch, minilm_path: Path
) -> None:
    text = run(work, COMMANDS[name], WIDTHS[where], monkeypatch)
    check_lines(text, 80 if where == "80 columns" else 160)
    assert "┃" not in text and "│" not in text, "a second table style"


@pytest.mark.parametrize("where", WIDTHS)
@pytest.mark.parametrize("name", [name for name in COMMANDS if name.startswith("stress")])
def test_every_score_of_every_encoding_is_on_one_line(
    name: str, where: str, work: Path, monkeypatch: pytest.MonkeyPatch, minilm_path: Path
) -> None:
    words = COMMANDS[name]
    text = run(work, words, WIDTHS[where], monkeypatch)
    document = json.loads(run(work, (*words, "-f", "json"), {}, monkeypatch))
    found = tables(text)
    assert score_columns(found, "encoding") == [expected_scores(s) for s in document["scores"].values()]
    if document["layers"]:
        (layers,) = [table for table in found if table[0][0] == "layer"]
        keys = [column.key for column in SCORE_COLUMNS if column.key != "stress"]
        expected = [
            [str(row["layer"]), row["projection"], *(fmt(shown_score(row[key])) for key in keys)]
            for row in document["layers"]
        ]
        assert [row[:-1] for row in layers[1:]] == expected
    if document["gate"]:
        assert "gate passed: fail above scaled_stress > 0.9" in text


def test_the_report_summary_has_every_score_of_every_target_on_one_line(
    work: Path, monkeypatch: pytest.MonkeyPatch, minilm_path: Path
) -> None:
    from test_markdown_everywhere import gfm_tables

    text = run(work, COMMANDS["report"], WIDTHS["80 columns"], monkeypatch)
    # The page the same run wrote holds the summary's cells (a GFM table, read by a Markdown parser).
    page = gfm_tables((work / "r.md").read_text(encoding="utf-8"))[0]
    assert page[0][0] == "target"
    assert score_columns(tables(text), "target") == [row[1:] for row in page[1:]]
    assert "gate passed: fail above scaled_stress > 0.99" in text  # a passing gate says so, as stress's does


def test_distances_warns_of_a_noisy_corpus_as_stress_does(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    words = COMMANDS["distances of a noisy corpus"]
    document = json.loads(run(work, (*words, "-f", "json"), {}, monkeypatch))
    assert document["noise"]["noise_fraction"] > 0.5
    (warning,) = document["warnings"]
    assert warning.startswith(f"noise fraction {document['noise']['noise_fraction']:.2f} (above 0.5)")
    text = run(work, words, {"COLUMNS": "80"}, monkeypatch)
    assert "warning: noise fraction" in text and "corrected" in text
    markdown = run(work, (*words, "-f", "markdown"), {}, monkeypatch)
    assert "> **Warning:** noise fraction" in markdown
    quiet = json.loads(run(work, ("distances", "counts.safetensors", "-f", "json"), {}, monkeypatch))
    assert quiet["noise"]["noise_fraction"] < 0.5 and quiet["warnings"] == []


def test_a_file_corpus_has_no_split_and_one_shard_is_singular(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = run(work, COMMANDS["stress an encoding"], {}, monkeypatch)
    assert "(split -)" not in text and "drift-words.txt" in text
    counted = run(work, ("marginals", DRIFT_WORDS, "-t", "whitespace", "--no-cache"), {}, monkeypatch)
    assert "1 shard counted" in counted and "1 shards" not in counted


@pytest.mark.parametrize("command", ["stress", "report"])
def test_an_array_file_as_the_target_is_told_its_spec(command: str, tmp_path: Path) -> None:
    import numpy as np
    from helpers import refused

    np.save(tmp_path / "rand.npy", np.random.default_rng(0).standard_normal((64, 16)))
    extra = ("-o", "r.md") if command == "report" else ()
    run = geoanalyze(command, "rand.npy", "--dataset", DRIFT_WORDS, *extra, cwd=tmp_path)
    refused(run, "rand.npy is an array file, not a checkpoint folder", "pass file:rand.npy")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["rand.npy"]  # nothing written
