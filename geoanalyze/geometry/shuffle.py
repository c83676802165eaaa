r"""The position-shuffle null: do these vectors carry information about which position they belong to?

H0 of a table P (n x k) scored against the target distances D: *the rows of P are exchangeable
over the positions*. Each aspect's statistic (shape: cos(E, D); order, local order and lag: a
Spearman rho, reported as the rank discordance (1 - rho) / 2) is held against the same statistic
of the table's own distance matrix E with its rows and columns shuffled: a quadratic-assignment
statistic, so K shuffles of many tables are one gather and one matrix product. The two-sided
Monte Carlo p-values of one run are adjusted together by Holm's step-down method; with too few
shuffles every category is ``undecided`` (:func:`draws_for`, at least :data:`MIN_SHUFFLES`).
Statistics, p-values and categories: docs/scores.md, section 5. Separation gets no category:
relabelling the rows never changes the closest pair.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.spatial.distance import squareform
from scipy.stats import rankdata

from .null import ALPHA, UNDECIDED, RankTest
from .scores import check_index, check_inputs, tie_ranks, unit_distances

#: score -> the statistic its shuffle test uses (relative separation has none: a shuffle cannot change it)
TESTED: dict[str, str] = {
    "scaled_stress": "scaled stress",
    "monotonicity_violation": "rank discordance",
    "anchored_monotonicity_violation": "anchored rank discordance",
    "lag_violation": "lag rank discordance",
}
#: the fewest shuffles any test gets (a p-value resolution of 0.001)
MIN_SHUFFLES = 999
#: a stream of its own, so no shuffle repeats another stream of the same seed
_SHUFFLE_STREAM = 0x73687566
#: statistics within this of the observed one count as ties (against the claim): float rounding of
#: a sum of n^2 terms of size <= 1 in another order stays far below it
_TIE = 1e-9
#: about this many float64 entries per gathered block of shuffles (4 channels of n^2 each)
_BLOCK_ENTRIES = 1 << 22


def draws_for(tests: int, alpha: float = ALPHA) -> int:
    """The fewest shuffles whose smallest two-sided p, 2 / (K + 1), reaches Holm's first level alpha / tests
    (and at least :data:`MIN_SHUFFLES`)."""
    return max(MIN_SHUFFLES, math.ceil(2 * max(1, tests) / alpha - 1 - 1e-9))


def can_decide(draws: int, tests: int, alpha: float = ALPHA) -> bool:
    """Whether ``draws`` shuffles can reject any of ``tests`` tests at family-wise level ``alpha``."""
    return 2 / (draws + 1) <= alpha / max(1, tests) + 1e-15


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: p_(i) * (m - i + 1), made monotone, capped at 1 (NaN stays NaN,
    and does not count in m)."""
    p = np.asarray(pvalues, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    if m == 0:
        return adjusted
    order = finite[np.argsort(p[finite], kind="stable")]
    steps = p[order] * (m - np.arange(m))
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(steps))
    return adjusted


def _centred_unit(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """values minus their mean, divided by their norm (along ``axis``); an all-tied set becomes zeros."""
    centred = values - values.mean(axis=axis, keepdims=axis is not None)
    norm = np.sqrt((centred * centred).sum(axis=axis, keepdims=axis is not None))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm > 0, centred / np.where(norm > 0, norm, 1.0), 0.0)


def _row_ranks(square: np.ndarray) -> np.ndarray:
    """Per row, the centred, unit-norm average ranks of the off-diagonal entries; 0 on the diagonal."""
    n = square.shape[0]
    off = ~np.eye(n, dtype=bool)
    ranks = rankdata(square[off].reshape(n, n - 1), axis=1)
    out = np.zeros((n, n))
    out[off] = _centred_unit(ranks, axis=1).ravel()
    return out


def _pair_channels(condensed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, pair ranks, row ranks) of condensed distances as n x n matrices, each scaled so that the
    sum over the full matrix of its product with the other side's is the statistic (cosine, rho, n * mean rho)."""
    top = float(np.max(np.abs(condensed))) if condensed.size else 0.0
    unit = condensed / top if top > 0 else condensed
    norm = float(np.sqrt(2 * np.dot(unit, unit)))
    values = squareform(unit / norm if norm > 0 else unit)
    merged = tie_ranks(condensed)
    ranks = squareform(_centred_unit(rankdata(merged)) / math.sqrt(2))
    return values, ranks, _row_ranks(squareform(merged))


