"""geoanalyze.corpus.positions: position sets and pooled counts against brute force, and their laws."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.corpus.marginals import PositionalCounts
from geoanalyze.corpus.positions import (
    PooledCounts,
    PositionSet,
    PositionSpec,
    log_edges,
    pool_positions,
    representatives,
)
from geoanalyze.errors import InputError
from geoanalyze.geometry.distances import position_geometry


def random_counts(n: int, vocab: int, seed: int, sequences: int = 40) -> PositionalCounts:
    """Counts of ``sequences`` random sequences of random lengths (N_i falls with i), with split halves."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((n, vocab), dtype=np.int64)
    half = np.zeros((n, vocab), dtype=np.int64)
    for _ in range(sequences):
        length = int(rng.integers(1, n + 1))
        in_a = rng.random() < 0.5
        for position in range(length):
            token = int(rng.integers(0, vocab))
            counts[position, token] += 1
            half[position, token] += in_a
    counts[n - 1, 0] += 1  # the counts reach all n positions
    return PositionalCounts(sp.csr_array(counts), sp.csr_array(half), {"n_sequences": sequences + 1})


def brute_pool(matrix: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Each bucket's row: its positions' rows summed, by a plain loop."""
    rows = []
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        total = np.zeros(matrix.shape[1], dtype=np.int64)
        for position in range(start, stop):
            total += matrix[position]
        rows.append(total)
    return np.array(rows)


def brute_representative(totals: np.ndarray, start: int, stop: int) -> int:
    """The N_i-weighted mean position of [start, stop), rounded half up, by a loop."""
    mass = sum(int(totals[i]) for i in range(start, stop))
    if mass == 0:
        return start
    return math.floor(sum(i * int(totals[i]) for i in range(start, stop)) / mass + 0.5)


# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("all", PositionSpec()),
        ("stride:4", PositionSpec("stride", 4)),
        ("log:64", PositionSpec("log", 64)),
        (" LOG:64 ", PositionSpec("log", 64)),
        ("log:1e3", PositionSpec("log", 1000)),
        ("range:10-20", PositionSpec("range", 10, 20)),
    ],
)
def test_a_spec_parses_and_reads_back(text: str, spec: PositionSpec) -> None:
    assert PositionSpec.parse(text) == spec
    assert PositionSpec.parse(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is not a position set"),
        ("log", "is not a position set"),
        ("log:", "is not a position set"),
        ("all:3", "is not a position set"),
        ("buckets:8", "is not a position set"),
        ("log:0", "at least 2 buckets"),
        ("log:1", "at least 2 buckets"),
        ("log:-3", "at least 2 buckets"),
        ("log:abc", "not a whole number"),
        ("log:1.5", "not a whole number"),
        ("log:inf", "not a whole number"),
        ("log:nan", "not a whole number"),
        ("stride:0", "stride K of at least 1"),
        ("stride:-2", "stride K of at least 1"),
        ("range:5-2", "0 <= A < B"),
        ("range:5-5", "0 <= A < B"),
        ("range:3", "a range is A-B"),
        ("range:a-9", "not a whole number"),
    ],
)
def test_a_hostile_spec_is_one_line_naming_it(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says) as caught:
        PositionSpec.parse(text)
    assert "\n" not in str(caught.value) and "--positions" in str(caught.value)


def test_more_buckets_than_positions_says_how_many_there_are() -> None:
    counts = random_counts(12, 5, seed=0)
    with pytest.raises(InputError, match=r"1000000000 buckets but the corpus reaches 12 positions.*log:12"):
        pool_positions(counts, "log:1e9")
    with pytest.raises(InputError, match="reaches 12 positions"):
        pool_positions(counts, "range:0-13")
    with pytest.raises(InputError, match="keeps 1 of the 12"):
        pool_positions(counts, "stride:12")


# --- buckets --------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200_000), st.data())
def test_log_buckets_are_n_disjoint_nonempty_intervals_covering_the_positions_in_order(
    n: int, data: st.DataObject
) -> None:
    buckets = data.draw(st.integers(1, min(n, 5000)))
    edges = log_edges(n, buckets)
    assert edges.shape == (buckets + 1,)
    assert edges[0] == 0 and edges[-1] == n
    assert np.all(np.diff(edges) >= 1)  # nonempty, disjoint, in order: together they cover 0..n-1


def test_log_buckets_grow_geometrically() -> None:
    edges = log_edges(131_072, 256)
    sizes = np.diff(edges)
    assert sizes[0] == 1 and sizes[-1] > 1000
    assert np.all(np.diff(sizes) >= -1)  # sizes never shrink (up to rounding)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(1, 6), st.integers(0, 10_000), st.data())
def test_pooled_counts_equal_a_brute_force_loop(n: int, vocab: int, seed: int, data: st.DataObject) -> None:
    counts = random_counts(n, vocab, seed)
    spec = data.draw(
        st.sampled_from(
            [
                PositionSpec("log", data.draw(st.integers(2, n))),
                PositionSpec("stride", data.draw(st.integers(1, max(1, (n - 1) // 1)))),
            ]
        )
    )
    if spec.kind == "stride" and len(range(0, n, spec.value)) < 2:
        spec = PositionSpec("stride", 1)
    pooled = pool_positions(counts, spec)
    assert isinstance(pooled, PooledCounts)
    starts, stops = spec.intervals(n)
    totals = counts.totals
    expected_labels = [brute_representative(totals, a, b) for a, b in zip(starts, stops, strict=True)]
    assert pooled.labels.tolist() == expected_labels
    for matrix, pooled_matrix in ((counts.counts, pooled.counts), (counts.half, pooled.half)):
        expected = brute_pool(matrix.toarray(), starts, stops)
        dense = pooled_matrix.toarray()
        assert np.array_equal(dense[pooled.labels], expected)
        others = np.setdiff1d(np.arange(n), pooled.labels)
        assert not dense[others].any()  # rows other than the representatives are empty
    # N of a bucket is the sum of its positions' N_i, in both halves
    assert pooled.bucket_totals.tolist() == [int(totals[a:b].sum()) for a, b in zip(starts, stops, strict=True)]
    assert np.all((pooled.labels >= starts) & (pooled.labels < stops))
    assert np.all(np.diff(pooled.labels) > 0)


def test_representatives_of_a_bucket_without_counts_is_its_first_position() -> None:
    totals = np.array([5, 0, 0, 0, 3, 1])
    assert representatives(totals, np.array([0, 1, 4]), np.array([1, 4, 6])).tolist() == [0, 1, 4]


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 30), st.integers(0, 10_000))
def test_stride_1_and_log_n_are_all_exactly(n: int, seed: int) -> None:
    counts = random_counts(n, 4, seed, sequences=60)
    reference = position_geometry(counts, min_count=1)
    for spec in ("stride:1", f"log:{n}", f"range:0-{n}"):
        pooled = pool_positions(counts, spec)
        assert (pooled.counts != counts.counts).nnz == 0 and (pooled.half != counts.half).nnz == 0
        geometry = position_geometry(pooled, min_count=1)
        assert np.array_equal(geometry.positions, reference.positions)
        assert np.array_equal(geometry.naive, reference.naive)
        assert np.array_equal(geometry.corrected, reference.corrected, equal_nan=True)
        assert np.array_equal(geometry.noise_floor, reference.noise_floor)


def test_all_is_the_counts_themselves() -> None:
    counts = random_counts(10, 4, seed=1)
    assert pool_positions(counts, "all") is counts
    assert PositionSet.of(counts, np.arange(3)) is None


def hellinger_by_hand(p: np.ndarray, q: np.ndarray) -> float:
    return math.sqrt(max(0.0, 1.0 - sum(math.sqrt(a * b) for a, b in zip(p.tolist(), q.tolist(), strict=True))))


def test_the_distance_of_two_buckets_is_the_hellinger_distance_of_their_pooled_marginals() -> None:
    counts = random_counts(64, 7, seed=3, sequences=200)
    pooled = pool_positions(counts, "log:8")
    geometry = position_geometry(pooled, min_count=1)
    dense, half = counts.counts.toarray().astype(float), counts.half.toarray().astype(float)
    starts, stops = pooled.starts, pooled.stops
    mixtures = [dense[a:b].sum(axis=0) / dense[a:b].sum() for a, b in zip(starts, stops, strict=True)]
    # the mixture of the positions' marginals weighted by N_i is the pooled marginal
    for (a, b), mixture in zip(zip(starts, stops, strict=True), mixtures, strict=True):
        weights = dense[a:b].sum(axis=1)
        marginals = dense[a:b] / weights[:, None]
        assert np.allclose(mixture, (weights[:, None] * marginals).sum(axis=0) / weights.sum(), atol=1e-15)
    assert geometry.positions.tolist() == pooled.labels.tolist()
    for i in range(len(starts)):
        for j in range(len(starts)):
            assert geometry.naive[i, j] == pytest.approx(hellinger_by_hand(mixtures[i], mixtures[j]), abs=1e-12)
    # the noise floor: the Hellinger distance of the bucket's two pooled halves
    for i, (a, b) in enumerate(zip(starts, stops, strict=True)):
        first, second = half[a:b].sum(axis=0), dense[a:b].sum(axis=0) - half[a:b].sum(axis=0)
        floor = hellinger_by_hand(first / first.sum(), second / second.sum())
        assert geometry.noise_floor[i] == pytest.approx(floor, abs=1e-12)


def test_min_count_drops_buckets_and_says_which_positions() -> None:
    counts = random_counts(32, 3, seed=4, sequences=30)
    pooled = pool_positions(counts, "log:6")
    assert isinstance(pooled, PooledCounts)
    least = int(pooled.bucket_totals.min())
    dropped = pooled.bucket_totals < least + 1
    kept = pooled.kept_positions(least + 1)
    assert kept.tolist() == pooled.labels[~dropped].tolist()
    report = pooled.left_out(least + 1)
    assert report["count"] == int(dropped.sum())
    covered = [i for start, stop in report["positions"] for i in range(start, stop + 1)]
    expected = [i for a, b, d in zip(pooled.starts, pooled.stops, dropped, strict=True) if d for i in range(a, b)]
    assert covered == expected


def test_the_position_set_names_each_scored_positions_bucket() -> None:
    counts = random_counts(40, 3, seed=5, sequences=80)
    pooled = pool_positions(counts, "log:5")
    chosen = PositionSet.of(pooled, pooled.labels[[1, 3]])
    assert chosen is not None
    assert chosen.to_dict() == {
        "spec": "log:5",
        "buckets": [[int(pooled.starts[1]), int(pooled.stops[1])], [int(pooled.starts[3]), int(pooled.stops[3])]],
    }
    assert chosen.line().startswith("log:5: 2 scored")
