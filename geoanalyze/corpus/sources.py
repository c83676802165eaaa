"""Where texts come from: named datasets, local files, a local data directory, synthetic corpora.

A source string is resolved, in this order, to

1. an existing local **path**: a file (.txt / .tokens one text a line, .tsv / .csv with a
   header, .jsonl, each optionally .gz) or a folder of .txt files (one text a file);
2. a **synthetic** spec: ``synthetic[:KIND][,key=value...]``
   (e.g. ``synthetic:shift,n=2000,length=64,vocab=5000,seed=1``);
3. a **named dataset** (``sst2``, ``imdb``, ``wikitext2``), looked up first in the local data
   directory (``--data-dir`` or ``GEOANALYZE_DATA_DIR``, laid out ``<name>/<split>.<ext>``)
   and then in the Hugging Face cache / hub through ``datasets.load_dataset``;
4. any other string: a Hugging Face hub dataset id.

Nothing is read until :meth:`CorpusSource.read`; :attr:`CorpusSource.fingerprint` changes
whenever the data would, so counts can be cached by it.
"""

from __future__ import annotations

import csv
import errno
import glob
import gzip
import hashlib
import io
import json
import math
import os
import stat as _stat
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataNotFoundError, FormatError, InputError, first_line

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
TEXT_COLUMN_GUESSES = ("text", "sentence", "review", "content", "document")


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


@dataclass(frozen=True)
class CorpusSource:
    """A resolved corpus: what it is and where, not yet read.

    Attributes
    ----------
    name : short display name ("sst2", a file name, "synthetic:drift").
    kind : "file", "folder", "hub" or "synthetic".
    location : the path, the hub id (``id`` or ``id/config``), or the synthetic spec.
    split : the split read (None for plain files).
    text_column : the column or JSON key holding the text (tabular and JSON sources).
    fingerprint : a string that changes whenever the data would change.
    tried : where else the resolver looked first (for error messages).
    """

    name: str
    kind: str
    location: str
    split: str | None
    text_column: str | None
    fingerprint: str
    hub_config: str | None = None
    tried: tuple[str, ...] = field(default=())
    #: the shard files of a "shards" source (a glob, or a folder of .jsonl/.parquet/... files), in order
    files: tuple[str, ...] = field(default=())

    def describe(self) -> dict[str, str | None]:
        """A JSON description for metadata and reports."""
        return {"name": self.name, "kind": self.kind, "location": self.location, "split": self.split}

    def read(self, limit: int | None = None) -> list[str]:
        """Read the texts (blank ones dropped), at most ``limit`` of them."""
        if limit is not None and limit < 1:
            raise InputError(f"--limit must be at least 1, got {limit}")
        if self.kind == "synthetic":
            texts = _read_synthetic(self.location)
        elif self.kind == "folder":
            texts = _read_folder(Path(self.location))
        elif self.kind == "hub":
            texts = _read_hub(self)
        elif self.kind == "shards":
            texts = [text for file in self.files for text in iter_file_texts(Path(file), self.text_column)]
        else:
            texts = _read_file(Path(self.location), self.text_column)
        texts = [text for text in texts if text.strip()]
        if limit is not None:
            texts = texts[:limit]
        if not texts:
            raise InputError(f"the corpus {self.name} ({self.location}) holds no text; check the file or split")
        return texts


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
) -> CorpusSource:
    """Resolve a source string to a :class:`CorpusSource` (see the module docstring)."""
    path = _checked_path(source)
    if path.is_dir():
        shard_files = _shard_files_in(path)
        if shard_files:
            return _shard_source(path.name, str(path.resolve()), shard_files, text_column)
        return CorpusSource(path.name, "folder", str(path.resolve()), None, None, _stat_fingerprint(path))
    if not path.exists() and glob.has_magic(source):
        matches = sorted(Path(m) for m in glob.glob(str(path), recursive=True) if Path(m).is_file())
        if not matches:
            raise InputError(f"no file matches {source}; check the pattern (quote it so the shell leaves it alone)")
        foreign = [m for m in matches if not _is_shard_file(m)]
        if foreign:
            raise InputError(
                f"{foreign[0]} (matched by {source}) is not a corpus shard; "
                f"shards end in {', '.join(SHARD_SUFFIXES)}: narrow the pattern"
            )
        return _shard_source(source, source, matches, text_column)
    if path.is_file():
        check_not_binary(path)
        return CorpusSource(path.name, "file", str(path.resolve()), None, text_column, _stat_fingerprint(path))
    if path.exists() or path.is_symlink():
        raise InputError(_not_a_regular_file(path))
    if is_synthetic_spec(source):
        spec = _normalise_synthetic_spec(source)
        return CorpusSource(spec, "synthetic", spec, None, None, spec)
    name = ALIASES.get(source.lower(), source.lower())
    info = DATASETS.get(name)
    if info is None and _looks_like_path(source):
        raise InputError(f"file not found: {source}; check the path")
    split = split or DEFAULT_SPLIT
    tried: list[str] = []
    if info is not None:
        if split not in info.splits:
            raise InputError(f"{info.name} has no split {split!r}; choose one of {', '.join(info.splits)}")
        directory = data_dir_from_env(data_dir)
        if directory is None:
            tried.append(f"a local data directory (none set: pass --data-dir or set {DATA_DIR_ENV})")
        else:
            for suffix in LOCAL_SUFFIXES:
                candidate = directory / info.name / f"{split}{suffix}"
                if candidate.is_file():
                    return CorpusSource(
                        info.name,
                        "file",
                        str(candidate.resolve()),
                        split,
                        text_column or info.text_column,
                        _stat_fingerprint(candidate),
                    )
            present = sorted({f.name.split(".")[0] for f in (directory / info.name).glob("*.*") if f.is_file()})
            hint = f" (it holds split {', '.join(present)}: pass --split {present[0]})" if present else ""
            if not directory.is_dir():
                state = "is a file, not a folder" if directory.exists() else "does not exist"
                hint = f" (the data directory {directory} {state})"
            tried.append(f"{directory / info.name}/{split}.{{{','.join(s.lstrip('.') for s in LOCAL_SUFFIXES)}}}{hint}")
        return CorpusSource(
            info.name,
            "hub",
            info.hub_id,
            split,
            text_column or info.text_column,
            f"hub:{info.hub_id}:{info.config}:{split}",
            hub_config=info.config,
            tried=tuple(tried),
        )
    return CorpusSource(
        source,
        "hub",
        source,
        split,
        text_column,
        f"hub:{source}:None:{split}",
        tried=(f"a local file or folder named {source!r} (absent)", f"known datasets ({', '.join(DATASETS)})"),
    )


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


