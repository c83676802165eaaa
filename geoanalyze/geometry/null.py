r"""The isotropy null: every scale-free score against random Gaussian tables of the same shape, and the
aspects the verdicts name.

This null asks a question of its own: *is the table closer to D than an isotropic cloud of its
width?* It is not the verdicts' null: ``stress``, ``report`` and ``track`` ask "do these vectors
carry position?" and test each table against shuffles of its own positions
(:mod:`geoanalyze.geometry.shuffle`). In high dimension Gaussian tables are nearly equidistant,
so this null rewards isotropy and depends on the width; it stays for the experiments that ask
whether a trained table moved away from its random initialisation, and for
:func:`geoanalyze.null_calibration`.

Its H0 for a table P (n x k): its scores are exchangeable with those of K tables with i.i.d.
N(0, 1) entries of the same shape, scored against the same D (the *null draws*). For a score x of P and the null values
v_1..v_K, with "at least as good" meaning <= for a lower-is-better score and >= otherwise:

    p_better = (1 + #{k: v_k at least as good as x}) / (K + 1)
    p_worse  = (1 + #{k: v_k at least as bad  as x}) / (K + 1)

are exact one-sided p-values under H0 (ties counted against the claim, so conservative). The
**category** of the score is

    better             if p_better <= alpha / 2
    worse              if p_worse  <= alpha / 2
    indistinguishable  otherwise

a two-sided test at level alpha = 0.05. The smallest p-value K draws can give is 1 / (K + 1),
so a category other than "indistinguishable" needs K >= 2 / alpha - 1 = 39 draws
(:data:`MIN_DRAWS`, also the default): "better" then means "better than every one of 39 random
tables". With fewer draws the category is ``undecided``. A table that *is* random is called
better or worse with probability alpha (5%), whatever its shape.

Each score of P also gets its ``rank`` among the K + 1 values (1 = best; ties share the best
rank) and two effect sizes: ``z`` = (x - mean) / sd of the null, and ``effect``, the
improvement over the null mean in the score's own units (positive = better than random).

The *aspects* a verdict names are the scale-free scores (:data:`ASPECTS`): shape (scaled
stress), order (monotonicity violation), local order (anchored violation), lag (lag violation)
and separation (relative separation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..errors import InputError
from .scores import all_scores, check_inputs

#: aspect name -> the scale-free score it is read from (the order the verdict names them in)
ASPECTS: dict[str, str] = {
    "shape": "scaled_stress",
    "order": "monotonicity_violation",
    "local_order": "anchored_monotonicity_violation",
    "lag": "lag_violation",
    "separation": "relative_separation",
}
#: the aspects the position-shuffle null tests (separation has no test: a shuffle never changes it)
TESTED_ASPECTS = ("shape", "order", "local_order", "lag")
#: the aspects whose score compares the vectors with D (the others are properties of the vectors alone)
D_ASPECTS = ("shape", "order", "local_order")
#: how an aspect is written in sentences
ASPECT_WORDS = {aspect: aspect.replace("_", " ") for aspect in ASPECTS}
#: the category when the draws are too few for any other (see MIN_DRAWS)
UNDECIDED = "undecided"
#: the level of the two-sided rank test
ALPHA = 0.05
#: scores where smaller is better (separation: larger is better)
LOWER_IS_BETTER = {
    "stress": True,
    "scaled_stress": True,
    "monotonicity_violation": True,
    "anchored_monotonicity_violation": True,
    "lag_violation": True,
    "separation": False,
    "relative_separation": False,
}


def min_draws(alpha: float = ALPHA) -> int:
    """The fewest draws whose smallest p-value, 1 / (K + 1), reaches alpha / 2: K >= 2 / alpha - 1."""
    return math.ceil(2 / alpha - 1 - 1e-9)


#: the fewest null draws for which the rank test at ALPHA can say better or worse (39)
MIN_DRAWS = min_draws(ALPHA)
#: a stream of its own, so no null draw equals the `random` encoding of the same seed
_NULL_STREAM = 0x6E756C6C


def null_rng(seed: int) -> np.random.Generator:
    """The generator of the null draws for ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([seed, _NULL_STREAM]))


def null_sample(
    shape: tuple[int, int],
    distances: Any,
    draws: int,
    seed: int = 0,
    anchored: bool = False,
    index: Any = None,
) -> dict[str, np.ndarray]:
    """Every score of ``draws`` i.i.d. N(0, 1) tables of ``shape`` against ``distances``: score -> (draws,) array.

    The tables are drawn one after another from :func:`null_rng` (``seed``), so a sample of K
    draws is the first K of a sample of more. ``anchored`` and ``index`` as in
    :func:`geoanalyze.geometry.scores.all_scores`.
    """
    if draws < 2:
        raise InputError(f"null calibration needs at least 2 draws, got {draws}")
    rng = null_rng(seed)
    rows = [all_scores(rng.standard_normal(shape), distances, anchored=anchored, index=index) for _ in range(draws)]
    return {name: np.array([row[name] for row in rows], dtype=np.float64) for name in rows[0]}


