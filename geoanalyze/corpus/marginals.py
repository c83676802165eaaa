"""Per-position token counts: the sufficient statistic of every geometry in the toolkit.

For a corpus tokenized as the model sees it, ``counts[i, t]`` is the number of sequences with
token t at position i, and N_i (``totals``) the number of sequences that have a (counted)
token at position i, so mu_i(t) = counts[i, t] / N_i. Positions count from 0; padding is
never counted. Every sequence is also assigned, by a seeded coin, to half A or half B; the
counts of half A are kept (``half``) so the split-half noise floor and the bias-corrected
distances can be computed from the file alone. Counts are additive: two files of the same
tokenizer merge by adding both matrices.

Files are safetensors (CSR arrays of both matrices, no pickle) with a JSON header holding the
tokenizer identity, the corpus, the options and the format version.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..cache import file_digests
from ..errors import FormatError, IncompatibleError, InputError
from ..geometry.distances import normalise_rows
from ..hub import packaged_minilm_path
from ..io import load_arrays, save_arrays
from .tokenize import Tokenizer

DEFAULT_MIN_COUNT = 100
_BATCH = 4096
_FIX = "regenerate it with `geoanalyze marginals`"


@dataclass
class PositionalCounts:
    """Sparse n x V token counts per position, with the split-half counts and metadata.

    Attributes
    ----------
    counts : scipy.sparse.csr_array, shape (n, V), int64. counts[i, t] = number of sequences
        with token t at position i.
    half : csr_array of the same shape: the counts of the sequences in split-half A
        (half B is ``counts - half``).
    metadata : tokenizer identity, corpus, options, ``n_sequences``.
    vocab : token strings for corpus-built vocabularies (whitespace, char); None for
        tokenizers with a fixed vocabulary.
    """

    counts: sp.csr_array
    half: sp.csr_array
    metadata: dict[str, Any] = field(default_factory=dict)
    vocab: list[str] | None = None

    def __post_init__(self) -> None:
        if self.counts.shape != self.half.shape:
            raise FormatError("counts and half counts differ in shape; the file is corrupt, regenerate it")

    @property
    def n_positions(self) -> int:
        """n, the number of positions (the longest sequence seen, after truncation)."""
        return int(self.counts.shape[0])

    @property
    def vocab_size(self) -> int:
        """V, the number of columns (token ids)."""
        return int(self.counts.shape[1])

    @property
    def totals(self) -> np.ndarray:
        """N_i: the number of sequences with a counted token at position i, shape (n,)."""
        return np.asarray(self.counts.sum(axis=1)).ravel().astype(np.int64)

    @property
    def half_totals(self) -> np.ndarray:
        """N_i of split-half A, shape (n,)."""
        return np.asarray(self.half.sum(axis=1)).ravel().astype(np.int64)

    @property
    def n_sequences(self) -> int:
        """Number of sequences counted."""
        return int(self.metadata.get("n_sequences", self.totals.max(initial=0)))

    def marginals(self) -> sp.csr_array:
        """mu: the row-normalised counts, float64 CSR (rows with N_i = 0 stay zero)."""
        return normalise_rows(self.counts)

    def kept_positions(self, min_count: int = DEFAULT_MIN_COUNT) -> np.ndarray:
        """Indices i with N_i >= min_count."""
        return np.flatnonzero(self.totals >= min_count)

    def left_out(self, min_count: int = DEFAULT_MIN_COUNT) -> dict[str, Any]:
        """Which positions ``min_count`` leaves out, and why (for reports)."""
        dropped = np.flatnonzero(self.totals < min_count)
        return {
            "min_count": int(min_count),
            "positions": position_runs(dropped),
            "count": int(dropped.size),
            "reason": f"N_i < {min_count} sequences",
        }

    def select(self, positions: np.ndarray) -> PositionalCounts:
        """The counts of the given positions only (rows in that order)."""
        positions = np.asarray(positions, dtype=np.int64)
        metadata = {key: value for key, value in self.metadata.items() if key != "n_empty"}  # row 0 may be gone
        return PositionalCounts(self.counts[positions], self.half[positions], metadata, self.vocab)

    # --- merging --------------------------------------------------------------------------

    def merge(self, other: PositionalCounts) -> PositionalCounts:
        """Add two count sets of the same tokenizer (their corpora are concatenated).

        Built vocabularies (whitespace, char) are united by token string.
        """
        check_mergeable(self.metadata, other.metadata)
        a_counts, a_half, b_counts, b_half, vocab = self.counts, self.half, other.counts, other.half, self.vocab
        if self.vocab is not None and other.vocab is not None:
            vocab, remap = _union_vocab(self.vocab, other.vocab)
            b_counts, b_half = _remap_columns(b_counts, remap, len(vocab)), _remap_columns(b_half, remap, len(vocab))
        shape = (max(self.n_positions, other.n_positions), max(a_counts.shape[1], b_counts.shape[1]))
        metadata = dict(self.metadata)
        metadata["n_sequences"] = self.n_sequences + other.n_sequences
        if "n_empty" in self.metadata and "n_empty" in other.metadata:
            metadata["n_empty"] = int(self.metadata["n_empty"]) + int(other.metadata["n_empty"])
        else:
            metadata.pop("n_empty", None)
        metadata["corpus"] = _as_list(self.metadata.get("corpus")) + _as_list(other.metadata.get("corpus"))
        return PositionalCounts(
            _resize(a_counts, shape) + _resize(b_counts, shape),
            _resize(a_half, shape) + _resize(b_half, shape),
            metadata,
            vocab,
        )

    __add__ = merge

    # --- files ----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the counts to a safetensors file (atomically, no pickle).

        The arrays are the matrices' own (int64 already: no copy), and safetensors (>= 0.8)
        writes each from its buffer, so writing holds no serialized copy of the file: a
        counting worker's peak while it stores a shard's partial counts is those counts.
        """
        arrays: dict[str, np.ndarray] = {}
        for name, matrix in (("counts", self.counts), ("half", self.half)):
            matrix = sp.csr_array(matrix)
            matrix.sum_duplicates()
            arrays[f"{name}.indptr"] = matrix.indptr.astype(np.int64, copy=False)
            arrays[f"{name}.indices"] = matrix.indices.astype(np.int64, copy=False)
            arrays[f"{name}.data"] = matrix.data.astype(np.int64, copy=False)
        metadata = dict(self.metadata, shape=[self.n_positions, self.vocab_size], vocab=self.vocab)
        save_arrays(path, arrays, kind="counts", metadata=metadata)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PositionalCounts:
        """Read a counts file written by :meth:`save`; FormatError if it is corrupt, foreign or inconsistent.

        Checked before use: exactly the six CSR tensors, all integer and 1-D; a header ``shape``
        of two non-negative integers; row pointers that start at 0, never decrease and end at
        the number of entries; token ids inside [0, V); no negative count; half-A counts never
        above the full counts; N_i never above ``n_sequences``; a built vocabulary of exactly V
        distinct strings; and the typed header fields (tokenizer an object, options of their type).
        """
        from ..io import INTEGER, check_tensors, header_field

        arrays, document = load_arrays(path, kind="counts")
        check_tensors(
            path,
            arrays,
            {f"{name}.{part}": (INTEGER, 1) for name in ("counts", "half") for part in ("indptr", "indices", "data")},
            kind="counts",
        )
        shape_field = header_field(path, document, "shape", list, "counts")
        if len(shape_field) != 2 or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape_field
        ):
            raise FormatError(
                f"{path}: header shape {str(shape_field)[:60]} is not [n, V] of non-negative integers; {_FIX}"
            )
        shape = (int(shape_field[0]), int(shape_field[1]))
        vocab = header_field(path, document, "vocab", (list, type(None)), "counts", default=None)
        tokenizer = header_field(path, document, "tokenizer", dict, "counts", default={})
        header_field(path, document, "n_sequences", int, "counts", default=0)
        header_field(path, document, "n_empty", (int, type(None)), "counts", default=None)
        for key in ("exclude_special", "add_special_tokens"):
            header_field(path, document, key, bool, "counts", default=False)
        for key in ("max_length", "split_seed"):
            header_field(path, document, key, (int, type(None)), "counts", default=None)
        corpus = header_field(path, document, "corpus", (list, type(None)), "counts", default=None)
        if corpus is not None and not all(isinstance(item, dict) for item in corpus):
            raise FormatError(f"{path}: header field 'corpus' must be a list of objects; {_FIX}")
        if not isinstance(tokenizer.get("kind", ""), str) or not isinstance(tokenizer.get("name", ""), str):
            raise FormatError(f"{path}: header field 'tokenizer' has a kind or name that is not a string; {_FIX}")
        matrices = [_checked_csr(path, arrays, name, shape) for name in ("counts", "half")]
        if tokenizer.get("vocab") == "built" or vocab is not None:
            if vocab is None or len(vocab) != shape[1]:
                held = "no vocabulary" if vocab is None else f"a vocabulary of {len(vocab)} tokens"
                raise FormatError(f"{path}: {shape[1]} token columns but {held}; {_FIX}")
            if not all(isinstance(token, str) for token in vocab):
                raise FormatError(f"{path}: the vocabulary holds a token that is not a string; {_FIX}")
            if len(set(vocab)) != len(vocab):
                raise FormatError(f"{path}: the vocabulary repeats a token; {_FIX}")
        excess = matrices[0] - matrices[1]
        if excess.nnz and excess.data.min() < 0:
            raise FormatError(f"{path}: a half-A count exceeds the full count of the same cell; {_FIX}")
        _check_sequences(path, document, np.asarray(matrices[0].sum(axis=1)).ravel())
        for key in ("shape", "vocab", "kind", "format_version"):
            document.pop(key, None)
        return cls(matrices[0], matrices[1], document, vocab)