SHARD_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".txt", ".txt.gz", ".tokens", ".tsv", ".csv", ".json")


def _is_shard_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(SHARD_SUFFIXES) or name.endswith(tuple(f"{s}.gz" for s in SHARD_SUFFIXES))


def _shard_files_in(folder: Path) -> list[Path]:
    """The shard files of a folder, or [] for a folder of .txt files (one text a file, as before).

    A folder holding .jsonl / .parquet / .tsv / ... files (and no .txt) is a set of shards read in
    sorted order; for .txt shards with one text a line, pass a glob (``'corpus/*.txt'``).
    """
    files = sorted(f for f in folder.rglob("*") if f.is_file() and _is_shard_file(f) and f.suffix.lower() != ".txt")
    if files and any(folder.rglob("*.txt")):
        raise InputError(
            f"{folder} mixes .txt files (one text a file) with {files[0].name}-like shards; "
            "pass a glob that picks one kind, e.g. "
            f"'{folder}/*{''.join(files[0].suffixes)}'"
        )
    return files


def files_read(source: CorpusSource) -> set[str]:
    """The real paths of the local files a resolved source reads (empty for hub and synthetic sources)."""
    if source.kind == "shards":
        return {os.path.realpath(file) for file in source.files}
    if source.kind == "file":
        return {os.path.realpath(source.location)}
    if source.kind == "folder":
        return {os.path.realpath(file) for file in Path(source.location).rglob("*.txt") if file.is_file()}
    return set()


def _shard_source(name: str, location: str, files: list[Path], text_column: str | None) -> CorpusSource:
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{_stat_fingerprint(file)}\n".encode())
    fingerprint = f"shards:{digest.hexdigest()[:16]}:{len(files)}"
    return CorpusSource(
        name, "shards", location, None, text_column, fingerprint, files=tuple(str(f.resolve()) for f in files)
    )


CORPUS_FORMATS = (
    "a text corpus (.txt / .tokens one text a line, .jsonl, .json, .tsv, .csv, each optionally .gz; "
    ".parquet) or a folder of .txt files"
)

