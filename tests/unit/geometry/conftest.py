"""Fixtures of the geometry tests: real PositionalCounts of synthetic corpora with known marginals."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from geoanalyze.corpus.marginals import PositionalCounts, count_positions
from geoanalyze.corpus.synthetic import SyntheticCorpus, synthetic_corpus
from geoanalyze.corpus.tokenize import get_tokenizer

CountTexts = Callable[..., PositionalCounts]


@pytest.fixture(scope="session")
def count_texts() -> CountTexts:
    """Count texts with the whitespace tokenizer, which recovers the synthetic tokens exactly."""

    def count(texts: Sequence[str], split_seed: int = 0) -> PositionalCounts:
        return count_positions(list(texts), get_tokenizer("whitespace"), split_seed=split_seed)

    return count


@pytest.fixture(scope="session")
def drift_corpus() -> SyntheticCorpus:
    """A small drift corpus: 12 positions, V = 40, N_i = 400."""
    return synthetic_corpus("drift", n_sequences=400, length=12, vocab_size=40, seed=3)


@pytest.fixture(scope="session")
def drift_counts(drift_corpus: SyntheticCorpus, count_texts: CountTexts) -> PositionalCounts:
    return count_texts(drift_corpus.texts)


@pytest.fixture(scope="session")
def ragged_texts(drift_corpus: SyntheticCorpus) -> list[str]:
    """The drift corpus with every text cut to a random length 1..12, so N_i falls with i."""
    lengths = np.random.default_rng(11).integers(1, 13, size=len(drift_corpus.texts))
    return [" ".join(text.split()[:length]) for text, length in zip(drift_corpus.texts, lengths, strict=True)]


@pytest.fixture(scope="session")
def ragged_counts(ragged_texts: list[str], count_texts: CountTexts) -> PositionalCounts:
    return count_texts(ragged_texts)