def _check_sequences(path: str | os.PathLike[str], document: dict[str, Any], totals: np.ndarray) -> None:
    """The header's ``n_sequences`` against the counts: no position counts more tokens than there are
    sequences, and where every sequence of a token has one at position 0 (a built vocabulary; special
    tokens added and counted: [CLS]) N_0 is exactly ``n_sequences`` less ``n_empty``, the sequences of
    no token (blank texts given to :func:`count_positions`; a header without it is not checked so)."""
    n_sequences, n_empty = document.get("n_sequences"), document.get("n_empty")
    if not isinstance(n_sequences, int) or not totals.any():
        return  # no token at all: degenerate, and what reads it says what to do
    if totals.max() > n_sequences:
        row = int(np.argmax(totals))
        raise FormatError(
            f"{path}: position {row} counts {int(totals[row])} tokens but the header says "
            f"{n_sequences} sequences (at most one token per sequence and position); {_FIX}"
        )
    tokenizer = document.get("tokenizer") or {}
    built = tokenizer.get("vocab") == "built"
    marked = (
        tokenizer.get("kind") == "hf" and document.get("add_special_tokens") and not document.get("exclude_special")
    )
    if (built or marked) and isinstance(n_empty, int) and int(totals[0]) != n_sequences - n_empty:
        why = "a non-blank text has a first word" if built else "each begins with a special token"
        raise FormatError(
            f"{path}: the header says {n_sequences} sequences ({n_empty} of them empty) but position 0 counts "
            f"{int(totals[0])} tokens, and every sequence that is not empty has one there ({why}); {_FIX}"
        )


