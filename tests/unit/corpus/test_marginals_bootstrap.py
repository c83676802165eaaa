"""bootstrap_counts: resampled sequences recounted without re-tokenizing."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from geoanalyze.corpus.marginals import bootstrap_counts, count_positions
from geoanalyze.corpus.tokenize import get_tokenizer
from geoanalyze.errors import InputError

TEXTS = ["a b c", "b c", "c a b d", "d", "a a a a a", "b d a"]


def brute_force(texts: list[str], multiplicity: np.ndarray, vocab: list[str]) -> dict[tuple[int, int], int]:
    counts: Counter[tuple[int, int]] = Counter()
    for text, weight in zip(texts, multiplicity, strict=True):
        for position, token in enumerate(text.split()):
            counts[(position, vocab.index(token))] += int(weight)
    return {key: value for key, value in counts.items() if value}


def test_each_resample_equals_a_weighted_brute_force_count() -> None:
    tokenizer = get_tokenizer("whitespace")
    resamples = list(bootstrap_counts(TEXTS, tokenizer, samples=5, seed=7))
    vocab = tokenizer.vocabulary()
    rng = np.random.default_rng(7)  # the documented draw: Multinomial(S, 1/S) per resample
    for counts in resamples:
        multiplicity = rng.multinomial(len(TEXTS), np.full(len(TEXTS), 1 / len(TEXTS)))
        coo = counts.tocoo()
        got = {(int(r), int(c)): int(v) for r, c, v in zip(coo.row, coo.col, coo.data, strict=True) if v}
        assert got == brute_force(TEXTS, multiplicity, vocab)


def test_every_resample_keeps_the_number_of_sequences() -> None:
    for counts in bootstrap_counts(TEXTS, get_tokenizer("whitespace"), samples=20, seed=1):
        assert counts[[0]].sum() == len(TEXTS)  # every text has a token at position 0


def test_resamples_average_to_the_counts() -> None:
    tokenizer = get_tokenizer("whitespace")
    total = sum(c.toarray() for c in bootstrap_counts(TEXTS, tokenizer, samples=4000, seed=3))
    expected = count_positions(TEXTS, get_tokenizer("whitespace")).counts.toarray()
    np.testing.assert_allclose(total / 4000, expected, atol=0.1)


def test_empty_corpus_is_refused() -> None:
    with pytest.raises(InputError):
        list(bootstrap_counts([""], get_tokenizer("whitespace"), samples=2))
