"""Stress, scaled stress, monotonicity violation, separation and null calibration against brute force.

Every reference here loops over pairs i < j (and pairs of pairs) in plain Python, straight from
GEOMETRY.md ("Stress and friends"), and shares no code with geoanalyze.geometry.scores.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.optimize import minimize_scalar

from geoanalyze.errors import InputError
from geoanalyze.geometry import scores
from geoanalyze.geometry.mds import classical_mds
from geoanalyze.geometry.null import LOWER_IS_BETTER, null_calibration
from geoanalyze.geometry.scores import (
    SCORES,
    all_scores,
    discordance,
    monotonicity_violation,
    scaled_stress,
    separation,
    stress,
)

FAST = settings(max_examples=80, deadline=None)


# --- independent references -------------------------------------------------------------------


def dist(p: np.ndarray, i: int, j: int) -> float:
    return math.sqrt(sum((float(a) - float(b)) ** 2 for a, b in zip(p[i], p[j], strict=True)))


def pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def pairwise(points: np.ndarray) -> np.ndarray:
    """Full n x n Euclidean distances by broadcasting."""
    return np.sqrt(np.square(points[:, None, :] - points[None, :, :]).sum(axis=2))


def loop_stress(p: np.ndarray, d: np.ndarray) -> float:
    """sum_{i<j} (||p_i - p_j|| - D_ij)^2 / sum_{i<j} D_ij^2."""
    residual = total = 0.0
    for i, j in pairs(p.shape[0]):
        residual += (dist(p, i, j) - d[i, j]) ** 2
        total += d[i, j] ** 2
    return residual / total


def sign(x: float) -> int:
    return int(x > 0) - int(x < 0)


def loop_discordance(keys: list[Any], e: Any, d: Any) -> float:
    """Over pairs of ``keys`` untied in ``e`` and in ``d``: the share ordered differently (nan if none), in plain Python."""
    discordant = decided = 0
    for a, b in itertools.combinations(keys, 2):
        s = sign(e[a] - e[b]) * sign(d[a] - d[b])
        if s != 0:
            decided += 1
            discordant += s < 0
    return discordant / decided if decided else math.nan


def loop_violation(p: np.ndarray, d: np.ndarray) -> float:
    """Over pairs of position-pairs untied in E and in D: the share ordered differently (nan if none)."""
    all_pairs = pairs(p.shape[0])
    return loop_discordance(all_pairs, {pair: dist(p, *pair) for pair in all_pairs}, d)


def loop_anchor_rate(e_row: np.ndarray, d_row: np.ndarray, anchor: int) -> float:
    """Violation among pairs (anchor, j), (anchor, k), j < k, both != anchor, in plain Python."""
    return loop_discordance([j for j in range(len(e_row)) if j != anchor], e_row, d_row)


def numpy_anchor_rate(e_row: np.ndarray, d_row: np.ndarray, anchor: int) -> float:
    """The same, all (j, k) of one anchor at once (for n in the hundreds)."""
    keep = np.arange(len(e_row)) != anchor
    e, d = e_row[keep], d_row[keep]
    product = np.sign(e[:, None] - e[None, :]) * np.sign(d[:, None] - d[None, :])
    upper = np.triu(np.ones_like(product, dtype=bool), k=1)
    decided = int(((product != 0) & upper).sum())
    return float(((product < 0) & upper).sum() / decided) if decided else math.nan


def loop_anchored(p: np.ndarray, d: np.ndarray, per_anchor: Callable[..., float] = loop_anchor_rate) -> float:
    """Mean over anchors (those with at least one untied pair of pairs) of the per-anchor rate."""
    e = pairwise(p)
    rates = [per_anchor(e[i], d[i], i) for i in range(p.shape[0])]
    finite = [r for r in rates if not math.isnan(r)]
    return sum(finite) / len(finite) if finite else math.nan


def loop_separation(p: np.ndarray) -> tuple[float, float]:
    values = [dist(p, i, j) for i, j in pairs(p.shape[0])]
    return min(values), min(values) / statistics.median(values)


def symmetric(upper: np.ndarray, n: int) -> np.ndarray:
    """n x n symmetric matrix, zero diagonal, from its upper triangle (row-major order)."""
    d = np.zeros((n, n))
    d[np.triu_indices(n, k=1)] = upper
    return d + d.T


def gaussian(seed: int, n: int, k: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, k))


def target_for(seed: int, n: int, k: int = 3) -> np.ndarray:
    """Target distances of some other configuration: Euclidean, untied, unrelated to P."""
    return pairwise(gaussian(seed + 1000, n, k))


# --- hypothesis strategies --------------------------------------------------------------------


@st.composite
def grid_case(draw: st.DrawFn, min_n: int = 3, max_n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """P on a quarter-integer grid (exact ties in E) and D with small integer entries (many ties)."""
    n = draw(st.integers(min_n, max_n))
    k = draw(st.integers(1, 3))
    p = draw(hnp.arrays(np.float64, (n, k), elements=st.integers(-12, 12).map(lambda v: v / 4)))
    upper = draw(hnp.arrays(np.float64, (n * (n - 1) // 2,), elements=st.integers(0, 6).map(float)))
    assume(upper.any())
    return p, symmetric(upper, n)


INCREASING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "affine": lambda x: 3.0 * x + 7.0,
    "cube": lambda x: x**3,
    "sqrt": np.sqrt,
    "exp": lambda x: np.exp(x / 4),
    "log1p": np.log1p,
}


# --- stress ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_stress_matches_loop(seed: int) -> None:
    p, d = gaussian(seed, 9, 3), target_for(seed, 9)
    assert stress(p, d) == pytest.approx(loop_stress(p, d), rel=1e-12)


def test_stress_accepts_condensed_and_one_dimensional_inputs() -> None:
    p, d = gaussian(5, 7, 1), target_for(5, 7)
    condensed = d[np.triu_indices(7, k=1)]
    expected = loop_stress(p, d)
    assert stress(p, condensed) == pytest.approx(expected, rel=1e-12)
    assert stress(p[:, 0], d) == pytest.approx(expected, rel=1e-12)


def test_mds_of_a_euclidean_matrix_has_stress_zero() -> None:
    d = target_for(7, 20, k=5)
    embedding = classical_mds(d).embedding_
    assert stress(embedding, d) == pytest.approx(0.0, abs=1e-20)
    assert scaled_stress(embedding, d) == pytest.approx(0.0, abs=1e-12)
    assert stress(gaussian(7, 20, 5), d) > 0.05


def test_stress_is_not_scale_invariant_but_scaled_stress_is() -> None:
    p, d = gaussian(3, 10, 4), target_for(3, 10)
    assert stress(2.0 * p, d) != pytest.approx(stress(p, d), rel=1e-3)
    assert stress(2.0 * p, d) == pytest.approx(loop_stress(2.0 * p, d), rel=1e-12)
    for factor in (1e-3, 0.5, 2.0, 17.0, 1e4):
        assert scaled_stress(factor * p, d) == pytest.approx(scaled_stress(p, d), rel=1e-9, abs=1e-15)
        assert scaled_stress(p, factor * d) == pytest.approx(scaled_stress(p, d), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_scaled_stress_is_the_minimum_over_global_scales(seed: int) -> None:
    p, d = gaussian(seed, 8, 2), target_for(seed, 8)
    best = minimize_scalar(
        lambda a: loop_stress(a * p, d), bounds=(1e-6, 100.0), method="bounded", options={"xatol": 1e-12}
    )
    assert scaled_stress(p, d) == pytest.approx(best.fun, rel=1e-6, abs=1e-12)
    # The closed form a* = sum E D / sum E^2 attains it.
    e = np.array([dist(p, i, j) for i, j in pairs(8)])
    t = np.array([d[i, j] for i, j in pairs(8)])
    a_star = float(e @ t / (e @ e))
    assert scaled_stress(p, d) == pytest.approx(loop_stress(a_star * p, d), rel=1e-9)
    assert scaled_stress(p, d) <= stress(p, d) + 1e-15


def test_scaled_stress_of_an_exact_multiple_is_zero() -> None:
    p = gaussian(1, 12, 3)
    d = 0.01 * pairwise(p)
    assert scaled_stress(p, d) == pytest.approx(0.0, abs=1e-12)
    assert stress(p, d) > 1.0


def test_scaled_stress_of_coincident_points_is_one() -> None:
    # E = 0: every scale gives stress sum D^2 / sum D^2 = 1.
    assert scaled_stress(np.zeros((5, 2)), target_for(0, 5)) == pytest.approx(1.0)
    assert stress(np.zeros((5, 2)), target_for(0, 5)) == pytest.approx(1.0)


def test_stress_of_all_zero_targets_is_an_error() -> None:
    with pytest.raises(InputError, match="undefined"):
        stress(gaussian(0, 5, 2), np.zeros((5, 5)))


@FAST
@given(grid_case())
def test_stress_properties(case: tuple[np.ndarray, np.ndarray]) -> None:
    p, d = case
    value = stress(p, d)
    assert value >= 0
    assert value == pytest.approx(loop_stress(p, d), rel=1e-9, abs=1e-12)
    assert 0 <= scaled_stress(p, d) <= value + 1e-12


# --- monotonicity violation -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_violation_matches_loop_over_pairs_of_pairs(seed: int) -> None:
    p, d = gaussian(seed, 10, 2), target_for(seed, 10)
    assert monotonicity_violation(p, d) == pytest.approx(loop_violation(p, d), abs=1e-12)


def test_violation_leaves_ties_out_exactly() -> None:
    # Positions on a line with integer coordinates: E has many ties; D = rounded distances of
    # another configuration has ties too, some of them joint.
    rng = np.random.default_rng(4)
    p = rng.integers(0, 6, size=(11, 1)).astype(float)
    d = np.round(pairwise(rng.integers(0, 4, size=(11, 2)).astype(float)))
    e = pairwise(p)[np.triu_indices(11, k=1)]
    t = d[np.triu_indices(11, k=1)]
    assert len(np.unique(e)) < e.size and len(np.unique(t)) < t.size  # the case really has ties
    expected = loop_violation(p, d)
    assert monotonicity_violation(p, d) == pytest.approx(expected, abs=1e-12)
    # discordance: the (concordant, discordant) counts themselves.
    concordant, discordant = discordance(e, t)
    loop_c = loop_d = 0
    for a, b in itertools.combinations(range(e.size), 2):
        s = sign(e[a] - e[b]) * sign(t[a] - t[b])
        loop_c += s > 0
        loop_d += s < 0
    assert (concordant, discordant) == (loop_c, loop_d)  # whole counts, no float residue


def test_violation_never_leaves_the_unit_interval_through_rounding() -> None:
    # Found by hypothesis: tau_b's float error once made the discordant share 1.0000000000000002.
    p = np.array([[0.0], [0.5], [0.0], [-0.25]])
    d = symmetric(np.array([0.0, 2.0, 0.0, 0.0, 0.0, 1.0]), 4)
    assert loop_violation(p, d) == 1.0
    assert monotonicity_violation(p, d) == 1.0


def test_violation_known_cases() -> None:
    p = gaussian(2, 15, 3)
    e = pairwise(p)
    # Identical order: D any strictly increasing function of E.
    assert monotonicity_violation(p, e) == pytest.approx(0.0, abs=1e-12)
    assert monotonicity_violation(p, np.exp(e) - 1) == pytest.approx(0.0, abs=1e-12)
    assert monotonicity_violation(p, e, anchored=True) == pytest.approx(0.0, abs=1e-12)
    # Reversed order: D strictly decreasing in E.
    reverse = 10.0 - e
    assert monotonicity_violation(p, reverse) == pytest.approx(1.0, abs=1e-12)
    assert monotonicity_violation(p, reverse, anchored=True) == pytest.approx(1.0, abs=1e-12)
    # Unrelated random configurations: about one half.
    random_p, random_d = gaussian(8, 60, 8), target_for(8, 60)
    assert monotonicity_violation(random_p, random_d) == pytest.approx(0.5, abs=0.05)
    assert monotonicity_violation(random_p, random_d, anchored=True) == pytest.approx(0.5, abs=0.05)


def test_violation_with_every_pair_tied_is_nan() -> None:
    p = gaussian(0, 5, 2)
    d = np.ones((5, 5)) - np.eye(5)
    assert math.isnan(loop_violation(p, d))
    assert math.isnan(monotonicity_violation(p, d))
    assert math.isnan(monotonicity_violation(p, d, anchored=True))


@FAST
@given(grid_case())
@example((np.array([[0.0], [0.5], [0.0], [-0.25]]), symmetric(np.array([0.0, 2.0, 0.0, 0.0, 0.0, 1.0]), 4)))
def test_violation_properties(case: tuple[np.ndarray, np.ndarray]) -> None:
    p, d = case
    value = monotonicity_violation(p, d)
    expected = loop_violation(p, d)
    if math.isnan(expected):
        assert math.isnan(value)
        return
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(expected, abs=1e-9)
    anchored = monotonicity_violation(p, d, anchored=True)
    expected_anchored = loop_anchored(p, d)
    if math.isnan(expected_anchored):
        assert math.isnan(anchored)
    else:
        assert 0.0 <= anchored <= 1.0
        assert anchored == pytest.approx(expected_anchored, abs=1e-9)


@FAST
@given(grid_case(), st.sampled_from(sorted(INCREASING)), st.sampled_from(sorted(INCREASING)))
def test_violation_is_invariant_under_increasing_transforms(
    case: tuple[np.ndarray, np.ndarray], of_d: str, of_e: str
) -> None:
    p, d = case
    transformed_d = INCREASING[of_d](d)
    np.fill_diagonal(transformed_d, 0.0)
    for anchored in (False, True):
        before = monotonicity_violation(p, d, anchored=anchored)
        after = monotonicity_violation(p, transformed_d, anchored=anchored)
        assert (math.isnan(before) and math.isnan(after)) or after == pytest.approx(before, abs=1e-9)
        # A positive scale of P is an increasing transform of E through P itself.
        scaled = monotonicity_violation(2.5 * p, d, anchored=anchored)
        assert (math.isnan(before) and math.isnan(scaled)) or scaled == pytest.approx(before, abs=1e-9)
    # Any increasing transform of E, through the pair counts.
    e = pairwise(p)[np.triu_indices(p.shape[0], k=1)]
    t = d[np.triu_indices(p.shape[0], k=1)]
    assert discordance(INCREASING[of_e](e), t) == pytest.approx(discordance(e, t), abs=1e-6)
    assert discordance(e, INCREASING[of_d](t)) == pytest.approx(discordance(e, t), abs=1e-6)


@FAST
@given(grid_case(), st.data())
def test_permuting_positions_consistently_changes_nothing(
    case: tuple[np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    p, d = case
    order = data.draw(st.permutations(range(p.shape[0])))
    permuted_p, permuted_d = p[order], d[np.ix_(order, order)]
    # The rows keep their position indices: the lag violation measures lags with them.
    before, after = all_scores(p, d), all_scores(permuted_p, permuted_d, index=np.array(order))
    assert before.keys() == after.keys()
    for name, value in before.items():
        if math.isnan(value):
            assert math.isnan(after[name]), name
        else:
            assert after[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


# --- anchored violation on both sides of the internal switch -----------------------------------------


def test_switch_size_is_what_these_tests_straddle() -> None:
    assert scores._VECTORISED_ANCHORS_UP_TO == 160


def anchored_problem(n: int, ties: bool, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """(P, D) of n points: Gaussian (seed n), or with ties: integer coordinates in [0, levels) for P and
    [0, levels] for D's points, D rounded."""
    if not ties:
        return gaussian(n, n, 3), target_for(n, n)
    rng = np.random.default_rng(n)
    p = rng.integers(0, levels, size=(n, 2)).astype(float)
    return p, np.round(pairwise(rng.integers(0, levels + 1, size=(n, 2)).astype(float)))