def _checked_csr(
    path: str | os.PathLike[str], arrays: dict[str, np.ndarray], name: str, shape: tuple[int, int]
) -> sp.csr_array:
    """One CSR matrix of a counts file, its internal consistency checked before scipy sees it."""
    indptr, indices, data = (arrays[f"{name}.{part}"].astype(np.int64) for part in ("indptr", "indices", "data"))
    n, vocab_size = shape
    if indptr.shape != (n + 1,):
        raise FormatError(
            f"{path}: {name}.indptr has {indptr.size} entries, the header's {n} positions need {n + 1}; {_FIX}"
        )
    if indices.shape != data.shape:
        raise FormatError(
            f"{path}: {name}.indices and {name}.data differ in length ({indices.size}, {data.size}); {_FIX}"
        )
    if indptr[0] != 0 or indptr[-1] != data.size or (n and np.any(np.diff(indptr) < 0)):
        raise FormatError(
            f"{path}: {name}.indptr is not a valid row-offset array (it must start at 0, never decrease and end "
            f"at {data.size}); {_FIX}"
        )
    if indices.size and (indices.min() < 0 or indices.max() >= vocab_size):
        raise FormatError(f"{path}: {name}.indices holds a token id outside 0..{vocab_size - 1}; {_FIX}")
    if data.size and data.min() < 0:
        raise FormatError(f"{path}: {name}.data holds a negative count; {_FIX}")
    matrix = sp.csr_array((data, indices, indptr), shape=shape)
    try:
        matrix.check_format(full_check=True)
    except ValueError as exc:
        raise FormatError(f"{path}: {name} is not a valid sparse matrix ({exc}); {_FIX}") from exc
    if not matrix.has_canonical_format:
        matrix.sum_duplicates()
    return matrix


