"""geoanalyze.corpus.synthetic: corpora whose per-position marginals are known exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.corpus.marginals import count_positions
from geoanalyze.corpus.synthetic import KINDS, SyntheticCorpus, synthetic_corpus, zipf
from geoanalyze.corpus.tokenize import WhitespaceTokenizer
from geoanalyze.errors import InputError


def token_matrix(corpus: SyntheticCorpus) -> np.ndarray:
    """(n_sequences, length) token indices parsed back from the texts ("w<index>" words)."""
    rows = [[int(word[1:]) for word in text.split(" ")] for text in corpus.texts]
    return np.asarray(rows, dtype=np.int64)


def empirical(corpus: SyntheticCorpus) -> np.ndarray:
    """Per-position token frequencies of the texts, counted independently of geoanalyze."""
    tokens = token_matrix(corpus)
    n, length = tokens.shape
    frequencies = np.zeros_like(corpus.marginals)
    for i in range(length):
        frequencies[i] = np.bincount(tokens[:, i], minlength=corpus.marginals.shape[1]) / n
    return frequencies


def hellinger(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sqrt(max(0.0, 1.0 - np.sum(np.sqrt(p * q)))))


@pytest.mark.parametrize("kind", KINDS)
def test_marginals_are_distributions(kind: str) -> None:
    corpus = synthetic_corpus(kind, n_sequences=30, length=12, vocab_size=40, seed=1)
    assert corpus.marginals.shape == (12, 40)
    assert corpus.marginals.dtype == np.float64
    assert np.all(corpus.marginals >= 0)
    np.testing.assert_allclose(corpus.marginals.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert corpus.vocab == [f"w{t}" for t in range(40)]
    assert (corpus.kind, corpus.seed) == (kind, 1)
    tokens = token_matrix(corpus)
    assert tokens.shape == (30, 12)
    assert tokens.min() >= 0
    assert tokens.max() < 40
    assert all(text == " ".join(corpus.vocab[t] for t in row) for text, row in zip(corpus.texts, tokens, strict=True))


@pytest.mark.parametrize("kind", KINDS)
def test_empirical_frequencies_converge_to_the_marginals(kind: str) -> None:
    corpus = synthetic_corpus(kind, n_sequences=20_000, length=6, vocab_size=8, seed=7)
    frequencies = empirical(corpus)
    total_variation = 0.5 * np.abs(frequencies - corpus.marginals).sum(axis=1)
    # E[TV] is about 0.01 here; 0.03 is far in the tail, a wrong law is much further off.
    assert total_variation.max() < 0.03, total_variation
    # Tokens with no mass are never drawn.
    assert np.all(frequencies[corpus.marginals == 0] == 0)


def test_counts_of_the_texts_recover_the_drawn_tokens() -> None:
    """The whitespace tokenizer recovers the drawn tokens exactly: count_positions equals the direct count."""
    corpus = synthetic_corpus("drift", n_sequences=500, length=10, vocab_size=30, seed=2)
    counts = count_positions(corpus.texts, WhitespaceTokenizer())
    dense = np.zeros_like(corpus.marginals)
    columns = [corpus.vocab.index(token) for token in counts.vocab]
    dense[:, columns] = counts.counts.toarray()
    np.testing.assert_array_equal(dense, empirical(corpus) * 500)
    assert counts.totals.tolist() == [500] * 10  # N_i = n_sequences at every position


def test_stationary_rows_identical() -> None:
    corpus = synthetic_corpus("stationary", n_sequences=5, length=9, vocab_size=25, seed=4)
    assert all(np.array_equal(row, corpus.marginals[0]) for row in corpus.marginals)
    np.testing.assert_allclose(np.sort(corpus.marginals[0]), np.sort(zipf(25)))
    np.testing.assert_allclose(corpus.true_distances(), 0.0, atol=1e-7)


def test_shift_distances_depend_only_on_the_lag() -> None:
    length, vocab = 10, 60
    corpus = synthetic_corpus("shift", n_sequences=5, length=length, vocab_size=vocab, seed=3)
    mu = corpus.marginals
    step = max(1, vocab // (4 * length))
    for i in range(length):  # each row is the first one rotated by step * i
        np.testing.assert_array_equal(mu[i], np.roll(mu[0], step * i))
    distances = corpus.true_distances()
    independent = np.array([[hellinger(mu[i], mu[j]) for j in range(length)] for i in range(length)])
    np.testing.assert_allclose(distances, independent, atol=1e-7)
    for lag in range(length):  # Toeplitz: constant along every diagonal
        diagonal = np.diagonal(distances, offset=lag)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
    assert np.all(np.diff(distances[0, : length // 2]) > 0)  # further apart, more different
    np.testing.assert_allclose(distances, distances.T)
    fisher_rao = corpus.true_distances("fisher-rao")
    np.testing.assert_allclose(fisher_rao, np.arccos(1.0 - independent**2), atol=1e-6)


def test_shift_options() -> None:
    corpus = synthetic_corpus("shift", n_sequences=2, length=4, vocab_size=20, seed=0, step=3)
    for i in range(4):
        np.testing.assert_array_equal(corpus.marginals[i], np.roll(corpus.marginals[0], 3 * i))
    flat = synthetic_corpus("shift", n_sequences=2, length=4, vocab_size=20, seed=0, kappa=0.0)
    np.testing.assert_allclose(flat.marginals, 1 / 20)


@pytest.mark.parametrize("anchors", [2, 3, 4])
def test_drift_ends_are_anchors(anchors: int) -> None:
    length, vocab = 3 * (anchors - 1) + 1, 50  # anchors sit on positions 0, 3, 6, ...
    corpus = synthetic_corpus("drift", n_sequences=3, length=length, vocab_size=vocab, seed=5, anchors=anchors)
    mu = corpus.marginals
    law = np.sort(zipf(vocab))
    anchor_rows = [3 * k for k in range(anchors)]
    assert anchor_rows[0] == 0
    assert anchor_rows[-1] == length - 1
    for row in anchor_rows:  # an anchor is a Zipf law over a permuted vocabulary
        np.testing.assert_allclose(np.sort(mu[row]), law, atol=1e-15)
    assert not np.allclose(mu[0], mu[-1])  # the vocabularies are permuted independently
    for k in range(anchors - 1):  # between anchors: the linear mixture
        left, right = mu[3 * k], mu[3 * k + 3]
        np.testing.assert_allclose(mu[3 * k + 1], (2 * left + right) / 3, atol=1e-12)
        np.testing.assert_allclose(mu[3 * k + 2], (left + 2 * right) / 3, atol=1e-12)


def test_same_seed_same_corpus() -> None:
    for kind in KINDS:
        a = synthetic_corpus(kind, n_sequences=20, length=8, vocab_size=30, seed=11)
        b = synthetic_corpus(kind, n_sequences=20, length=8, vocab_size=30, seed=11)
        c = synthetic_corpus(kind, n_sequences=20, length=8, vocab_size=30, seed=12)
        assert a.texts == b.texts
        np.testing.assert_array_equal(a.marginals, b.marginals)
        assert a.texts != c.texts


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "wobble"},
        {"kind": "DRIFT"},
        {"n_sequences": 0},
        {"length": 0},
        {"vocab_size": 0},
        {"length": -4},
        {"n_sequences": 2.5},
        {"vocab_size": 7.5},
        {"kind": "drift", "anchors": 1},
        {"kind": "stationary", "anchors": 3},
        {"kind": "shift", "temperature": 2.0},
        {"kind": "shift", "step": 2.5},
        {"seed": 1.5},
        {"seed": -1},
    ],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    options = {"n_sequences": 4, "length": 5, "vocab_size": 10, **kwargs}
    with pytest.raises(InputError):
        synthetic_corpus(**options)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    n_sequences=st.integers(1, 30),
    length=st.integers(1, 20),
    vocab_size=st.integers(1, 50),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_size_gives_a_valid_corpus(kind: str, n_sequences: int, length: int, vocab_size: int, seed: int) -> None:
    corpus = synthetic_corpus(kind, n_sequences=n_sequences, length=length, vocab_size=vocab_size, seed=seed)
    assert corpus.marginals.shape == (length, vocab_size)
    assert np.all(corpus.marginals >= 0)
    np.testing.assert_allclose(corpus.marginals.sum(axis=1), 1.0, atol=1e-12)
    tokens = token_matrix(corpus)
    assert tokens.shape == (n_sequences, length)
    assert np.all(corpus.marginals[np.arange(length), tokens] > 0)  # every drawn token has mass
