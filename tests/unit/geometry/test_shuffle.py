"""The position-shuffle null (geometry/shuffle.py) against independent computations.

- each statistic under a shuffle equals its definition recomputed from the shuffled table's own
  vectors (scipy's Spearman, a loop over anchors, the scaled stress of all_scores);
- the p-values follow (1 + #as good) / (K + 1) over the same shuffles drawn by hand;
- Holm's adjusted p-values equal a brute-force step-down loop;
- laws: scale- and width-free (c P, P with zero columns, P rotated), equivariant (P and D relabelled
  together give the same test), and exact: a table that is its own shuffle has uniform p-values;
- under a global null (200 seeds of shuffled tables) the family-wise rate of any category other
  than indistinguishable is at most alpha.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist, squareform
from scipy.stats import spearmanr

from geoanalyze.geometry.scores import all_scores, tie_ranks
from geoanalyze.geometry.shuffle import (
    MIN_SHUFFLES,
    TESTED,
    ShuffleNull,
    _Group,
    _pair_channels,
    _shuffled_statistics,
    can_decide,
    decide,
    draws_for,
    holm,
)

ROOT = Path(__file__).resolve().parents[3]


def drifting(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A target D that drifts with position, and a table that follows it (plus noise)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, n)[:, None]
    truth = np.hstack([np.sin(3 * x), np.cos(2 * x)])
    d = squareform(pdist(truth + 0.02 * rng.standard_normal(truth.shape)))
    table = np.hstack([truth, 0.05 * rng.standard_normal((n, 6))]) @ rng.standard_normal((8, 16))
    return d, table


def statistics_by_hand(table: np.ndarray, d: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The four statistics from their definitions: cos(E, D), Spearman of pair ranks, mean per-anchor
    Spearman of E's row against D's row and against the lags (ties merged as every score merges them)."""
    n = table.shape[0]
    e = pdist(table)
    dc = d[np.triu_indices(n, 1)]
    cosine = e @ dc / (np.linalg.norm(e) * np.linalg.norm(dc))
    er, dr = tie_ranks(e), tie_ranks(dc)
    rho = spearmanr(er, dr).statistic
    full_e, full_d = squareform(er), squareform(dr)
    lags = np.abs(t[:, None] - t[None, :])
    anchored, lagged = [], []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        anchored.append(spearmanr(full_e[i, others], full_d[i, others]).statistic)
        lagged.append(spearmanr(full_e[i, others], lags[i, others]).statistic)
    return np.array([cosine, rho, np.mean(anchored), np.mean(lagged)])


def test_each_statistic_under_a_shuffle_is_its_definition_on_the_shuffled_table() -> None:
    d, table = drifting(17)
    t = np.arange(17.0) * 3  # gaps in the positions
    group = _Group(d, t)
    group.tables.append(_pair_channels(pdist(table / np.abs(table).max())))
    draws = 25
    observed, null = _shuffled_statistics(group, draws, np.random.default_rng(5))
    np.testing.assert_allclose(observed[:, 0], statistics_by_hand(table, d, t), atol=1e-12)
    # the same shuffles by hand: sigma relabels D; the table's row sigma^-1(i) sits at position i
    rng = np.random.default_rng(5)
    sigmas = rng.permuted(np.tile(np.arange(17), (draws, 1)), axis=1)
    for k, sigma in enumerate(sigmas):
        inverse = np.argsort(sigma)
        by_hand = statistics_by_hand(table[inverse], d, t)
        np.testing.assert_allclose([null[c][k, 0] for c in range(4)], by_hand, atol=1e-12)


def test_shape_statistic_is_the_scaled_stress_itself() -> None:
    d, table = drifting(30, seed=2)
    nulls = ShuffleNull(d, np.arange(30), 99, seed=0)
    nulls.register(table)
    test = nulls.run()[0]["scaled_stress"]
    assert test["observed"] == pytest.approx(all_scores(table, d)["scaled_stress"], abs=1e-12)
    assert test["statistic"] == "scaled stress"


def test_p_values_count_the_shuffles_at_least_as_good() -> None:
    rng = np.random.default_rng(3)
    d, _ = drifting(20)
    table = rng.standard_normal((20, 4))
    nulls = ShuffleNull(d, np.arange(20), 199, seed=4)
    nulls.register(table)
    test = nulls.run()[0]
    group = next(iter(nulls._groups.values()))
    stream = np.random.default_rng(np.random.SeedSequence([4, 0x73687566]))
    observed, null = _shuffled_statistics(group, 199, stream)
    for c, score in enumerate(TESTED):
        better = (1 + np.sum(null[c][:, 0] >= observed[c, 0] - 1e-9)) / 200
        worse = (1 + np.sum(null[c][:, 0] <= observed[c, 0] + 1e-9)) / 200
        assert test[score]["p_better"] == pytest.approx(better)
        assert test[score]["p_worse"] == pytest.approx(worse)
        assert test[score]["p"] == pytest.approx(min(1, 2 * min(better, worse)))