class SparseCounter:
    """Counts of a stream of batches, merged as they come: memory O(non-zero counts), not O(corpus).

    Each batch is encoded into one flat id array; positions come from the sequence lengths (no
    Python loop per token) and (position, id) keys are reduced with ``np.unique``. The key is
    ``position << 40 | id``, so sorted keys are in CSR (row-major) order. A batch's distinct
    keys are merged into the sorted running keys in place (``searchsorted``), and only keys
    never seen before are inserted: the memory held is the distinct (position, token) pairs,
    plus one batch.
    """

    _ID_BITS = 40  # ids below 2**40, positions below 2**23

    def __init__(self, tokenizer: Tokenizer, exclude_special: bool = False):
        self.tokenizer = tokenizer
        self.exclude_special = bool(exclude_special)
        self._special = tokenizer.special_ids if exclude_special else np.zeros(0, dtype=np.int64)
        self._keys = np.zeros(0, dtype=np.int64)
        self._counts = np.zeros(0, dtype=np.int64)
        self._half = np.zeros(0, dtype=np.int64)
        self._new_keys = self._new_counts = self._new_half = np.zeros(0, dtype=np.int64)
        self.n_positions = 0
        self.n_sequences = 0
        self.n_empty = 0  # sequences of no token at all (a blank text given to count_positions)

    def add(self, texts: Sequence[str], in_half: np.ndarray) -> int:
        """Count one batch (``in_half[s]``: sequence s is in split-half A); return its tokens."""
        ids, lengths = self.tokenizer.encode_batch(texts)
        self.n_sequences += len(texts)
        self.n_empty += int(np.count_nonzero(lengths == 0))
        if not ids.size:
            return 0
        self.n_positions = max(self.n_positions, int(lengths.max()))
        positions = token_positions(lengths)
        token_half = np.repeat(np.asarray(in_half, dtype=bool), lengths)
        if self._special.size:
            keep = ~np.isin(ids, self._special)
            ids, positions, token_half = ids[keep], positions[keep], token_half[keep]
        keys = (positions << self._ID_BITS) | ids
        del positions
        unique, inverse, count = np.unique(keys, return_inverse=True, return_counts=True)
        half_count = np.bincount(inverse.ravel(), weights=token_half, minlength=unique.size).astype(np.int64)
        self._merge(unique, count.astype(np.int64), half_count)
        return int(ids.size)

    def _merge(self, keys: np.ndarray, counts: np.ndarray, half: np.ndarray) -> None:
        """Add sorted distinct keys with their counts to the running ones.

        Keys already held are added in place; new ones go to a small sorted side buffer, folded
        into the main arrays once it holds an eighth of them (one copy per fold, not per batch).
        """
        if self._keys.size:
            fresh = add_present(self._keys, [self._counts, self._half], keys, [counts, half])
            if not fresh.any():
                return
            keys, counts, half = keys[fresh], counts[fresh], half[fresh]
        self._new_keys, (self._new_counts, self._new_half) = merge_sorted(
            self._new_keys, [self._new_counts, self._new_half], keys, [counts, half]
        )
        if self._new_keys.size > self._keys.size // 8:
            self._fold()

    def _fold(self) -> None:
        if self._new_keys.size:
            self._keys, (self._counts, self._half) = merge_sorted(
                self._keys, [self._counts, self._half], self._new_keys, [self._new_counts, self._new_half]
            )
            self._new_keys = self._new_counts = self._new_half = np.zeros(0, dtype=np.int64)

    def result(self, split_seed: int = 0) -> PositionalCounts:
        """The counts so far, as a :class:`PositionalCounts` with the usual metadata."""
        self._fold()
        tokenizer = self.tokenizer
        shape = (self.n_positions, tokenizer.vocab_size)
        counts = keys_to_csr(self._keys, self._counts, shape, self._ID_BITS)
        half = sp.csr_array((self._half, counts.indices.copy(), counts.indptr.copy()), shape=shape)
        half.eliminate_zeros()
        # The counter is spent: its arrays now belong to the matrices (the keys are dropped).
        self._keys = self._counts = self._half = np.zeros(0, dtype=np.int64)
        metadata = {
            "tokenizer": tokenizer_identity(tokenizer),
            "max_length": tokenizer.max_length,
            "exclude_special": self.exclude_special,
            "add_special_tokens": bool(getattr(tokenizer, "add_special_tokens", False)),
            "split_seed": int(split_seed),
            "n_sequences": self.n_sequences,
            "n_empty": self.n_empty,
        }
        return PositionalCounts(counts, half, metadata, tokenizer.vocabulary())


