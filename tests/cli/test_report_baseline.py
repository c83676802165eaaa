"""`report --baseline A B` (issue 24): B's position scores beside A's on the report page, with the
change and the null's spread; `--fail-if-worse` as track's (tracking.compare's arithmetic).

The packaged MiniLM against a copy whose position table's rows are shuffled fails the gate; against
an identical copy (the command of docs/tracking.md, run as written) it passes. Both runs are real
analyses of the shipped checkpoint on a shipped sample corpus (about 4 s of CPU each).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from helpers import REPO_ROOT, SAMPLES, invoke, ok
from test_track import linked_copy, shuffled_copy

from geoanalyze.tracking.track import LABELS, TRACKED

PAGE = REPO_ROOT / "docs" / "tracking.md"
CHEAP = ["--dataset", str(SAMPLES / "drift-words.txt"), "--layers", "none", "--compare", "sinusoidal"]


def docs_command() -> str:
    (command,) = [
        line.strip()
        for block in re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
        for line in block.splitlines()
        if line.strip().startswith("geoanalyze report --baseline")
    ]
    return command


def section(page: str) -> str:
    """The page's comparison: from its heading to the first target's section."""
    return page.split("## Against the baseline", 1)[1].split("\n## ", 1)[0]


def test_an_identical_copy_passes_with_the_docs_command_as_written(tmp_path: Path, minilm_path: Path) -> None:
    (tmp_path / "sample_corpora").symlink_to(SAMPLES)
    linked_copy(minilm_path, tmp_path / "pretrained")
    linked_copy(minilm_path, tmp_path / "finetuned")
    command = docs_command()
    run = ok(invoke(shlex.split(command)[1:], cwd=tmp_path))
    assert "against the baseline" in run.stdout
    page = (tmp_path / "geometry.md").read_text(encoding="utf-8")
    # after the summary table, before the first target's own section
    assert page.index("## Against the baseline") < page.index("## pretrained on")
    rows = [line for line in section(page).splitlines() if line.startswith("| ") and "baseline" not in line]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == [LABELS[s] for s in TRACKED]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == cells[2] and cells[3] == "0" and cells[5] == "no", row
    gates = {row.split(" | ")[0].lstrip("| "): row.rstrip(" |").rsplit(" | ", 1)[1] for row in rows}
    assert gates == {"scaled": "-", "violation": "pass", "anchored": "-", "lag viol.": "pass", "rel. sep.": "-"}


def test_a_shuffled_position_table_fails_and_the_page_and_json_say_by_how_much(
    tmp_path: Path, minilm_path: Path
) -> None:
    worse = shuffled_copy(minilm_path, tmp_path / "shuffled")
    args = ["report", "--baseline", minilm_path, worse, "-o", "page.md", *CHEAP, "-f", "json"]
    run = invoke([*args, "--fail-if-worse", "order", "--fail-if-worse", "separation=1"], cwd=tmp_path)
    assert run.code == 1, str(run)
    assert "Traceback" not in run.stderr
    (error,) = run.stderr.strip().splitlines()[-1:]
    assert error.startswith("error: worse than the baseline") and "violation is worse by" in error
    comparison = json.loads(run.stdout)["comparison"]
    scores = {entry["score"]: entry for entry in comparison["scores"]}
    order = scores["monotonicity_violation"]
    # tracking.compare's arithmetic, checked here from the record's own numbers
    assert order["change"] == pytest.approx(order["candidate"] - order["baseline"])
    assert order["worse_by"] == pytest.approx(order["change"]) and order["worse_by"] > order["null_spread"] > 0
    assert order["beyond_null_spread"] and order["failed"] and order["tolerance"] == order["null_spread"]
    assert order["baseline"] == pytest.approx(0.2728, abs=1e-4) and order["candidate"] > 0.45  # shuffled: ~random
    assert scores["relative_separation"]["tolerance"] == 1.0 and not scores["relative_separation"]["failed"]
    assert comparison["crossed"] == ["monotonicity_violation"]
    page = (tmp_path / "page.md").read_text(encoding="utf-8")  # the page is written, gate and all
    assert "| violation |" in section(page) and "FAIL" in section(page) and "is worse by" in section(page)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fail-if-worse", "order"], "--fail-if-worse compares with a baseline; pass --baseline A"),
        (["--baseline", "A", "extra"], "--baseline A compares one checkpoint B with A, got 2"),
        (["--baseline", "A", "--fail-if-worse", "nope"], "--fail-if-worse: unknown score 'nope'"),
    ],
)
def test_a_baseline_misused_is_one_line_and_exit_2_before_any_work(
    tmp_path: Path, minilm_path: Path, extra: list[str], message: str
) -> None:
    run = invoke(["report", minilm_path, *extra, "-o", "page.md", *CHEAP], cwd=tmp_path)
    assert run.code == 2, str(run)
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line
    assert not (tmp_path / "page.md").exists() and not (tmp_path / "page_files").exists()


@pytest.mark.slow  # one more analysis (11 s wall on a loaded machine); the refusal's arithmetic is check_comparable's
def test_checkpoints_read_against_different_geometries_are_refused_and_nothing_is_written(
    tmp_path: Path, minilm_path: Path
) -> None:
    args = ["report", "--baseline", minilm_path, "sinusoidal:d=64", "-o", "page.md", "--max-length", "12", *CHEAP[:2]]
    run = invoke([*args, "--layers", "none", "--compare", "sinusoidal"], cwd=tmp_path)
    assert run.code == 2, str(run)
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("error: --baseline: ") and "differ in their width (64, not 384)" in line
    assert not (tmp_path / "page.md").exists() and not (tmp_path / "page_files").exists()


def test_a_side_by_side_report_compares_the_targets_in_a_sentence(tmp_path: Path, minilm_path: Path) -> None:
    """`report A B` (no --baseline): a sentence reads B's scores against A's, each the way it reads, on
    the page and in the table format; the shuffled copy is worse on order, beyond the null's spread."""
    worse = shuffled_copy(minilm_path, tmp_path / "shuffled")
    run = ok(invoke(["report", minilm_path, worse, "-o", "page.md", *CHEAP[:4], "--null-draws", "4"], cwd=tmp_path))
    page = (tmp_path / "page.md").read_text(encoding="utf-8")
    (line,) = [line for line in page.splitlines() if line.startswith("Compared: ")]
    assert line.startswith("Compared: shuffled against ")
    worse_on = line.split("worse on ", 1)[1].split(";")[0].split(" (")[0]
    assert "violation" in worse_on.split(", ")
    assert "beyond the random tables' spread on" in line and "lower is better except rel. sep." in line
    folded = " ".join(part.strip() for part in run.stdout.splitlines())
    assert "compared: shuffled against " in folded
