r"""Reading one corpus file: its format, its encoding, and the binary files that are never a corpus.

Formats, by suffix (each optionally gzipped, ``.gz``):

- ``.txt`` / ``.tokens``: one text a line; a line ends at ``"\n"``, ``"\r\n"`` or a lone ``"\r"``
  (old Mac files), never at \x85, \u2028, \x0c, ... as :meth:`str.splitlines` would cut; stripped;
- ``.tsv`` / ``.csv``: a header line naming the columns, then one text a row in the text column
  (TSV unquoted, as GLUE writes it; CSV quoted, fields may span lines);
- ``.jsonl`` / ``.json``: one JSON object a line, the text in its text field;
- ``.parquet``: the text column, read batch by batch.

The text column is ``--text-column`` when given, else the first of :data:`TEXT_COLUMN_GUESSES`
present. Every file is UTF-8 (a byte order mark is dropped, at the head and within, where a
concatenation of files left one); an invalid byte, a NUL byte or a corrupt compressed stream is one
error naming the file and the line, and a file in UTF-16 or UTF-32 (by its byte order mark), a gzip
stream inside a gzip stream or gzip data without ``.gz`` is an error naming what it is. :func:`read_file` reads a
file whole; :func:`iter_file_texts` streams the same texts (memory: one line, one parquet batch).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import FormatError, InputError, first_line

TEXT_COLUMN_GUESSES = ("text", "sentence", "review", "content", "document")


SHARD_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".txt", ".txt.gz", ".tokens", ".tsv", ".csv", ".json")


def is_shard_file(path: Path) -> bool:
    """Whether a file name is one a shard of a glob or folder may have (:data:`SHARD_SUFFIXES`, optionally .gz)."""
    name = path.name.lower()
    return name.endswith(SHARD_SUFFIXES) or name.endswith(tuple(f"{s}.gz" for s in SHARD_SUFFIXES))


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


#: byte order marks of the encodings a text editor may save in, longest first (UTF-32LE starts as UTF-16LE)
_OTHER_UNICODE = (
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian)", "UTF-32"),
    (b"\xff\xfe", "UTF-16 (little-endian)", "UTF-16"),
    (b"\xfe\xff", "UTF-16 (big-endian)", "UTF-16"),
)
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"


def check_head(head: bytes, path: Path, gunzipped: bool) -> None:
    """Refuse, naming what they are, the text files that would otherwise read as invalid UTF-8 or as
    binary: UTF-16 and UTF-32 (by their byte order mark, or ASCII with NULs between without one),
    gzip data inside gzip data, gzip data not named .gz. ``head``: the first bytes (64 are enough)."""
    for mark, what, codec in _OTHER_UNICODE:
        if head.startswith(mark):
            plain = path.name.removesuffix(".gz")
            read = (
                f"zcat {path.name} | iconv -f {codec} -t UTF-8"
                if gunzipped
                else f"iconv -f {codec} -t UTF-8 {path.name}"
            )
            raise FormatError(
                f"{path} is {what} text (by its byte order mark), and corpora are read as UTF-8; "
                f"convert it: {read} > utf8-{plain}"
            )
    unmarked = _unicode_without_bom(head)
    if unmarked is not None:
        what, codec = unmarked
        raise FormatError(
            f"{path} looks like {what} text without a byte order mark (its first characters are ASCII with "
            f"NUL bytes between), and corpora are read as UTF-8; convert it: iconv -f {codec} -t UTF-8 "
            f"{path.name} > utf8-{path.name.removesuffix('.gz')}"
        )
    if head.startswith(_GZIP_MAGIC):
        if gunzipped:
            raise FormatError(
                f"{path} is gzip-compressed twice (its content is gzip data again); decompress it once: "
                f"zcat {path.name} > once-{path.name}"
            )
        raise FormatError(f"{path} is gzip-compressed but not named .gz; rename it to {path.name}.gz")


def _unicode_without_bom(head: bytes) -> tuple[str, str] | None:
    """(what, iconv's name) when ``head`` (at least two whole characters) is ASCII text in UTF-32 or
    UTF-16 without a byte order mark: NUL bytes where a UTF-8 text never has them."""
    for size, what, codec in (
        (4, "UTF-32 (little-endian)", "UTF-32LE"),
        (4, "UTF-32 (big-endian)", "UTF-32BE"),
        (2, "UTF-16 (little-endian)", "UTF-16LE"),
        (2, "UTF-16 (big-endian)", "UTF-16BE"),
    ):
        units = [head[i : i + size] for i in range(0, len(head) - size + 1, size)]
        if len(units) < 2:
            continue
        at = 0 if codec.endswith("LE") else size - 1  # where the ASCII byte sits in each character
        if all(0 < unit[at] < 0x80 and unit.count(0) == size - 1 for unit in units):
            return what, codec
    return None


def _without_boms(text: str) -> str:
    # U+FEFF is a byte order mark where files were concatenated (`cat a.txt b.txt`), not a character
    # of the text: kept, it would stick to the next token.
    return text.replace(_BOM, "") if _BOM in text else text


def decode(data: bytes, path: Path, gunzipped: bool = False) -> str:
    """A file's bytes as text: UTF-8 without byte order marks, no NUL; FormatError naming the line
    otherwise (and :func:`check_head`'s errors)."""
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark (Excel, Notepad) is not text
        data = data[3:]
    check_head(data[:64], path, gunzipped)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, data[: exc.start].count(b"\n") + 1, data[exc.start], exc.start) from exc
    nul = text.find("\x00")
    if nul >= 0:
        raise FormatError(_nul_message(path, text[:nul].count("\n") + 1, len(text[:nul].encode())))
    return _without_boms(text)


def _not_utf8(path: Path, line: int, byte: int, offset: int) -> FormatError:
    return FormatError(
        f"{path}, line {line}: not valid UTF-8 (byte {byte:#04x} at offset {offset}); "
        "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )


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


def read_bytes(path: Path) -> bytes:
    """A file's bytes, gunzipped when it ends in .gz; one error for a file that cannot be read."""
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


def read_file(path: Path, text_column: str | None) -> list[str]:
    """The texts of one file, read whole, blank ones included (the module docstring's formats)."""
    suffix = _base_suffix(path)
    if suffix == ".parquet":
        return list(_iter_parquet(path, text_column))
    text = decode(read_bytes(path), path, gunzipped=path.suffix.lower() == ".gz")
    if suffix in (".tsv", ".csv"):
        return _read_table(text, path, text_column, delimiter="\t" if suffix == ".tsv" else ",")
    if suffix in (".jsonl", ".json"):
        return list(_jsonl_values(text.split("\n"), path, text_column))
    return [line.strip() for line in split_lines(text)]


def split_lines(text: str) -> list[str]:
    """Lines ending at "\\n", "\\r\\n" or a lone "\\r" (an old Mac file): str.splitlines() would also
    cut texts at \\x85, \\u2028, \\x0c, ..."""
    if "\r" not in text:
        return text.split("\n")
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def pick_column(columns: Iterable[str], text_column: str | None, path: Path) -> str:
    """The text column: ``text_column`` when given (InputError if absent), else the first guess present."""
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
        column = header.index(pick_column(header, text_column, path))
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
            column = pick_column(record.keys(), text_column, path)
        value = record.get(column)
        if not isinstance(value, str):
            raise FormatError(f"{path}, line {number}: field {column!r} is missing or not a string")
        yield value


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
        texts = _jsonl_values(_iter_lines(path), path, text_column)
    elif suffix in (".tsv", ".csv"):
        texts = read_file(path, text_column)
    else:
        texts = (piece.strip() for line in _iter_lines(path) for piece in split_lines(line))
    return (text for text in texts if text.strip())


def _iter_lines(path: Path) -> Iterator[str]:
    """Decoded lines of a (gzipped) file, cut at "\\n" only, with the error messages of decode."""
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
                if number == 1:
                    check_head(raw[:64], path, gunzipped=path.suffix.lower() == ".gz")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _not_utf8(path, number, raw[exc.start], offset + exc.start) from exc
                nul = raw.find(b"\x00")
                if nul >= 0:
                    raise FormatError(_nul_message(path, number, offset + nul))
                offset += len(raw)
                yield _without_boms(line[:-1] if line.endswith("\n") else line)
        except _DECOMPRESSION_ERRORS as exc:
            raise _unreadable(path, exc) from exc


def _iter_parquet(path: Path, text_column: str | None, batch_rows: int = 4096) -> Iterator[str]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        column = pick_column(parquet.schema_arrow.names, text_column, path)
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=[column]):
            for value in batch.column(0).to_pylist():
                if not isinstance(value, str):
                    raise FormatError(f"{path}: column {column!r} holds a {type(value).__name__}, not text")
                yield value
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise FormatError(f"cannot read {path} ({first_line(exc)}); check that the file is complete") from exc