def add_present(
    keys: np.ndarray, values: list[np.ndarray], new_keys: np.ndarray, new_values: list[np.ndarray]
) -> np.ndarray:
    """Add the values of the new keys already in ``keys`` to ``values``, in place; return the
    mask of the new keys that are not (both key arrays sorted and distinct)."""
    return ~_add_found(keys, values, new_keys, new_values)[1]


def merge_sorted(
    keys: np.ndarray, values: list[np.ndarray], new_keys: np.ndarray, new_values: list[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Add (new_keys, new_values) to (keys, values): both key arrays sorted and distinct.

    Values of keys present in both are added in place (:func:`add_present`); only keys never
    seen before are inserted (one copy of the arrays then), so a long stream of batches costs
    memory for the distinct keys, not for the batches.
    """
    if keys.size == 0:
        return new_keys, list(new_values)
    where, found = _add_found(keys, values, new_keys, new_values)
    fresh = ~found
    if fresh.any():
        at = where[fresh]
        keys = np.insert(keys, at, new_keys[fresh])
        values = [np.insert(held, at, new[fresh]) for held, new in zip(values, new_values, strict=True)]
    return keys, values


def _add_found(
    keys: np.ndarray, values: list[np.ndarray], new_keys: np.ndarray, new_values: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Where each new key goes in ``keys`` and whether it is there; the values of those there added."""
    where = np.searchsorted(keys, new_keys)
    found = where < keys.size
    found[found] = keys[where[found]] == new_keys[found]
    for held, new in zip(values, new_values, strict=True):
        held[where[found]] += new[found]  # distinct keys: no index repeats
    return where, found


def csr_keys(matrix: sp.csr_array, id_bits: int = 40) -> np.ndarray:
    """The sorted ``row << id_bits | column`` keys of a canonical CSR matrix's entries."""
    rows = np.repeat(np.arange(matrix.shape[0], dtype=np.int64), np.diff(matrix.indptr))
    return (rows << id_bits) | matrix.indices.astype(np.int64)


def keys_to_csr(keys: np.ndarray, values: np.ndarray, shape: tuple[int, int], id_bits: int = 40) -> sp.csr_array:
    """The CSR matrix of sorted ``row << id_bits | column`` keys (the inverse of :func:`csr_keys`)."""
    indptr = np.concatenate([[0], np.cumsum(np.bincount(keys >> id_bits, minlength=shape[0]))]).astype(np.int64)
    cols = keys & ((1 << id_bits) - 1)
    return sp.csr_array((values, cols, indptr), shape=shape)


def count_positions(
    texts: Sequence[str],
    tokenizer: Tokenizer,
    exclude_special: bool = False,
    split_seed: int = 0,
    batch_size: int = _BATCH,
    progress: Callable[[int], None] | None = None,
) -> PositionalCounts:
    """Count tokens per position over a list of texts, batched and vectorised.

    For corpora that do not fit in memory, :func:`~geoanalyze.corpus.streaming.compute_counts` streams a source shard by
    shard through the same :class:`SparseCounter`, with the same split-half coins.

    Parameters
    ----------
    texts : the corpus.
    tokenizer : a :class:`~geoanalyze.corpus.tokenize.Tokenizer` (truncates to its max_length).
    exclude_special : drop special tokens ([CLS], [SEP], ...) from the counts.
    split_seed : seed of the coin that assigns each sequence to split-half A or B: sequence s
        is in half A when the s-th uniform of ``np.random.default_rng(split_seed)`` is < 0.5.
    batch_size : texts encoded at once.
    progress : called with the number of texts done after each batch.
    """
    rng = np.random.default_rng(split_seed)
    counter = SparseCounter(tokenizer, exclude_special=exclude_special)
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        counter.add(batch, rng.random(len(batch)) < 0.5)
        if progress is not None:
            progress(len(batch))
    return counter.result(split_seed=split_seed)


def token_positions(lengths: np.ndarray) -> np.ndarray:
    """The position of every token of a flat batch, from the sequence lengths: 0..len-1 per sequence."""
    starts = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)


def tokenizer_fingerprint(spec: str) -> str:
    """What a tokenizer's counts depend on besides its spec: the digests of the files it loads."""
    if spec in ("whitespace", "char"):
        return spec
    path = Path(spec).expanduser()
    if not path.exists():
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(spec, "tokenizer.json")
        except Exception:
            found = None
        if isinstance(found, str):
            path = Path(found).parent
        else:
            packaged = packaged_minilm_path()
            path = packaged if packaged is not None else path
    if not path.exists():
        return spec
    files = [file for file in (sorted(path.glob("*")) if path.is_dir() else [path]) if file.is_file()]
    try:
        digests = file_digests(files)
    except OSError:  # unreadable: loading the tokenizer reports it
        digests = [f"{file.stat().st_size}:{file.stat().st_mtime_ns}" for file in files]
    listed = "\n".join(f"{file.name}:{digest}" for file, digest in zip(files, digests, strict=True))
    return f"{path.resolve()}:{hashlib.sha256(listed.encode()).hexdigest()[:16]}"


def tokenizer_identity(tokenizer: Tokenizer) -> dict[str, Any]:
    """The tokenizer as a counts file records it: its identity (kind, name, vocabulary size and
    hash) and, for a Hugging Face tokenizer, ``rules_sha256``: the digest of how it turns text into
    ids besides the vocabulary (normalizer, pre-tokenizer, the model's settings and merges). A cased
    and an uncased tokenizer of one vocabulary differ there, so their counts never merge."""
    identity = dict(tokenizer.identity())
    if identity.get("kind") != "hf":
        return identity
    backend = tokenizer.spec().backend_json
    if backend:
        rules = json.loads(backend)
        model = {key: value for key, value in (rules.get("model") or {}).items() if key != "vocab"}
        wanted = {"normalizer": rules.get("normalizer"), "pre_tokenizer": rules.get("pre_tokenizer"), "model": model}
        identity["rules_sha256"] = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]
    return identity


