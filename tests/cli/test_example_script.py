"""The Python API as a user runs it: examples/score_and_report.py, executed as a script."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import DRIFT_WORDS, REPO_ROOT, assert_rope_verdict, geoanalyze, gfm_tables, ok, run_process
from test_ci_output import assert_rectangular

import geoanalyze as ga

EXAMPLE = REPO_ROOT / "examples" / "score_and_report.py"


def test_the_example_script_runs_and_writes_a_report(tmp_path: Path) -> None:
    """A real process: the script as a user runs it (its own imports, its own stdout)."""
    result = run_process([sys.executable, EXAMPLE, tmp_path / "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert_rope_verdict(lines[0], holm_tests=16)
    assert (
        lines[2]
        == "{'shape': 'better', 'order': 'better', 'local_order': 'better', 'lag': 'better', 'separation': None}"
    )
    assert lines[3] == f"wrote {tmp_path / 'out' / 'report.md'}"
    assert lines[5] == "order: rank 1 of 1000, better than its position shuffles"
    page = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    tables = gfm_tables(page)
    assert_rectangular(tables)
    assert [row[0] for row in tables[0][1:]] == ["rope:d=64", "alibi"]
    for link in (tmp_path / "out" / "report_files").iterdir():
        assert f"report_files/{link.name}" in page


def test_the_api_says_what_the_cli_says(tmp_path: Path) -> None:
    """score() + to_json() equals `stress -f json` (apart from the CLI's own run and gate records)."""
    import json

    args = (
        "stress",
        "rope:d=16",
        "--dataset",
        DRIFT_WORDS,
        "--null-draws",
        2,
        "--compare",
        "sinusoidal,mds",
        "-f",
        "json",
    )
    cli = json.loads(ok(geoanalyze(*args, cwd=tmp_path)).stdout)
    result = ga.score("rope:d=16", dataset=str(DRIFT_WORDS), null_draws=2, compare="sinusoidal,mds")
    api = json.loads(ga.to_json(result))  # a JSON string, as the CLI prints
    assert api == {key: value for key, value in cli.items() if key not in ("run", "gate")}
    assert ga.verdict(result) == cli["summary"]["verdict"]
    assert ga.to_markdown(result).startswith("## rope:d=16 on drift-words.txt")
