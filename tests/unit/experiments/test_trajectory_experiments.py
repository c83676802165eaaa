"""verify separation and verify monotonicity score the whole trajectory, as track does (issue 24, item 5).

geometry.trajectory scores a series of (step, table) against one geometry with ONE null (the random
tables drawn once per shape: the experiments' isotropy question); analysis.score_table (and so
`geoanalyze stress` and `geoanalyze track`) tests each table against shuffles of its own positions. Checked here against independent computations on small inputs; the figures
against their trajectories through matplotlib's objects and plotting.audit. The smoke runs
themselves (seconds each, 2 of them) are in the slow job.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import invoke, ok
from matplotlib.patches import Polygon, Rectangle

from geoanalyze.geometry.null import ASPECTS, null_rng, null_sample
from geoanalyze.geometry.scores import all_scores, separation
from geoanalyze.geometry.trajectory import (
    TRACKED,
    NullCache,
    shape_null,
    shape_trajectory,
    trajectory,
)
from geoanalyze.plotting import audit


def line_geometry(n: int = 7) -> tuple[np.ndarray, np.ndarray]:
    positions = np.arange(n)
    return np.abs(positions[:, None] - positions[None, :]).astype(float), positions


def drifting_tables(n: int = 7, width: int = 3, steps: tuple[int, ...] = (30, 0, 10)) -> list[tuple[int, np.ndarray]]:
    """Tables that move from noise (step 0) towards a line in position (the last step)."""
    rng = np.random.default_rng(5)
    noise = rng.standard_normal((n, width))
    line = np.outer(np.arange(n), np.ones(width))
    top = max(steps)
    return [(step, (1 - step / top) * noise + (step / top) * line) for step in steps]


def test_a_trajectory_is_in_step_order_each_score_its_own_against_one_null_drawn_once() -> None:
    distances, positions = line_geometry()
    tables = drifting_tables()
    nulls = NullCache(distances, positions, draws=39, seed=3)  # 39: the fewest that can call a category
    points = trajectory(tables, nulls)
    assert [p.step for p in points] == [0, 10, 30]
    expected_null = null_sample((7, 3), distances, 39, seed=3, anchored=True, index=positions)  # independent
    by_step = dict(tables)
    for point in points:
        observed = all_scores(by_step[point.step], distances, index=positions)
        assert set(point.scores) == set(TRACKED) == set(ASPECTS.values())
        for score in TRACKED:
            entry = point.scores[score]
            assert entry["score"] == pytest.approx(observed[score])
            assert entry["null_mean"] == pytest.approx(expected_null[score].mean())
            assert entry["null_sd"] == pytest.approx(expected_null[score].std(ddof=1))
            assert (entry["null_low"], entry["null_high"]) == pytest.approx(
                (expected_null[score].min(), expected_null[score].max())
            )
            assert entry["category"] in {"better", "indistinguishable", "worse", "undecided"}
    # the line (last step) orders every pair as D does: better than all 39 random tables
    assert points[-1].value("monotonicity_violation") == pytest.approx(0.0)
    assert points[-1].scores["monotonicity_violation"]["category"] == "better"
    assert len(nulls._samples) == 1  # one shape, drawn once for the three steps
    record = json.loads(json.dumps(points[0].to_dict()))
    assert record["step"] == 0 and set(record["lag_violation"]) == {
        "score", "null_mean", "null_sd", "null_low", "null_high", "category"
    }  # fmt: skip


def test_track_and_stress_score_a_table_through_the_same_shuffle_tests() -> None:
    """analysis.score_table + settle (what stress and track call) give a table the scores of all_scores and
    the tests of the shuffle null run directly on it."""
    from geoanalyze.analysis import score_table, settle
    from geoanalyze.geometry.shuffle import ShuffleNull, decide

    distances, positions = line_geometry()
    table = drifting_tables()[2][1]
    nulls = ShuffleNull(distances, positions, draws=999, seed=0)
    (scored,) = settle(nulls, [score_table(table, distances, positions, nulls)])
    assert scored.observed == all_scores(table, distances, index=positions)
    direct = ShuffleNull(distances, positions, draws=999, seed=0)
    direct.register(table)
    assert scored.null == decide(direct.run())[0]
    assert scored.categories["shape"] == scored.null["scaled_stress"]["category"]


def test_a_shape_null_is_the_score_of_the_null_streams_gaussian_tables() -> None:
    rng = null_rng(2)
    independent = [separation(rng.standard_normal((6, 4)), relative=True) for _ in range(5)]
    relative = lambda table: separation(table, relative=True)  # noqa: E731
    assert shape_null((6, 4), relative, 5, seed=2) == pytest.approx(independent)
    tables = [(4, np.eye(6, 4)), (2, np.ones((6, 4)) + 1e-3 * np.arange(24).reshape(6, 4))]
    points = shape_trajectory(tables, "relative_separation", relative, 5, seed=2)
    assert [p.step for p in points] == [2, 4]
    assert points[1].value("relative_separation") == pytest.approx(relative(np.eye(6, 4)))
    assert points[1].scores["relative_separation"]["null_mean"] == pytest.approx(np.mean(independent))


def test_observed_tables_pair_each_evaluation_with_its_table_and_refuse_a_miscount() -> None:
    from geoanalyze.experiments.positional import observed_tables

    lines = [{"step": 4, "eval_loss": 1.0}, {"step": 8, "eval_loss": 0.9}]
    tables = [np.zeros((2, 2)), np.ones((2, 2))]
    assert [step for step, _ in observed_tables(lines, tables, "eval_loss")] == [4, 8]
    with pytest.raises(AssertionError, match="1 tables observed for 2 evaluations"):
        observed_tables(lines, tables[:1], "eval_loss")


def band(axis: object) -> list[tuple[float, float]]:
    """The (low, high) of every shaded horizontal band of ``axis``."""
    spans = []
    for patch in axis.patches:  # type: ignore[attr-defined]
        if isinstance(patch, Polygon | Rectangle):
            ys = np.asarray(patch.get_path().transformed(patch.get_patch_transform()).vertices)[:, 1]
            spans.append((float(ys.min()), float(ys.max())))
    return spans


@pytest.mark.parametrize("steps", [(0, 40), (0, 10, 20, 30)])
def test_the_monotonicity_figure_draws_the_trajectory_over_its_null_band(
    tmp_path: Path, steps: tuple[int, ...]
) -> None:
    from geoanalyze.experiments.positional_figures import TRAJECTORY_PANELS, monotonicity_trajectory_figure

    distances, positions = line_geometry()
    points = trajectory(drifting_tables(steps=steps), NullCache(distances, positions, draws=9, seed=0))
    figure = monotonicity_trajectory_figure(points, tmp_path / "t.png", "drift, learned table")
    assert audit(figure) == []
    assert (tmp_path / "t.png").stat().st_size > 1000
    for axis, score in zip(figure.axes, TRAJECTORY_PANELS, strict=True):
        learned = next(line for line in axis.lines if line.get_label() == "learned table")
        assert list(learned.get_xdata()) == list(steps)
        assert list(learned.get_ydata()) == pytest.approx([p.value(score) for p in points])
        null = points[0].scores[score]
        low, high = band(axis)[0]
        assert (low, high) == pytest.approx((null["null_low"], null["null_high"]))


def test_the_separation_figure_shades_each_runs_null_band(tmp_path: Path) -> None:
    from geoanalyze.experiments.positional_figures import separation_figure
    from geoanalyze.experiments.separation import separation_trajectories

    tables = {
        "mlm": [(s, np.random.default_rng(s).standard_normal((8, 4))) for s in (4, 8, 12)],
        "order": [(s, np.random.default_rng(9 + s).standard_normal((5, 4))) for s in (4, 8, 12)],
    }
    runs = {
        name: [{"step": s, "separation": separation(t), "relative_separation": separation(t, relative=True)} for s, t in
               series]
        for name, series in tables.items()
    }  # fmt: skip
    trajectories = separation_trajectories(tables, seed=0)
    figure = separation_figure(tmp_path / "s.png", runs, trajectories)
    assert audit(figure) == []
    relative = figure.axes[1]
    assert len(band(relative)) == 2  # one band per run: their shapes differ
    for name, points in trajectories.items():
        drawn = next(line for line in relative.lines if line.get_label() == name)
        assert list(drawn.get_ydata()) == pytest.approx([r["relative_separation"] for r in runs[name]])
        null = points[0].scores["relative_separation"]
        assert any(span == pytest.approx((null["null_low"], null["null_high"])) for span in band(relative))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["separation", "monotonicity"])
def test_verify_smoke_records_the_trajectory_and_draws_it(tmp_path: Path, name: str) -> None:
    ok(invoke(["verify", name, "--preset", "smoke", "-o", "out"], cwd=tmp_path))
    document = json.loads((tmp_path / "out" / f"{name}.json").read_text())
    data = document["data"]
    if name == "monotonicity":
        points = data["trajectory"]
        assert [p["step"] for p in points] == [0, 20, 40]  # the initial table and every evaluation
        assert (tmp_path / "out" / "monotonicity-trajectory.png").stat().st_size > 1000
    else:
        points = data["corpus_trajectory"]["mlm"]
        assert [p["step"] for p in points] == [4, 8]
        assert [p["step"] for p in data["trajectory"]["order"]] == [4, 8]
    for point in points:
        for score in ("monotonicity_violation", "relative_separation"):
            assert set(point[score]) >= {"score", "null_mean", "null_sd", "category"}
