"""Landmark MDS (geometry/landmark.py) against classical MDS: all landmarks, Euclidean recovery, n = 4096."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist, squareform

from geoanalyze.corpus.marginals import PositionalCounts, count_positions
from geoanalyze.corpus.synthetic import synthetic_corpus
from geoanalyze.corpus.tokenize import get_tokenizer
from geoanalyze.errors import InputError
from geoanalyze.geometry.distances import fisher_rao_distances, hellinger_distances
from geoanalyze.geometry.landmark import choose_landmarks, landmark_mds, triangulate
from geoanalyze.geometry.mds import classical_mds
from geoanalyze.geometry.scores import scaled_stress

#: the agreement of the landmark path's scaled stress with the dense one's (issue 34)
TOLERANCE = 1e-3


def dense_rows(distances: np.ndarray):  # type: ignore[no-untyped-def]
    """squared_to_landmarks of a full matrix whose landmarks are ``columns``."""

    def rows(columns: np.ndarray):  # type: ignore[no-untyped-def]
        return lambda start, stop: np.square(distances[start:stop][:, columns])

    return rows


def drift_counts(length: int, seed: int = 0) -> PositionalCounts:
    corpus = synthetic_corpus("drift", n_sequences=64, length=length, vocab_size=256, seed=seed)
    counts = count_positions(list(corpus.texts), get_tokenizer("whitespace", max_length=length))
    return counts.select(counts.kept_positions(1))


def same_up_to_sign(a: np.ndarray, b: np.ndarray, atol: float) -> None:
    signs = np.sign(np.sum(a * b, axis=0))
    np.testing.assert_allclose(a * signs, b, atol=atol)


@pytest.mark.parametrize("n", [5, 40, 200])
def test_every_point_a_landmark_is_classical_mds(n: int) -> None:
    points = np.random.default_rng(n).normal(size=(n, 7)) ** 3  # skewed: distinct eigenvalues
    d = squareform(pdist(points))
    embedding, values = triangulate(d, dense_rows(d)(np.arange(n)), n)
    dense = classical_mds(d)
    assert embedding.shape == dense.embedding.shape
    same_up_to_sign(embedding, dense.embedding, atol=1e-8)
    np.testing.assert_allclose(values[: dense.effective_rank], dense.eigenvalues[: dense.effective_rank], rtol=1e-9)


def test_all_landmarks_on_counts_equal_classical_mds_of_hellinger() -> None:
    counts = drift_counts(96)
    fitted = landmark_mds(counts, landmarks=1000)
    assert fitted.landmarks.tolist() == list(range(96))
    same_up_to_sign(fitted.embedding, classical_mds(hellinger_distances(counts)).embedding, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rank=st.integers(1, 6),
    extra=st.integers(0, 10),
    n=st.integers(20, 120),
)
def test_recovers_a_euclidean_configuration_of_low_rank(seed: int, rank: int, extra: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, rank)) * rng.uniform(0.5, 3.0, size=rank)
    d = squareform(pdist(points))
    chosen = choose_landmarks(n, rank + 1 + extra, seed)  # rank + 1 points in general position span it
    embedding, _ = triangulate(d[np.ix_(chosen, chosen)], dense_rows(d)(chosen), n)
    np.testing.assert_allclose(squareform(pdist(embedding)), d, atol=1e-7 * max(1.0, d.max()))


def test_landmark_draw_is_reproducible_from_its_seed() -> None:
    first = choose_landmarks(1000, 50, seed=7)
    assert np.array_equal(first, choose_landmarks(1000, 50, seed=7))
    assert not np.array_equal(first, choose_landmarks(1000, 50, seed=8))
    assert np.all(np.diff(first) > 0) and first.size == 50


@pytest.mark.parametrize(("n", "k"), [(1, 5), (10, 1), (0, 0)])
def test_too_few_points_or_landmarks_refused(n: int, k: int) -> None:
    with pytest.raises(InputError, match="at least 2"):
        choose_landmarks(n, k)


def test_fisher_rao_all_landmarks_equal_classical_mds() -> None:
    counts = drift_counts(48, seed=1)
    fitted = landmark_mds(counts, metric="fisher-rao", landmarks=48)
    dense = classical_mds(fisher_rao_distances(counts))
    same_up_to_sign(fitted.embedding, dense.embedding, atol=1e-7)


def agreement(n: int, landmarks: int) -> tuple[float, float]:
    counts = drift_counts(n)
    d = hellinger_distances(counts)
    dense = scaled_stress(classical_mds(d).embedding, d)
    sparse = scaled_stress(landmark_mds(counts, landmarks=landmarks, seed=3).embedding, d)
    return dense, sparse


def test_landmark_agrees_with_dense_at_512() -> None:
    dense, sparse = agreement(512, landmarks=300)  # fewer landmarks than positions
    assert abs(sparse - dense) <= TOLERANCE


@pytest.mark.slow
def test_landmark_agrees_with_dense_at_4096() -> None:
    dense, sparse = agreement(4096, landmarks=1024)
    assert abs(sparse - dense) <= TOLERANCE