@dataclass
class _Group:
    """The tables registered on one set of positions, and that set's target channels."""

    distances: np.ndarray
    index: np.ndarray
    members: list[int] = field(default_factory=list)
    tables: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)


class ShuffleNull:
    """The shuffle tests of every table of one run: register each table, then :meth:`run` them together.

    Tables on the same positions share one set of shuffles and one gather of the target's channels
    per block; the p-values of all of them form one family for :func:`holm`.
    """

    def __init__(self, distances: np.ndarray, positions: np.ndarray, draws: int | None, seed: int) -> None:
        self.distances, self.positions, self.seed = np.asarray(distances), np.asarray(positions), seed
        #: None: as many as the family needs (:func:`draws_for`), fixed when the tests run
        self.requested = draws
        self._groups: dict[tuple[int, ...] | None, _Group] = {}
        self._count = 0

    def register(self, table: np.ndarray, subset: np.ndarray | None = None) -> int:
        """Queue ``table`` (its rows: the kept positions, or the rows ``subset`` of them); returns its handle."""
        key = None if subset is None else tuple(int(i) for i in subset)
        if key not in self._groups:
            distances = self.distances if subset is None else self.distances[np.ix_(subset, subset)]
            index = self.positions if subset is None else self.positions[subset]
            self._groups[key] = _Group(np.asarray(distances, dtype=np.float64), np.asarray(index, dtype=np.float64))
        group = self._groups[key]
        values, ranks, rows = _pair_channels(unit_distances(table)[0])
        group.members.append(self._count)
        group.tables.append((values, ranks, rows))
        self._count += 1
        return self._count - 1

    @property
    def tests(self) -> int:
        """The number of tests the registered tables make (the family Holm corrects over)."""
        return self._count * len(TESTED)

    def draws(self) -> int:
        """The shuffles each test gets."""
        return self.requested if self.requested is not None else draws_for(self.tests)

    def run(self) -> list[dict[str, RankTest]]:
        """Every registered table's tests, in registration order: score -> :func:`_summary` (unadjusted)."""
        draws = self.draws()
        results: list[dict[str, RankTest]] = [{} for _ in range(self._count)]
        for key, group in self._groups.items():
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, _SHUFFLE_STREAM, *(key or ())]))
            observed, null = _shuffled_statistics(group, draws, rng)
            for column, member in enumerate(group.members):
                results[member] = {
                    score: _summary(name, observed[c, column], null[c][:, column], score)
                    for c, (score, name) in enumerate(TESTED.items())
                }
        return results


def _target_channels(group: _Group) -> np.ndarray:
    """The four target matrices (D's values, D's pair ranks, D's row ranks, the lags' row ranks), (4, n^2)."""
    d = group.distances
    n = d.shape[0]
    condensed = d[np.triu_indices(n, k=1)]
    values, ranks, rows = _pair_channels(condensed)
    lags = np.abs(group.index[:, None] - group.index[None, :])
    lag_rows = _row_ranks(squareform(tie_ranks(squareform(lags, checks=False))))
    return np.stack([values.ravel(), ranks.ravel(), rows.ravel(), lag_rows.ravel()])