@pytest.mark.parametrize("ties", [False, True], ids=["untied", "tied"])
def test_anchored_violation_small_n_matches_per_anchor_loop(ties: bool) -> None:
    p, d = anchored_problem(12, ties, levels=4)
    expected = loop_anchored(p, d)
    assert monotonicity_violation(p, d, anchored=True) == pytest.approx(expected, abs=1e-12)
    assert all_scores(p, d)["anchored_monotonicity_violation"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("ties", [False, True], ids=["untied", "tied"])
def test_anchored_violation_large_n_matches_per_anchor_loop(ties: bool) -> None:
    n = 170
    assert n > scores._VECTORISED_ANCHORS_UP_TO
    p, d = anchored_problem(n, ties, levels=5)
    expected = loop_anchored(p, d, per_anchor=numpy_anchor_rate)
    assert monotonicity_violation(p, d, anchored=True) == pytest.approx(expected, abs=1e-9)
    # The per-anchor NumPy reference agrees with the plain loop on a few anchors.
    e = pairwise(p)
    for anchor in (0, 85, 169):
        assert numpy_anchor_rate(e[anchor], d[anchor], anchor) == pytest.approx(
            loop_anchor_rate(e[anchor], d[anchor], anchor), abs=1e-12
        )


def test_anchored_violation_agrees_across_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    p, d = anchored_problem(30, ties=True, levels=4)
    vectorised = monotonicity_violation(p, d, anchored=True)
    monkeypatch.setattr(scores, "_VECTORISED_ANCHORS_UP_TO", 5)
    per_anchor = monotonicity_violation(p, d, anchored=True)
    assert per_anchor == pytest.approx(vectorised, abs=1e-12)
    assert per_anchor == pytest.approx(loop_anchored(p, d), abs=1e-12)


# --- separation --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_separation_matches_loop(seed: int) -> None:
    p = gaussian(seed, 9, 3)
    smallest, relative = loop_separation(p)
    assert separation(p) == pytest.approx(smallest, rel=1e-12)
    assert separation(p, relative=True) == pytest.approx(relative, rel=1e-12)
    result = all_scores(p, target_for(seed, 9))
    assert result["separation"] == pytest.approx(smallest, rel=1e-12)
    assert result["relative_separation"] == pytest.approx(relative, rel=1e-12)


def test_separation_of_duplicates_and_even_counts() -> None:
    p = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 0.0], [6.0, 8.0]])  # m = 6 pairs: an even median
    assert separation(p) == 0.0
    assert separation(p, relative=True) == 0.0
    q = np.array([[0.0], [1.0], [3.0], [7.0]])
    assert separation(q) == 1.0
    assert separation(q, relative=True) == pytest.approx(1.0 / statistics.median([1, 3, 7, 2, 6, 4]))
    assert separation(np.zeros((3, 2)), relative=True) == 0.0


