"""The lag violation (GEOMETRY.md, "lag violation") against a plain-Python loop over anchors and pairs.

The reference shares no code with geoanalyze.geometry.scores: for every anchor i it walks all
ordered pairs (j, l) of other positions with |t_i - t_j| < |t_i - t_l| and scores E_ij > E_il as
1, E_ij == E_il as 1/2; the rate is the mean over anchors that have such a pair.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.stats import special_ortho_group

from geoanalyze.encodings.standard import sinusoidal
from geoanalyze.errors import InputError
from geoanalyze.geometry.null import null_calibration
from geoanalyze.geometry.scores import all_scores, lag_violation

FAST = settings(max_examples=80, deadline=None)


def loop_lag_violation(p: np.ndarray, t: np.ndarray) -> float:
    n = len(t)
    e = [[math.dist(p[i], p[j]) for j in range(n)] for i in range(n)]
    rates = []
    for i in range(n):
        share = pairs = 0.0
        for j in range(n):
            for k in range(n):
                if len({i, j, k}) < 3 or not abs(t[i] - t[j]) < abs(t[i] - t[k]):
                    continue
                pairs += 1
                share += 1.0 if e[i][j] > e[i][k] else 0.5 if e[i][j] == e[i][k] else 0.0
        if pairs:
            rates.append(share / pairs)
    return sum(rates) / len(rates) if rates else math.nan


def broadcast_lag_violation(p: np.ndarray, t: np.ndarray) -> float:
    """The same by broadcasting one anchor at a time (for n in the hundreds)."""
    e = np.sqrt(np.square(p[:, None, :] - p[None, :, :]).sum(axis=2))
    rates = []
    for i in range(len(t)):
        keep = np.arange(len(t)) != i
        lag, row = np.abs(t[keep] - t[i]), e[i, keep]
        closer = lag[:, None] < lag[None, :]
        score = (row[:, None] > row[None, :]) + 0.5 * (row[:, None] == row[None, :])
        if closer.any():
            rates.append(score[closer].mean())
    return float(np.mean(rates))


@st.composite
def gapped_grid(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Vectors on a half-integer grid (exact ties in E) at distinct integer positions with gaps
    (equal lags on both sides of an anchor happen often)."""
    n = draw(st.integers(3, 9))
    k = draw(st.integers(1, 3))
    p = draw(hnp.arrays(np.float64, (n, k), elements=st.integers(-4, 4).map(lambda v: v / 2)))
    t = draw(st.lists(st.integers(0, 14), min_size=n, max_size=n, unique=True))
    return p, np.array(t, dtype=np.float64)


@FAST
@given(gapped_grid())
def test_matches_the_loop_with_ties_and_gaps(case: tuple[np.ndarray, np.ndarray]) -> None:
    p, t = case
    assert lag_violation(p, t) == pytest.approx(loop_lag_violation(p, t), abs=1e-12)


@pytest.mark.parametrize("n", [3, 4, 17, 33, 130, 257])
def test_matches_broadcasting_at_sizes_around_powers_of_two(n: int) -> None:
    # the merge count pads each row to a power of two: straddle both sides
    rng = np.random.default_rng(n)
    p = rng.integers(-6, 7, size=(n, 2)).astype(np.float64)  # integers: exact ties in E too
    t = np.sort(rng.choice(3 * n, size=n, replace=False)).astype(np.float64)
    assert lag_violation(p, t) == pytest.approx(broadcast_lag_violation(p, t), abs=1e-12)


@FAST
@given(
    st.integers(3, 30),
    st.floats(1e-3, 1e3),
    hnp.arrays(np.float64, (3,), elements=st.floats(-100, 100)),
    st.integers(0, 2**31 - 1),
)
def test_invariant_to_scale_rotation_and_translation(n: int, scale: float, shift: np.ndarray, seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((n, 3))
    rotation = special_ortho_group.rvs(3, random_state=seed)
    moved = scale * p @ rotation + shift
    assert lag_violation(moved) == pytest.approx(lag_violation(p), abs=1e-12)


def test_a_monotone_line_is_zero_and_a_fold_is_not() -> None:
    t = np.array([0, 1, 2, 5, 9, 10, 30], dtype=np.float64)
    assert lag_violation(t, t) == 0.0
    assert lag_violation(-3.0 * t + 1, t) == 0.0
    # evenly spaced vectors for positions with gaps: seen from position 9, position 10 (lag 1) is
    # as far as position 5 (lag 4), a tie counted one half; the score needs the true indices
    assert lag_violation(np.arange(7.0), t) > 0
    # the ends of a half circle meet again: 1-D lag order is lost near them
    angles = np.linspace(0, 1.9 * np.pi, 40)
    assert lag_violation(np.stack([np.cos(angles), np.sin(angles)], axis=1)) > 0.05


def test_reversed_order_is_one() -> None:
    # from every anchor the farther positions sit closer: only possible for 3 points (anchor 1 has no pair)
    p = np.array([[0.0], [10.0], [1.0]])
    assert lag_violation(p) == pytest.approx(loop_lag_violation(p, np.arange(3.0)))
    assert lag_violation(p) == 1.0


def test_random_vectors_are_near_one_half_and_sinusoidal_near_zero() -> None:
    rng = np.random.default_rng(0)
    assert lag_violation(rng.standard_normal((200, 64))) == pytest.approx(0.5, abs=0.01)
    # sinusoidal distances grow with lag over short ranges (the issue's ~0.3% on 54 SST-2 positions)
    assert lag_violation(sinusoidal(np.arange(54), d=384)) < 0.01


def test_identical_vectors_are_one_half() -> None:
    assert lag_violation(np.zeros((6, 2))) == 0.5


def test_in_all_scores_and_the_null() -> None:
    rng = np.random.default_rng(1)
    t = np.array([0, 1, 2, 3, 7, 8, 20, 21], dtype=np.float64)
    p = t[:, None] + 0.01 * rng.standard_normal((8, 2))
    d = np.abs(t[:, None] - t[None, :])
    result = all_scores(p, d, index=t)
    assert result["lag_violation"] == pytest.approx(loop_lag_violation(p, t), abs=1e-12)
    assert result["lag_violation"] < all_scores(p, d)["lag_violation"]  # the gaps matter
    null = null_calibration(p, d, draws=20, seed=0, index=t)["lag_violation"]
    assert null["mean"] == pytest.approx(0.5, abs=0.1)
    assert null["beats"] == 1.0


@pytest.mark.parametrize(
    "index",
    [[0, 1, 1, 2], [0, 1, 2], [0, 1, 2, np.nan]],
    ids=["repeated", "too few", "nan"],
)
def test_bad_indices(index: list[float]) -> None:
    with pytest.raises(InputError, match="position indices"):
        lag_violation(np.zeros((4, 2)), index)
    with pytest.raises(InputError, match="position indices"):
        all_scores(np.eye(4), np.ones((4, 4)) - np.eye(4), index=index)


def test_bad_vectors() -> None:
    with pytest.raises(InputError, match="at least 3"):
        lag_violation(np.zeros((2, 2)))
    with pytest.raises(InputError, match="NaN"):
        lag_violation(np.array([[0.0], [np.nan], [1.0]]))
