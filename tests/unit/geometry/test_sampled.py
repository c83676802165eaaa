"""Scores on a seeded sample of positions (geometry/sampled.py): the draw, the jackknife, and coverage of the dense value."""

from __future__ import annotations

import numpy as np
import pytest

from geoanalyze.corpus.marginals import PositionalCounts, count_positions
from geoanalyze.corpus.synthetic import synthetic_corpus
from geoanalyze.corpus.tokenize import get_tokenizer
from geoanalyze.errors import InputError
from geoanalyze.geometry.distances import hellinger_distances, position_geometry
from geoanalyze.geometry.sampled import (
    DENSE_BUDGET,
    DENSE_LIMIT,
    DENSE_MATRICES,
    WITH_ERRORS,
    check_dense,
    dense_limit,
    draw_sample,
    jackknife_errors,
    sample_size,
    sampled_geometry,
)
from geoanalyze.geometry.scores import all_scores

N = 384


@pytest.fixture(scope="module")
def counts() -> PositionalCounts:
    corpus = synthetic_corpus("drift", n_sequences=64, length=N, vocab_size=256, seed=5)
    return count_positions(list(corpus.texts), get_tokenizer("whitespace", max_length=N))


def sinusoid(positions: np.ndarray, d: int = 32) -> np.ndarray:
    """The sinusoidal table of Vaswani et al., written out."""
    theta = 10000.0 ** (-2.0 * np.arange(d // 2) / d)
    angles = positions[:, None] * theta[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def test_dense_limit_follows_from_the_budget() -> None:
    assert DENSE_MATRICES * 8 * DENSE_LIMIT**2 <= DENSE_BUDGET < DENSE_MATRICES * 8 * (DENSE_LIMIT + 1) ** 2
    assert DENSE_LIMIT == 2048


@pytest.mark.parametrize("given", ["0", "-5", "2", "abc", "1e3", "3.5"])
def test_a_malformed_limit_is_refused(monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    monkeypatch.setenv("GEOANALYZE_DENSE_LIMIT", given)
    with pytest.raises(InputError, match="GEOANALYZE_DENSE_LIMIT"):
        dense_limit()


def test_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEOANALYZE_DENSE_LIMIT", "100")
    assert dense_limit() == 100 and sample_size(100) == 100
    monkeypatch.setenv("GEOANALYZE_DENSE_LIMIT", " ")
    assert dense_limit() == DENSE_LIMIT and sample_size(DENSE_LIMIT) == 512


def test_the_sample_is_reproducible_from_its_seed() -> None:
    first, again, other = draw_sample(10_000, 500, 3), draw_sample(10_000, 500, 3), draw_sample(10_000, 500, 4)
    assert np.array_equal(first.rows, again.rows) and np.array_equal(first.groups, again.groups)
    assert not np.array_equal(first.rows, other.rows)
    assert np.all(np.diff(first.rows) > 0) and first.rows.max() < 10_000
    assert np.bincount(first.groups).tolist() == [50] * 10
    assert first.describe() == "scored on 500 of 10000 positions (seed 3), ± = SE"


@pytest.mark.parametrize(("n", "m"), [(10, 11), (10, 2), (0, 0)])
def test_an_impossible_sample_is_refused(n: int, m: int) -> None:
    with pytest.raises(InputError, match="cannot be scored"):
        draw_sample(n, m, 0)


def test_sampled_geometry_is_the_dense_geometry_restricted(counts: PositionalCounts) -> None:
    kept = counts.kept_positions(32)
    sample = draw_sample(kept.size, 60, seed=1)
    geometry = sampled_geometry(counts, kept, sample, 32)
    dense = position_geometry(counts, min_count=32)
    assert np.array_equal(geometry.positions, kept[sample.rows])
    np.testing.assert_allclose(geometry.naive, dense.naive[np.ix_(sample.rows, sample.rows)], atol=1e-12)
    np.testing.assert_allclose(geometry.corrected, dense.corrected[np.ix_(sample.rows, sample.rows)], atol=1e-12)
    assert geometry.left_out == dense.left_out


def test_jackknife_is_the_textbook_formula() -> None:
    rng = np.random.default_rng(0)
    points = rng.normal(size=(40, 3))
    table = points + 0.3 * rng.normal(size=(40, 3))
    d = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    index = np.arange(40) * 3
    groups = np.arange(40) % 4
    errors = jackknife_errors(table, d, index, groups)
    for name in WITH_ERRORS:
        leave_out = []
        for g in range(4):  # written out, one group left out at a time
            keep = [i for i in range(40) if groups[i] != g]
            leave_out.append(all_scores(table[keep], d[np.ix_(keep, keep)], index=index[keep])[name])
        mean = sum(leave_out) / 4
        expected = (3 / 4 * sum((x - mean) ** 2 for x in leave_out)) ** 0.5
        assert errors[name] == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_a_perfect_table_has_no_error() -> None:
    points = np.random.default_rng(1).normal(size=(30, 4))
    d = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    errors = jackknife_errors(points, d, np.arange(30), np.arange(30) % 5)
    assert errors["scaled_stress"] == pytest.approx(0, abs=1e-12)
    assert errors["monotonicity_violation"] == 0


@pytest.mark.parametrize(
    ("seeds", "covered"), [(4, 3), pytest.param(20, 18, marks=pytest.mark.slow)], ids=["4-seeds", "20-seeds"]
)
def test_sampled_estimates_cover_the_dense_value(counts: PositionalCounts, seeds: int, covered: int) -> None:
    """Over the seeds, each score's sample estimate (m = 96 of 384) lies within 3 SE of the dense value at
    least ``covered`` times (a normal estimate does so 99.7% of the time)."""
    kept = counts.kept_positions(32)
    table = sinusoid(kept.astype(np.float64))
    dense = all_scores(table, hellinger_distances(counts.select(kept)), index=kept)
    hits = dict.fromkeys(WITH_ERRORS, 0)
    for seed in range(seeds):
        sample = draw_sample(kept.size, 96, seed)
        geometry = sampled_geometry(counts, kept, sample, 32)
        rows = table[sample.rows]
        estimate = all_scores(rows, geometry.naive, index=geometry.positions)
        errors = jackknife_errors(rows, geometry.naive, geometry.positions, sample.groups)
        for name in WITH_ERRORS:
            hits[name] += abs(estimate[name] - dense[name]) <= 3 * errors[name]
    assert all(count >= covered for count in hits.values()), hits


def test_check_dense_names_the_size_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    check_dense(DENSE_LIMIT)
    with pytest.raises(
        InputError, match=r"131072 kept positions .* would be 275 GB; choose fewer positions with --positions"
    ):
        check_dense(131072)
    monkeypatch.setenv("GEOANALYZE_DENSE_LIMIT", "10")
    with pytest.raises(InputError, match="dense limit of 10"):
        check_dense(11)


def test_the_truth_of_a_sample_is_the_dense_truth_restricted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic corpus's exact distances past the limit: the scored positions' rows only, equal to the dense ones."""
    from geoanalyze.analysis import StressOptions, compared_encodings, known_distances, resolve_target, target_geometry

    options = StressOptions(
        dataset="synthetic:drift,length=64,n=64,vocab=32", max_positions=64, min_count=32, cache=False
    )
    target = resolve_target("rope:d=16", options, compared_encodings(()))
    monkeypatch.setenv("GEOANALYZE_DENSE_LIMIT", "20")
    sampled = target_geometry(target, options)
    assert sampled.sample is not None and len(sampled.positions) == 20
    truth = known_distances(sampled.geometry)
    monkeypatch.delenv("GEOANALYZE_DENSE_LIMIT")
    dense = target_geometry(target, options)
    rows = np.searchsorted(dense.positions, sampled.positions)
    expected = known_distances(dense.geometry)
    assert truth is not None and expected is not None
    np.testing.assert_allclose(truth, expected[np.ix_(rows, rows)], atol=1e-12)