def test_separation_bad_input() -> None:
    with pytest.raises(InputError):
        separation(np.zeros((1, 3)))
    with pytest.raises(InputError):
        separation(np.array([[0.0, 1.0], [np.nan, 2.0], [1.0, 1.0]]))


# --- all_scores --------------------------------------------------------------------------------------


def test_all_scores_agrees_with_each_score() -> None:
    p, d = gaussian(9, 11, 3), target_for(9, 11)
    result = all_scores(p, d)
    assert set(result) == {*SCORES, "relative_separation"}
    assert result["stress"] == pytest.approx(stress(p, d), rel=1e-12)
    assert result["scaled_stress"] == pytest.approx(scaled_stress(p, d), rel=1e-12)
    assert result["monotonicity_violation"] == pytest.approx(loop_violation(p, d), abs=1e-12)
    assert result["anchored_monotonicity_violation"] == pytest.approx(loop_anchored(p, d), abs=1e-12)
    assert result["lag_violation"] == pytest.approx(scores.lag_violation(p), abs=1e-12)
    assert "anchored_monotonicity_violation" not in all_scores(p, d, anchored=False)
    assert set(LOWER_IS_BETTER) == set(result)


# --- null calibration ---------------------------------------------------------------------------------


NULL_KEYS = {"stress", "scaled_stress", "monotonicity_violation", "lag_violation", "separation", "relative_separation"}