#: suffixes of files that are never a corpus, with what they are
BINARY_SUFFIXES = {
    ".safetensors": "a safetensors tensor file",
    ".npy": "a NumPy array (.npy)",
    ".npz": "a NumPy archive (.npz)",
    ".pt": "a PyTorch file (.pt)",
    ".pth": "a PyTorch file (.pth)",
    ".ckpt": "a model checkpoint file (.ckpt)",
    ".bin": "a binary file (.bin, e.g. pytorch_model.bin)",
    ".pkl": "a Python pickle",
    ".pickle": "a Python pickle",
    ".joblib": "a joblib pickle",
    ".h5": "an HDF5 file",
    ".hdf5": "an HDF5 file",
    ".onnx": "an ONNX model",
    ".gguf": "a GGUF model file",
    ".msgpack": "a msgpack file",
    ".arrow": "an Arrow file",
    ".feather": "an Arrow (feather) file",
    ".zip": "a zip archive",
    ".tar": "a tar archive",
    ".tgz": "a gzipped tar archive",
    ".7z": "a 7-Zip archive",
    ".rar": "a RAR archive",
    ".png": "a PNG image",
    ".jpg": "a JPEG image",
    ".jpeg": "a JPEG image",
    ".gif": "a GIF image",
    ".webp": "a WebP image",
    ".svg": "an SVG image",
    ".pdf": "a PDF document",
    ".so": "a shared library",
    ".exe": "an executable",
    ".whl": "a Python wheel",
}

#: compressed formats the readers do not decompress (only gzip is read)
OTHER_COMPRESSION = {".bz2": "bzip2", ".xz": "xz", ".lzma": "lzma", ".zst": "zstd", ".lz4": "lz4", ".z": "compress"}

