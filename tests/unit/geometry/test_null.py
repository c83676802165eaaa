"""The rank test of geoanalyze.geometry.null against independent computations and its laws.

- p-values and ranks by a brute-force loop over the draws;
- the level: a table that *is* random is called better (or worse) with probability 1/(K+1)
  exactly, measured over many exchangeable samples;
- laws (hypothesis): the direction of a score flips better and worse; a better value never gets
  a worse category; fewer than 39 draws decide nothing;
- the equidistant table's scaled stress equals the scaled stress of a real equidistant table
  (a simplex: one-hot rows).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.geometry.null import (
    ALPHA,
    ASPECTS,
    MIN_DRAWS,
    categorize,
    equidistant_scaled_stress,
    min_draws,
    null_calibration,
    null_sample,
    rank_test,
)
from geoanalyze.geometry.scores import all_scores, scaled_stress

RANK = ("worse", "indistinguishable", "better")


def brute_force(x: float, values: list[float], lower_is_better: bool) -> tuple[float, float, int]:
    """(p_better, p_worse, rank) by counting draw by draw."""
    as_good = as_bad = strictly_better = 0
    for v in values:
        good = v <= x if lower_is_better else v >= x
        bad = v >= x if lower_is_better else v <= x
        as_good += good
        as_bad += bad
        strictly_better += (v < x) if lower_is_better else (v > x)
    k = len(values)
    return (1 + as_good) / (k + 1), (1 + as_bad) / (k + 1), 1 + strictly_better


def test_thirty_nine_draws_are_the_fewest_that_decide() -> None:
    assert MIN_DRAWS == 39 == min_draws(0.05)
    assert 1 / (MIN_DRAWS + 1) <= ALPHA / 2 < 1 / MIN_DRAWS
    assert min_draws(0.1) == 19 and min_draws(0.01) == 199


@pytest.mark.parametrize("lower_is_better", [True, False])
def test_p_values_and_rank_equal_a_brute_force_count(lower_is_better: bool) -> None:
    rng = np.random.default_rng(3)
    values = list(np.round(rng.standard_normal(39), 1))  # rounded: ties occur
    for x in [*values[:5], -5.0, 5.0, 0.05]:
        result = rank_test(x, np.array(values), lower_is_better)
        p_better, p_worse, rank = brute_force(x, values, lower_is_better)
        assert result["p_better"] == p_better and result["p_worse"] == p_worse and result["rank"] == rank
        expected = "better" if p_better <= 0.025 else "worse" if p_worse <= 0.025 else "indistinguishable"
        assert result["category"] == expected
        assert result["mean"] == pytest.approx(np.mean(values)) and result["sd"] == pytest.approx(
            np.std(values, ddof=1)
        )
        assert result["low"] == min(values) and result["high"] == max(values)
        effect = np.mean(values) - x if lower_is_better else x - np.mean(values)
        assert result["effect"] == pytest.approx(effect)


def test_a_random_table_is_called_better_or_worse_at_the_stated_rate() -> None:
    # Exchangeable: x and the 39 draws from one distribution. P(better) = P(x is the strict minimum) = 1/40.
    rng = np.random.default_rng(0)
    trials = 40_000
    samples = rng.standard_normal((trials, MIN_DRAWS + 1))
    counts = {"better": 0, "worse": 0, "indistinguishable": 0}
    for row in samples:
        counts[rank_test(row[0], row[1:])["category"]] += 1
    sd = math.sqrt(trials * 0.025 * 0.975)
    assert abs(counts["better"] - trials / 40) < 4 * sd
    assert abs(counts["worse"] - trials / 40) < 4 * sd


def test_a_best_and_a_worst_value() -> None:
    values = np.linspace(0.4, 0.6, MIN_DRAWS)
    assert rank_test(0.1, values)["category"] == "better"
    assert rank_test(0.9, values)["category"] == "worse"
    assert rank_test(0.5, values)["category"] == "indistinguishable"
    # A tie with the best draw is not "better than every draw": ties count against the claim.
    assert rank_test(0.4, values)["category"] == "indistinguishable"
    assert rank_test(math.nan, values)["category"] == "undecided"


finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(x=finite, values=st.lists(finite, min_size=2, max_size=60))
def test_the_direction_of_a_score_flips_better_and_worse(x: float, values: list[float]) -> None:
    low = rank_test(x, np.array(values), lower_is_better=True)
    high = rank_test(-x, -np.array(values), lower_is_better=False)
    assert low["category"] == high["category"]
    assert low["p_better"] == high["p_better"] and low["rank"] == high["rank"]
    flipped = rank_test(x, np.array(values), lower_is_better=False)
    assert low["p_better"] == flipped["p_worse"] and low["p_worse"] == flipped["p_better"]


@settings(max_examples=200, deadline=None)
@given(x=finite, y=finite, values=st.lists(finite, min_size=2, max_size=60))
def test_a_better_value_never_gets_a_worse_category(x: float, y: float, values: list[float]) -> None:
    good, bad = min(x, y), max(x, y)
    a, b = rank_test(good, np.array(values)), rank_test(bad, np.array(values))
    assert RANK.index(a["category"] if a["category"] != "undecided" else "indistinguishable") >= RANK.index(
        b["category"] if b["category"] != "undecided" else "indistinguishable"
    )
    assert a["p_better"] <= b["p_better"] and a["rank"] <= b["rank"]


@settings(max_examples=100, deadline=None)
@given(x=finite, values=st.lists(finite, min_size=2, max_size=MIN_DRAWS - 1))
def test_fewer_than_39_draws_decide_nothing(x: float, values: list[float]) -> None:
    assert rank_test(x, np.array(values))["category"] == "undecided"
    assert categorize(0.0, 1.0, len(values)) == "undecided"


def test_null_sample_is_the_documented_draws() -> None:
    rng = np.random.default_rng(1)
    distances = np.abs(rng.standard_normal((9, 9)))
    distances = distances + distances.T
    np.fill_diagonal(distances, 0)
    sample = null_sample((9, 4), distances, 5, seed=7, anchored=True)
    stream = np.random.default_rng(np.random.SeedSequence([7, 0x6E756C6C]))
    for k in range(5):
        expected = all_scores(stream.standard_normal((9, 4)), distances, anchored=True)
        for name, value in expected.items():
            assert sample[name][k] == value
    # the first K draws of a larger sample are the sample of K
    assert np.array_equal(null_sample((9, 4), distances, 8, seed=7)["scaled_stress"][:5], sample["scaled_stress"])
    table = rng.standard_normal((9, 4))
    assert null_calibration(table, distances, draws=5, seed=7, anchored=True) == null_calibration(
        table, distances, draws=5, seed=7, anchored=True
    )
    assert set(ASPECTS.values()) <= set(sample)


def test_equidistant_scaled_stress_is_a_simplex_s() -> None:
    rng = np.random.default_rng(2)
    n = 12
    distances = np.abs(rng.standard_normal((n, n))) + 1
    distances = distances + distances.T
    np.fill_diagonal(distances, 0)
    simplex = np.eye(n)  # every pair at distance sqrt(2)
    assert equidistant_scaled_stress(distances) == pytest.approx(scaled_stress(simplex, distances), abs=1e-12)
    flat = np.ones((n, n)) - np.eye(n)
    assert equidistant_scaled_stress(flat) == pytest.approx(0.0, abs=1e-15)


def test_rank_test_records_keep_their_published_key_order() -> None:
    # the JSON of a rank test is byte-identical to the dicts it replaced: an isotropy test, an undefined
    # score's test, and a shuffle test each keep their key order
    values = np.linspace(0.0, 1.0, 40)
    assert list(rank_test(0.2, values).to_dict()) == [
        *("mean", "sd", "low", "high", "z", "beats", "rank"),
        *("p_better", "p_worse", "effect", "category"),
    ]
    assert list(rank_test(math.nan, values).to_dict()) == [
        *("mean", "sd", "low", "high", "z", "p_better", "p_worse"),
        *("effect", "beats", "rank", "category"),
    ]
    assert rank_test(math.nan, values).to_dict()["rank"] is None
    from geoanalyze.geometry.shuffle import shuffle_test

    p = np.arange(12.0)[:, None] * np.ones((1, 3))
    test = shuffle_test(p, np.abs(np.subtract.outer(np.arange(12.0), np.arange(12.0))), draws=19)["scaled_stress"]
    assert list(test.to_dict()) == [
        *("statistic", "observed", "mean", "sd", "low", "high", "z", "beats", "rank"),
        *("p_better", "p_worse", "p", "effect", "draws", "p_adjusted", "category"),
    ]
    assert test["category"] == test.category


def test_scores_do_not_import_the_null() -> None:
    # the null draws are scored by geometry.scores, so scores must not reach back (not even inside a
    # function): the null <-> scores cycle of issue 33 stays broken
    import ast
    import inspect

    import geoanalyze.geometry.scores as scores

    tree = ast.parse(inspect.getsource(scores))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {"null", "geoanalyze.geometry.null"} & imported, imported
