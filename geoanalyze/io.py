"""Files on disk: atomic writes, the one container format the toolkit writes, and GFM tables.

Every array file geoanalyze writes is a safetensors file (no pickle, no code) whose header
metadata holds one JSON document under the key ``"geoanalyze"``::

    {"kind": "counts" | "distances" | "mds", "format_version": 1, ...}

``kind`` says what the file is, so a command given the wrong file says so instead of
misreading it. Writes go to a temporary file in the same folder and are renamed into place
(:func:`atomic_path`), so a crash or an error never leaves a half-written output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import FormatError, InputError, first_line

METADATA_KEY = "geoanalyze"
FORMAT_VERSION = 1

#: the staged folders of this process (:func:`staged_folder`), removed by :func:`remove_staged`
_STAGED: dict[Path, None] = {}


@contextlib.contextmanager
def staged_folder(path: str | os.PathLike[str], create: bool = True) -> Iterator[Path]:
    """A folder written aside and renamed into place by the block: an earlier one at ``path`` is
    removed, a new one made (unless ``create``: the block makes it); on any failure, an interrupt
    or a terminating signal (the CLI's handler calls :func:`remove_staged`) it is removed, so no
    staged folder outlives its run. A block that renames it into place leaves nothing to remove."""
    folder = Path(path)
    shutil.rmtree(folder, ignore_errors=True)
    if create:
        folder.mkdir(parents=True)
    _STAGED[folder] = None
    try:
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        _STAGED.pop(folder, None)


def remove_staged() -> None:
    """Remove every staged folder of this process (the signal handler of a terminated run)."""
    for folder in list(_STAGED):
        shutil.rmtree(folder, ignore_errors=True)
        _STAGED.pop(folder, None)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    The parent folder is created if needed. On any exception the temporary file is removed
    and ``path`` is left untouched.
    """
    target = Path(path)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create folder {parent}: {exc.strerror}; choose another output path") from exc
    if target.is_dir():
        raise InputError(f"{target} is a folder; pass a file path for the output")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise InputError(f"cannot write in {parent}: {exc.strerror}; choose another output path") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp makes 0600; outputs get the usual mode
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise InputError(f"cannot write {target}: {exc.strerror}; choose another output path") from exc
    finally:
        if tmp.exists():
            tmp.unlink()


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: The process's umask, read once at import: os.umask can only be read by setting it, which is not
#: thread-safe. Files made with restrictive modes (mkstemp, mkdtemp) are chmod-ed to ``mode & ~UMASK``.
UMASK = _read_umask()


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (a file name of non-UTF-8 bytes it quotes is
    written as a backslash escape)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")


def save_arrays(
    path: str | os.PathLike[str],
    arrays: Mapping[str, np.ndarray],
    kind: str,
    metadata: Mapping[str, Any],
) -> None:
    """Save named arrays and a JSON metadata document as a safetensors file, atomically.

    Parameters
    ----------
    path : destination file.
    arrays : name -> array; arrays are made C-contiguous.
    kind : what the file holds ("counts", "distances", "mds", ...); checked on load.
    metadata : JSON-serialisable document stored in the header.
    """
    from safetensors.numpy import save_file

    document = {"kind": kind, "format_version": FORMAT_VERSION, **metadata}
    # Standard JSON only: non-finite floats become null, as in every --format json output.
    header = {METADATA_KEY: json.dumps(to_jsonable(document), sort_keys=True, allow_nan=False)}
    tensors = {name: np.ascontiguousarray(array) for name, array in arrays.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=header)


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The geoanalyze metadata document of a safetensors file, or None if it has none.

    Raises FormatError when the file is not a readable safetensors file.
    """
    from safetensors import safe_open

    file = Path(path)
    if not file.is_file():
        raise InputError(f"file not found: {file}; check the path")
    try:
        with safe_open(str(file), framework="numpy") as handle:
            header = handle.metadata() or {}
    except Exception as exc:  # safetensors raises several unrelated types on corrupt input
        raise FormatError(f"{file} is not a readable safetensors file ({exc}); regenerate it with geoanalyze") from exc
    raw = header.get(METADATA_KEY)
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{file} has a corrupt geoanalyze header; regenerate it") from exc
    if not isinstance(document, dict):
        raise FormatError(f"{file} has a corrupt geoanalyze header; regenerate it")
    return document


def load_arrays(path: str | os.PathLike[str], kind: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Load a file written by :func:`save_arrays`, checking its kind and format version."""
    from safetensors.numpy import load_file

    document = read_metadata(path)
    if document is None or "kind" not in document:
        raise FormatError(
            f"{path} is a safetensors file but not a geoanalyze {kind} file; "
            f"create one with `geoanalyze {_command_for(kind)}`"
        )
    if document["kind"] != kind:
        raise FormatError(
            f"{path} holds geoanalyze {str(document['kind'])[:40]}, not {kind}; "
            f"pass a {kind} file (made by `geoanalyze {_command_for(kind)}`)"
        )
    version = document.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version != FORMAT_VERSION:
        raise FormatError(
            f"{path} has format version {version}, this geoanalyze reads version {FORMAT_VERSION}; "
            "regenerate the file with this version"
        )
    try:
        arrays = load_file(str(path))
    except Exception as exc:
        raise FormatError(
            f"{path} is corrupt ({first_line(exc, 120)}); regenerate it with `geoanalyze {_command_for(kind)}`"
        ) from exc
    return arrays, document


#: dtype kinds accepted for a tensor: integers (signed or not) and real floats
INTEGER, REAL = "iu", "f"


def check_tensors(
    path: str | os.PathLike[str],
    arrays: Mapping[str, np.ndarray],
    expected: Mapping[str, tuple[str, int]],
    kind: str,
    optional: Collection[str] = (),
) -> None:
    """Refuse a file whose tensors are not exactly ``expected`` (name -> (dtype kinds, ndim)).

    A missing tensor (unless ``optional``), an unknown extra tensor, a tensor of another dtype
    kind (a float where integers belong, a bool, a complex) or another number of dimensions is a
    FormatError naming the file, the tensor and the command that writes a good file.
    """
    fix = f"regenerate it with `geoanalyze {_command_for(kind)}`"
    missing = [name for name in expected if name not in arrays and name not in optional]
    if missing:
        raise FormatError(f"{path} lacks the tensor {missing[0]!r} of a {kind} file; {fix}")
    extra = sorted(set(arrays) - set(expected))
    if extra:
        raise FormatError(f"{path} holds an unknown tensor {extra[0][:60]!r} (not part of a {kind} file); {fix}")
    for name, (kinds, ndim) in expected.items():
        if name not in arrays:
            continue
        array = arrays[name]
        if array.dtype.kind not in kinds:
            wanted = "integers" if kinds == INTEGER else "real floats"
            raise FormatError(f"{path}: tensor {name!r} has dtype {array.dtype}, a {kind} file holds {wanted}; {fix}")
        if array.ndim != ndim:
            raise FormatError(
                f"{path}: tensor {name!r} has shape {array.shape}, a {kind} file holds a {ndim}-D array; {fix}"
            )


_MISSING = object()


def header_field(
    path: str | os.PathLike[str],
    document: Mapping[str, Any],
    key: str,
    types: type | tuple[type, ...],
    kind: str,
    default: Any = _MISSING,
) -> Any:
    """``document[key]`` checked to be of ``types`` (bool is not an int here); FormatError otherwise.

    Without ``default`` the field is required; with one, an absent field (not a wrong-typed one)
    gives the default.
    """
    fix = f"regenerate it with `geoanalyze {_command_for(kind)}`"
    if key not in document:
        if default is _MISSING:
            raise FormatError(f"{path}: the {kind} header lacks the field {key!r}; {fix}")
        return default
    value = document[key]
    allowed = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in allowed:
        ok = False
    elif float in allowed and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    else:
        ok = isinstance(value, allowed)
    if not ok:
        names = " or ".join("null" if t is type(None) else _JSON_NAMES.get(t, t.__name__) for t in allowed)
        raise FormatError(
            f"{path}: header field {key!r} is {type(value).__name__ if value is not None else 'null'}, "
            f"expected {names}; {fix}"
        )
    return value


_JSON_NAMES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "true/false",
    list: "a list",
    dict: "an object",
}


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """The geoanalyze kind of a safetensors file ("counts", ...), or None for anything else."""
    if Path(path).suffix != ".safetensors":
        return None
    document = read_metadata(path)
    return None if document is None else document.get("kind")


