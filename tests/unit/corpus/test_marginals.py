"""geoanalyze.corpus.marginals: counts against brute force, their laws, files, merging, the cache."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from geoanalyze.cache import CACHE_ENV
from geoanalyze.corpus.marginals import PositionalCounts, count_positions
from geoanalyze.corpus.sources import resolve_source
from geoanalyze.corpus.streaming import CountJob, compute_counts
from geoanalyze.corpus.tokenize import CharTokenizer, HFTokenizer, WhitespaceTokenizer
from geoanalyze.errors import FormatError, IncompatibleError
from geoanalyze.io import save_arrays

CLS, SEP = 101, 102
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]

word_texts = st.lists(
    st.lists(st.sampled_from(WORDS), max_size=9).map(" ".join),
    max_size=25,
)


def brute_force(sequences: Iterable[Iterable[Any]]) -> Counter[tuple[int, Any]]:
    """(position, token) -> number of sequences, by a plain loop."""
    counter: Counter[tuple[int, Any]] = Counter()
    for sequence in sequences:
        for position, token in enumerate(sequence):
            counter[position, token] += 1
    return counter


def as_counter(matrix: Any, vocab: list[str] | None = None) -> Counter[tuple[int, Any]]:
    """The nonzero entries of a count matrix, keyed by (position, id or token string)."""
    coo = sp.coo_array(matrix)
    counter: Counter[tuple[int, Any]] = Counter()
    for row, col, value in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True):
        assert value > 0
        counter[row, col if vocab is None else vocab[col]] += value
    return counter


def same_matrix(a: Any, b: Any) -> bool:
    return a.shape == b.shape and (sp.csr_array(a) != sp.csr_array(b)).nnz == 0


def hf_reference(reference_tokenizer: Any, texts: list[str], max_length: int, **kwargs: Any) -> list[list[int]]:
    return [reference_tokenizer(t, truncation=True, max_length=max_length, **kwargs)["input_ids"] for t in texts]


@pytest.fixture(scope="module")
def bert(minilm_path: Path) -> HFTokenizer:
    return HFTokenizer(str(minilm_path), max_length=64)


# --- against brute force ------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(texts=word_texts, max_length=st.integers(1, 10), batch_size=st.integers(1, 8))
def test_whitespace_counts_equal_brute_force(texts: list[str], max_length: int, batch_size: int) -> None:
    counts = count_positions(texts, WhitespaceTokenizer(max_length), batch_size=batch_size)
    pieces = [text.split()[:max_length] for text in texts]
    assert as_counter(counts.counts, counts.vocab) == brute_force(pieces)
    longest = max(map(len, pieces), default=0)
    assert counts.n_positions == longest
    assert counts.vocab_size == len(counts.vocab) == len({p for seq in pieces for p in seq})
    # N_i is the number of sequences longer than i.
    assert counts.totals.tolist() == [sum(len(p) > i for p in pieces) for i in range(longest)]
    assert counts.n_sequences == len(texts)
    assert counts.counts.dtype == np.int64


def test_char_counts_equal_brute_force() -> None:
    texts = ["abc", "ba", "", "c\x00a c", "aaaa"]
    counts = count_positions(texts, CharTokenizer(max_length=4), batch_size=2)
    assert as_counter(counts.counts, counts.vocab) == brute_force(list(t)[:4] for t in texts)


@pytest.mark.parametrize("max_length", [16, 512])
def test_hf_counts_equal_brute_force(
    minilm_path: Path, reference_tokenizer: Any, sst2_sentences: list[str], max_length: int
) -> None:
    texts = sst2_sentences[:300]
    counts = count_positions(texts, HFTokenizer(str(minilm_path), max_length=max_length), batch_size=64)
    sequences = hf_reference(reference_tokenizer, texts, max_length)
    assert as_counter(counts.counts) == brute_force(sequences)
    longest = max(map(len, sequences))
    assert counts.counts.shape == (longest, 30522)
    assert counts.totals.tolist() == [sum(len(s) > i for s in sequences) for i in range(longest)]
    assert counts.counts[[0], [CLS]].item() == len(texts)  # every sequence starts with [CLS]
    assert counts.metadata["max_length"] == max_length
    assert counts.metadata["add_special_tokens"] is True
    assert counts.metadata["exclude_special"] is False
    assert counts.vocab is None


def test_exclude_special(minilm_path: Path, reference_tokenizer: Any, sst2_sentences: list[str]) -> None:
    texts = sst2_sentences[:200]
    tokenizer = HFTokenizer(str(minilm_path), max_length=12)
    kept = count_positions(texts, tokenizer)
    dropped = count_positions(texts, tokenizer, exclude_special=True)
    special = set(tokenizer.special_ids.tolist())
    sequences = hf_reference(reference_tokenizer, texts, 12)
    expected = brute_force([(t if t not in special else None) for t in s] for s in sequences)
    expected = Counter({key: value for key, value in expected.items() if key[1] is not None})
    assert as_counter(dropped.counts) == expected
    assert dropped.totals[0] == 0  # position 0 only ever held [CLS]
    assert kept.totals[0] == len(texts)
    assert dropped.n_positions == kept.n_positions  # positions are not renumbered
    assert dropped.counts[:, [CLS]].sum() == 0
    assert dropped.counts[:, [SEP]].sum() == 0
    assert dropped.totals.tolist() == [
        sum(len(s) > i and s[i] not in special for s in sequences) for i in range(kept.n_positions)
    ]
    assert dropped.metadata["exclude_special"] is True


def test_progress_is_told_every_text(bert: HFTokenizer, sst2_sentences: list[str]) -> None:
    done: list[int] = []
    count_positions(sst2_sentences[:50], bert, batch_size=16, progress=done.append)
    assert done == [16, 16, 16, 2]


def test_empty_corpus_counts() -> None:
    counts = count_positions([], WhitespaceTokenizer())
    assert counts.counts.shape == (0, 0)
    assert counts.n_sequences == 0
    assert counts.totals.size == 0


# --- laws ---------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(first=word_texts, second=word_texts, max_length=st.integers(1, 10))
def test_counts_are_additive(first: list[str], second: list[str], max_length: int) -> None:
    whole = count_positions(first + second, WhitespaceTokenizer(max_length))
    merged = count_positions(first, WhitespaceTokenizer(max_length)).merge(
        count_positions(second, WhitespaceTokenizer(max_length))
    )
    # Both vocabularies list tokens by first appearance, so even the columns agree.
    assert merged.vocab == whole.vocab
    assert same_matrix(merged.counts, whole.counts)
    assert merged.n_sequences == whole.n_sequences == len(first) + len(second)


@settings(max_examples=10, deadline=None)
@given(cut=st.integers(0, 120), seed=st.integers(0, 3))
def test_hf_counts_are_additive(bert: HFTokenizer, sst2_sentences: list[str], cut: int, seed: int) -> None:
    texts = sst2_sentences[:120]
    whole = count_positions(texts, bert, split_seed=seed)
    merged = count_positions(texts[:cut], bert, split_seed=seed) + count_positions(texts[cut:], bert, split_seed=seed)
    assert same_matrix(merged.counts, whole.counts)
    assert merged.n_sequences == 120
    assert np.all(merged.half_totals <= merged.totals)


@settings(max_examples=40, deadline=None)
@given(
    texts=word_texts, seed=st.integers(0, 2**32 - 1), batch_sizes=st.lists(st.integers(1, 30), min_size=1, max_size=3)
)
def test_batch_size_changes_nothing(texts: list[str], seed: int, batch_sizes: list[int]) -> None:
    reference = count_positions(texts, WhitespaceTokenizer(6), split_seed=seed, batch_size=4096)
    for batch_size in batch_sizes:
        other = count_positions(texts, WhitespaceTokenizer(6), split_seed=seed, batch_size=batch_size)
        assert other.vocab == reference.vocab
        assert same_matrix(other.counts, reference.counts)
        assert same_matrix(other.half, reference.half)
        assert other.metadata == reference.metadata


@settings(max_examples=40, deadline=None)
@given(texts=word_texts, seed=st.integers(0, 1000))
def test_totals_non_increasing_and_halves_bounded(texts: list[str], seed: int) -> None:
    counts = count_positions(texts, WhitespaceTokenizer(8), split_seed=seed, batch_size=7)
    assert np.all(np.diff(counts.totals) <= 0)
    assert np.all(counts.half_totals <= counts.totals)
    assert np.all(counts.half_totals >= 0)
    assert (counts.half > counts.counts).nnz == 0
    assert counts.half.dtype == np.int64
    if counts.half.nnz:
        assert counts.half.data.min() >= 0


def test_hf_totals_non_increasing_with_special_tokens(bert: HFTokenizer, sst2_sentences: list[str]) -> None:
    counts = count_positions(sst2_sentences, bert)
    assert np.all(np.diff(counts.totals) <= 0)
    assert np.all(counts.half_totals <= counts.totals)


def test_half_is_the_count_of_a_subset_of_sequences() -> None:
    """Each text starts with its own marker, so half[0] names the sequences of half A; recount them."""
    rng = random.Random(5)
    texts = [" ".join([f"s{k}", *rng.choices(WORDS, k=rng.randint(0, 6))]) for k in range(300)]
    counts = count_positions(texts, WhitespaceTokenizer(), split_seed=11, batch_size=64)
    half_a = as_counter(counts.half, counts.vocab)
    members = [text for k, text in enumerate(texts) if half_a[0, f"s{k}"] == 1]
    assert 100 < len(members) < 200  # a fair coin
    assert half_a == brute_force(text.split() for text in members)
    assert counts.half_totals[0] == len(members)


def test_split_seed_changes_halves_deterministically(sst2_sentences: list[str], bert: HFTokenizer) -> None:
    texts = sst2_sentences[:200]
    a = count_positions(texts, bert, split_seed=0)
    again = count_positions(texts, bert, split_seed=0, batch_size=33)
    b = count_positions(texts, bert, split_seed=1)
    assert same_matrix(a.half, again.half)
    assert not same_matrix(a.half, b.half)
    assert same_matrix(a.counts, b.counts)
    assert (a.metadata["split_seed"], b.metadata["split_seed"]) == (0, 1)


# --- marginals and the minimum count ------------------------------------------------------


def test_marginals_are_row_normalised(bert: HFTokenizer, sst2_sentences: list[str]) -> None:
    counts = count_positions(sst2_sentences[:100], bert, exclude_special=True)
    mu = counts.marginals()
    sums = np.asarray(mu.sum(axis=1)).ravel()
    np.testing.assert_allclose(sums[counts.totals > 0], 1.0)
    assert np.all(sums[counts.totals == 0] == 0.0)
    i, t = 3, int(counts.counts[[3]].tocoo().col[0])
    assert mu[[i], [t]].item() == counts.counts[[i], [t]].item() / counts.totals[i]


def test_kept_positions_and_left_out() -> None:
    texts = [" ".join(["w"] * k) for k in range(1, 11)]  # N_i = 10 - i
    counts = count_positions(texts, WhitespaceTokenizer())
    assert counts.totals.tolist() == list(range(10, 0, -1))
    assert counts.kept_positions(min_count=5).tolist() == [0, 1, 2, 3, 4, 5]
    report = counts.left_out(min_count=5)
    assert report["positions"] == [[6, 9]]
    assert report["count"] == 4
    assert report["min_count"] == 5
    assert "N_i < 5" in report["reason"]
    assert counts.left_out(min_count=1) == {"min_count": 1, "positions": [], "count": 0, "reason": "N_i < 1 sequences"}
    assert counts.kept_positions(min_count=11).size == 0
    selected = counts.select(counts.kept_positions(min_count=5))
    assert selected.totals.tolist() == [10, 9, 8, 7, 6, 5]


def test_left_out_with_a_gap(bert: HFTokenizer, sst2_sentences: list[str]) -> None:
    counts = count_positions(sst2_sentences[:300], bert, exclude_special=True)
    kept = counts.kept_positions(min_count=100)
    expected_kept = [i for i, n in enumerate(counts.totals.tolist()) if n >= 100]
    assert kept.tolist() == expected_kept
    assert kept[0] == 1  # position 0 ([CLS] only) is dropped
    report = counts.left_out(min_count=100)
    assert report["positions"] == [[0, 0], [int(kept[-1]) + 1, counts.n_positions - 1]]
    assert report["count"] == counts.n_positions - kept.size


# --- files --------------------------------------------------------------------------------


def assert_identical(a: PositionalCounts, b: PositionalCounts) -> None:
    assert same_matrix(a.counts, b.counts)
    assert same_matrix(a.half, b.half)
    assert a.counts.dtype == b.counts.dtype == np.int64
    assert a.half.dtype == b.half.dtype == np.int64
    assert a.metadata == b.metadata
    assert a.vocab == b.vocab


def test_save_load_round_trip(tmp_path: Path, bert: HFTokenizer, sst2_sentences: list[str]) -> None:
    texts = ["the cat sat", "a dog ran on the mat", "", "the"]
    for counts in (
        count_positions(texts, WhitespaceTokenizer(), split_seed=3),
        count_positions(sst2_sentences[:100], bert, exclude_special=True, split_seed=9),
        count_positions(["", " "], WhitespaceTokenizer()),
    ):
        counts.metadata["corpus"] = [{"name": "c.txt", "kind": "file", "location": "/x/c.txt", "split": None}]
        path = tmp_path / "sub" / "counts.safetensors"
        counts.save(path)
        assert_identical(PositionalCounts.load(path), counts)
        assert not list(path.parent.glob(".*.tmp"))  # written atomically, nothing left behind


@pytest.fixture
def saved_counts(tmp_path: Path) -> Path:
    path = tmp_path / "good.safetensors"
    count_positions(["the cat sat", "a dog ran on the mat"] * 20, WhitespaceTokenizer()).save(path)
    return path


@pytest.mark.parametrize("keep", [0, 4, 8, 30, -1, -9])
def test_truncated_file(tmp_path: Path, saved_counts: Path, keep: int) -> None:
    data = saved_counts.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[:keep])
    with pytest.raises(FormatError):
        PositionalCounts.load(cut)


@pytest.mark.parametrize("seed", range(4))
def test_random_bytes(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "noise.safetensors"
    path.write_bytes(random.Random(seed).randbytes(2000))
    with pytest.raises(FormatError):
        PositionalCounts.load(path)


def test_foreign_safetensors_files(tmp_path: Path) -> None:
    foreign = tmp_path / "model.safetensors"
    save_file({"weight": np.ones((3, 4), dtype=np.float32), "bias": np.zeros(4, dtype=np.float32)}, str(foreign))
    with pytest.raises(FormatError, match="not a geoanalyze counts file"):
        PositionalCounts.load(foreign)
    other_kind = tmp_path / "distances.safetensors"
    save_arrays(other_kind, {"distances": np.eye(3)}, kind="distances", metadata={})
    with pytest.raises(FormatError, match="distances"):
        PositionalCounts.load(other_kind)


def test_inconsistent_counts_file(tmp_path: Path) -> None:
    """A geoanalyze counts header whose arrays do not fit its shape, or hold negative counts."""
    good = {
        f"{name}.{part}": np.asarray(values, dtype=np.int64)
        for name in ("counts", "half")
        for part, values in (("indptr", [0, 1, 2]), ("indices", [0, 3]), ("data", [5, 2]))
    }
    cases = {
        "narrow": (good, {"shape": [2, 2]}),  # column 3 is out of range
        "negative": ({**good, "counts.data": np.asarray([5, -2], dtype=np.int64)}, {"shape": [2, 4]}),
        "missing": ({k: v for k, v in good.items() if k != "half.data"}, {"shape": [2, 4]}),
        "no shape": (good, {}),
    }
    for name, (arrays, metadata) in cases.items():
        path = tmp_path / f"{name}.safetensors"
        save_arrays(path, arrays, kind="counts", metadata=metadata)
        with pytest.raises(FormatError):
            PositionalCounts.load(path)
    save_arrays(tmp_path / "fine.safetensors", good, kind="counts", metadata={"shape": [2, 4]})
    assert PositionalCounts.load(tmp_path / "fine.safetensors").totals.tolist() == [5, 2]


# --- merging ------------------------------------------------------------------------------


def test_merge_refuses_other_tokenizers_and_options(bert: HFTokenizer) -> None:
    texts = ["the cat sat", "a dog"]
    whitespace = count_positions(texts, WhitespaceTokenizer(64))
    char = count_positions(texts, CharTokenizer(64))
    hf = count_positions(texts, bert)
    for a, b in ((whitespace, char), (hf, whitespace), (char, hf)):
        with pytest.raises(IncompatibleError, match="tokenizer"):
            a.merge(b)
    with pytest.raises(IncompatibleError, match="max_length"):
        whitespace.merge(count_positions(texts, WhitespaceTokenizer(8)))
    with pytest.raises(IncompatibleError, match="exclude_special"):
        hf.merge(count_positions(texts, bert, exclude_special=True))


def test_merge_unites_built_vocabularies_by_token() -> None:
    first = count_positions(["x y", "y z"], WhitespaceTokenizer())
    second = count_positions(["z w y", "x"], WhitespaceTokenizer())
    assert first.vocab == ["x", "y", "z"]
    assert second.vocab == ["z", "w", "y", "x"]
    merged = first + second
    assert merged.vocab == ["x", "y", "z", "w"]
    column = merged.vocab.index("z")
    assert merged.counts[:, [column]].toarray().ravel().tolist() == [1, 1, 0]  # z: position 0 in B, 1 in A
    column = merged.vocab.index("y")
    assert merged.counts[:, [column]].toarray().ravel().tolist() == [1, 1, 1]
    assert as_counter(merged.counts, merged.vocab) == brute_force(t.split() for t in ["x y", "y z", "z w y", "x"])
    assert as_counter(merged.half, merged.vocab) == as_counter(first.half, first.vocab) + as_counter(
        second.half, second.vocab
    )
    assert merged.n_sequences == 4
    assert first.vocab == ["x", "y", "z"]  # the operands are untouched


def test_merge_keeps_the_corpus_list(tmp_path: Path) -> None:
    a = count_positions(["one two"], WhitespaceTokenizer())
    b = count_positions(["three"], WhitespaceTokenizer())
    a.metadata["corpus"] = [{"name": "a"}]
    b.metadata["corpus"] = [{"name": "b"}]
    merged = a.merge(b)
    assert merged.metadata["corpus"] == [{"name": "a"}, {"name": "b"}]
    merged.save(tmp_path / "m.safetensors")
    assert_identical(PositionalCounts.load(tmp_path / "m.safetensors"), merged)


# --- the cache ----------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def counted(source: Any, cache: bool = True, **job: Any) -> tuple[PositionalCounts, bool]:
    """compute_counts' counts of a :class:`CountJob` of ``job``, and whether they came from the cache."""
    counts, report = compute_counts(source, CountJob(**job), cache=cache)
    return counts, report.cached


