"""The bias correction's acceptance test on synthetic corpora whose true marginals are known.

Issue: "On a synthetic corpus with known marginals, N_i = 1000 per position and V >= 5000, the
corrected Hellinger's mean absolute error against the true distances is at most half the naive
estimate's."
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from geoanalyze.corpus.marginals import PositionalCounts
from geoanalyze.corpus.synthetic import SyntheticCorpus, synthetic_corpus
from geoanalyze.geometry.distances import position_geometry

LENGTH = 32
VOCAB = 5000
N_SEQUENCES = 1000


def chord_distances(marginals: np.ndarray) -> np.ndarray:
    """True Hellinger distances ||sqrt mu_i - sqrt mu_j||_2 / sqrt 2, by differences, not BC products."""
    roots = np.sqrt(marginals)
    return np.sqrt(0.5 * np.square(roots[:, None, :] - roots[None, :, :]).sum(axis=2))


@pytest.fixture(scope="module", params=[("drift", 0), ("drift", 1), ("shift", 0), ("shift", 1)], ids=str)
def corpus(request: pytest.FixtureRequest) -> SyntheticCorpus:
    kind, seed = request.param
    return synthetic_corpus(kind, n_sequences=N_SEQUENCES, length=LENGTH, vocab_size=VOCAB, seed=seed)


def test_corrected_hellinger_halves_the_naive_error(
    corpus: SyntheticCorpus, count_texts: Callable[..., PositionalCounts]
) -> None:
    assert corpus.marginals.shape == (LENGTH, VOCAB)
    truth = chord_distances(corpus.marginals)
    # The corpus's own truth agrees with the chord formula (up to the sqrt(eps) rounding of sqrt(1 - BC)).
    np.testing.assert_allclose(corpus.true_distances(), truth, rtol=0, atol=1e-7)

    counts = count_texts(corpus.texts)
    np.testing.assert_array_equal(counts.totals, np.full(LENGTH, N_SEQUENCES))
    geometry = position_geometry(counts, metric="hellinger", min_count=100)
    assert geometry.positions.tolist() == list(range(LENGTH))
    assert geometry.summary["undefined_pairs"] == 0

    upper = np.triu_indices(LENGTH, k=1)
    naive, corrected, true = geometry.naive[upper], geometry.corrected[upper], truth[upper]
    assert np.all(np.isfinite(corrected))
    naive_error = np.abs(naive - true).mean()
    corrected_error = np.abs(corrected - true).mean()
    assert corrected_error <= 0.5 * naive_error, (corrected_error, naive_error)
    # The plug-in estimate is biased upward: missed rare tokens lower the empirical BC.
    assert naive.mean() > true.mean()