def test_null_calibration_keys_and_ranges() -> None:
    p, d = gaussian(4, 14, 3), target_for(4, 14)
    summary = null_calibration(p, d, draws=6, seed=1)
    assert set(summary) == NULL_KEYS
    for name, entry in summary.items():
        assert set(entry.to_dict()) == {
            *("mean", "sd", "low", "high", "z", "beats"),
            *("rank", "p_better", "p_worse", "effect", "category"),
        }, name
        assert entry.category == "undecided"  # 6 draws cannot decide (the rank test needs 39)
        assert 0.0 <= entry.beats <= 1.0
        assert entry.sd >= 0
    with_anchors = null_calibration(p, d, draws=3, seed=1, anchored=True)
    assert set(with_anchors) == NULL_KEYS | {"anchored_monotonicity_violation"}


def test_null_draws_differ_from_the_random_encoding_of_the_same_seed() -> None:
    from geoanalyze.encodings.standard import random

    same_seed = random(np.arange(6), d=2, seed=0)
    first_null_draw = np.random.default_rng(np.random.SeedSequence([0, 0x6E756C6C])).standard_normal((6, 2))
    assert not np.allclose(first_null_draw, same_seed)


def test_null_calibration_is_the_documented_null() -> None:
    # K = 5 i.i.d. N(0, 1) encodings of P's shape from the null's own stream
    # (SeedSequence([seed, 0x6E756C6C]), distinct from a `random` encoding's default_rng(seed)):
    # mean, sd (ddof 1), z, beats.
    p, d = gaussian(6, 10, 2), target_for(6, 10)
    draws, seed = 5, 42
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6E756C6C]))
    nulls = [rng.standard_normal(p.shape) for _ in range(draws)]
    observed = {
        "stress": loop_stress(p, d),
        "monotonicity_violation": loop_violation(p, d),
        "separation": loop_separation(p)[0],
    }
    summary = null_calibration(p, d, draws=draws, seed=seed)
    for name, of in (
        ("stress", lambda x: loop_stress(x, d)),
        ("monotonicity_violation", lambda x: loop_violation(x, d)),
        ("separation", lambda x: loop_separation(x)[0]),
    ):
        values = [of(x) for x in nulls]
        mean, sd = statistics.mean(values), statistics.stdev(values)
        lower_is_better = name != "separation"
        beaten = sum((v > observed[name]) if lower_is_better else (v < observed[name]) for v in values)
        entry = summary[name]
        assert entry["mean"] == pytest.approx(mean, rel=1e-9)
        assert entry["sd"] == pytest.approx(sd, rel=1e-9)
        assert entry["z"] == pytest.approx((observed[name] - mean) / sd, rel=1e-9)
        assert entry["beats"] == beaten / draws


