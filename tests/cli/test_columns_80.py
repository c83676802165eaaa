"""Every command of README and docs that prints a table, at 80 columns and in a pipe (160).

Done when (issue 23): no line is wider than the output, no line ends in a space, and every score of
every encoding is on one line per row: the score tables are read back cell by cell (columns are two
or more spaces apart) and compared with the JSON document of the same run, row by row, whether the
table is laid out one row per encoding or, where that does not fit, transposed (one row per score,
the encodings side by side). Inputs are small: the sample corpora and the packaged MiniLM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import DRIFT, DRIFT_WORDS, geoanalyze, ok, rule_tables

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
    found = rule_tables(text)
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
    from helpers import gfm_tables

    text = run(work, COMMANDS["report"], WIDTHS["80 columns"], monkeypatch)
    # The page the same run wrote holds the summary's cells (a GFM table, read by a Markdown parser).
    page = gfm_tables((work / "r.md").read_text(encoding="utf-8"), code_backticks=True)[0]
    assert page[0][0] == "target"
    assert score_columns(rule_tables(text), "target") == [row[1:] for row in page[1:]]
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


# --- track, verify, report --baseline, datasets list (issue 31) ---------------------------------------


@pytest.fixture(scope="module")
def series(work: Path, minilm_path: Path) -> Path:
    """A Trainer output under a long path, as `train` writes it (out/runs/NAME/checkpoint-STEP): the
    packaged MiniLM at steps 10 and 1000 (hard links), and at step 100 with its position rows shuffled."""
    from test_track import linked_copy, shuffled_copy

    folder = work / "out" / "runs" / "sst2-learned-positions"
    for step in (10, 100, 1000):
        copy = shuffled_copy if step == 100 else linked_copy
        checkpoint = copy(minilm_path, folder / f"checkpoint-{step}")
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return folder


def number_cells(table: list[list[str]]) -> list[list[str]]:
    return [row[1:] for row in table[1:]]


def track_steps(text: str) -> dict[str, list[str]]:
    """The position table of `track`'s table format, step -> its cells (the scores, then null), read
    one row per step or transposed (one row per score, the steps side by side)."""
    found = [table for table in rule_tables(text) if table[0][0] in ("step", "score") and "layer" not in table[0]]
    steps: dict[str, list[str]] = {}
    for table in found:
        if table[0][0] == "score":
            for j, name in enumerate(table[0][1:], start=1):
                steps[name] = [row[j] for row in table[1:]]
        else:
            for row in table[1:]:
                steps[row[0]] = row[-6:]
    return steps


#: track's position table one row per step (a pipe, 80 columns), then transposed (60 columns)
TRACK_WIDTHS = {**WIDTHS, "60 columns": {"COLUMNS": "60"}}


@pytest.mark.parametrize("where", TRACK_WIDTHS)
def test_track_fits_and_every_number_is_the_json_s(
    where: str, work: Path, series: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geoanalyze.tracking.track import TRACKED

    words = ("track", series, "--dataset", DRIFT_WORDS, *FAST, "--layers", "1", "--max-sequences", 16)
    text = run(work, words, TRACK_WIDTHS[where], monkeypatch)
    check_lines(text, int(TRACK_WIDTHS[where].get("COLUMNS", 160)))
    if where == "60 columns":
        assert any(table[0][:2] == ["score", "step 10"] for table in rule_tables(text)), text
    document = json.loads(run(work, (*words, "-f", "json"), {}, monkeypatch))
    expected = {
        record["step"]: [fmt(record["position"][key]) for key in TRACKED]
        + [category_code(record["position"]["categories"])]
        for record in document["records"]
    }
    steps = track_steps(text)
    assert {int(name.removeprefix("step ")): cells for name, cells in steps.items()} == expected
    if where == "60 columns":
        return  # the layer rows' labels fold at 60 columns (their numbers never do)
    (layers,) = [table for table in rule_tables(text) if "layer" in table[0]]
    assert [row[3:] for row in layers[1:]] == [
        [fmt(row[key]) for key in TRACKED] + [category_code(row["categories"])]
        for record in document["records"]
        for row in record["layers"]
    ]
    legend = [line for line in text.splitlines() if line.lstrip().startswith("null:")]
    assert legend, "the null legend"


def test_track_at_80_columns_names_every_checkpoint_in_full(
    work: Path, series: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = ("track", series, "--dataset", DRIFT_WORDS, *FAST, "--layers", "1", "--max-sequences", 16)
    text = run(work, words, WIDTHS["80 columns"], monkeypatch)
    assert "0.0649\n" not in text
    for step in (10, 100, 1000):  # each checkpoint named as the user gave it, relative to the working folder
        assert f"step {step}: out/runs/sst2-learned-positions/checkpoint-{step}\n" in text


def test_verify_fits_with_every_number_of_the_json(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    words = ("verify", "alibi-rank1", "--preset", "smoke", "--output-dir", "verify-alibi")
    text = run(work, words, WIDTHS["80 columns"], monkeypatch)
    check_lines(text, 80)
    document = json.loads((work / "verify-alibi" / "alibi-rank1.json").read_text(encoding="utf-8"))
    (table,) = [table for table in rule_tables(text) if table[0][0] == "check"]
    assert {row[0]: row[1:] for row in table[1:]} == {
        check["name"]: [fmt(check["value"]), check["verdict"].upper()] for check in document["checks"]
    }
    folded = " ".join(line.strip() for line in text.splitlines())
    assert all(f"{c['name']}: {c['claim']} (paper: {c['paper']})" in folded for c in document["checks"])
    assert "note: smoke preset:" in text and "(run --preset ci for that)" in folded


@pytest.mark.parametrize("where", WIDTHS)
def test_report_baseline_fits_with_every_number_of_the_json(
    where: str, work: Path, series: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geoanalyze.tracking.track import LABELS

    first, second = series / "checkpoint-10", series / "checkpoint-100"
    words = ("report", "--baseline", first, second, "-o", "b.md", "--dataset", DRIFT_WORDS, "--layers", "none", *FAST)
    text = run(work, words, WIDTHS[where], monkeypatch)
    check_lines(text, 80 if where == "80 columns" else 160)
    document = json.loads(run(work, (*words, "-f", "json"), {}, monkeypatch))
    (table,) = [table for table in rule_tables(text) if table[0][:2] == ["score", "baseline"]]
    assert "change is" in table[0]
    expected = []
    for s in document["comparison"]["scores"]:
        direction = "worse" if s["worse_by"] > 0 else "better" if s["worse_by"] < 0 else "same"
        numbers = [fmt(s[key]) for key in ("baseline", "candidate", "change", "null_spread")]
        expected.append([LABELS[s["score"]], *numbers, direction])
    assert [row[:5] + row[6:7] for row in table[1:]] == expected


def test_datasets_list_splits_no_word(monkeypatch: pytest.MonkeyPatch, work: Path, shared_data: Path) -> None:
    text = run(work, ("datasets", "list", "--data-dir", shared_data), WIDTHS["80 columns"], monkeypatch)
    check_lines(text, 80)
    words = set(text.split())
    assert {"unsupervised", "sentence", "Salesforce/wikitext", "(wikitext-2-v1)", "validation,"} <= words
