"""Where texts come from: named datasets, local files, a local data directory, synthetic corpora.

A source string is resolved, in this order, to

1. an existing local **path**: a file (.txt / .tokens one text a line, .tsv / .csv with a
   header, .jsonl, each optionally .gz) or a folder of .txt files (one text a file); a folder
   of .jsonl / .parquet / ... files, or a glob, is a set of **shards** read in sorted order;
2. a **synthetic** spec: ``synthetic[:KIND][,key=value...]``
   (e.g. ``synthetic:shift,n=2000,length=64,vocab=5000,seed=1``);
3. ``stdlib``: the Python standard library's own source files, a folder of .py files
   (:class:`StdlibSource`);
4. a **named dataset** (``sst2``, ``imdb``, ``wikitext2``), looked up first in the local data
   directory (``--data-dir`` or ``GEOANALYZE_DATA_DIR``, laid out ``<name>/<split>.<ext>``)
   and then in the Hugging Face cache / hub through ``datasets.load_dataset``;
5. any other string: a Hugging Face hub dataset id.

Each corpus kind is one class of the :class:`CorpusSource` protocol (:class:`FileSource`,
:class:`FolderSource`, :class:`ShardsSource`, :class:`HubSource`, :class:`SyntheticSource`);
nothing is read until asked, and its ``fingerprint`` changes whenever the data would (the SHA-256
of local files' bytes with their format, a hub dataset's id, config and split, a synthetic spec),
so counts are cached and recorded by it. A new kind is a new subclass and one rule in
:func:`resolve_source`.

A corpus is read as rows, documents or packed sequences (:data:`READ_MODES`, ``--read``): a
:class:`Shard` in document mode joins WikiText articles (:func:`documents`); packing is the
counting's (``corpus.streaming``), as it needs the tokenizer.

Folder corpora, shard folders and globs skip hidden files and folders (a name starting with
'.': ``.git/``, ``.ipynb_checkpoints/``) unless ``include_hidden``.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import math
import os
import stat as _stat
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from ..cache import file_digests
from ..errors import DataNotFoundError, FormatError, InputError, first_line
from .formats import (
    BINARY_SUFFIXES,
    OTHER_COMPRESSION,
    SHARD_SUFFIXES,
    check_not_binary,
    decode,
    is_shard_file,
    iter_file_texts,
    pick_column,
    read_bytes,
    read_file,
)

DATA_DIR_ENV = "GEOANALYZE_DATA_DIR"
LOCAL_SUFFIXES = (
    ".tsv",
    ".jsonl.gz",
    ".jsonl",
    ".tokens",
    ".txt",
    ".csv",
    ".tsv.gz",
    ".txt.gz",
    ".csv.gz",
    ".tokens.gz",
    ".json",
    ".json.gz",
)


@dataclass(frozen=True)
class DatasetInfo:
    """A named dataset: where it lives on the hub and which column holds the text."""

    name: str
    hub_id: str
    config: str | None
    splits: tuple[str, ...]
    text_column: str
    description: str


DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            "sst2",
            "nyu-mll/glue",
            "sst2",
            ("train", "validation", "test"),
            "sentence",
            "GLUE SST-2: 67k movie-review phrases, lower-cased (Socher et al. 2013)",
        ),
        DatasetInfo(
            "imdb",
            "stanfordnlp/imdb",
            None,
            ("train", "test", "unsupervised"),
            "text",
            "IMDB Large Movie Review: 25k long reviews per split (Maas et al. 2011)",
        ),
        DatasetInfo(
            "wikitext2",
            "Salesforce/wikitext",
            "wikitext-2-v1",
            ("train", "validation", "test"),
            "text",
            "WikiText-2 v1 (tokenized): Wikipedia paragraphs, one a line (Merity et al. 2016)",
        ),
    )
}
ALIASES = {"glue/sst2": "sst2", "sst-2": "sst2", "wikitext-2": "wikitext2", "wikitext": "wikitext2"}
DEFAULT_SPLIT = "train"


# --- the corpus kinds ---------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusSource(ABC):
    """A resolved corpus, not yet read: the protocol every corpus kind follows.

    Attributes
    ----------
    name : short display name ("sst2", a file name, "synthetic:drift").
    location : the path, the glob, the hub id (``id`` or ``id/config``), or the synthetic spec.
    fingerprint : a string that changes whenever the data would change (it keys the counts cache
        and identifies the corpus in a counts file's header).
    split : the split read (None for plain files).
    text_column : the column or JSON key holding the text (tabular and JSON sources).
    kind : "file", "folder", "shards", "hub" or "synthetic" (one per class).
    """

    kind: ClassVar[str]
    name: str
    location: str
    fingerprint: str
    split: str | None = None
    text_column: str | None = None

    def describe(self) -> dict[str, str | None]:
        """A JSON description for metadata and reports."""
        return {"name": self.name, "kind": self.kind, "location": self.location, "split": self.split}

    def read(self, limit: int | None = None, read: str = "rows") -> list[str]:
        """Read the texts (blank ones dropped), at most ``limit`` of them; ``read="document"``: the
        documents (:func:`documents`). Packed sequences are token ids, not texts: refused here."""
        if limit is not None and limit < 1:
            raise InputError(f"--limit must be at least 1, got {limit}")
        if check_read_mode(read) == "packed":
            raise InputError(
                "--read packed is for counting; a checkpoint's forward pass and --bootstrap read whole "
                "texts: pass --read rows or --read document"
            )
        texts = [text for text in self.texts() if text.strip()]
        if read == "document":
            texts = list(documents(texts))
        if limit is not None:
            texts = texts[:limit]
        if not texts:
            raise InputError(f"the corpus {self.name} ({self.location}) holds no text; check the file or split")
        return texts

    def texts(self) -> Iterable[str]:
        """Every text, read whole (blank ones included; :meth:`read` drops them)."""
        return list(self.stream())

    @abstractmethod
    def stream(self) -> Iterator[str]:
        """The non-blank texts, in the order of :meth:`read`, as a stream (memory: one text or batch)."""

    def shards(self, files_per_shard: int) -> list[Shard]:
        """The units of streamed work, in corpus order (``files_per_shard``: one-text files per shard)."""
        return [Shard(self.name, self)]

    def files_read(self) -> set[str]:
        """The real paths of the local files the source reads (empty for hub and synthetic sources)."""
        return set()

    @abstractmethod
    def stream_fingerprint(self) -> str:
        """Changes whenever :meth:`stream`'s texts would (a shard's key in a work folder)."""

    def has_columns(self) -> bool:
        """Whether the texts come with named columns beside them (a label column can be read)."""
        return False


@dataclass(frozen=True)
class Shard:
    """One unit of streamed work: a name and the source it streams (one file, a group of one-text
    files, a synthetic spec or a hub stream). Picklable: a worker process reads the shard itself."""

    name: str
    source: CorpusSource
    #: how the texts are read (:data:`READ_MODES`): "document" joins WikiText articles (:func:`documents`)
    read: str = "rows"

    def texts(self) -> Iterator[str]:
        """The shard's non-blank texts, in order, as a stream (documents in document mode)."""
        if self.read == "document":
            yield from documents(self.source.stream())
            return
        yield from self.source.stream()

    def fingerprint(self) -> str:
        """Changes whenever the shard's texts would (file sizes and modification times)."""
        return self.source.stream_fingerprint()


