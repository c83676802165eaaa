"""geoanalyze.tracking: steps read from names and trainer states, series order, the baseline's arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geoanalyze.errors import InputError
from geoanalyze.tracking.compare import Change, parse_fail_if_worse
from geoanalyze.tracking.figures import log_steps
from geoanalyze.tracking.series import find_series, folder_step, step_in_name


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("checkpoint-500", 500),
        ("step-12", 12),
        ("step1000", 1000),
        ("global_step300", 300),
        ("iter_7", 7),
        ("42", 42),
        ("runs/out/checkpoint-9/", 9),
        ("all-MiniLM-L6-v2", None),
        ("base", None),
        ("v2-checkpoint", None),
    ],
)
def test_the_step_in_a_name(name: str, step: int | None) -> None:
    assert step_in_name(name) == step


def checkpoint(folder: Path, **files: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    for name, content in files.items():
        (folder / f"{name}.json").write_text(json.dumps(content))
    return folder


def test_the_trainer_state_comes_before_the_name(tmp_path: Path) -> None:
    assert folder_step(checkpoint(tmp_path / "checkpoint-5", trainer_state={"global_step": 7})) == 7
    assert folder_step(checkpoint(tmp_path / "step-5", trainer={"step": 9})) == 9
    assert folder_step(checkpoint(tmp_path / "checkpoint-6", trainer_state={"global_step": "x"})) == 6


def test_a_series_is_sorted_by_step_and_its_sources_merged(tmp_path: Path) -> None:
    for step in (300, 20, 1000):
        checkpoint(tmp_path / "out" / f"checkpoint-{step}")
    checkpoint(tmp_path / "late" / "step-5000")
    members = find_series([str(tmp_path / "out"), str(tmp_path / "late" / "step-5000")])
    assert [m.step for m in members] == [20, 300, 1000, 5000]
    assert [m.kind for m in members] == ["hf"] * 4
    globbed = find_series([str(tmp_path / "out" / "checkpoint-*")])
    assert [m.step for m in globbed] == [20, 300, 1000]


def test_two_members_of_one_step_are_refused(tmp_path: Path) -> None:
    first = checkpoint(tmp_path / "a" / "checkpoint-10")
    second = checkpoint(tmp_path / "b" / "checkpoint-10")
    with pytest.raises(InputError, match="both step 10"):
        find_series([str(first), str(second)])
    assert len(find_series([str(first), str(second)], order="given")) == 2


def test_revisions_are_members_of_one_hub_model() -> None:
    members = find_series(["org/model"], revisions=["step2000", "step1000"])
    assert [(m.name, m.step, m.revision) for m in members] == [
        ("org/model@step1000", 1000, "step1000"),
        ("org/model@step2000", 2000, "step2000"),
    ]
    with pytest.raises(InputError, match="one hub model"):
        find_series(["a/b", "c/d"], revisions=["main"])


def test_a_run_folder_lists_its_kept_steps_and_its_latest_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = {"pe": "learned", "d_model": 8, "n_positions": 16}
    for step in (6, 9):
        folder = run / "checkpoints" / f"step-{step}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "trainer.json").write_text(json.dumps({"step": step}))
    latest = run / "checkpoint"
    latest.mkdir()
    (latest / "config.json").write_text(json.dumps(config))
    (latest / "trainer.json").write_text(json.dumps({"step": 9}))
    members = find_series([str(run)])
    assert [(m.step, m.kind) for m in members] == [(6, "run"), (9, "run")]
    (latest / "trainer.json").write_text(json.dumps({"step": 12}))
    assert [m.step for m in find_series([str(run)])] == [6, 9, 12]


@pytest.mark.parametrize(
    ("items", "rules"),
    [
        (["order"], {"monotonicity_violation": None}),
        (["lag=0.01", "rel.sep.=0"], {"lag_violation": 0.01, "relative_separation": 0.0}),
        (["scaled_stress=1e-3"], {"scaled_stress": 0.001}),
    ],
)
def test_fail_if_worse_names_a_score_and_a_tolerance(items: list[str], rules: dict) -> None:
    assert parse_fail_if_worse(items) == rules


@pytest.mark.parametrize(
    ("items", "words"),
    [
        (["colour"], "unknown score"),
        (["order=-1"], ">= 0"),
        (["order=x"], "not a number"),
        (["order", "order=1"], "twice"),
    ],
)
def test_bad_fail_if_worse_is_refused(items: list[str], words: str) -> None:
    with pytest.raises(InputError, match=words):
        parse_fail_if_worse(items)


finite = st.floats(-10, 10, allow_nan=False)


@given(a=finite, b=finite, spread=st.floats(0, 5), tolerance=st.none() | st.floats(0, 5))
def test_worse_is_higher_for_a_violation_and_lower_for_separation(
    a: float, b: float, spread: float, tolerance: float | None
) -> None:
    violation = Change("monotonicity_violation", a, b, spread, tolerance)
    separation = Change("relative_separation", a, b, spread, tolerance)
    assert violation.worse_by == pytest.approx(b - a) and separation.worse_by == pytest.approx(a - b)
    limit = spread if tolerance is None else tolerance
    assert violation.failed == (b - a > limit) and separation.failed == (a - b > limit)
    assert violation.beyond_spread == (abs(b - a) > spread)
    assert not Change("lag_violation", a, a, spread, tolerance).failed  # an identical copy always passes


def test_an_undefined_score_fails_closed() -> None:
    assert Change("monotonicity_violation", 0.3, math.nan, 0.01).failed


@pytest.mark.parametrize(
    ("steps", "scale"), [([10, 100, 1000], "log"), ([0, 50, 500], "symlog"), ([1, 2, 50], None), ([5], None)]
)
def test_the_x_axis_is_logarithmic_over_two_decades(steps: list[int], scale: str | None) -> None:
    assert log_steps(steps) == scale