@dataclass(frozen=True)
class RankTest:
    """One score's rank test against its null: the null's mean, sd and range, z, the share beaten
    (``beats``), the rank (1 = best; None for an undefined score), both one-sided p-values, the effect
    and the category.

    A shuffle test (:mod:`geoanalyze.geometry.shuffle`) also names its ``statistic`` and carries the
    ``observed`` value, its two-sided ``p``, its ``draws`` and Holm's ``p_adjusted``; an isotropy
    test (:func:`rank_test`) leaves them None, and its record leaves them out. ``test["sd"]`` reads
    a field as the JSON record names it.
    """

    mean: float
    sd: float
    low: float
    high: float
    z: float
    beats: float
    rank: int | None
    p_better: float
    p_worse: float
    effect: float
    category: str
    statistic: str | None = None
    observed: float | None = None
    p: float | None = None
    draws: int | None = None
    p_adjusted: float | None = None

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record, in its published key order (a field that is None and optional is left out)."""
        order: tuple[str, ...]
        if self.statistic is not None:
            order = ("statistic", "observed", "mean", "sd", "low", "high", "z", "beats", "rank")
            order += ("p_better", "p_worse", "p", "effect", "draws", "p_adjusted", "category")
        elif self.rank is None:
            order = ("mean", "sd", "low", "high", "z", "p_better", "p_worse", "effect", "beats", "rank", "category")
        else:
            order = tuple(f.name for f in fields(self))[:11]
        return {name: self[name] for name in order if name == "rank" or self[name] is not None}


def rank_test(value: float, null: np.ndarray, lower_is_better: bool = True, alpha: float = ALPHA) -> RankTest:
    """Where ``value`` falls among the null values (a :class:`RankTest`).

    ``beats``: the share of draws ``value`` is strictly better than. A NaN value (an undefined
    score) is worse than nothing and better than nothing: its category is ``undecided``.
    """
    values = np.asarray(null, dtype=np.float64)
    draws = int(values.size)
    mean = float(values.mean())
    sd = float(values.std(ddof=1)) if draws > 1 else math.nan
    x = float(value)
    spread = (mean, sd, float(values.min()), float(values.max()))
    if math.isnan(x):
        return RankTest(
            *spread,
            z=math.nan,
            beats=0.0,
            rank=None,
            p_better=math.nan,
            p_worse=math.nan,
            effect=math.nan,
            category=UNDECIDED,
        )
    if lower_is_better:
        strictly_better_null, as_good, as_bad = values < x, values <= x, values >= x
        beats = values > x
        effect = mean - x
    else:
        strictly_better_null, as_good, as_bad = values > x, values >= x, values <= x
        beats = values < x
        effect = x - mean
    p_better = (1 + int(as_good.sum())) / (draws + 1)
    p_worse = (1 + int(as_bad.sum())) / (draws + 1)
    return RankTest(
        *spread,
        z=(x - mean) / sd if sd > 0 else math.nan,
        beats=float(beats.mean()),
        rank=1 + int(strictly_better_null.sum()),
        p_better=p_better,
        p_worse=p_worse,
        effect=float(effect),
        category=categorize(p_better, p_worse, draws, alpha),
    )


def categorize(p_better: float, p_worse: float, draws: int, alpha: float = ALPHA) -> str:
    """better / worse / indistinguishable from the one-sided p-values; undecided when ``draws`` cannot decide."""
    if draws < min_draws(alpha):
        return UNDECIDED
    # 1e-12: 1 / (K + 1) and alpha / 2 are equal in exact arithmetic at K = MIN_DRAWS
    if p_better <= alpha / 2 + 1e-12:
        return "better"
    if p_worse <= alpha / 2 + 1e-12:
        return "worse"
    return "indistinguishable"


def calibrate(scores: Mapping[str, float], null: Mapping[str, np.ndarray], alpha: float = ALPHA) -> dict[str, RankTest]:
    """:func:`rank_test` of every score that has null values."""
    return {
        name: rank_test(scores.get(name, math.nan), values, LOWER_IS_BETTER.get(name, True), alpha)
        for name, values in null.items()
    }


def categories(calibrated: Mapping[str, RankTest]) -> dict[str, str | None]:
    """aspect -> category, from score -> test (a :func:`calibrate` result, or the shuffle tests of
    :func:`geoanalyze.geometry.shuffle.decide`); None for an aspect with no test (separation)."""
    return {aspect: (calibrated[score].category if score in calibrated else None) for aspect, score in ASPECTS.items()}


def null_calibration(
    positions: Any,
    distances: Any,
    draws: int = 8,
    seed: int = 0,
    scores: dict[str, float] | None = None,
    anchored: bool = False,
    index: Any = None,
    alpha: float = ALPHA,
) -> dict[str, RankTest]:
    """Scores of ``draws`` i.i.d. N(0, 1) encodings of the same shape, and where ``positions`` falls:
    score -> its :class:`RankTest` (category undecided below 39 draws). ``index`` as in
    :func:`~geoanalyze.geometry.scores.all_scores`.
    """
    p, d = check_inputs(positions, distances)
    observed = scores if scores is not None else all_scores(p, d, anchored=anchored, index=index)
    return calibrate(observed, null_sample(p.shape, d, draws, seed=seed, anchored=anchored, index=index), alpha)


def equidistant_scaled_stress(distances: Any) -> float:
    r"""The scaled stress of a table with no position information at all: every position equidistant.

    E_ij = c for all pairs gives 1 - (\sum D)^2 / (m \sum D^2): the share of D's sum of squares
    that is spread around its mean. A near-isotropic table (high-dimensional Gaussian vectors,
    whose distances are nearly equal) scores about this, whatever D is; when it is small, D is
    nearly flat and scaled stress rewards isotropy, not position information.
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim == 2:
        d = d[np.triu_indices(d.shape[0], k=1)]
    top = float(np.max(np.abs(d))) if d.size else 0.0
    if top == 0:
        return math.nan
    d = d / top
    total = float(np.dot(d, d))
    return max(0.0, 1.0 - float(d.sum()) ** 2 / (d.size * total))