@dataclass(frozen=True)
class FileSource(CorpusSource):
    """One local file (a named dataset's copy in the data directory too)."""

    kind: ClassVar[str] = "file"

    @classmethod
    def at(cls, path: Path, text_column: str | None, name: str | None = None, split: str | None = None) -> FileSource:
        """The source of an existing file, fingerprinted by its format and the digest of its bytes."""
        return cls(name or path.name, str(path.resolve()), content_fingerprint(path), split, text_column)

    def texts(self) -> list[str]:
        return read_file(Path(self.location), self.text_column)

    def stream(self) -> Iterator[str]:
        yield from iter_file_texts(Path(self.location), self.text_column)

    def files_read(self) -> set[str]:
        return {os.path.realpath(self.location)}

    def stream_fingerprint(self) -> str:
        return stream_fingerprint("file", self.location, [self.location], text_column=self.text_column)

    def has_columns(self) -> bool:
        """A table or JSON lines (not plain text)."""
        suffixes = [suffix.lower() for suffix in Path(self.location).suffixes if suffix.lower() != ".gz"]
        return bool(suffixes) and suffixes[-1] in (".tsv", ".csv", ".jsonl", ".json")


@dataclass(frozen=True)
class FolderSource(CorpusSource):
    """A folder of .txt files, one text a file, in sorted path order (nested folders included).

    ``members``: the files of one shard of the folder; empty, every .txt file under it (hidden
    ones too with ``include_hidden``).
    """

    kind: ClassVar[str] = "folder"
    members: tuple[str, ...] = ()
    include_hidden: bool = False

    def listed(self) -> list[Path]:
        """The folder's text files, in corpus order: every .txt file under it."""
        return visible_files(Path(self.location), "*.txt", self.include_hidden)

    def _files(self) -> list[Path]:
        if self.members:
            return [Path(m) for m in self.members]
        files = self.listed()
        if not files:
            raise InputError(
                f"{self.location} holds no .txt files; pass a folder of .txt files (one text each) or a file"
            )
        return files

    def texts(self) -> list[str]:
        return [decode(read_bytes(f), f).strip() for f in self._files()]

    def stream(self) -> Iterator[str]:
        for file in self._files():
            text = decode(read_bytes(file), file).strip()
            if text:
                yield text

    def shards(self, files_per_shard: int) -> list[Shard]:
        members = [str(f) for f in self._files()]
        return [
            Shard(f"{self.name}[{i}:]", replace(self, members=tuple(members[i : i + files_per_shard])))
            for i in range(0, len(members), files_per_shard)
        ]

    def files_read(self) -> set[str]:
        if self.members:
            return {os.path.realpath(file) for file in self.members}
        found = self.listed()
        return {os.path.realpath(file) for file in found if file.is_file()}

    def stream_fingerprint(self) -> str:
        return stream_fingerprint("files", self.location, self.members)


