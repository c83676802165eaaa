"""--read document and packed (issue 34, item 3): WikiText articles joined exactly as an independent
split of the raw file finds them; packed sequences laid end to end are the texts joined by SEP (the
real MiniLM tokenizer, against transformers' own encoding); long sequences counted whole; the cache
keyed by the mode; synthetic sampling vectorised to the very tokens of one search per position."""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.corpus.sources import Shard, documents, is_article_heading, resolve_source
from geoanalyze.corpus.streaming import CountJob, EncodedBlock, _counts_key, compute_counts, packed, shards_of
from geoanalyze.corpus.synthetic import drift_marginals, sample_tokens, synthetic_corpus, zipf
from geoanalyze.corpus.tokenize import DOCUMENT_MAX_LENGTH, get_tokenizer
from geoanalyze.errors import InputError

#: a top-level WikiText heading, on the raw file's own lines: " = Title = " (not " = = Section = = ")
HEADING = re.compile(r"^ = [^=\n](?:[^\n]*[^=\n])? = $", re.M)


def raw_articles(raw: str) -> list[str]:
    """The articles of a raw WikiText file, split at its top-level headings by a regular expression;
    each article's non-blank lines, stripped, joined by newlines."""
    starts = [m.start() for m in HEADING.finditer(raw)]
    chunks = [raw[a:b] for a, b in zip(starts, [*starts[1:], len(raw)], strict=True)]
    return ["\n".join(line.strip() for line in chunk.split("\n") if line.strip()) for chunk in chunks]


@pytest.fixture(scope="module")
def wikitext(shared_data: Path) -> Path:
    return shared_data / "wikitext2" / "validation.tokens"


def test_document_mode_joins_wikitext_articles_as_an_independent_split_of_the_raw_file(wikitext: Path) -> None:
    expected = raw_articles(wikitext.read_text(encoding="utf-8"))
    assert len(expected) == 60  # the validation split's articles (grep -c '^ = [^=]')
    source = resolve_source(str(wikitext))
    (shard,) = shards_of(source, "document")
    assert shard.read == "document"
    assert list(shard.texts()) == expected
    assert list(documents(source.stream())) == expected


def test_read_gives_documents_and_refuses_packed(wikitext: Path) -> None:
    """What a checkpoint's forward pass and --bootstrap read: the documents, or the rows; packed is refused."""
    source = resolve_source(str(wikitext))
    assert source.read(5, "document") == raw_articles(wikitext.read_text(encoding="utf-8"))[:5]
    assert source.read(5) == list(source.stream())[:5]
    with pytest.raises(InputError, match="--read packed is for counting"):
        source.read(5, "packed")


def test_a_slice_starting_mid_article_keeps_its_first_lines_as_rows(wikitext: Path, tmp_path: Path) -> None:
    """Lines before the first heading are documents of their own (a corpus without headings reads as rows)."""
    lines = wikitext.read_text(encoding="utf-8").split("\n")[3:400]
    sliced = tmp_path / "slice.tokens"
    sliced.write_text("\n".join(lines), encoding="utf-8")
    first = next(k for k, line in enumerate(lines) if HEADING.match(line))
    leading = [line.strip() for line in lines[:first] if line.strip()]
    got = list(Shard("slice", resolve_source(str(sliced)), "document").texts())
    assert got == leading + raw_articles("\n".join(lines[first:]))


@pytest.mark.parametrize(
    ("line", "heading"),
    [("= Title =", True), ("= A =", True), ("= = Section = =", False), ("= = = Sub = = =", False),
     ("=  =", False), ("a = b =", False), ("= Title =\nmore", False), ("= 2 + 2 = 4 =", True)],
)  # fmt: skip
def test_article_headings(line: str, heading: bool) -> None:
    assert is_article_heading(line) is heading


def test_document_counts_every_article_whole(wikitext: Path) -> None:
    """Whitespace tokens of each article against a brute-force count by position: N_i is the number
    of articles longer than i, none cut at 512."""
    articles = raw_articles(wikitext.read_text(encoding="utf-8"))
    counts, _ = compute_counts(resolve_source(str(wikitext)), CountJob("whitespace", read="document"), cache=False)
    lengths = np.asarray([len(a.split()) for a in articles])
    assert counts.n_sequences == len(articles) and counts.n_positions == lengths.max() > 512
    assert counts.metadata["max_length"] == DOCUMENT_MAX_LENGTH and counts.metadata["read"] == "document"
    expected = np.asarray([(lengths > i).sum() for i in range(lengths.max())])
    assert np.array_equal(counts.totals, expected)
    vocab = counts.vocab
    assert vocab is not None
    at = 700  # one position's token counts, brute force
    brute = Counter(a.split()[at] for a in articles if len(a.split()) > at)
    row = counts.counts[[at], :].toarray()[0]
    assert {vocab[t]: int(row[t]) for t in np.flatnonzero(row)} == dict(brute)