def _resize(matrix: sp.csr_array, shape: tuple[int, int]) -> sp.csr_array:
    if matrix.shape == shape:
        return matrix
    coo = matrix.tocoo()
    return sp.coo_array((coo.data, (coo.row, coo.col)), shape=shape).tocsr()


def _union_vocab(first: list[str], second: list[str]) -> tuple[list[str], np.ndarray]:
    index = {token: i for i, token in enumerate(first)}
    vocab = list(first)
    remap = np.empty(len(second), dtype=np.int64)
    for j, token in enumerate(second):
        if token not in index:
            index[token] = len(vocab)
            vocab.append(token)
        remap[j] = index[token]
    return vocab, remap


def _remap_columns(matrix: sp.csr_array, remap: np.ndarray, width: int) -> sp.csr_array:
    coo = matrix.tocoo()
    return sp.coo_array((coo.data, (coo.row, remap[coo.col])), shape=(matrix.shape[0], width)).tocsr()


def position_runs(indices: np.ndarray) -> list[list[int]]:
    """[[start, stop], ...] inclusive runs of consecutive indices, for compact reports."""
    if indices.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(indices) != 1)
    starts = np.concatenate([[indices[0]], indices[breaks + 1]])
    stops = np.concatenate([indices[breaks], [indices[-1]]])
    return [[int(a), int(b)] for a, b in zip(starts, stops, strict=True)]