@dataclass(frozen=True)
class StdlibSource(FolderSource):
    """The Python standard library's own source files (``--dataset stdlib``): the *.py files under
    ``sysconfig.get_paths()["stdlib"]``, sorted, one text a file, long documents every machine has.

    Left out: installed packages (site-packages, dist-packages), the library's test suites
    (folders named test, tests, idle_test: some are deliberately not UTF-8) and hidden files.
    """

    @classmethod
    def here(cls) -> StdlibSource:
        """The standard library of the Python running this, fingerprinted by its files' contents."""
        root = stdlib_root()
        files = stdlib_files(root)
        listed = "\n".join(f"{f.relative_to(root)}:{d}" for f, d in zip(files, _digests(files), strict=True))
        fingerprint = f"stdlib:{hashlib.sha256(listed.encode()).hexdigest()[:32]}:{len(files)}"
        return cls("stdlib", str(root), fingerprint)

    def listed(self) -> list[Path]:
        return stdlib_files(Path(self.location))


#: the folders of the standard library that are not its own source (see :class:`StdlibSource`)
STDLIB_LEFT_OUT = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test"})


def stdlib_root() -> Path:
    """The standard library's folder of the Python running this (``sysconfig``'s "stdlib" path)."""
    import sysconfig

    return Path(sysconfig.get_paths()["stdlib"]).resolve()


