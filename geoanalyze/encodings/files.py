"""Position tables stored in files: MDS PE files and plain .npy / .safetensors arrays.

Every table read here is validated before use (:func:`read_table`): a real numeric dtype
(integers, bool excluded, and float16/32/64 become float64 exactly; complex, string, bytes,
object, structured and date dtypes are refused, never cast), exactly two dimensions, at least
one row and one column, every entry of the rows used finite. An ``.npy`` header is read and checked against the
file's size before any data is (a header that declares more than the file holds is refused
without allocating), and object arrays are never unpickled (``allow_pickle=False``). An MDS
PE file's ``positions`` must be distinct non-negative integers, one per row.

``file:<path>`` is the spec family of these tables (``mds:<file>`` reads them too, mds.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError, IncompatibleError, InputError, first_line
from .registry import Encoding, EncodingContext, encoding, require_path

#: dtype kinds a position table may have: signed and unsigned integers, real floats
_NUMERIC = "iuf"
_KIND_NAMES = {
    "b": "booleans",
    "c": "complex numbers (a silent cast would drop the imaginary part)",
    "U": "strings",
    "S": "bytes",
    "O": "Python objects (never unpickled)",
    "V": "structured records",
    "M": "dates",
    "m": "time spans",
}


@encoding("file", "rows of an .npy or .safetensors array: file:<path>", takes_path=True, order=70)
def file_encoding(spec: str, path: str) -> Encoding:
    """``file:<path>``: the rows of a stored table at the positions asked for."""
    require_path("file", path)
    return table_encoding(spec, path)


def table_encoding(spec: str, path: str) -> Encoding:
    """The encoding ``spec`` whose vectors are rows of the table in ``path`` (:func:`load_table`)."""

    def from_file(positions: np.ndarray, context: EncodingContext) -> np.ndarray:
        return load_table(path, positions, counts=context.counts)

    return Encoding(spec, from_file)


def load_table(path: str, positions: np.ndarray, counts: dict[str, Any] | None = None) -> np.ndarray:
    """Rows of a stored position table for the given position indices.

    MDS PE files carry a ``positions`` array naming the position of each row; plain arrays
    are indexed by position directly. A position the file lacks is an error, and so is an MDS
    file made from counts whose positions mean something else than ``counts``' (another
    vocabulary, or no special tokens: position 0 would be the first word, not [CLS]).
    """
    file = Path(path).expanduser() if str(path).startswith("~") else Path(path)  # ./~/x is the folder ~
    table, row_positions, metadata = read_table(file)
    if metadata is not None:
        _check_same_positions(file, metadata, counts)
    if row_positions is None:
        row_positions = np.arange(table.shape[0])
    lookup = {int(p): row for row, p in enumerate(row_positions.tolist())}
    missing = [int(p) for p in positions if int(p) not in lookup]
    if missing:
        raise InputError(
            f"{file} has no row for position {missing[0]} (it covers {len(lookup)} positions); "
            "lower --max-length or regenerate the file"
        )
    rows = np.fromiter((lookup[int(p)] for p in positions), dtype=np.int64, count=len(positions))
    selected = table[rows]
    # Only the rows used must be finite: a table may leave rows it never serves undefined.
    bad = ~np.isfinite(selected)
    if bad.any():
        row = int(rows[np.argwhere(bad)[0][0]])
        raise FormatError(f"{file} has NaN or infinite entries (first in row {row}); fix the file")
    return selected


def read_table(file: Path) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any] | None]:
    """(table as float64 (n, d), the row positions of an MDS file or None, its geoanalyze header or None)."""
    if not file.exists():
        raise InputError(f"encoding file not found: {file}; check the path")
    if not file.is_file():
        raise InputError(f"{file} is not a regular file; pass an .npy or .safetensors position table")
    if file.suffix == ".npy":
        return checked_table(file, _read_npy(file)), None, None
    if file.suffix == ".safetensors":
        return _read_safetensors(file)
    raise InputError(f"{file}: unsupported encoding file type {file.suffix!r}; use .npy or .safetensors")


def _read_npy(file: Path) -> np.ndarray:
    """An .npy array, its header checked against the file size first; never unpickled."""
    fmt = np.lib.format
    fix = "save the table with numpy.save(path, table.astype(float))"
    try:
        size = file.stat().st_size
        with file.open("rb") as handle:
            version = fmt.read_magic(handle)
            if version == (1, 0):
                shape, _fortran, dtype = fmt.read_array_header_1_0(handle)
            elif version in ((2, 0), (3, 0)):
                shape, _fortran, dtype = fmt.read_array_header_2_0(handle)
            else:  # pragma: no cover - read_magic accepts only the versions above today
                raise ValueError(f"unknown .npy version {version}")
            offset = handle.tell()
    except (ValueError, OSError, SyntaxError, TypeError, EOFError) as exc:
        raise FormatError(f"{file} is not a readable .npy array ({first_line(exc, 120)}); {fix}") from exc
    _check_dtype(file, dtype, fix)
    count = int(np.prod(shape, dtype=object)) if shape else 1
    expected = count * dtype.itemsize
    if size - offset != expected:
        raise FormatError(
            f"{file}: its header declares a {dtype} array of shape {tuple(shape)} ({expected} bytes) but the file "
            f"holds {size - offset} bytes of data (truncated or corrupt); {fix}"
        )
    try:
        return np.load(file, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise FormatError(f"{file} is not a readable .npy array ({first_line(exc, 120)}); {fix}") from exc


def _check_dtype(file: Path, dtype: np.dtype[Any], fix: str, name: str = "") -> None:
    if dtype.kind not in _NUMERIC or dtype.fields is not None or dtype.subdtype is not None:
        what = _KIND_NAMES.get(dtype.kind, f"dtype {dtype}")
        where = f" (tensor {name!r})" if name else ""
        raise FormatError(f"{file}{where} holds {what}, not real numbers; a position table is real-valued: {fix}")


def checked_table(file: Path, array: np.ndarray, name: str = "") -> np.ndarray:
    """A stored array as a float64 (n, d) position table, or FormatError naming the problem and the fix."""
    fix = "save a real (n, d) array, e.g. numpy.save(path, table.astype(float))"
    _check_dtype(file, array.dtype, fix, name)
    where = f" (tensor {name!r})" if name else ""
    if array.ndim != 2:
        hint = " (a single column: save table[:, None])" if array.ndim == 1 else ""
        raise FormatError(
            f"{file}{where} is an array of shape {array.shape}; a position table is 2-D (n positions, d){hint}"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise FormatError(f"{file}{where} is empty (shape {array.shape}); a position table needs rows and columns")
    if array.dtype.kind in "iu" and array.size and max(abs(int(array.min())), abs(int(array.max()))) > 2**53:
        raise FormatError(
            f"{file}{where} holds integers beyond 2^53, which float64 cannot represent exactly; "
            "rescale the table or save it as floats"
        )
    return np.asarray(array, dtype=np.float64)


def _read_safetensors(file: Path) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any] | None]:
    from safetensors.numpy import load_file

    from ..io import FORMAT_VERSION, INTEGER, REAL, check_tensors, read_metadata

    metadata = read_metadata(file)
    try:
        arrays = load_file(str(file))
    except Exception as exc:  # safetensors raises several unrelated types on corrupt input
        raise FormatError(f"{file} is not a readable safetensors file ({first_line(exc, 120)})") from exc
    if metadata is not None:
        kind = metadata.get("kind")
        if kind != "mds":
            shown = kind if isinstance(kind, str) else "no kind"
            raise FormatError(
                f"{file} is a geoanalyze {shown[:40]} file, not a position table; pass an MDS file "
                "(made by `geoanalyze mds -o`) or a plain array"
            )
        version = metadata.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool) or version != FORMAT_VERSION:
            raise FormatError(
                f"{file} has format version {str(version)[:20]}, this geoanalyze reads version {FORMAT_VERSION}; "
                "regenerate it with `geoanalyze mds`"
            )
        if not isinstance(metadata.get("counts", {}), dict):
            raise FormatError(f"{file}: header field 'counts' is not an object; regenerate it with `geoanalyze mds`")
        check_tensors(
            file,
            arrays,
            {"position_embeddings": (REAL, 2), "positions": (INTEGER, 1), "A": (REAL, 2), "W": (REAL, 2)},
            kind="mds",
            optional=("A", "W"),
        )
    if "position_embeddings" in arrays:
        table = checked_table(file, arrays["position_embeddings"], "position_embeddings")
        row_positions = arrays.get("positions")
        if row_positions is not None:
            row_positions = _checked_positions(file, row_positions, table.shape[0])
        return table, row_positions, metadata
    if len(arrays) == 1:
        name, array = next(iter(arrays.items()))
        return checked_table(file, array, name), None, None
    raise FormatError(
        f"{file} holds {len(arrays)} tensors and none is named position_embeddings; "
        "save the table alone or under that name"
    )


def _checked_positions(file: Path, positions: np.ndarray, rows: int) -> np.ndarray:
    fix = "regenerate it with `geoanalyze mds`"
    if positions.dtype.kind not in "iu" or positions.ndim != 1:
        raise FormatError(
            f"{file}: 'positions' must be a 1-D integer array, got {positions.dtype} {positions.shape}; {fix}"
        )
    if positions.shape[0] != rows:
        raise FormatError(f"{file}: {positions.shape[0]} positions for {rows} table rows; {fix}")
    values = positions.astype(np.int64)
    if values.size and values.min() < 0:
        raise FormatError(f"{file}: 'positions' holds a negative position; {fix}")
    if np.unique(values).size != values.size:
        raise FormatError(f"{file}: 'positions' repeats a position; {fix}")
    return values


def _check_same_positions(file: Path, metadata: dict[str, Any], counts: dict[str, Any] | None) -> None:
    made_from = metadata.get("counts") or {}
    if not counts or not made_from or not isinstance(made_from, dict):
        return
    for key in ("add_special_tokens", "exclude_special"):
        if key in made_from and key in counts and made_from[key] != counts[key]:
            raise IncompatibleError(
                f"{file} was made from counts with {key}={made_from[key]}, these have {counts[key]}: "
                "its positions mean something else; rebuild it from the same kind of counts"
            )
    theirs, ours = made_from.get("tokenizer") or {}, counts.get("tokenizer") or {}
    if not isinstance(theirs, dict):
        raise FormatError(
            f"{file}: header field counts.tokenizer is not an object; regenerate it with `geoanalyze mds`"
        )
    if theirs.get("vocab_sha256") != ours.get("vocab_sha256") or theirs.get("kind") != ours.get("kind"):
        raise IncompatibleError(
            f"{file} was made with the tokenizer {str(theirs.get('name'))[:60]}, these counts with {ours.get('name')}; "
            "rebuild it with the same --tokenizer"
        )