def test_rows_stay_the_default_and_the_mode_keys_the_cache(wikitext: Path) -> None:
    source = resolve_source(str(wikitext))
    keys = {read: _counts_key(source, CountJob("whitespace", read=read)) for read in ("rows", "document", "packed")}
    assert "read" not in keys["rows"] and CountJob().read == "rows"
    assert keys["document"]["read"] == "document" and keys["packed"]["read"] == "packed"
    assert shards_of(source) == shards_of(source, "rows") == source.shards(2000)
    with pytest.raises(InputError, match="--read 'pages' is not a way"):
        compute_counts(source, CountJob("whitespace", read="pages"), cache=False)


# --- packed ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm(minilm_path: Path) -> Any:
    """The real MiniLM tokenizer as packed mode loads it (no special tokens), loaded once."""
    return get_tokenizer(str(minilm_path), add_special_tokens=False)


TEXT = st.text(alphabet="abcdefgh ijk.,!?XYZé", min_size=1, max_size=40).filter(str.strip)


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(TEXT, min_size=1, max_size=9),
    length=st.integers(1, 12),
    cut=st.integers(1, 4),
)
def test_packed_sequences_laid_end_to_end_are_the_texts_joined_by_sep(
    minilm: Any, reference_tokenizer: Any, texts: list[str], length: int, cut: int
) -> None:
    """The law of packing, against transformers' own encoding of each text (no special tokens):
    ids(t1) [SEP] ids(t2) [SEP] ... ids(tk), cut into sequences of ``length``, the last shorter."""
    tokenizer = copy.copy(minilm)  # one load; packing reads only max_length (it encodes untruncated)
    tokenizer.max_length = length
    batches = [texts[i : i + cut] for i in range(0, len(texts), cut)]
    blocks = list(packed(tokenizer, iter(batches)))
    joined: list[int] = []
    for k, text in enumerate(texts):
        joined += ([reference_tokenizer.sep_token_id] if k else []) + reference_tokenizer.encode(
            text, add_special_tokens=False
        )
    assert np.concatenate([b.ids for b in blocks]).tolist() == joined
    lengths = np.concatenate([b.lengths for b in blocks])
    assert lengths.sum() == len(joined) and (lengths[:-1] == length).all() and 1 <= lengths[-1] <= length
    assert all(b.ids.size == b.lengths.sum() for b in blocks)