def stdlib_files(root: Path) -> list[Path]:
    """The *.py files of the standard library at ``root``, sorted, without :data:`STDLIB_LEFT_OUT`."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):  # pruned: site-packages is not walked
        subfolders[:] = [name for name in subfolders if name not in STDLIB_LEFT_OUT and not name.startswith(".")]
        found += [Path(folder, name) for name in files if name.endswith(".py") and not name.startswith(".")]
    return sorted(path for path in found if path.is_file())


#: how a corpus is read: each text a sequence (truncated), each document whole, or texts packed
READ_MODES = ("rows", "document", "packed")


def check_read_mode(read: str) -> str:
    """``read`` if it is one of :data:`READ_MODES`, else an InputError naming them."""
    if read not in READ_MODES:
        raise InputError(f"--read {read!r} is not a way to read a corpus; choose one of {', '.join(READ_MODES)}")
    return read


def is_article_heading(text: str) -> bool:
    """A WikiText top-level heading line (`` = Title = `` stripped to ``= Title =``), not a section's
    ``= = Section = =``."""
    return len(text) > 4 and "\n" not in text and text.startswith("= ") and text.endswith(" =") and text[2] != "="


def documents(texts: Iterable[str]) -> Iterator[str]:
    """Texts read as documents: a WikiText article heading (:func:`is_article_heading`) starts a
    document, and its lines up to the next heading are joined with newlines; texts before the first
    heading (and every text of a corpus without headings: a file of a folder, a review) are
    documents of their own. A stream: one article held at a time."""
    article: list[str] = []
    for text in texts:
        if is_article_heading(text.strip()):
            if article:
                yield "\n".join(article)
            article = [text]
        elif article:
            article.append(text)
        else:
            yield text
    if article:
        yield "\n".join(article)


@dataclass(frozen=True)
class ShardsSource(CorpusSource):
    """The files of a glob, or of a folder of .jsonl / .parquet / ... files, read in that order."""

    kind: ClassVar[str] = "shards"
    #: the shard files, resolved, in order
    files: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, location: str, files: list[Path], text_column: str | None) -> ShardsSource:
        """The source of these files, fingerprinted by their formats and contents, in order."""
        listed = "\n".join(f"{_format_of(f)}:{d}" for f, d in zip(files, _digests(files), strict=True))
        fingerprint = f"shards:{hashlib.sha256(listed.encode()).hexdigest()[:32]}:{len(files)}"
        resolved = tuple(str(f.resolve()) for f in files)
        return cls(name, location, fingerprint, None, text_column, files=resolved)

    def stream(self) -> Iterator[str]:
        for file in self.files:
            yield from iter_file_texts(Path(file), self.text_column)

    def shards(self, files_per_shard: int) -> list[Shard]:
        """One shard a file."""
        pieces = (FileSource(Path(file).name, file, self.fingerprint, None, self.text_column) for file in self.files)
        return [Shard(piece.name, piece) for piece in pieces]

    def files_read(self) -> set[str]:
        return {os.path.realpath(file) for file in self.files}

    def stream_fingerprint(self) -> str:
        return stream_fingerprint("shards", self.location, self.files, text_column=self.text_column)


@dataclass(frozen=True)
class HubSource(CorpusSource):
    """A Hugging Face dataset: read whole from the cache, or streamed (:func:`iter_hub_texts`).

    ``tried``: where the resolver looked first (named in the error when the hub has it not
    either); ``data_files``: local files streamed through ``datasets`` (a builder name such as
    ``json`` as the location).
    """

    kind: ClassVar[str] = "hub"
    hub_config: str | None = None
    tried: tuple[str, ...] = ()
    data_files: tuple[str, ...] = ()

    def texts(self) -> list[str]:
        dataset = _load_hub(self)
        column = pick_column(dataset.column_names, self.text_column, Path(self.location))
        return [str(value) for value in dataset[column]]

    def stream(self) -> Iterator[str]:
        yield from iter_hub_texts(self, self.data_files)

    def stream_fingerprint(self) -> str:
        return stream_fingerprint(
            "hub", self.location, self.data_files, self.split, self.hub_config, text_column=self.text_column
        )

    def has_columns(self) -> bool:
        return True


@dataclass(frozen=True)
class SyntheticSource(CorpusSource):
    """A synthetic corpus of known marginals (:mod:`geoanalyze.corpus.synthetic`), by its normalised spec."""

    kind: ClassVar[str] = "synthetic"

    @classmethod
    def of(cls, spec: str) -> SyntheticSource:
        """The source of a spec, normalised (kind checked, options sorted): its name, location and fingerprint."""
        normalised = _normalise_synthetic_spec(spec)
        return cls(normalised, normalised, normalised)

    def texts(self) -> list[str]:
        from .synthetic import synthetic_corpus

        kind, options = parse_synthetic_spec(self.location)
        return synthetic_corpus(kind, **options).texts  # type: ignore[arg-type]

    def stream(self) -> Iterator[str]:
        yield from (text for text in self.texts() if text.strip())

    def stream_fingerprint(self) -> str:
        return stream_fingerprint("synthetic", self.location, ())


def stream_fingerprint(
    label: str,
    location: str,
    files: Iterable[str],
    split: str | None = None,
    hub_config: str | None = None,
    text_column: str | None = None,
) -> str:
    """A short hash of a stream's identity and its files' contents and modification times (a file
    that cannot be looked at is left out: reading it reports it)."""
    parts = [label, location, str(split), str(hub_config), str(text_column)]
    present = [file for file in files if os.path.exists(file)]
    parts += [f"{file}:{digest}" for file, digest in zip(present, _digests(present), strict=True)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


TABLE_SUFFIXES = (".tsv", ".csv", ".jsonl", ".json", ".parquet")


def reads_columns(source: CorpusSource) -> bool:
    """Whether a source's texts are read from a column or JSON key (``--text-column`` applies):
    tables, JSON lines, parquet shards, hub datasets."""
    if source.has_columns():
        return True
    return isinstance(source, ShardsSource) and any(_is_table(file) for file in source.files)


def _is_table(file: str) -> bool:
    suffixes = [suffix.lower() for suffix in Path(file).suffixes if suffix.lower() != ".gz"]
    return bool(suffixes) and suffixes[-1] in TABLE_SUFFIXES


def files_read(source: CorpusSource) -> set[str]:
    """The real paths of the local files a resolved source reads (empty for hub and synthetic sources)."""
    return source.files_read()


def is_synthetic_spec(source: str) -> bool:
    """``synthetic``, ``synthetic:KIND,...`` or ``synthetic,key=value,...``."""
    return source == "synthetic" or source.startswith(("synthetic:", "synthetic,"))


def default_tokenizer(source: str) -> str:
    """The tokenizer a corpus is counted with when none is named: bert-base-uncased (the
    paper's), or whitespace for synthetic specs, whose tokens are whole words ``w<id>``."""
    return "whitespace" if is_synthetic_spec(source) else "bert-base-uncased"


def data_dir_from_env(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The local data directory: the explicit argument, else $GEOANALYZE_DATA_DIR, else None."""
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or None
    return None if chosen is None else Path(chosen).expanduser()


def resolve_source(
    source: str,
    split: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    text_column: str | None = None,
    include_hidden: bool = False,
) -> CorpusSource:
    """Resolve a source string to the :class:`CorpusSource` of its kind (see the module docstring).

    A local path comes first: a file named like a synthetic spec (``synthetic:drift``) is read,
    and a note says so (the spec is then reached only from another folder or by renaming the file).
    """
    _check_utf8_names([source])
    path = _checked_path(source)
    local = _local_source(source, path, text_column, include_hidden)
    if local is not None:
        if is_synthetic_spec(source):
            from ..notes import note

            note(
                f"{source} is the local {local.kind} {local.location}, not the synthetic corpus of that spec; "
                "rename the file (or run from another folder) to count the synthetic one"
            )
        return local
    if is_synthetic_spec(source):
        return SyntheticSource.of(source)
    if source == "stdlib":
        return StdlibSource.here()
    info = DATASETS.get(ALIASES.get(source.lower(), source.lower()))
    if info is None and _looks_like_path(source):
        raise InputError(f"file not found: {source}; check the path")
    split = split or DEFAULT_SPLIT
    if info is not None:
        return _named_dataset(info, split, data_dir_from_env(data_dir), text_column)
    return HubSource(
        source,
        source,
        f"hub:{source}:None:{split}",
        split,
        text_column,
        tried=(
            f"a local file or folder named {source!r} (absent)",
            f"known datasets ({', '.join(DATASETS)}{_typo(source)})",
        ),
    )


def _typo(source: str) -> str:
    """``; did you mean sst2?`` when ``source`` is close to a named dataset (sts2), else nothing."""
    from difflib import get_close_matches

    close = get_close_matches(source.lower(), list(DATASETS), n=1, cutoff=0.6)
    return f"; did you mean --dataset {close[0]}?" if close else ""


def _local_source(source: str, path: Path, text_column: str | None, include_hidden: bool) -> CorpusSource | None:
    """The source of an existing path (a folder, a file) or of a glob; None when the string names neither."""
    if path.is_dir():
        shard_files = _shard_files_in(path, include_hidden)
        _check_utf8_names(shard_files)
        if shard_files:
            return ShardsSource.of(path.name, str(path.resolve()), shard_files, text_column)
        fingerprint = content_fingerprint(path, include_hidden)
        return FolderSource(path.name, str(path.resolve()), fingerprint, include_hidden=include_hidden)
    if not path.exists() and glob.has_magic(source):
        return ShardsSource.of(source, source, _glob_shards(source, path, include_hidden), text_column)
    if path.is_file():
        check_not_binary(path)
        return FileSource.at(path, text_column)
    if path.exists() or path.is_symlink():
        raise InputError(_not_a_regular_file(path))
    return None


def _glob_shards(source: str, path: Path, include_hidden: bool = False) -> list[Path]:
    """The files a glob matches, in sorted order; every one must be a shard (hidden names match
    only with ``include_hidden``, or where the pattern spells the dot)."""
    found = glob.glob(str(path), recursive=True, include_hidden=include_hidden)
    matches = sorted(Path(m) for m in found if Path(m).is_file())
    _check_utf8_names(matches)
    if not matches:
        raise InputError(f"no file matches {source}; check the pattern (quote it so the shell leaves it alone)")
    foreign = [m for m in matches if not is_shard_file(m)]
    if foreign:
        raise InputError(
            f"{foreign[0]} (matched by {source}) is not a corpus shard; "
            f"shards end in {', '.join(SHARD_SUFFIXES)}: narrow the pattern"
        )
    return matches


def _named_dataset(info: DatasetInfo, split: str, directory: Path | None, text_column: str | None) -> CorpusSource:
    """A named dataset: its copy in the local data directory, else the hub (which names where else it looked)."""
    if split not in info.splits:
        raise InputError(f"{info.name} has no split {split!r}; choose one of {', '.join(info.splits)}")
    tried: list[str] = []
    if directory is None:
        tried.append(f"a local data directory (none set: pass --data-dir or set {DATA_DIR_ENV})")
    else:
        for suffix in LOCAL_SUFFIXES:
            candidate = directory / info.name / f"{split}{suffix}"
            if candidate.is_file():
                return FileSource.at(candidate, text_column or info.text_column, name=info.name, split=split)
        tried.append(_where_looked(info, split, directory))
    return HubSource(
        info.name,
        info.hub_id,
        f"hub:{info.hub_id}:{info.config}:{split}",
        split,
        text_column or info.text_column,
        hub_config=info.config,
        tried=tuple(tried),
    )


def _where_looked(info: DatasetInfo, split: str, directory: Path) -> str:
    """The data directory's files a split was looked for in, with a hint at the splits it holds."""
    present = sorted({f.name.split(".")[0] for f in (directory / info.name).glob("*.*") if f.is_file()})
    hint = f" (it holds split {', '.join(present)}: pass --split {present[0]})" if present else ""
    if not directory.is_dir():
        state = "is a file, not a folder" if directory.exists() else "does not exist"
        hint = f" (the data directory {directory} {state})"
    return f"{directory / info.name}/{split}.{{{','.join(s.lstrip('.') for s in LOCAL_SUFFIXES)}}}{hint}"


def load_texts(
    source: str,
    split: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    text_column: str | None = None,
    limit: int | None = None,
) -> list[str]:
    """Load the texts of a corpus: a dataset name, a local path or a synthetic spec.

    Parameters
    ----------
    source : "sst2", "imdb", "wikitext2", a hub dataset id, a file or folder path, or
        ``synthetic[:KIND][,key=value...]``.
    split : dataset split (default "train"); ignored for local files.
    data_dir : a local folder laid out ``<name>/<split>.<ext>`` that stands in for the hub
        (default: $GEOANALYZE_DATA_DIR).
    text_column : column or JSON key with the text (tabular / JSON sources).
    limit : read at most this many texts (the first ones).

    Returns
    -------
    list of non-blank texts, in corpus order.
    """
    return resolve_source(source, split, data_dir, text_column).read(limit)


def visible_files(folder: Path, pattern: str, include_hidden: bool = False) -> list[Path]:
    """The paths under ``folder`` matching ``pattern``, in sorted order, none hidden: a file or folder
    whose name starts with '.' (``.git/``, ``.ipynb_checkpoints/``, ``.DS_Store``) is not the corpus,
    unless ``include_hidden`` (``--include-hidden``)."""
    return sorted(
        path
        for path in folder.rglob(pattern)
        if include_hidden or not any(part.startswith(".") for part in path.relative_to(folder).parts)
    )


def _shard_files_in(folder: Path, include_hidden: bool = False) -> list[Path]:
    """The shard files of a folder, or [] for a folder of .txt files (one text a file, as before).

    A folder holding .jsonl / .parquet / .tsv / ... files (and no .txt) is a set of shards read in
    sorted order; for .txt shards with one text a line, pass a glob (``'corpus/*.txt'``).
    """
    listed = visible_files(folder, "*", include_hidden)
    files = [f for f in listed if f.is_file() and is_shard_file(f) and f.suffix.lower() != ".txt"]
    if files and visible_files(folder, "*.txt", include_hidden):
        raise InputError(
            f"{folder} mixes .txt files (one text a file) with {files[0].name}-like shards; "
            "pass a glob that picks one kind, e.g. "
            f"'{folder}/*{''.join(files[0].suffixes)}'"
        )
    return files


def _checked_path(source: str) -> Path:
    """The path a source string names, refusing strings no corpus can have (checked before any
    look-up: an empty string would otherwise be the current folder)."""
    if not source.strip():
        raise InputError(
            f"the corpus name is empty ({source!r}; an unset shell variable?); pass a dataset name, a file or a folder"
        )
    if "\x00" in source:
        raise InputError(f"the corpus name {source!r} holds a NUL character; pass a dataset name, a file or a folder")
    try:
        # only a leading ~ is the home folder: Path("./~/c.txt") drops the "./" and would expand it
        path = Path(source).expanduser() if source.startswith("~") else Path(source)
    except RuntimeError as exc:  # ~user of no such user
        raise InputError(f"cannot expand {source}: {exc}; write the path in full") from exc
    try:
        os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise InputError(f"the path {_short(source)} is too long for the file system; shorten it") from exc
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise InputError(
                f"cannot read {path}: permission denied; check the permissions of it and its folders"
            ) from exc
        if exc.errno == errno.ELOOP:
            raise InputError(f"{path} is a loop of symbolic links; fix the link") from exc
        if exc.errno != errno.ENOTDIR:
            raise InputError(f"cannot read {path}: {exc.strerror}; check the path") from exc
    return path


def _short(text: str, limit: int = 80) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _not_a_regular_file(path: Path) -> str:
    """Why an existing path that is neither a file nor a folder cannot be read as a corpus."""
    if path.is_symlink() and not path.exists():
        return f"{path} is a broken symbolic link (to {os.readlink(path)}); fix the link or pass the file itself"
    mode = path.stat().st_mode
    what = (
        "a named pipe (FIFO)"
        if _stat.S_ISFIFO(mode)
        else "a socket"
        if _stat.S_ISSOCK(mode)
        else "a device"
        if _stat.S_ISCHR(mode) or _stat.S_ISBLK(mode)
        else "not a regular file"
    )
    return f"{path} is {what}, not a regular file; write the texts to a file and pass that"


def _looks_like_path(source: str) -> bool:
    return source.startswith((".", "/", "~")) or source.lower().endswith(
        (*LOCAL_SUFFIXES, ".gz", ".parquet", *BINARY_SUFFIXES, *OTHER_COMPRESSION)
    )


def content_fingerprint(path: Path, include_hidden: bool = False) -> str:
    """What a local file or folder corpus holds, whatever its path: a file's format, the digest of
    its bytes and its mtime; a folder's .txt files' relative names (their order is the corpus
    order), digests and mtimes."""
    if path.is_dir():
        files = visible_files(path, "*.txt", include_hidden)
        _check_utf8_names(files)
        listed = "\n".join(f"{f.relative_to(path)}:{d}" for f, d in zip(files, _digests(files), strict=True))
        return f"folder:{hashlib.sha256(listed.encode()).hexdigest()[:32]}:{len(files)}"
    return f"file:{_format_of(path)}:{_digests([path])[0]}"


def _check_utf8_names(names: Iterable[str | os.PathLike[str]]) -> None:
    """Refuse a name of bytes that are not UTF-8 (a Latin-1 name from an old archive): every
    identity, header and output of ours is UTF-8 text."""
    for name in names:
        text = os.fspath(name)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(text).decode("utf-8", "backslashreplace")
            raise InputError(
                f"the name {shown} is not valid UTF-8; rename it to UTF-8 (e.g. convmv -f latin1 -t utf-8 --notest)"
            ) from None


def _format_of(path: Path) -> str:
    """The suffixes a file is read by (``.tsv.gz``): the same bytes read as .txt and .tsv differ."""
    return "".join(path.suffixes).lower()


def _digests(files: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Each file's content digest and modification time (a touched file is recounted: cautious);
    for a list that cannot be read (no permission, gone) the stat of each, so resolving still
    works and reading reports the problem in its own words."""
    listed = list(files)
    try:
        return [
            f"{digest}:{os.stat(file).st_mtime_ns}" for file, digest in zip(listed, file_digests(listed), strict=True)
        ]
    except OSError:
        return [_stat_of(file) for file in listed]


def _stat_of(file: str | os.PathLike[str]) -> str:
    try:
        stat = os.stat(file)
    except OSError:
        return f"unreadable:{os.path.realpath(file)}"
    return f"stat:{os.path.realpath(file)}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}:{stat.st_ino}"


def iter_hub_texts(source: HubSource, data_files: tuple[str, ...] = (), batch_rows: int = 1024) -> Iterator[str]:
    """The texts of a hub dataset, streamed: nothing is downloaded in full.

    Online, ``datasets``' streaming mode reads the remote files record by record. Offline
    (HF_HUB_OFFLINE, or the hub does not answer) the cached copy is used as before, read in
    batches from its memory-mapped Arrow files. ``data_files`` (with a builder name such as
    ``json`` as the location) streams local files through the same code.
    """
    from ..hub import hub_offline

    streaming = bool(data_files) or not hub_offline()
    dataset = _load_hub(source, streaming=streaming, data_files=data_files)
    column: str | None = None
    try:
        for batch in dataset.iter(batch_size=batch_rows):
            if column is None:
                column = pick_column(batch.keys(), source.text_column, Path(source.location))
            for value in batch[column]:
                text = str(value)
                if text.strip():
                    yield text
    except (InputError, FormatError):
        raise
    except Exception as exc:  # a dropped connection or a corrupt remote file, mid-stream
        raise FormatError(f"reading {source.name} (split {source.split}) failed: {first_line(exc)}; run again") from exc


# --- the hub ------------------------------------------------------------------------------


def _load_hub(source: HubSource, streaming: bool = False, data_files: tuple[str, ...] = ()) -> Any:
    from ..hub import hub_offline

    tried = list(source.tried)
    try:
        import datasets

        if hub_offline():
            # Unreachable or forbidden: go straight to the cache instead of retrying for half a
            # minute. Both libraries read the flag at import time, hence the attributes.
            import huggingface_hub.constants

            huggingface_hub.constants.HF_HUB_OFFLINE = True
            datasets.config.HF_HUB_OFFLINE = True

        datasets.logging.set_verbosity_error()
        datasets.disable_progress_bars()
        files = list(data_files) or None  # None: the dataset's own files
        return datasets.load_dataset(
            source.location, source.hub_config, split=source.split, streaming=streaming, data_files=files
        )
    except Exception as exc:  # offline, unknown id, missing split: all reported the same way
        where = "the Hugging Face cache" if hub_offline() else "the Hugging Face cache and hub"
        tried.append(f"{where} ({first_line(exc)})")
        raise DataNotFoundError(
            f"dataset {source.name!r} (split {source.split}) not found; tried {'; '.join(tried)}. "
            "Pass a local file, or --data-dir pointing at a folder laid out <name>/<split>.<tsv|jsonl.gz|tokens|txt>"
        ) from exc


# --- synthetic ----------------------------------------------------------------------------

_SYNTHETIC_KEYS = {"n": "n_sequences", "length": "length", "vocab": "vocab_size", "seed": "seed"}


def parse_synthetic_spec(spec: str) -> tuple[str, dict[str, float]]:
    """Split ``synthetic:KIND,key=value,...`` into (kind, keyword arguments)."""
    body = spec.split(":", 1)[1] if ":" in spec else spec.partition(",")[2]
    parts = [part.strip() for part in body.split(",") if part.strip()]
    kind = "drift"
    if parts and "=" not in parts[0]:
        kind = parts.pop(0)
    options: dict[str, float] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            raise InputError(f"bad synthetic option {part!r} in {spec!r}; write key=value")
        try:
            number = float(value)
        except ValueError as exc:
            raise InputError(f"synthetic option {key}={value!r} is not a number") from exc
        if not math.isfinite(number):
            raise InputError(f"synthetic option {key}={value!r} must be a finite number")
        name = _SYNTHETIC_KEYS.get(key.strip(), key.strip())
        if name in options:  # n=300,...,n=5 (or n and its long name): the last would silently win
            raise InputError(f"synthetic option {key.strip()} is given twice in {spec!r}; keep one")
        options[name] = int(number) if number.is_integer() else number
    return kind, options


def _normalise_synthetic_spec(spec: str) -> str:
    kind, options = parse_synthetic_spec(spec)
    from .synthetic import KINDS

    if kind not in KINDS:
        raise InputError(f"unknown synthetic kind {kind!r}; choose one of {', '.join(KINDS)}")
    short = {v: k for k, v in _SYNTHETIC_KEYS.items()}
    rest = ",".join(f"{short.get(k, k)}={v}" for k, v in sorted(options.items()))
    return f"synthetic:{kind}" + (f",{rest}" if rest else "")
