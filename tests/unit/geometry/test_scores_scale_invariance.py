"""Scores of c P for c in [1e-300, 1e300]: the scale-free ones are those of P, the raw ones exact.

Two independent checks of geoanalyze.geometry.scores:

* property tests (hypothesis): every scale-free score of c P equals that of P to 1e-9 relative,
  the separation moves by c, and the raw stress is never NaN (inf only when the true value is
  beyond float64's range);
* a brute-force reference in exact arithmetic: integer tables and integer target points, so
  squared distances are exact integers (every order and tie decided exactly), and the sums of
  the stresses taken in 60-digit Decimal, whose exponent range holds (1e300)^2 without overflow.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from itertools import combinations

import numpy as np
import pytest
from helpers import SCALE_FREE
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist

from geoanalyze.geometry.scores import (
    all_scores,
    embedding_distances,
    lag_violation,
    monotonicity_violation,
    scaled_stress,
    separation,
    stress,
)

FLOAT_MAX = Decimal(str(np.finfo(np.float64).max))

exponents = st.integers(-300, 300)


@st.composite
def integer_problem(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """(P, Q): an integer table and integer target points of the same n (D = distances of Q)."""
    n = draw(st.integers(3, 8))
    k = draw(st.integers(1, 4))
    cells = st.integers(-20, 20)
    p = np.array(draw(st.lists(st.lists(cells, min_size=k, max_size=k), min_size=n, max_size=n)), dtype=np.float64)
    q = np.array(draw(st.lists(st.lists(cells, min_size=2, max_size=2), min_size=n, max_size=n)), dtype=np.float64)
    return p, q


def same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=150, deadline=None)
@given(problem=integer_problem(), exponent=exponents)
def test_scale_free_scores_of_cp_are_those_of_p(problem: tuple[np.ndarray, np.ndarray], exponent: int) -> None:
    p, d, c = problem[0], pdist(problem[1]), 10.0**exponent
    assume(d.any())  # D = 0: stress undefined (refused), nothing to compare
    plain = all_scores(p, d)
    scaled = all_scores(p * c, d)
    for key in SCALE_FREE:
        assert same(scaled[key], plain[key]), (key, c, scaled[key], plain[key])
    assert same(scaled["separation"], plain["separation"] * c) or (
        plain["separation"] * c == 0 and scaled["separation"] < 1e-300
    )
    assert not math.isnan(scaled["stress"])


@settings(max_examples=60, deadline=None)
@given(problem=integer_problem(), exponent=exponents)
def test_the_target_distances_scale_freely_too(problem: tuple[np.ndarray, np.ndarray], exponent: int) -> None:
    """Scaled stress and the violations are scale-free in D as well (D / max D first)."""
    p, d, c = problem[0], pdist(problem[1]), 10.0**exponent
    assume(d.any())
    assert same(scaled_stress(p, d * c), scaled_stress(p, d))
    assert same(monotonicity_violation(p, d * c), monotonicity_violation(p, d))


# --- brute force in exact arithmetic -----------------------------------------------------------


def exact_pairs(points: np.ndarray) -> list[int]:
    """Squared distances (exact integers) over i < j in pdist order."""
    rows = [[int(v) for v in row] for row in points]
    return [
        sum((a - b) ** 2 for a, b in zip(rows[i], rows[j], strict=True)) for i, j in combinations(range(len(rows)), 2)
    ]


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def brute_violation(e2: list[int], d2: list[int]) -> float:
    concordant = discordant = 0
    for a, b in combinations(range(len(e2)), 2):
        product = sign(e2[a] - e2[b]) * sign(d2[a] - d2[b])
        concordant += product > 0
        discordant += product < 0
    return discordant / (concordant + discordant) if concordant + discordant else math.nan


def brute_anchored(e2: list[int], d2: list[int], n: int) -> float:
    index = {pair: k for k, pair in enumerate(combinations(range(n), 2))}

    def at(i: int, j: int) -> int:
        return index[(min(i, j), max(i, j))]

    rates = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        concordant = discordant = 0
        for j, m in combinations(others, 2):
            product = sign(e2[at(i, j)] - e2[at(i, m)]) * sign(d2[at(i, j)] - d2[at(i, m)])
            concordant += product > 0
            discordant += product < 0
        if concordant + discordant:
            rates.append(discordant / (concordant + discordant))
    return float(np.mean(rates)) if rates else math.nan


def brute_lag(e2: list[int], n: int) -> float:
    index = {pair: k for k, pair in enumerate(combinations(range(n), 2))}
    rates = []
    for i in range(n):
        greater = ties = comparable = 0
        others = [j for j in range(n) if j != i]
        for j in others:
            for m in others:
                if abs(i - j) < abs(i - m):
                    comparable += 1
                    ej, el = e2[index[(min(i, j), max(i, j))]], e2[index[(min(i, m), max(i, m))]]
                    greater += ej > el
                    ties += ej == el
        if comparable:
            rates.append((greater + 0.5 * ties) / comparable)
    return float(np.mean(rates)) if rates else math.nan


def brute_stresses(e2: list[int], d2: list[int], c: Decimal) -> tuple[Decimal, Decimal]:
    """(raw stress, scaled stress) of the distances c sqrt(e2) against sqrt(d2), in 60-digit Decimal."""
    with localcontext() as ctx:
        ctx.prec = 60
        e = [c * Decimal(v).sqrt() for v in e2]
        d = [Decimal(v).sqrt() for v in d2]
        dd = sum(x * x for x in d)
        raw = sum((a - b) ** 2 for a, b in zip(e, d, strict=True)) / dd
        ee = sum(x * x for x in e)
        scaled = Decimal(1) if ee == 0 else 1 - sum(a * b for a, b in zip(e, d, strict=True)) ** 2 / (ee * dd)
        return raw, scaled


@settings(max_examples=120, deadline=None)
@given(problem=integer_problem(), exponent=exponents)
def test_every_score_against_a_brute_force_reference(problem: tuple[np.ndarray, np.ndarray], exponent: int) -> None:
    p, q = problem
    n = p.shape[0]
    e2, d2 = exact_pairs(p), exact_pairs(q)
    if not any(d2):
        return
    c_text = f"1e{exponent}"
    c = float(c_text)
    scores = all_scores(p * c, pdist(q))
    raw, scaled = brute_stresses(e2, d2, Decimal(c))  # the float c, exactly
    if raw > FLOAT_MAX:
        assert scores["stress"] == math.inf
    else:
        assert math.isclose(scores["stress"], float(raw), rel_tol=1e-9, abs_tol=1e-300)
    assert math.isclose(scores["scaled_stress"], float(scaled), rel_tol=1e-9, abs_tol=1e-12)
    assert same(scores["monotonicity_violation"], brute_violation(e2, d2))
    assert same(scores["anchored_monotonicity_violation"], brute_anchored(e2, d2, n))
    assert same(scores["lag_violation"], brute_lag(e2, n))
    smallest = min(e2)
    true_separation = Decimal(c) * Decimal(smallest).sqrt()
    if smallest == 0:
        assert scores["separation"] == 0.0
    else:
        assert math.isclose(scores["separation"], float(true_separation), rel_tol=1e-12)


@pytest.mark.parametrize("exponent", [-300, -160, 0, 160, 300])
def test_the_single_score_functions_agree_with_all_scores(exponent: int) -> None:
    rng = np.random.default_rng(3)
    p, d = rng.standard_normal((12, 5)) * 10.0**exponent, pdist(rng.standard_normal((12, 2)))
    together = all_scores(p, d)
    assert same(scaled_stress(p, d), together["scaled_stress"])
    assert same(monotonicity_violation(p, d), together["monotonicity_violation"])
    assert same(monotonicity_violation(p, d, anchored=True), together["anchored_monotonicity_violation"])
    assert same(lag_violation(p), together["lag_violation"])
    assert same(separation(p), together["separation"])
    assert same(separation(p, relative=True), together["relative_separation"])
    assert stress(p, d) == together["stress"] or same(stress(p, d), together["stress"])


def test_embedding_distances_overflow_to_inf_never_nan() -> None:
    p = np.array([[0.0], [1.7e308], [-1.7e308]])
    e = embedding_distances(p)
    assert e[0] == pytest.approx(1.7e308) and math.isinf(e[2]) and not np.isnan(e).any()


def test_scale_argument_puts_the_raw_scores_back() -> None:
    """all_scores(P / s, D, scale=s) is all_scores(P, D): how projected layers score a huge table."""
    rng = np.random.default_rng(5)
    p, d = rng.standard_normal((10, 4)), pdist(rng.standard_normal((10, 2)))
    direct = all_scores(p * 1e100, d)
    via_scale = all_scores(p, d, scale=1e100)
    for key, value in direct.items():
        assert same(value, via_scale[key]), key