MERGE_OPTIONS = ("max_length", "exclude_special", "add_special_tokens")


def check_mergeable(first: dict[str, Any], second: dict[str, Any]) -> None:
    """IncompatibleError unless counts with these metadata can be added (same vocabulary and options).

    Used by :meth:`PositionalCounts.merge`, and before any counting on the metadata a corpus
    *will* have, so a mix of tokenizers or max lengths is refused before the work, not after.
    """
    mine, theirs = first.get("tokenizer"), second.get("tokenizer")
    if (
        isinstance(mine, dict)
        and isinstance(theirs, dict)
        and not ("rules_sha256" in mine and "rules_sha256" in theirs)
    ):
        # a counts file written before the rules were recorded: compared by its vocabulary alone
        mine, theirs = ({k: v for k, v in d.items() if k != "rules_sha256"} for d in (mine, theirs))
    if _vocabulary_identity(mine) != _vocabulary_identity(theirs):
        raise IncompatibleError(
            f"cannot merge counts of different tokenizers ({short_name(mine)} vs {short_name(theirs)}); "
            "count both corpora with the same --tokenizer"
        )
    for key in MERGE_OPTIONS:
        if first.get(key) != second.get(key):
            raise IncompatibleError(
                f"cannot merge counts made with different {key} "
                f"({first.get(key)} vs {second.get(key)}); recount with the same options"
            )


def _vocabulary_identity(identity: Any) -> Any:
    """What must agree for counts to add up: the id -> token map and the rules that reach it, not
    the name it was loaded by (bert-base-uncased and all-MiniLM-L6-v2 share both)."""
    if isinstance(identity, dict):
        return {key: value for key, value in identity.items() if key != "name" or identity.get("vocab") == "built"}
    return identity


def short_name(identity: Any) -> str:
    """A tokenizer identity (or another recorded value) as an error message names it."""
    if isinstance(identity, dict):
        return str(identity.get("name", identity))
    return str(identity)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def bootstrap_counts(
    texts: Sequence[str],
    tokenizer: Tokenizer,
    samples: int,
    seed: int = 0,
    batch_size: int = _BATCH,
) -> Iterator[sp.csr_array]:
    """Count matrices of ``samples`` bootstrap resamples of the sequences (with replacement).

    The corpus is tokenized once; each resample draws multiplicities w_s ~ Multinomial(S, 1/S)
    over the S sequences and recounts with one weighted ``bincount`` over the distinct
    (position, token) keys: no re-tokenization, no Python loop per token.
    """
    stride = np.int64(tokenizer.max_length)
    key_parts, sequence_parts = [], []
    n_positions = 0
    for start in range(0, len(texts), batch_size):
        ids, lengths = tokenizer.encode_batch(texts[start : start + batch_size])
        if not ids.size:
            continue
        n_positions = max(n_positions, int(lengths.max()))
        key_parts.append(ids * stride + token_positions(lengths))
        sequence_parts.append(np.repeat(np.arange(start, start + len(lengths), dtype=np.int64), lengths))
    if not key_parts:
        raise InputError("the corpus has no tokens to resample")
    unique, inverse = np.unique(np.concatenate(key_parts), return_inverse=True)
    sequence = np.concatenate(sequence_parts)
    rows, cols = unique % stride, unique // stride
    shape = (n_positions, tokenizer.vocab_size)
    rng = np.random.default_rng(seed)
    for _ in range(samples):
        multiplicity = rng.multinomial(len(texts), np.full(len(texts), 1.0 / len(texts)))
        weights = np.bincount(inverse.ravel(), weights=multiplicity[sequence], minlength=unique.size)
        yield sp.csr_array(sp.coo_array((weights.astype(np.int64), (rows, cols)), shape=shape))