@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=12))
def test_holm_equals_the_step_down_loop(pvalues: list[float]) -> None:
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    expected = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        expected[i] = running
    np.testing.assert_allclose(holm(pvalues), expected, rtol=1e-12)


def test_draws_reach_holms_first_level() -> None:
    assert draws_for(1) == MIN_SHUFFLES
    assert draws_for(24) == MIN_SHUFFLES and can_decide(MIN_SHUFFLES, 24)
    for tests in (148, 1000):
        k = draws_for(tests)
        assert can_decide(k, tests) and not can_decide(k - 1, tests)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.floats(1e-6, 1e6), st.integers(0, 5))
def test_the_test_is_free_of_scale_width_and_rotation(seed: int, scale: float, extra: int) -> None:
    rng = np.random.default_rng(seed)
    d, table = drifting(12, seed=seed % 7)
    rotation = np.linalg.qr(rng.standard_normal((16, 16)))[0]
    variants = [table, scale * table, np.hstack([table, np.zeros((12, extra))]), table @ rotation]
    results = []
    for variant in variants:
        nulls = ShuffleNull(d, np.arange(12), 60, seed=1)
        nulls.register(variant)
        results.append(nulls.run()[0])
    for other in results[1:]:
        for score in TESTED:
            assert other[score]["p_better"] == results[0][score]["p_better"]
            assert other[score]["observed"] == pytest.approx(results[0][score]["observed"], abs=1e-9)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_relabelling_table_and_target_together_changes_no_statistic(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d, table = drifting(11, seed=seed % 5)
    t = np.sort(rng.choice(40, size=11, replace=False)).astype(float)
    order = rng.permutation(11)
    first, second = _Group(d, t), _Group(d[np.ix_(order, order)], t[order])
    first.tables.append(_pair_channels(pdist(table)))
    second.tables.append(_pair_channels(pdist(table[order])))
    a, _ = _shuffled_statistics(first, 1, np.random.default_rng(0))
    b, _ = _shuffled_statistics(second, 1, np.random.default_rng(0))
    np.testing.assert_allclose(a, b, atol=1e-12)


def family_rejects(seed: int, draws: int = MIN_SHUFFLES, tables: int = 6) -> bool:
    """Whether any category of one run is other than indistinguishable, when every table is a random
    relabelling of a table with position structure (so H0 holds for each)."""
    rng = np.random.default_rng(seed)
    d, table = drifting(24, seed=seed % 3)
    nulls = ShuffleNull(d, np.arange(24), draws, seed=seed)
    for _ in range(tables):
        nulls.register(table[rng.permutation(24)])
    decided = decide(nulls.run())
    return any(test["category"] != "indistinguishable" for row in decided for test in row.values())


def family_rate(seeds: int = 200) -> float:
    """The share of ``seeds`` simulated runs under the global null with any category other than indistinguishable."""
    return float(np.mean([family_rejects(seed) for seed in range(seeds)]))


def test_the_family_wise_rate_under_the_global_null_is_at_most_alpha() -> None:
    rate = family_rate(200)
    assert rate <= 0.05, rate
    record = json.loads((ROOT / "docs" / "results" / "null-family-rate.json").read_text())
    assert record["rate"] == rate and record["seeds"] == 200  # docs/scores.md prints this record


def test_a_table_with_position_is_told_apart_at_the_family_level() -> None:
    d, table = drifting(24)
    nulls = ShuffleNull(d, np.arange(24), None, seed=0)
    for _ in range(6):
        nulls.register(table)
    decided = decide(nulls.run())
    assert {test["category"] for row in decided for test in row.values()} == {"better"}
    # a constant table: no shuffle moves it, so there is no evidence either way (p undefined, undecided),
    # and it does not enter the family
    flat = ShuffleNull(d, np.arange(24), None, seed=0)
    flat.register(np.ones((24, 3)))
    flat.register(table)
    decided = decide(flat.run())
    assert {t["category"] for t in decided[0].values()} == {"undecided"}
    assert all(math.isnan(t["p"]) for t in decided[0].values())
    assert {t["category"] for t in decided[1].values()} == {"better"}
    assert decided[1]["scaled_stress"]["p_adjusted"] == pytest.approx(4 * decided[1]["scaled_stress"]["p"])


def test_too_few_draws_leave_every_category_undecided() -> None:
    d, table = drifting(24)
    nulls = ShuffleNull(d, np.arange(24), 39, seed=0)
    for _ in range(2):
        nulls.register(table)
    assert not can_decide(39, nulls.tests)
    assert {t["category"] for row in decide(nulls.run()) for t in row.values()} == {"undecided"}
    assert math.isclose(decide(nulls.run())[0]["scaled_stress"]["p"], 2 / 40)


if __name__ == "__main__":  # regenerates docs/results/null-family-rate.json
    out = ROOT / "docs" / "results" / "null-family-rate.json"
    record = {
        "what": "share of simulated runs under the global null (6 shuffled tables, 24 positions, 4 aspects each: "
        "24 tests, 999 shuffles, Holm at 5%) with any category other than indistinguishable",
        "command": "python tests/unit/geometry/test_shuffle.py",
        "seeds": 200,
        "rate": family_rate(200),
    }
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