def _shuffled_statistics(group: _Group, draws: int, rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray]]:
    """(observed (4, T), per channel the (draws, T) statistics under shuffles) of a group's T tables."""
    targets = _target_channels(group)  # (4, n^2)
    n = group.distances.shape[0]
    # per channel, the tables' matrices as columns (n^2, T); the row ranks serve local order and lag
    values = np.stack([t[0].ravel() for t in group.tables], axis=1)
    ranks = np.stack([t[1].ravel() for t in group.tables], axis=1)
    rows = np.stack([t[2].ravel() for t in group.tables], axis=1)
    sides = (values, ranks, rows, rows)
    # the row channels sum n anchors' rho: their statistic is the mean
    weights = np.array([1.0, 1.0, 1.0 / n, 1.0 / n])
    observed = np.stack([weights[c] * (targets[c] @ sides[c]) for c in range(4)])
    null = [np.empty((draws, len(group.tables))) for _ in range(4)]
    block = max(1, min(draws, _BLOCK_ENTRIES // (4 * n * n)))
    base = np.tile(np.arange(n), (block, 1))
    for start in range(0, draws, block):
        size = min(block, draws - start)
        sigma = rng.permuted(base[:size], axis=1)
        flat = (sigma[:, :, None] * n + sigma[:, None, :]).reshape(size, n * n)
        for c in range(4):
            null[c][start : start + size] = weights[c] * (targets[c][flat] @ sides[c])
    return observed, null


def _summary(statistic: str, observed: float, null: np.ndarray, score: str) -> RankTest:
    """One test on the score's scale (lower is better): the shuffles' mean, sd, range, z, the share beaten,
    the rank, both one-sided p-values, the two-sided p and the effect (undecided until :func:`decide`).
    Larger raw statistics are better; scaled stress is 1 - cos^2 and a rank discordance (1 - rho) / 2."""
    draws = int(null.size)
    as_good = int(np.count_nonzero(null >= observed - _TIE))
    as_bad = int(np.count_nonzero(null <= observed + _TIE))
    strictly_better = int(np.count_nonzero(null > observed + _TIE))
    p_better, p_worse = (1 + as_good) / (draws + 1), (1 + as_bad) / (draws + 1)

    def scale(x: Any) -> Any:
        return 1.0 - np.square(x) if score == "scaled_stress" else (1.0 - np.asarray(x)) / 2.0

    on_scale, value = scale(null), float(scale(observed))
    mean, sd = float(on_scale.mean()), float(on_scale.std(ddof=1)) if draws > 1 else math.nan
    if np.all(np.abs(null - observed) <= _TIE):
        # no shuffle moves the statistic (a flat table: every distance tied): no evidence either way
        p_better = p_worse = math.nan
    return RankTest(
        statistic=statistic,
        observed=value,
        mean=mean,
        sd=sd,
        low=float(on_scale.min()),
        high=float(on_scale.max()),
        z=(value - mean) / sd if sd > 0 else math.nan,
        beats=float(np.count_nonzero(null < observed - _TIE)) / draws,
        rank=1 + strictly_better,
        p_better=p_better,
        p_worse=p_worse,
        p=min(1.0, 2 * min(p_better, p_worse)) if math.isfinite(p_better) else math.nan,
        effect=mean - value,
        draws=draws,
        category=UNDECIDED,
    )


def decide(tests: Sequence[Mapping[str, RankTest]], alpha: float = ALPHA) -> list[dict[str, RankTest]]:
    """Holm over every test of ``tests`` (one mapping score -> test per table): each test gains
    ``p_adjusted`` and ``category`` (better / worse when the adjusted p <= alpha, by its smaller one-sided
    p; else indistinguishable; undecided when the draws cannot reach Holm's first level, or for a test no
    shuffle moves, whose p is undefined and which is left out of the family)."""
    flat = [(i, score) for i, table in enumerate(tests) for score in table]
    raw = [float(tests[i][score].p or math.nan) for i, score in flat]
    adjusted = holm(raw)
    draws = min((int(tests[i][score].draws or 0) for i, score in flat), default=0)
    decidable = can_decide(draws, int(np.isfinite(raw).sum()), alpha)
    out: list[dict[str, RankTest]] = [{} for _ in tests]
    for (i, score), p_adj in zip(flat, adjusted, strict=True):
        test = tests[i][score]
        if not decidable or not math.isfinite(p_adj):
            category = UNDECIDED
        elif p_adj <= alpha + 1e-12:
            category = "better" if test.p_better <= test.p_worse else "worse"
        else:
            category = "indistinguishable"
        out[i][score] = replace(test, p_adjusted=float(p_adj), category=category)
    return out


def shuffle_test(
    positions: Any, distances: Any, draws: int | None = None, seed: int = 0, index: Any = None, alpha: float = ALPHA
) -> dict[str, RankTest]:
    """The shuffle tests of one table P (n x k) against target distances D (n x n): score -> test.

    Each :class:`~geoanalyze.geometry.null.RankTest` holds the fields of :func:`_summary`, Holm's ``p_adjusted`` over the four tests and the
    ``category`` (better, indistinguishable, worse; undecided with too few ``draws``). ``index``: the
    positions' indices (the lags), default 0..n-1. ``draws`` None: :func:`draws_for` the four tests (999).
    """
    p, condensed = check_inputs(positions, distances)
    t = check_index(index, p.shape[0])
    nulls = ShuffleNull(squareform(condensed), t, draws, seed)
    nulls.register(p)
    return decide(nulls.run(), alpha)[0]