def test_packed_counts_hold_the_texts_and_their_separators(minilm: Any, reference_tokenizer: Any) -> None:
    texts = ["the cat sat on the mat .", "a long text " * 30, "end"]
    ids = [reference_tokenizer.encode(t, add_special_tokens=False) for t in texts]
    total = sum(map(len, ids)) + len(texts) - 1
    tokenizer = copy.copy(minilm)
    tokenizer.max_length = 32
    blocks = list(packed(tokenizer, iter([texts])))
    assert sum(len(b) for b in blocks) == -(-total // 32)
    sep = reference_tokenizer.sep_token_id
    assert int(sum((b.ids == sep).sum() for b in blocks)) == len(texts) - 1


def test_packed_counting_through_compute_counts(minilm_path: Path, tmp_path: Path, reference_tokenizer: Any) -> None:
    texts = ["the cat sat on the mat .", "a long text " * 30, "end of it all"]
    corpus = tmp_path / "three.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    job = CountJob(str(minilm_path), max_length=16, read="packed")
    counts, _ = compute_counts(resolve_source(str(corpus)), job, cache=False)
    stream = [reference_tokenizer.sep_token_id] * (len(texts) - 1) + [
        i for t in texts for i in reference_tokenizer.encode(t, add_special_tokens=False)
    ]
    n = len(stream)
    assert counts.n_sequences == -(-n // 16) and counts.n_positions == 16
    assert int(counts.counts.sum()) == n and counts.metadata["read"] == "packed"
    assert counts.metadata["add_special_tokens"] is False
    assert np.array_equal(counts.counts.sum(axis=0), np.bincount(stream, minlength=counts.vocab_size))


def test_packed_needs_an_eos_or_sep() -> None:
    with pytest.raises(InputError, match="whitespace has neither"):
        list(packed(get_tokenizer("whitespace", max_length=8), iter([["a b c"]])))


# --- long sequences --------------------------------------------------------------------------------


def test_a_32k_token_document_is_counted_whole_and_rows_still_cut_at_512(
    minilm_path: Path, reference_tokenizer: Any, tmp_path: Path
) -> None:
    text = " ".join(f"word{k % 97} and" for k in range(11000))
    n = len(reference_tokenizer.encode(text))  # with [CLS] and [SEP]
    assert n > 32_768
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "long.txt").write_text(text, encoding="utf-8")
    source = resolve_source(str(folder))
    whole, _ = compute_counts(source, CountJob(str(minilm_path), read="document"), cache=False)
    assert whole.n_positions == n and whole.n_sequences == 1
    cut, _ = compute_counts(source, CountJob(str(minilm_path), max_length=32_768, read="document"), cache=False)
    assert cut.n_positions == 32_768
    rows, _ = compute_counts(source, CountJob(str(minilm_path)), cache=False)
    assert rows.n_positions == 512


def test_encoded_blocks_count_as_the_batches_they_join() -> None:
    """Blocks of several batches (the counter's hand-over) give the counts of batch by batch."""
    from geoanalyze.corpus.streaming import _blocks

    parts = [EncodedBlock(np.arange(k, k + 5), np.asarray([2, 3])) for k in range(4)]
    blocks = list(_blocks(iter(parts), tokens=8))
    assert [len(b) for b in blocks] == [4, 4]
    assert np.array_equal(np.concatenate([b.ids for b in blocks]), np.concatenate([p.ids for p in parts]))


# --- synthetic at long lengths --------------------------------------------------------------------


def loop_sample(marginals: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """The reference: one inverse-CDF search per position (the generator before it was vectorised)."""
    length, vocab = marginals.shape
    cdf = np.cumsum(marginals, axis=1)
    cdf[:, -1] = 1.0
    u = rng.random((n, length))
    tokens = np.empty((n, length), dtype=np.int64)
    for i in range(length):
        tokens[:, i] = np.searchsorted(cdf[i], u[:, i], side="right")
    return np.minimum(tokens, vocab - 1)


@settings(max_examples=40, deadline=None)
@given(
    length=st.integers(1, 700),
    vocab=st.integers(1, 40),
    n=st.integers(1, 30),
    seed=st.integers(0, 2**32 - 1),
    zeros=st.floats(0.0, 0.9),
)
def test_vectorised_sampling_draws_the_tokens_of_one_search_per_position(
    length: int, vocab: int, n: int, seed: int, zeros: float
) -> None:
    rng = np.random.default_rng(seed)
    weights = rng.random((length, vocab)) * (rng.random((length, vocab)) >= zeros)
    weights[:, rng.integers(vocab)] += 1e-3  # every row some mass
    marginals = weights / weights.sum(axis=1, keepdims=True)
    got = sample_tokens(marginals, n, np.random.default_rng(seed + 1))
    assert np.array_equal(got, loop_sample(marginals, n, np.random.default_rng(seed + 1)))


def test_drift_marginals_by_block_are_the_whole_formula_bit_for_bit() -> None:
    length, vocab, anchors = 10_000, 64, 4
    got = drift_marginals(length, vocab, np.random.default_rng(3), anchors=anchors)
    rng = np.random.default_rng(3)
    nus = np.stack([zipf(vocab)[rng.permutation(vocab)] for _ in range(anchors)])
    x = np.linspace(0.0, anchors - 1, length)
    left = np.minimum(np.floor(x).astype(int), anchors - 2)
    lam = (x - left)[:, None]
    assert np.array_equal(got, (1.0 - lam) * nus[left] + lam * nus[left + 1])


def test_a_long_synthetic_drift_keeps_its_true_marginals() -> None:
    """A fast, smaller stand-in for length=131072 (benchmarks/long_documents.py measures that one)."""
    corpus = synthetic_corpus("drift", n_sequences=4, length=20_000, vocab_size=64)
    assert corpus.marginals.shape == (20_000, 64) and np.allclose(corpus.marginals.sum(axis=1), 1.0)
    assert [len(t.split()) for t in corpus.texts] == [20_000] * 4
    from geoanalyze.analysis import true_marginals

    spec = resolve_source("synthetic:drift,n=4,length=20000,vocab=64")
    assert np.array_equal(true_marginals(spec.describe()), corpus.marginals)
