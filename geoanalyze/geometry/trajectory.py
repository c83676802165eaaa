"""A series of tables scored against one geometry, every one held against the same null: a trajectory.

The pure scoring part of geometry over training (docs/tracking.md), below every command:

::

    NullCache          the random Gaussian tables drawn ONCE per shape: every table of that shape is
                       held against the same draws, so a change of category along the series is the
                       tables', not the draws'
    trajectory         (step, table) pairs -> one :class:`TrajectoryPoint` per step: each tracked score
                       against D with its null's mean, sd, range and the category

``geoanalyze track`` (through analysis.score_table) and the experiments ``separation`` and
``monotonicity`` use it, so their trajectories are computed the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from .null import ASPECTS, RankTest, calibrate, null_rng, null_sample, rank_test
from .scores import all_scores

#: the scale-free scores a trajectory follows, in the order of the aspects they are read for
TRACKED = tuple(ASPECTS.values())


class NullCache:
    """The null draws of one analysis, drawn once per shape: every table of width k on the same
    positions is held against the same K random tables (so their categories compare)."""

    def __init__(self, distances: np.ndarray, positions: np.ndarray, draws: int, seed: int) -> None:
        self.distances, self.positions, self.draws, self.seed = distances, positions, draws, seed
        self._samples: dict[int, dict[str, np.ndarray]] = {}

    def sample(self, width: int) -> dict[str, np.ndarray]:
        """The null scores of tables of ``width`` columns on the kept positions."""
        if width not in self._samples:
            shape = (self.positions.size, width)
            self._samples[width] = null_sample(
                shape, self.distances, self.draws, seed=self.seed, anchored=True, index=self.positions
            )
        return self._samples[width]


class TrajectoryEntry(TypedDict):
    """One tracked score at one step: its value, its null's mean, sd and range, and its category."""

    score: float
    null_mean: float
    null_sd: float
    null_low: float
    null_high: float
    category: str


@dataclass(frozen=True)
class TrajectoryPoint:
    """One step of a trajectory: per tracked score, its value, its null's mean, sd, range, and the category."""

    step: int
    scores: Mapping[str, TrajectoryEntry]

    def value(self, score: str) -> float:
        return float(self.scores[score]["score"])

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, **{score: dict(entry) for score, entry in self.scores.items()}}


def _entry(value: float, test: RankTest) -> TrajectoryEntry:
    return {
        "score": float(value),
        "null_mean": test.mean,
        "null_sd": test.sd,
        "null_low": test.low,
        "null_high": test.high,
        "category": test.category,
    }


def trajectory(
    tables: Iterable[tuple[int, np.ndarray]], nulls: NullCache, scores: Sequence[str] = TRACKED
) -> list[TrajectoryPoint]:
    """Each (step, table) scored against one geometry with one null, in step order: every score in ``scores``
    of the table (rows: the null's kept positions) with its rank test against the null of its width."""
    points = []
    for step, table in sorted(tables, key=lambda pair: pair[0]):
        observed = all_scores(table, nulls.distances, index=nulls.positions)
        calibrated = calibrate(observed, nulls.sample(int(table.shape[1])))
        points.append(TrajectoryPoint(int(step), {s: _entry(observed.get(s, math.nan), calibrated[s]) for s in scores}))
    return points


def shape_null(shape: tuple[int, int], score: Any, draws: int, seed: int = 0) -> np.ndarray:
    """``score(table)`` of ``draws`` i.i.d. N(0, 1) tables of ``shape``, from the null's own stream
    (:func:`~geoanalyze.geometry.null.null_rng`): the null of a score that needs no D (separation)."""
    rng = null_rng(seed)
    return np.array([float(score(rng.standard_normal(shape))) for _ in range(draws)], dtype=np.float64)


def shape_trajectory(
    tables: Iterable[tuple[int, np.ndarray]],
    name: str,
    score: Any,
    draws: int,
    seed: int = 0,
    lower_is_better: bool = False,
) -> list[TrajectoryPoint]:
    """Each (step, table) scored by a D-free ``score`` (called ``name``) against :func:`shape_null` of its shape."""
    nulls: dict[tuple[int, int], np.ndarray] = {}
    points = []
    for step, table in sorted(tables, key=lambda pair: pair[0]):
        shape = (int(table.shape[0]), int(table.shape[1]))
        if shape not in nulls:
            nulls[shape] = shape_null(shape, score, draws, seed)
        value = float(score(table))
        points.append(
            TrajectoryPoint(int(step), {name: _entry(value, rank_test(value, nulls[shape], lower_is_better))})
        )
    return points