_MAGIC = (
    (b"\x93NUMPY", "a NumPy array (.npy)"),
    (b"PK\x03\x04", "a zip archive (a .zip, .npz or PyTorch .pt file)"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"GGUF", "a GGUF model file"),
    (b"\x7fELF", "an executable"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
    (b"ARROW1", "an Arrow file"),
)


def binary_kind(path: Path) -> str | None:
    """What a file is when it is a binary format that is never a corpus (by name, then by its first
    bytes), or None for a file that may be text."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in BINARY_SUFFIXES:
        return BINARY_SUFFIXES[suffixes[-1]]
    if suffixes and suffixes[-1] in OTHER_COMPRESSION:
        return f"a {OTHER_COMPRESSION[suffixes[-1]]}-compressed file"
    try:
        with path.open("rb") as handle:
            head = handle.read(512)
    except OSError:
        return None  # the reader reports it, with its path
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "a Python pickle"
    if head.startswith(b"BZh") and head[4:10] == b"1AY&SY":
        return "a bzip2-compressed file"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "a tar archive"
    if head.startswith(b"\x1f\x8b") and suffixes[-1:] != [".gz"]:
        return "a gzip-compressed file not named .gz"
    if len(head) >= 9 and head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") < path.stat().st_size:
        return "a safetensors tensor file"
    return None


def check_not_binary(path: Path) -> None:
    """Refuse a binary file given as a corpus, naming what it is and what to pass instead."""
    what = binary_kind(path)
    if what is None:
        return
    if what == "a gzip-compressed file not named .gz":
        raise InputError(f"{path} is gzip-compressed but not named .gz; rename it to {path.name}.gz")
    if what.endswith("-compressed file"):
        raise InputError(
            f"{path} is {what}, and only gzip (.gz) corpora are read; decompress it or recompress with gzip"
        )
    if what == "a safetensors tensor file":
        from ..io import file_kind

        kind = file_kind(path) if path.suffix == ".safetensors" else None
        if kind == "counts":
            raise InputError(
                f"{path} holds geoanalyze counts, not a corpus; give it as a source of marginals / distances / mds, "
                "or pass the corpus it was counted from here"
            )
        if kind is not None:
            raise InputError(f"{path} holds geoanalyze {kind}, not a corpus; pass {CORPUS_FORMATS}")
    raise InputError(f"{path} is {what}, not a corpus; pass {CORPUS_FORMATS}")


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
        path = Path(source).expanduser()
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


def _stat_fingerprint(path: Path) -> str:
    if path.is_dir():
        files = sorted(path.rglob("*.txt"))
        digest = hashlib.sha256()
        for f in files:
            stat = f.stat()
            digest.update(f"{f.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
        return f"folder:{path.resolve()}:{digest.hexdigest()[:16]}:{len(files)}"
    stat = path.stat()
    return f"file:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


# --- local files --------------------------------------------------------------------------


def _decode(data: bytes, path: Path) -> str:
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark (Excel, Notepad) is not text
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FormatError(
            f"{path}, line {line}: not valid UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from exc
    nul = text.find("\x00")
    if nul >= 0:
        raise FormatError(_nul_message(path, text[:nul].count("\n") + 1, len(text[:nul].encode())))
    return text


def _nul_message(path: Path, line: int, offset: int) -> str:
    return (
        f"{path}, line {line}: a NUL byte (offset {offset}), which text never holds; "
        "this looks like a binary file: pass a UTF-8 text corpus"
    )


#: what a broken compressed stream raises: gzip.BadGzipFile and truncation (OSError, EOFError), zlib.error
_DECOMPRESSION_ERRORS = (OSError, EOFError, zlib.error)


def _unreadable(path: Path, exc: BaseException) -> InputError:
    """The one error of a file that cannot be read (permission, corrupt or truncated compression)."""
    if isinstance(exc, PermissionError):
        return InputError(f"cannot read {path}: permission denied; check its permissions")
    if path.suffix.lower() == ".gz" and not isinstance(exc, (IsADirectoryError, FileNotFoundError)):
        return FormatError(
            f"{path} is not valid gzip data ({first_line(exc)}); the file is corrupt or incomplete: "
            "download or compress it again"
        )
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else first_line(exc)
    return FormatError(f"cannot read {path} ({reason}); check that the file is complete")


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix.lower() == ".gz":
            with gzip.open(path, "rb") as handle:
                return handle.read()
        return path.read_bytes()
    except _DECOMPRESSION_ERRORS as exc:
        raise _unreadable(path, exc) from exc


def _base_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _read_file(path: Path, text_column: str | None) -> list[str]:
    suffix = _base_suffix(path)
    if suffix == ".parquet":
        return list(_iter_parquet(path, text_column))
    text = _decode(_read_bytes(path), path)
    if suffix in (".tsv", ".csv"):
        return _read_table(text, path, text_column, delimiter="\t" if suffix == ".tsv" else ",")
    if suffix in (".jsonl", ".json"):
        return _read_jsonl(text, path, text_column)
    # A line ends at "\n" only: str.splitlines() would also cut texts at \x85, \u2028, \x0c, ...
    return [line.strip() for line in text.split("\n")]


def _pick_column(columns: Iterable[str], text_column: str | None, path: Path) -> str:
    columns = list(columns)
    if text_column is not None:
        if text_column not in columns:
            raise InputError(
                f"{path} has no column {text_column!r}; its columns are {', '.join(columns)}: pass one with --text-column"
            )
        return text_column
    for guess in TEXT_COLUMN_GUESSES:
        if guess in columns:
            return guess
    raise InputError(
        f"{path}: no text column found among {', '.join(columns) or '(none)'}; pass one with --text-column"
    )


def _read_table(text: str, path: Path, text_column: str | None, delimiter: str) -> list[str]:
    # GLUE-style TSV files are unquoted: a quote character is part of the text.
    # newline="": quoted CSV fields may hold line breaks, and only \n / \r end a row.
    if delimiter == "\t":
        rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=csv.QUOTE_NONE)
    else:
        rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(rows, None)
        if header is None:
            raise InputError(f"{path} is empty; pass a file with a header line and texts")
        column = header.index(_pick_column(header, text_column, path))
        texts = []
        for row in rows:
            if not row:
                continue
            if column >= len(row):
                raise FormatError(
                    f"{path}, line {rows.line_num}: {len(row)} fields, the header has {len(header)}; fix the row"
                )
            texts.append(row[column])
    except csv.Error as exc:  # an over-long field, a stray quote in strict places, a NUL byte
        raise FormatError(f"{path}, line {rows.line_num}: {exc}; fix the file or convert it to .jsonl") from exc
    return texts


def _read_jsonl(text: str, path: Path, text_column: str | None) -> list[str]:
    return list(_jsonl_values(text.split("\n"), path, text_column))


def _jsonl_values(lines: Iterable[str], path: Path, text_column: str | None) -> Iterator[str]:
    """The text field of each JSON line (blank lines skipped), with the line number in errors."""
    column: str | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}, line {number}: not valid JSON ({exc.msg}); fix or remove the line") from exc
        except (RecursionError, ValueError) as exc:  # nesting too deep, an integer of thousands of digits
            raise FormatError(
                f"{path}, line {number}: JSON beyond what is read ({first_line(exc, 80)}); fix or remove the line"
            ) from exc
        if not isinstance(record, dict):
            raise FormatError(f"{path}, line {number}: expected a JSON object per line")
        if column is None:
            column = _pick_column(record.keys(), text_column, path)
        value = record.get(column)
        if not isinstance(value, str):
            raise FormatError(f"{path}, line {number}: field {column!r} is missing or not a string")
        yield value


def _read_folder(path: Path) -> list[str]:
    files = sorted(path.rglob("*.txt"))
    if not files:
        raise InputError(f"{path} holds no .txt files; pass a folder of .txt files (one text each) or a file")
    return [_decode(_read_bytes(f), f).strip() for f in files]


# --- streaming reads ----------------------------------------------------------------------


def iter_file_texts(path: Path, text_column: str | None) -> Iterator[str]:
    """The non-blank texts of one file, read as a stream (memory: one line, one parquet batch).

    The same texts, in the same order, as :meth:`CorpusSource.read` gives for that file:
    .txt / .tokens lines stripped, .jsonl / .json records' text field, .parquet's text column.
    Tables (.tsv / .csv, whose quoted fields may span lines) are read whole, one file at a time.
    """
    suffix = _base_suffix(path)
    if suffix == ".parquet":
        texts: Iterable[str] = _iter_parquet(path, text_column)
    elif suffix in (".jsonl", ".json"):
        texts = _iter_jsonl(path, text_column)
    elif suffix in (".tsv", ".csv"):
        texts = _read_file(path, text_column)
    else:
        texts = (line.strip() for line in _iter_lines(path))
    return (text for text in texts if text.strip())


def _iter_lines(path: Path) -> Iterator[str]:
    """Decoded lines of a (gzipped) file, cut at "\\n" only, with the error messages of _decode."""
    try:
        handle = gzip.open(path, "rb") if path.suffix.lower() == ".gz" else path.open("rb")  # noqa: SIM115
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    with handle:
        number = 0
        offset = 0
        try:
            for raw in handle:
                number += 1
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                    offset = 3
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise FormatError(
                        f"{path}, line {number}: not valid UTF-8 (byte {raw[exc.start]:#04x} at offset "
                        f"{offset + exc.start}); convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
                    ) from exc
                nul = raw.find(b"\x00")
                if nul >= 0:
                    raise FormatError(_nul_message(path, number, offset + nul))
                offset += len(raw)
                yield line[:-1] if line.endswith("\n") else line
        except _DECOMPRESSION_ERRORS as exc:
            raise _unreadable(path, exc) from exc


def _iter_jsonl(path: Path, text_column: str | None) -> Iterator[str]:
    return _jsonl_values(_iter_lines(path), path, text_column)


def _iter_parquet(path: Path, text_column: str | None, batch_rows: int = 4096) -> Iterator[str]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        column = _pick_column(parquet.schema_arrow.names, text_column, path)
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=[column]):
            for value in batch.column(0).to_pylist():
                if not isinstance(value, str):
                    raise FormatError(f"{path}: column {column!r} holds a {type(value).__name__}, not text")
                yield value
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise FormatError(f"cannot read {path} ({first_line(exc)}); check that the file is complete") from exc


def iter_hub_texts(source: CorpusSource, data_files: tuple[str, ...] = (), batch_rows: int = 1024) -> Iterator[str]:
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
                column = _pick_column(batch.keys(), source.text_column, Path(source.location))
            for value in batch[column]:
                text = str(value)
                if text.strip():
                    yield text
    except GeneratorExit:
        raise
    except (InputError, FormatError):
        raise
    except Exception as exc:  # a dropped connection or a corrupt remote file, mid-stream
        raise FormatError(f"reading {source.name} (split {source.split}) failed: {first_line(exc)}; run again") from exc


# --- the hub ------------------------------------------------------------------------------


def _load_hub(source: CorpusSource, streaming: bool = False, data_files: tuple[str, ...] = ()) -> Any:
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
        extra: dict[str, Any] = {"data_files": list(data_files)} if data_files else {}
        return datasets.load_dataset(
            source.location, source.hub_config, split=source.split, streaming=streaming, **extra
        )
    except Exception as exc:  # offline, unknown id, missing split: all reported the same way
        where = "the Hugging Face cache" if hub_offline() else "the Hugging Face cache and hub"
        tried.append(f"{where} ({first_line(exc)})")
        raise DataNotFoundError(
            f"dataset {source.name!r} (split {source.split}) not found; tried {'; '.join(tried)}. "
            "Pass a local file, or --data-dir pointing at a folder laid out <name>/<split>.<tsv|jsonl.gz|tokens|txt>"
        ) from exc


def _read_hub(source: CorpusSource) -> list[str]:
    dataset = _load_hub(source)
    column = _pick_column(dataset.column_names, source.text_column, Path(source.location))
    return [str(value) for value in dataset[column]]


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


def _read_synthetic(spec: str) -> list[str]:
    from .synthetic import synthetic_corpus

    kind, options = parse_synthetic_spec(spec)
    return synthetic_corpus(kind, **options).texts  # type: ignore[arg-type]