def test_null_calibration_is_deterministic_for_a_seed() -> None:
    p, d = gaussian(5, 12, 3), target_for(5, 12)
    first = null_calibration(p, d, draws=4, seed=7)
    assert null_calibration(p, d, draws=4, seed=7) == first
    assert null_calibration(p, d, draws=4, seed=8) != first


def test_null_calibration_direction() -> None:
    d = target_for(11, 16, k=4)
    perfect = classical_mds(d).embedding_
    summary = null_calibration(perfect, d, draws=8, seed=0)
    assert summary["stress"]["beats"] == 1.0
    assert summary["monotonicity_violation"]["beats"] == 1.0
    assert summary["monotonicity_violation"]["z"] < 0
    # Separation: larger is better; a duplicated row beats no draw, a huge scale beats all.
    collapsed = perfect.copy()
    collapsed[1] = collapsed[0]
    assert null_calibration(collapsed, d, draws=8, seed=0)["separation"]["beats"] == 0.0
    assert null_calibration(1e6 * perfect, d, draws=8, seed=0)["separation"]["beats"] == 1.0
    # Given scores are used as the observed values.
    given_scores = {"stress": -1.0}
    assert null_calibration(perfect, d, draws=3, scores=given_scores)["stress"]["beats"] == 1.0


def test_null_calibration_needs_two_draws() -> None:
    with pytest.raises(InputError, match="draws"):
        null_calibration(gaussian(0, 5, 2), target_for(0, 5), draws=1)