def test_compute_counts_caches(tmp_path: Path, cache: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\n\na dog ran\nthe end\n", encoding="utf-8")
    source = resolve_source(str(corpus))
    first, hit = counted(source, tokenizer="whitespace", split_seed=2)
    assert hit is False
    assert as_counter(first.counts, first.vocab) == brute_force(
        t.split() for t in ["the cat sat", "a dog ran", "the end"]
    )
    assert first.metadata["corpus"] == [dict(source.describe(), limit=None, fingerprint=source.fingerprint)]
    assert len(list((cache / "counts").glob("*.safetensors"))) == 1
    second, hit = counted(source, tokenizer="whitespace", split_seed=2)
    assert hit is True
    assert_identical(second, first)
    third, hit = counted(source, tokenizer="whitespace", split_seed=2, cache=False)
    assert hit is False
    assert_identical(third, first)
    # Other options are other jobs.
    assert counted(source, tokenizer="whitespace", split_seed=3)[1] is False
    limited, hit = counted(source, tokenizer="whitespace", split_seed=2, limit=1)
    assert hit is False
    assert limited.n_sequences == 1
    assert counted(source, tokenizer="char", split_seed=2)[1] is False


def test_compute_counts_recounts_a_changed_file(tmp_path: Path, cache: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("one two\n", encoding="utf-8")
    before, _ = counted(resolve_source(str(corpus)), tokenizer="whitespace")
    corpus.write_text("one two\nthree four five\n", encoding="utf-8")
    after, hit = counted(resolve_source(str(corpus)), tokenizer="whitespace")
    assert hit is False
    assert before.n_sequences == 1
    assert after.n_sequences == 2


def test_compute_counts_replaces_a_corrupt_cache_entry(tmp_path: Path, cache: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("one two\nthree\n", encoding="utf-8")
    source = resolve_source(str(corpus))
    expected, _ = counted(source, tokenizer="whitespace")
    (entry,) = (cache / "counts").glob("*.safetensors")
    entry.write_bytes(entry.read_bytes()[:50])
    again, hit = counted(source, tokenizer="whitespace")
    assert hit is False
    assert_identical(again, expected)
    assert counted(source, tokenizer="whitespace")[1] is True  # rewritten


def test_compute_counts_with_the_real_tokenizer(
    tmp_path: Path, cache: Path, minilm_path: Path, reference_tokenizer: Any, sst2_sentences: list[str]
) -> None:
    corpus = tmp_path / "s.tsv"
    corpus.write_text("sentence\tlabel\n" + "".join(f"{s}\t1\n" for s in sst2_sentences[:80]), encoding="utf-8")
    source = resolve_source(str(corpus))
    counts, hit = counted(source, tokenizer=str(minilm_path), max_length=20, exclude_special=True, limit=60)
    assert hit is False
    sequences = hf_reference(reference_tokenizer, sst2_sentences[:60], 20)
    expected = Counter({k: v for k, v in brute_force(sequences).items() if k[1] not in (CLS, SEP)})
    assert as_counter(counts.counts) == expected
    cached, hit = counted(source, tokenizer=str(minilm_path), max_length=20, exclude_special=True, limit=60)
    assert hit is True
    assert_identical(cached, counts)
