"""What a new user types and mistypes: one name for one idea, errors that say the fix, help text
that reads right, docs that need nothing outside the repository, and progress in CI logs."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import DRIFT_WORDS, REPO_ROOT, SAMPLES, geoanalyze, ok, refused
from test_stress_command import FAST

from geoanalyze.progress import ProgressBars, duration

STATIONARY = SAMPLES / "stationary.txt"


def test_a_mistyped_spec_suggests_the_nearest_one(tmp_path: Path) -> None:
    refused(geoanalyze("stress", "ropee:d=64", "--dataset", DRIFT_WORDS, cwd=tmp_path), "did you mean rope:d=64?")
    refused(geoanalyze("stress", "sinusodial", "--dataset", DRIFT_WORDS, cwd=tmp_path), "did you mean sinusoidal?")
    compared = geoanalyze("stress", "rope:d=8", "--dataset", DRIFT_WORDS, "--compare", "alibbi", cwd=tmp_path)
    refused(compared, "unknown encoding 'alibbi'", "did you mean alibi?")
    report = geoanalyze("report", "rope:d=8", "ropee:d=8", "--dataset", DRIFT_WORDS, "-o", "r.md", cwd=tmp_path)
    refused(report, "did you mean rope:d=8?")
    assert os.listdir(tmp_path) == []


def test_an_offline_bert_base_points_to_the_shipped_minilm(tmp_path: Path, minilm_path: Path) -> None:
    result = geoanalyze("stress", "bert-base-uncased", "--dataset", DRIFT_WORDS, cwd=tmp_path)
    refused(result, "checkpoint 'bert-base-uncased' not found", "sentence-transformers/all-MiniLM-L6-v2")


def test_a_missing_split_names_the_split_the_data_dir_has(tmp_path: Path) -> None:
    data = tmp_path / "data" / "wikitext2"
    data.mkdir(parents=True)
    (data / "validation.tokens").write_text(" = Title = \n" + "a line of text with words in it\n" * 20)
    work = tmp_path / "work"
    work.mkdir()
    result = geoanalyze("distances", "wikitext2", "--data-dir", tmp_path / "data", "-t", "whitespace", cwd=work)
    assert result.code == 2, result.stderr
    assert "it holds split validation: pass --split validation" in result.stderr
    fixed = ("distances", "wikitext2", "--split", "validation", "--data-dir", tmp_path / "data", "-t", "whitespace")
    ok(geoanalyze(*fixed, "--min-count", 5, cwd=work))


def test_max_length_is_the_name_everywhere_and_max_positions_its_alias(tmp_path: Path) -> None:
    common = ("stress", "rope:d=8", "--dataset", DRIFT_WORDS, *FAST, "--compare", "", "-f", "json")
    new = json.loads(ok(geoanalyze(*common, "--max-length", 20, cwd=tmp_path)).stdout)
    old = json.loads(ok(geoanalyze(*common, "--max-positions", 20, cwd=tmp_path)).stdout)
    assert new["positions"] == old["positions"] == list(range(20))
    for command in ("stress", "report", "marginals", "distances", "mds"):
        assert "--max-length" in ok(geoanalyze(command, "--help", cwd=tmp_path)).stdout, command


def test_help_shows_flags_without_a_type_and_keeps_bracketed_words(tmp_path: Path) -> None:
    env = {"COLUMNS": "200"}
    for command in ("stress", "report", "train", "verify", "marginals"):
        text = geoanalyze(command, "--help", cwd=tmp_path, env=env).stdout
        assert "<bool>" not in text, command
    assert "a [model] table" in geoanalyze("train", "--help", cwd=tmp_path, env=env).stdout
    stress_help = " ".join(geoanalyze("stress", "--help", cwd=tmp_path, env=env).stdout.split())
    for label in ("scaled", "violation", "anchored", "rel. sep.", "stress"):
        assert label in stress_help


def test_docs_need_nothing_outside_the_repository() -> None:
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for name in ("PAPERS.md", "GEOMETRY.md", "DESIGN.md", "shared/seeds"):
            assert name not in text, f"{page.name} cites {name}, which users of the repository do not have"


# --- progress in logs ---------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_lines_carry_step_info_elapsed_and_eta(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEOANALYZE_PROGRESS_SECONDS", "10")
    clock = Clock()
    with ProgressBars(plain=True, clock=clock) as bars:
        advance = bars.track("training order", 100)
        for _ in range(100):
            clock.now += 0.5  # 2 steps a second: a line every 20 steps
            advance(1)
            if _ == 39:
                advance(0, info="loss 0.53")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "progress: training order: 20/100 (20%), elapsed 10s, ETA 40s"
    assert lines[1] == "progress: training order: 40/100 (40%), elapsed 20s, ETA 30s"
    assert lines[2] == "progress: training order: 60/100 (60%), loss 0.53, elapsed 30s, ETA 20s"
    assert lines[-1] == "progress: training order: 100/100 (100%), loss 0.53, elapsed 50s"
    assert len(lines) == 5


def test_a_short_task_prints_nothing_and_a_disabled_one_never(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    with ProgressBars(plain=True, clock=clock) as bars:
        advance = bars.track("counting", 10)
        advance(10)
    with ProgressBars(enabled=False, clock=clock) as bars:
        advance = bars.track("counting", 10)
        clock.now += 100
        advance(10)
    assert capsys.readouterr().err == ""


def test_durations() -> None:
    assert [duration(s) for s in (0, 59.4, 60, 271, 3600, 7500)] == ["0s", "59s", "1m00s", "4m31s", "1h00m", "2h05m"]


def test_a_piped_run_prints_progress_lines(tmp_path: Path) -> None:
    """stderr is a pipe here, as in CI: with a 0 s interval every update is a line."""
    env = {"GEOANALYZE_PROGRESS_SECONDS": "0"}
    result = ok(geoanalyze("marginals", STATIONARY, "-t", "whitespace", "--no-cache", cwd=tmp_path, env=env))
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert lines, result.stderr
    # counting reports shards done, tokens and throughput (corpora at scale, docs/large-corpora.md)
    assert re.fullmatch(
        r"progress: counting stationary\.txt: \d+/\d+ shards \(\d+%\), [\d.]+ k? ?tokens, [\d.]+ [kM]? ?tokens/s, elapsed \d+s",
        lines[0],
    ), lines[0]
    assert "(100%)" in lines[-1]
    assert "\n\n" not in result.stderr


def test_a_piped_training_run_shows_its_loss_before_the_first_evaluation(tmp_path: Path) -> None:
    """The training line carries the running loss from the first steps, not only after an evaluation."""
    env = {"GEOANALYZE_PROGRESS_SECONDS": "0"}
    result = ok(
        geoanalyze(
            "train",
            "--task",
            "order",
            "--steps",
            "6",
            "--set",
            "eval_every=6",
            "-o",
            tmp_path / "run",
            cwd=tmp_path,
            env=env,
        )
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress: training order")]
    before_evaluation = [line for line in lines if "eval acc" not in line]
    assert any(re.search(r", loss \d", line) for line in before_evaluation), result.stderr