# --- bad input ------------------------------------------------------------------------------------------


SCORE_FUNCTIONS: dict[str, Callable[[np.ndarray, np.ndarray], object]] = {
    "stress": stress,
    "scaled_stress": scaled_stress,
    "violation": monotonicity_violation,
    "anchored": lambda p, d: monotonicity_violation(p, d, anchored=True),
    "all_scores": all_scores,
    "null_calibration": lambda p, d: null_calibration(p, d, draws=2),
}


def _with_nan(array: np.ndarray, index: tuple[int, int]) -> np.ndarray:
    copy = array.copy()
    copy[index] = np.nan
    return copy


BAD_INPUTS = {
    "two positions": (gaussian(0, 2, 3), target_for(0, 2)),
    "one position": (gaussian(0, 1, 3), np.zeros((1, 1))),
    "nan in P": (_with_nan(gaussian(0, 5, 3), (2, 1)), target_for(0, 5)),
    "inf in P": (np.where(np.eye(5, 3) > 0, np.inf, gaussian(0, 5, 3)), target_for(0, 5)),
    "nan in D": (gaussian(0, 5, 3), _with_nan(target_for(0, 5), (1, 3))),
    "more positions than D": (gaussian(0, 6, 3), target_for(0, 5)),
    "fewer positions than D": (gaussian(0, 4, 3), target_for(0, 5)),
    "condensed D of the wrong length": (gaussian(0, 5, 3), np.ones(9)),
    "non-square D": (gaussian(0, 5, 3), np.ones((5, 4))),
    "P of three axes": (np.zeros((5, 2, 2)), target_for(0, 5)),
}


@pytest.mark.parametrize("function", sorted(SCORE_FUNCTIONS))
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_an_input_error(function: str, case: str) -> None:
    p, d = BAD_INPUTS[case]
    with pytest.raises(InputError):
        SCORE_FUNCTIONS[function](p, d)
