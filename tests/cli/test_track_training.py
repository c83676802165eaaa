"""`train --geometry-every N --keep-checkpoints K`, then `track RUN`: the issue's "done when" on a tiny run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DRIFT, TINY_TRAIN, invoke, ok, train_sets

TINY = [*TINY_TRAIN, "eval_every=3", "eval_batches=1"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    sets = train_sets(*TINY)
    args = ["train", "-o", "run", "--pe", "learned", *sets, "--geometry-every", "4", "--keep-checkpoints", "3"]
    ok(invoke(args, cwd=folder))
    return folder / "run"


def test_train_keeps_the_last_checkpoints_and_logs_the_geometry(run: Path) -> None:
    kept = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert kept == ["step-12", "step-6", "step-9"]  # evaluations at 3, 6, 9, 12: the last 3 kept
    for name in kept:
        state = json.loads((run / "checkpoints" / name / "trainer.json").read_text())
        assert state["step"] == int(name[5:])
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    geometry = [line for line in lines if "geometry" in line]
    assert [line["step"] for line in geometry] == [4, 8, 12]
    rows = geometry[-1]["geometry"]
    assert set(rows) == {"position", "L1 query", "L1 key", "L2 query", "L2 key"}
    assert set(rows["position"]["categories"]) == {"shape", "order", "local_order", "lag", "separation"}
    assert 0 <= rows["position"]["monotonicity_violation"] <= 1
    assert [line["step"] for line in lines if "geometry" not in line] == [3, 6, 9, 12]


def test_the_training_figure_has_the_geometry_panel(run: Path) -> None:
    from geoanalyze.tracking.figures import training_figure

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    figure = training_figure(rows, run / "again.png")
    geometry = figure.axes[2]
    assert geometry.get_title() == "position geometry against the held-out batches' D\n(not track's corpus: values differ)"
    assert geometry.get_ylabel() == "score (lower is better)"
    series = [line for line in geometry.get_lines() if line.get_linestyle() != "--"]
    # the four lower-is-better scores; relative separation (higher is better) is not on this axis
    assert [line.get_label() for line in series] == ["scaled", "violation", "anchored", "lag viol."]
    assert [list(line.get_xdata()) for line in series] == [[4, 8, 12]] * 4
    (chance,) = [line for line in geometry.get_lines() if line.get_linestyle() == "--"]
    assert list(chance.get_ydata()) == [0.5, 0.5]
    (band,) = geometry.patches  # scaled stress of the position row's shuffles
    logged = [row["geometry"]["position"]["null"]["scaled_stress"] for row in rows if "geometry" in row]
    ys = [band.get_y(), band.get_y() + band.get_height()] if hasattr(band, "get_height") else band.get_xy()[:, 1]
    assert min(ys) == pytest.approx(min(b["low"] for b in logged)) and max(ys) == pytest.approx(max(b["high"] for b in logged))
    assert (run / "training.png").read_bytes()[:4] == b"\x89PNG"


def test_track_scores_the_kept_checkpoints_in_step_order(run: Path, tmp_path: Path) -> None:
    result = ok(invoke(["track", run, "--dataset", DRIFT, "--max-length", "12", "-f", "json"], cwd=tmp_path))
    records = json.loads(result.stdout)["records"]
    assert [r["step"] for r in records] == [6, 9, 12]
    for record in records:
        assert record["error"] is None
        assert record["position"]["dim"] == 32
        assert set(record["position"]["categories"]) == {"shape", "order", "local_order", "lag", "separation"}


def test_kept_checkpoints_are_where_track_looks() -> None:
    from geoanalyze.tracking import series
    from geoanalyze.train import loop

    assert series.KEPT_DIR == loop.KEPT_DIR