def _command_for(kind: str) -> str:
    return {"counts": "marginals", "distances": "distances", "mds": "mds"}.get(kind, kind)


def dumps(data: Any) -> str:
    """JSON text of a result: indented, numpy values and typed records as plain ones, non-finite numbers as null."""
    return json.dumps(to_jsonable(data), indent=2, allow_nan=False)


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars and arrays, and typed records (a value with ``to_dict``), recursively into plain
    JSON types."""
    if callable(getattr(value, "to_dict", None)) and not isinstance(value, type):
        return to_jsonable(value.to_dict())
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


#: field metadata for :func:`serialise`: the field is not in the record (a printer or a figure reads it)
NOT_IN_JSON = {"json": False}
#: field metadata for :func:`serialise`: the field's mapping is merged into the record's own keys
FLAT = {"json": "flat"}
#: field metadata for :func:`serialise`: the field is in the record only when it is set (not None, not empty)
IF_SET = {"json": "if set"}


def serialise(value: Any) -> Any:
    """A result as its JSON document holds it: a value with ``to_dict`` as that, a dataclass as
    :func:`serialise_fields`, a mapping as a dict and a tuple as a list, recursively; numpy values are
    left to :func:`to_jsonable`."""
    if callable(getattr(value, "to_dict", None)) and not isinstance(value, type):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return serialise_fields(value)
    if isinstance(value, Mapping):
        return {key: serialise(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [serialise(item) for item in value]
    return value


def serialise_fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields in order, each :func:`serialise`-d, as their metadata say (:data:`NOT_IN_JSON`:
    left out, :data:`FLAT`: merged into the record's keys, :data:`IF_SET`: only when not None or empty)."""
    record: dict[str, Any] = {}
    for field in dataclasses.fields(value):
        shown, held = field.metadata.get("json", True), getattr(value, field.name)
        if shown == "flat":
            record.update(serialise(held))
        elif shown is True or (shown == "if set" and not (held is None or (isinstance(held, Collection) and not held))):
            record[field.name] = serialise(held)
    return record


class Record:
    """A dataclass whose record (:meth:`to_dict`) and JSON (:meth:`to_json`) are its fields (:func:`serialise_fields`)."""

    def to_dict(self) -> dict[str, Any]:
        """The record as Python values (numpy values left to :func:`to_jsonable`)."""
        return serialise_fields(self)

    def to_json(self) -> str:
        """The record as indented JSON, numpy values as plain ones and non-finite numbers as null."""
        return dumps(self.to_dict())


def markdown_cell(value: Any, formatter: Callable[[Any], str] = str) -> str:
    """One GitHub-Markdown table cell: ``|`` escaped (it would end the cell) and newlines as spaces."""
    return " ".join(formatter(value).replace("\\|", "|").replace("|", "\\|").split())


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], formatter: Callable[[Any], str] = str) -> str:
    """A GitHub (GFM) table: the header as text, every cell through ``formatter`` and :func:`markdown_cell`,
    so a ``|`` in a value cannot split a row (the report's pages and the experiments' records)."""
    lines = ["| " + " | ".join(markdown_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(markdown_cell(v, formatter) for v in row) + " |" for row in rows]
    return "\n".join(lines)
