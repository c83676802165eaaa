"""Files and specs that are loaded: each is accepted exactly or refused in one line, exit 2.

Position tables (.npy, plain .safetensors, MDS PE files behind ``file:`` and ``mds:``), counts
files, distances files and synthetic specs, each crafted or tampered from a real file that the
CLI wrote (``marginals drift.txt -t whitespace``, ``distances``, ``mds``). Every case runs
through the sandbox harness: the exit code, one ``error:`` line naming the file (or the spec) and
the problem, no file left behind, inputs unchanged. Nothing is ever unpickled.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from .harness import SAMPLES, Sandbox, invoke

Arrays = dict[str, np.ndarray]
Mutator = Callable[[Arrays, dict[str, Any]], Any]

STRESS = ("--dataset", "drift.txt", "-t", "whitespace", "--compare", "", "--null-draws", "2")


# --- real files, written once by the CLI ------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The bytes of a counts, a distances and an MDS PE file made from sample_corpora/drift.txt."""
    os.environ["GEOANALYZE_PROGRESS_SECONDS"] = "100000"
    root = tmp_path_factory.mktemp("real-files")
    (root / "drift.txt").write_bytes((SAMPLES / "drift.txt").read_bytes())
    for args in (
        ["marginals", "drift.txt", "-t", "whitespace", "-o", "c.safetensors"],
        ["distances", "c.safetensors", "--min-count", "10", "-o", "d.safetensors"],
        ["mds", "c.safetensors", "--dim", "8", "--min-count", "10", "-o", "pe.safetensors"],
    ):
        run = invoke(args, root)
        assert run.code == 0, str(run)
    return {name: (root / name).read_bytes() for name in ("c.safetensors", "d.safetensors", "pe.safetensors")}


def unpack(data: bytes) -> tuple[Arrays, dict[str, Any]]:
    """The tensors and the geoanalyze header document of a safetensors file's bytes."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    document = json.loads(header["__metadata__"]["geoanalyze"])
    return {name: np.array(value) for name, value in st_load(data).items()}, document


def pack(arrays: Arrays, document: Any, raw: str | None = None) -> bytes:
    """A safetensors file of ``arrays`` whose geoanalyze header is ``document`` (or the raw string ``raw``)."""
    if raw is None and document is None:
        return st_save(arrays)
    text = raw if raw is not None else json.dumps(document)
    return st_save(arrays, metadata={"geoanalyze": text})


def tampered(data: bytes, mutate: Mutator) -> bytes:
    """Apply ``mutate(arrays, document)``: it edits in place (None), or returns new bytes."""
    arrays, document = unpack(data)
    result = mutate(arrays, document)
    return result if isinstance(result, bytes) else pack(arrays, document)


def raw_header(data: bytes, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """Edit the safetensors JSON header itself (offsets, shapes), keeping the data bytes."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + size :]


def _set(key: str, value: Any) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        document[key] = value

    return mutate


def _drop(key: str) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        document.pop(key, None)

    return mutate


def _tensor(name: str, change: Callable[[np.ndarray], np.ndarray | None]) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        value = change(arrays[name])
        if value is not None:
            arrays[name] = value

    return mutate


def _del_tensor(name: str) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        del arrays[name]

    return mutate


def _add_tensor(name: str, value: np.ndarray) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        arrays[name] = value

    return mutate


def _raw_metadata(text: str) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> bytes:
        return pack(arrays, None, raw=text)

    return mutate


def _no_metadata(arrays: Arrays, document: dict[str, Any]) -> bytes:
    return pack(arrays, None)


def _swap(index_a: int, index_b: int) -> Callable[[np.ndarray], np.ndarray]:
    def change(array: np.ndarray) -> np.ndarray:
        array = array.copy()
        array[[index_a, index_b]] = array[[index_b, index_a]]
        return array

    return change


def _at(index: int, value: Any) -> Callable[[np.ndarray], np.ndarray]:
    def change(array: np.ndarray) -> np.ndarray:
        array = array.copy()
        array.flat[index] = value
        return array

    return change


def _vocab(change: Callable[[list[Any]], Any]) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        document["vocab"] = change(list(document["vocab"]))

    return mutate


def _tokenizer(key: str, value: Any) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        document["tokenizer"] = dict(document["tokenizer"], **{key: value})

    return mutate


def _half_above_full(arrays: Arrays, document: dict[str, Any]) -> None:
    arrays["half.data"] = arrays["half.data"].copy()
    arrays["half.data"][0] += 10**6


def _more_than_sequences(arrays: Arrays, document: dict[str, Any]) -> None:
    document["n_sequences"] = 10


def _lengths_differ(arrays: Arrays, document: dict[str, Any]) -> None:
    arrays["counts.indices"] = arrays["counts.indices"][:-1]


# --- counts files (read by `distances`) -------------------------------------------------------

COUNTS_CASES: list[tuple[str, Mutator, str]] = [
    ("swapped-offsets", _tensor("counts.indptr", _swap(3, 4)), "indptr"),
    ("swapped-half-offsets", _tensor("half.indptr", _swap(10, 11)), "indptr"),
    ("offsets-not-from-0", _tensor("counts.indptr", _at(0, 1)), "indptr"),
    ("offsets-end-short", _tensor("counts.indptr", _at(-1, 5)), "indptr"),
    ("offsets-decrease-at-end", _tensor("counts.indptr", lambda a: np.concatenate([a[:-1], [a[-1] - 1]])), "indptr"),
    ("offsets-too-few", _tensor("counts.indptr", lambda a: a[:-2]), "indptr"),
    ("header-claims-more-positions", _set("shape", [65, 500]), "indptr"),
    ("header-claims-fewer-positions", _set("shape", [63, 500]), "indptr"),
    ("header-claims-smaller-vocab", _set("shape", [64, 100]), "token id"),
    ("vocab-shorter-than-V", _vocab(lambda v: v[:-1]), "vocabulary"),
    ("vocab-much-shorter", _vocab(lambda v: v[:10]), "vocabulary"),
    ("vocab-longer-than-V", _vocab(lambda v: [*v, "extra"]), "vocabulary"),
    ("vocab-repeats", _vocab(lambda v: [v[0], *v[:-1]]), "repeats"),
    ("vocab-non-string", _vocab(lambda v: [3, *v[1:]]), "not a string"),
    ("vocab-missing", _drop("vocab"), "vocabulary"),
    ("vocab-a-string", _set("vocab", "w1 w2"), "vocab"),
    ("negative-count", _tensor("counts.data", _at(0, -1)), "negative"),
    ("negative-half-count", _tensor("half.data", _at(5, -3)), "negative"),
    ("half-above-full", _half_above_full, "half-a"),
    ("counts-above-n_sequences", _more_than_sequences, "sequences"),
    ("token-id-negative", _tensor("counts.indices", _at(0, -1)), "token id"),
    ("token-id-beyond-V", _tensor("counts.indices", _at(0, 500)), "token id"),
    ("huge-token-id", _tensor("half.indices", _at(0, 2**62)), "token id"),
    ("float-counts", _tensor("counts.data", lambda a: a.astype(np.float64) + 0.5), "dtype"),
    ("float-token-ids", _tensor("counts.indices", lambda a: a.astype(np.float32)), "dtype"),
    ("bool-counts", _tensor("half.data", lambda a: a > 0), "dtype"),
    ("2d-offsets", _tensor("counts.indptr", lambda a: a[None, :]), "shape"),
    ("indices-data-lengths-differ", _lengths_differ, "differ"),
    *[(f"missing-{name}", _del_tensor(name), "lacks") for name in ("counts.indptr", "counts.indices", "counts.data")],
    *[(f"missing-{name}", _del_tensor(name), "lacks") for name in ("half.indptr", "half.indices", "half.data")],
    ("extra-tensor", _add_tensor("payload", np.zeros(3)), "unknown tensor"),
    ("kind-distances", _set("kind", "distances"), "distances"),
    ("kind-a-list", _set("kind", ["counts"]), "geoanalyze"),
    ("kind-missing", _drop("kind"), "not a geoanalyze counts"),
    ("version-2", _set("format_version", 2), "version"),
    ("version-string", _set("format_version", "1"), "version"),
    ("version-true", _set("format_version", True), "version"),
    ("version-float", _set("format_version", 1.5), "version"),
    ("version-missing", _drop("format_version"), "version"),
    ("metadata-a-list", _raw_metadata("[1, 2]"), "header"),
    ("metadata-a-string", _raw_metadata('"counts"'), "header"),
    ("metadata-not-json", _raw_metadata("{kind: counts"), "header"),
    ("metadata-absent", _no_metadata, "not a geoanalyze"),
    ("shape-missing", _drop("shape"), "shape"),
    ("shape-a-string", _set("shape", "64x500"), "shape"),
    ("shape-three-entries", _set("shape", [64, 500, 1]), "shape"),
    ("shape-negative", _set("shape", [-64, 500]), "shape"),
    ("shape-bools", _set("shape", [True, 500]), "shape"),
    ("shape-floats", _set("shape", [64.5, 500]), "shape"),
    ("n_sequences-a-string", _set("n_sequences", "2000"), "n_sequences"),
    ("tokenizer-a-list", _set("tokenizer", ["whitespace"]), "tokenizer"),
    ("tokenizer-kind-a-number", _tokenizer("kind", 7), "tokenizer"),
    ("exclude_special-a-string", _set("exclude_special", "no"), "exclude_special"),
    ("max_length-a-string", _set("max_length", "512"), "max_length"),
    ("split_seed-a-float", _set("split_seed", 0.5), "split_seed"),
    ("corpus-a-string", _set("corpus", "drift.txt"), "corpus"),
    ("corpus-of-numbers", _set("corpus", [1, 2]), "corpus"),
]

RAW_CASES: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("truncated-tail", lambda b: b[:-100]),
    ("truncated-half", lambda b: b[: len(b) // 2]),
    ("header-only", lambda b: b[: 8 + int.from_bytes(b[:8], "little")]),
    ("header-length-lies", lambda b: (2**40).to_bytes(8, "little") + b[8:]),
    ("header-length-short", lambda b: (16).to_bytes(8, "little") + b[8:]),
    ("empty-file", lambda b: b""),
    ("seven-bytes", lambda b: b[:7]),
    ("garbage", lambda b: bytes(range(256)) * 4),
    ("text", lambda b: b"w1 w2 w3\nw4 w5\n"),
    ("offsets-beyond-the-data", lambda b: raw_header(b, _stretch_offsets)),
    ("declared-shape-lies", lambda b: raw_header(b, _wrong_shape)),
]


def _stretch_offsets(header: dict[str, Any]) -> None:
    name = next(key for key in header if key != "__metadata__")
    header[name]["data_offsets"][1] += 8


def _wrong_shape(header: dict[str, Any]) -> None:
    name = next(key for key in header if key != "__metadata__")
    header[name]["shape"] = [header[name]["shape"][0] * 2, *header[name]["shape"][1:]]


@pytest.mark.parametrize(("mutate", "word"), [case[1:] for case in COUNTS_CASES], ids=[c[0] for c in COUNTS_CASES])
def test_tampered_counts_file_is_refused(sandbox: Sandbox, real: dict[str, bytes], mutate: Mutator, word: str) -> None:
    sandbox.write("c.safetensors", tampered(real["c.safetensors"], mutate))
    sandbox.refused("distances", "c.safetensors", "-f", "json", words=("c.safetensors", word))


@pytest.mark.parametrize("damage", [case[1] for case in RAW_CASES], ids=[c[0] for c in RAW_CASES])
@pytest.mark.parametrize("kind", ["counts", "distances", "pe"])
def test_damaged_container_is_refused(
    sandbox: Sandbox, real: dict[str, bytes], damage: Callable[[bytes], bytes], kind: str
) -> None:
    sandbox.copy_sample("drift.txt")
    if kind == "counts":
        sandbox.write("c.safetensors", damage(real["c.safetensors"]))
        sandbox.refused("distances", "c.safetensors", words=("c.safetensors",))
    elif kind == "distances":
        sandbox.write("d.safetensors", damage(real["d.safetensors"]))
        sandbox.refused("mds", "d.safetensors", "--dim", "8", words=("d.safetensors",))
    else:
        sandbox.write("pe.safetensors", damage(real["pe.safetensors"]))
        sandbox.refused("stress", "mds:pe.safetensors", *STRESS, words=("pe.safetensors",))


def test_untampered_counts_file_round_trips(sandbox: Sandbox, real: dict[str, bytes]) -> None:
    """The control: the same path through pack/unpack with no change is accepted."""
    sandbox.write("c.safetensors", tampered(real["c.safetensors"], lambda arrays, document: None))
    result = sandbox.accepted("distances", "c.safetensors", "-f", "json")
    assert json.loads(result.stdout)


# --- distances files (read by `mds`) ----------------------------------------------------------


def _both(name: str, change: Callable[[np.ndarray], np.ndarray]) -> Mutator:
    """Change a matrix symmetrically (so only the intended defect is there)."""

    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        arrays[name] = change(arrays[name].copy())

    return mutate


def _cell(i: int, j: int, value: float) -> Callable[[np.ndarray], np.ndarray]:
    def change(matrix: np.ndarray) -> np.ndarray:
        matrix[i, j] = matrix[j, i] = value
        return matrix

    return change


def _no_positions(arrays: Arrays, document: dict[str, Any]) -> None:
    arrays.update(
        positions=np.zeros(0, np.int64),
        totals=np.zeros(0, np.int64),
        naive=np.zeros((0, 0)),
        corrected=np.zeros((0, 0)),
        noise_floor=np.zeros(0),
    )


DISTANCES_CASES: list[tuple[str, Mutator, str]] = [
    ("asymmetric", _tensor("naive", _at(1, 0.99)), "symmetric"),
    ("nonzero-diagonal", _tensor("naive", _at(0, 0.25)), "symmetric"),
    ("negative-distance", _both("naive", _cell(0, 1, -0.5)), "outside"),
    ("hellinger-above-1", _both("naive", _cell(0, 1, 1.5)), "outside"),
    ("huge-distance", _both("naive", _cell(0, 1, 1e300)), "outside"),
    ("nan-naive", _both("naive", _cell(0, 1, np.nan)), "nan"),
    ("inf-corrected", _both("corrected", _cell(0, 1, np.inf)), "infinity"),
    ("negative-noise-floor", _tensor("noise_floor", _at(0, -1.0)), "noise floor"),
    ("positions-unsorted", _tensor("positions", _swap(0, 1)), "ascending"),
    ("positions-repeat", _tensor("positions", _at(1, 0)), "distinct"),
    ("positions-negative", _tensor("positions", lambda a: a - 1), "non-negative"),
    ("positions-float", _tensor("positions", lambda a: a.astype(np.float64)), "dtype"),
    ("totals-negative", _tensor("totals", _at(0, -5)), "negative"),
    ("totals-short", _tensor("totals", lambda a: a[:-1]), "totals"),
    ("noise-floor-short", _tensor("noise_floor", lambda a: a[:-1]), "noise_floor"),
    ("naive-wrong-shape", _tensor("naive", lambda a: a[:-1, :-1]), "naive"),
    ("corrected-1d", _tensor("corrected", lambda a: a.ravel()), "shape"),
    ("naive-integers", _tensor("naive", lambda a: (a * 0).astype(np.int64)), "dtype"),
    ("no-positions", _no_positions, "no position"),
    ("metric-unknown", _set("metric", "cosine"), "metric"),
    ("metric-a-number", _set("metric", 3), "metric"),
    ("metric-missing", _drop("metric"), "metric"),
    ("missing-naive", _del_tensor("naive"), "lacks"),
    ("missing-positions", _del_tensor("positions"), "lacks"),
    ("extra-tensor", _add_tensor("extra", np.zeros(2)), "unknown tensor"),
    ("left_out-a-list", _set("left_out", [1]), "left_out"),
    ("summary-a-string", _set("summary", "fine"), "summary"),
    ("counts-header-a-string", _set("counts", "c.safetensors"), "counts"),
    ("kind-counts", _set("kind", "counts"), "counts"),
    ("version-0", _set("format_version", 0), "version"),
]


@pytest.mark.parametrize(
    ("mutate", "word"), [case[1:] for case in DISTANCES_CASES], ids=[c[0] for c in DISTANCES_CASES]
)
def test_tampered_distances_file_is_refused(
    sandbox: Sandbox, real: dict[str, bytes], mutate: Mutator, word: str
) -> None:
    sandbox.write("d.safetensors", tampered(real["d.safetensors"], mutate))
    sandbox.refused("mds", "d.safetensors", "--dim", "8", "-f", "json", words=("d.safetensors", word))


def test_untampered_distances_file_round_trips(sandbox: Sandbox, real: dict[str, bytes]) -> None:
    sandbox.write("d.safetensors", tampered(real["d.safetensors"], lambda arrays, document: None))
    sandbox.accepted("mds", "d.safetensors", "--dim", "8", "-f", "json")


# --- MDS PE files (read by `mds:<file>`) ------------------------------------------------------


def _counts_field(key: str, value: Any) -> Mutator:
    def mutate(arrays: Arrays, document: dict[str, Any]) -> None:
        document["counts"] = dict(document["counts"], **{key: value})

    return mutate


PE_CASES: list[tuple[str, Mutator, str]] = [
    ("positions-repeat", _tensor("positions", _at(1, 0)), "repeats"),
    ("positions-negative", _tensor("positions", _at(0, -1)), "negative"),
    ("positions-float", _tensor("positions", lambda a: a.astype(np.float32)), "dtype"),
    ("positions-too-few", _tensor("positions", lambda a: a[:-1]), "positions"),
    ("positions-2d", _tensor("positions", lambda a: a[None, :]), "shape"),
    ("table-1d", _tensor("position_embeddings", lambda a: a.ravel()), "shape"),
    ("table-3d", _tensor("position_embeddings", lambda a: a[None]), "shape"),
    ("table-nan", _tensor("position_embeddings", _at(17, np.nan)), "nan"),
    ("table-inf", _tensor("position_embeddings", _at(3, np.inf)), "infinite"),
    ("table-minus-inf", _tensor("position_embeddings", _at(9, -np.inf)), "infinite"),
    ("table-integers", _tensor("position_embeddings", lambda a: a.astype(np.int32)), "dtype"),
    ("table-bools", _tensor("position_embeddings", lambda a: a > 0), "dtype"),
    ("A-integers", _tensor("A", lambda a: a.astype(np.int64)), "dtype"),
    ("W-1d", _tensor("W", lambda a: a.ravel()), "shape"),
    ("missing-table", _del_tensor("position_embeddings"), "lacks"),
    ("missing-positions", _del_tensor("positions"), "lacks"),
    ("extra-tensor", _add_tensor("payload", np.zeros(4, np.float32)), "unknown tensor"),
    ("kind-counts", _set("kind", "counts"), "counts"),
    ("kind-missing", _drop("kind"), "no kind"),
    ("version-2", _set("format_version", 2), "version"),
    ("version-string", _set("format_version", "1"), "version"),
    ("metadata-a-list", _raw_metadata("[]"), "header"),
    ("metadata-not-json", _raw_metadata("{"), "header"),
    ("counts-header-a-string", _set("counts", "whitespace"), "counts"),
    ("tokenizer-a-string", _counts_field("tokenizer", "whitespace"), "tokenizer"),
    ("other-tokenizer", _counts_field("tokenizer", {"kind": "hf", "name": "bert-base-uncased"}), "tokenizer"),
    ("other-special-tokens", _counts_field("add_special_tokens", True), "add_special_tokens"),
]


@pytest.mark.parametrize(("mutate", "word"), [case[1:] for case in PE_CASES], ids=[c[0] for c in PE_CASES])
def test_tampered_pe_file_is_refused(sandbox: Sandbox, real: dict[str, bytes], mutate: Mutator, word: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("pe.safetensors", tampered(real["pe.safetensors"], mutate))
    sandbox.refused("stress", "mds:pe.safetensors", *STRESS, words=("pe.safetensors", word))


def test_untampered_pe_file_scores(sandbox: Sandbox, real: dict[str, bytes]) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("pe.safetensors", tampered(real["pe.safetensors"], lambda arrays, document: None))
    run = sandbox.accepted("stress", "mds:pe.safetensors", *STRESS, "-f", "json")
    (scores,) = json.loads(run.stdout)["scores"].values()
    assert 0 <= scores["scaled_stress"] < 0.2


# --- plain tables: .npy ----------------------------------------------------------------------


def _table() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((64, 8))


class _Payload:
    """Unpickling this creates a file: a refused load must leave no trace of it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, ("pwned.txt", "w"))


def _npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def _npy_header(shape: tuple[int, ...], descr: str = "<f8", data: bytes = b"\0" * 4096, version: int = 1) -> bytes:
    buffer = io.BytesIO()
    fmt = np.lib.format
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    (fmt.write_array_header_1_0 if version == 1 else fmt.write_array_header_2_0)(buffer, header)
    return buffer.getvalue() + data


def _with_nan() -> np.ndarray:
    table = _table()
    table[10, 3] = np.nan
    return table


def _with(value: float) -> np.ndarray:
    table = _table()
    table[20, 0] = value
    return table


NPY_REFUSED: list[tuple[str, Callable[[], bytes], str]] = [
    ("complex128", lambda: _npy(_table().astype(np.complex128)), "complex"),
    ("complex64", lambda: _npy(_table().astype(np.complex64)), "complex"),
    ("complex-with-zero-imaginary", lambda: _npy(_table() + 0j), "complex"),
    ("unicode-strings", lambda: _npy(_table().astype(str)), "strings"),
    ("bytes", lambda: _npy(_table().astype(bytes)), "bytes"),
    ("pickled-objects", lambda: _npy(np.array([_Payload(), _Payload()], dtype=object), allow_pickle=True), "objects"),
    ("pickled-floats", lambda: _npy(_table().astype(object), allow_pickle=True), "objects"),
    ("structured", lambda: _npy(np.zeros(64, dtype=[("a", "f8"), ("b", "f8")])), "structured"),
    ("bools", lambda: _npy(_table() > 0), "booleans"),
    ("datetimes", lambda: _npy(np.zeros((64, 8), dtype="datetime64[s]")), "dates"),
    ("timedeltas", lambda: _npy(np.zeros((64, 8), dtype="timedelta64[s]")), "time spans"),
    ("nan-entry", lambda: _npy(_with_nan()), "nan"),
    ("inf-entry", lambda: _npy(_with(np.inf)), "infinite"),
    ("minus-inf-entry", lambda: _npy(_with(-np.inf)), "infinite"),
    ("0-d", lambda: _npy(np.float64(1.0)), "2-d"),
    ("1-d", lambda: _npy(_table()[:, 0]), "2-d"),
    ("3-d", lambda: _npy(_table()[None]), "2-d"),
    ("no-rows", lambda: _npy(_table()[:0]), "empty"),
    ("no-columns", lambda: _npy(_table()[:, :0]), "empty"),
    ("single-position", lambda: _npy(_table()[:1]), "no row for position 1"),
    ("too-few-rows", lambda: _npy(_table()[:40]), "no row for position 40"),
    ("huge-declared-shape", lambda: _npy_header((10**12, 10**12)), "declares"),
    ("huge-declared-shape-v2", lambda: _npy_header((2**40, 8), version=2), "declares"),
    ("declared-bigger-than-data", lambda: _npy_header((64, 8), data=b"\0" * 100), "declares"),
    ("trailing-bytes", lambda: _npy(_table()) + b"\0" * 16, "declares"),
    ("truncated", lambda: _npy(_table())[:-8], "declares"),
    ("header-only", lambda: _npy(_table())[:128], "declares"),
    ("not-npy", lambda: b"0.1 0.2\n0.3 0.4\n", "not a readable .npy"),
    ("empty-file", lambda: b"", "not a readable .npy"),
    ("bad-magic-version", lambda: b"\x93NUMPY\x09\x00" + b"\0" * 200, "not a readable .npy"),
    ("header-not-a-dict", lambda: _npy_header((64, 8))[:10] + b"[1, 2]".ljust(118) + b"\n", "not a readable .npy"),
    ("integers-beyond-2^53", lambda: _npy(np.full((64, 8), 2**60, dtype=np.int64)), "2^53"),
]


@pytest.mark.parametrize(("make", "word"), [case[1:] for case in NPY_REFUSED], ids=[c[0] for c in NPY_REFUSED])
def test_bad_npy_table_is_refused(sandbox: Sandbox, make: Callable[[], bytes], word: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("t.npy", make())
    sandbox.refused("stress", "file:t.npy", *STRESS, words=("t.npy", word))
    assert not sandbox.path("pwned.txt").exists()


NPY_ACCEPTED: list[tuple[str, Callable[[], bytes]]] = [
    ("float64", lambda: _npy(_table())),
    ("float32", lambda: _npy(_table().astype(np.float32))),
    ("float16", lambda: _npy(_table().astype(np.float16))),
    ("big-endian", lambda: _npy(_table().astype(">f8"))),
    ("int16", lambda: _npy((_table() * 100).astype(np.int16))),
    ("uint8", lambda: _npy((_table() * 10 + 100).astype(np.uint8))),
    ("fortran-order", lambda: _npy(np.asfortranarray(_table()))),
    ("npy-version-2", lambda: _npy_header((64, 8), data=_table().tobytes(), version=2)),
    ("more-rows-than-positions", lambda: _npy(np.random.default_rng(2).standard_normal((512, 8)))),
    ("one-column", lambda: _npy(_table()[:, :1])),
]


@pytest.mark.parametrize("make", [case[1] for case in NPY_ACCEPTED], ids=[c[0] for c in NPY_ACCEPTED])
def test_good_npy_table_scores_as_its_float64_copy(sandbox: Sandbox, make: Callable[[], bytes]) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("t.npy", make())
    exact = np.load(sandbox.path("t.npy"), allow_pickle=False).astype(np.float64)
    np.save(sandbox.path("copy.npy"), exact)
    ours = json.loads(sandbox.accepted("stress", "file:t.npy", *STRESS, "-f", "json").stdout)
    theirs = json.loads(sandbox.accepted("stress", "file:copy.npy", *STRESS, "-f", "json").stdout)
    (mine,), (copy,) = ours["scores"].values(), theirs["scores"].values()
    for key in ("scaled_stress", "monotonicity_violation", "lag_violation", "stress", "separation"):
        assert mine[key] == copy[key], key


def test_a_folder_named_like_a_table_is_refused(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.path("t.npy").mkdir()
    sandbox.refused("stress", "file:t.npy", *STRESS, words=("t.npy", "not a regular file"))


@pytest.mark.parametrize("name", ["missing.npy", "t.txt", "t.pt"])
def test_a_missing_or_unknown_table_file_is_refused(sandbox: Sandbox, name: str) -> None:
    sandbox.copy_sample("drift.txt")
    if name != "missing.npy":
        sandbox.write(name, "0.1 0.2\n")
    sandbox.refused("stress", f"file:{name}", *STRESS, words=(name,))


# --- plain tables: .safetensors --------------------------------------------------------------

ST_REFUSED: list[tuple[str, Callable[[], bytes], str]] = [
    ("bools", lambda: st_save({"table": _table() > 0}), "booleans"),
    ("nan", lambda: st_save({"table": _with_nan()}), "nan"),
    ("inf", lambda: st_save({"position_embeddings": _with(np.inf)}), "infinite"),
    ("1-d", lambda: st_save({"table": _table()[:, 0].copy()}), "2-d"),
    ("3-d", lambda: st_save({"table": _table()[None]}), "2-d"),
    ("no-rows", lambda: st_save({"table": np.zeros((0, 8))}), "empty"),
    ("no-columns", lambda: st_save({"table": np.zeros((64, 0))}), "empty"),
    ("two-tensors", lambda: st_save({"a": _table(), "b": _table()}), "position_embeddings"),
    ("no-tensor", lambda: st_save({}), "tensors"),
    ("single-position", lambda: st_save({"table": _table()[:1].copy()}), "no row for position 1"),
    (
        "pe-positions-float",
        lambda: st_save({"position_embeddings": _table(), "positions": np.arange(64.0)}),
        "1-d integer",
    ),
    (
        "pe-positions-repeat",
        lambda: st_save({"position_embeddings": _table(), "positions": np.zeros(64, np.int64)}),
        "repeats",
    ),
    ("truncated", lambda: st_save({"table": _table()})[:-64], "safetensors"),
    (
        "geoanalyze-counts-header",
        lambda: st_save({"table": _table()}, metadata={"geoanalyze": '{"kind": "counts"}'}),
        "counts",
    ),
]


@pytest.mark.parametrize(("make", "word"), [case[1:] for case in ST_REFUSED], ids=[c[0] for c in ST_REFUSED])
def test_bad_safetensors_table_is_refused(sandbox: Sandbox, make: Callable[[], bytes], word: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("t.safetensors", make())
    sandbox.refused("stress", "file:t.safetensors", *STRESS, words=("t.safetensors", word))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "uint8"])
def test_good_safetensors_table_scores_as_its_float64_copy(sandbox: Sandbox, dtype: str) -> None:
    sandbox.copy_sample("drift.txt")
    values = (_table() * 10 + 50).astype(dtype)
    sandbox.write("t.safetensors", st_save({"table": values}))
    sandbox.write("copy.safetensors", st_save({"table": values.astype(np.float64)}))
    ours = json.loads(sandbox.accepted("stress", "file:t.safetensors", *STRESS, "-f", "json").stdout)
    theirs = json.loads(sandbox.accepted("stress", "file:copy.safetensors", *STRESS, "-f", "json").stdout)
    (mine,), (copy,) = ours["scores"].values(), theirs["scores"].values()
    assert mine["scaled_stress"] == copy["scaled_stress"] and mine["stress"] == copy["stress"]


# --- synthetic specs (read by `marginals`) ---------------------------------------------------

SYNTHETIC_REFUSED: list[tuple[str, str]] = [
    ("synthetic:shift,n=30,length=8,vocab=50,kappa=-1e300", "kappa"),
    ("synthetic:shift,n=30,length=8,vocab=50,kappa=-1", "kappa"),
    ("synthetic:shift,n=30,length=8,vocab=50,kappa=1e300", "kappa"),
    ("synthetic:shift,n=30,length=8,vocab=50,kappa=nan", "kappa"),
    ("synthetic:shift,n=30,length=8,vocab=50,kappa=inf", "kappa"),
    ("synthetic:shift,n=30,length=8,vocab=50,kappa=abc", "kappa"),
    ("synthetic:shift,n=30,length=8,vocab=50,step=1e30", "step"),
    ("synthetic:shift,n=30,length=8,vocab=50,step=-3", "step"),
    ("synthetic:shift,n=30,length=8,vocab=50,step=2.5", "step"),
    ("synthetic:rough,n=30,length=8,vocab=50,amplitude=1e300", "amplitude"),
    ("synthetic:rough,n=30,length=8,vocab=50,amplitude=-1", "amplitude"),
    ("synthetic:rough,n=30,length=8,vocab=50,roughness=2", "roughness"),
    ("synthetic:rough,n=30,length=8,vocab=50,roughness=-0.1", "roughness"),
    ("synthetic:drift,n=30,length=8,vocab=50,anchors=1", "anchors"),
    ("synthetic:drift,n=30,length=8,vocab=50,anchors=1e30", "anchors"),
    ("synthetic:drift,n=30,length=8,vocab=50,anchors=2.5", "anchors"),
    ("synthetic:drift,n=1e12,length=16,vocab=50", "cells"),
    ("synthetic:drift,n=10,length=1e9,vocab=50", "cells"),
    ("synthetic:drift,n=10,length=100,vocab=1e9", "cells"),
    ("synthetic:drift,n=0,length=8,vocab=50", "n"),
    ("synthetic:drift,n=-3,length=8,vocab=50", "n"),
    ("synthetic:drift,n=2.5,length=8,vocab=50", "n"),
    ("synthetic:drift,n=abc,length=8,vocab=50", "n"),
    ("synthetic:drift,n=nan,length=8,vocab=50", "n"),
    ("synthetic:drift,n=inf,length=8,vocab=50", "n"),
    ("synthetic:drift,n=30,length=0,vocab=50", "length"),
    ("synthetic:drift,n=30,length=8,vocab=0", "vocab"),
    ("synthetic:drift,n=30,length=8,vocab=-5", "vocab"),
    ("synthetic:drift,n=30,length=8,vocab=50,seed=-1", "seed"),
    ("synthetic:drift,n=30,length=8,vocab=50,seed=1.5", "seed"),
    ("synthetic:drift,n=30,length=8,vocab=50,bogus=3", "bogus"),
    ("synthetic:shift,n=30,length=8,vocab=50,anchors=3", "anchors"),
    ("synthetic:drift,n=30,length=8,vocab=50,step=3", "step"),
    ("synthetic:stationary,n=30,length=8,vocab=50,kappa=1", "kappa"),
    ("synthetic:wobble,n=30", "wobble"),
    ("synthetic:drift,n", "n"),
]


@pytest.mark.parametrize(("spec", "word"), SYNTHETIC_REFUSED, ids=[c[0].split(":", 1)[1] for c in SYNTHETIC_REFUSED])
def test_bad_synthetic_spec_is_refused(sandbox: Sandbox, spec: str, word: str) -> None:
    sandbox.refused("marginals", spec, "-t", "whitespace", "-f", "json", words=(word,))


@pytest.mark.parametrize(
    "spec",
    ["synthetic:drift,n=300,length=16,vocab=50,n=5", "synthetic:drift,n=300,length=16,vocab=50,vocab=60"],
)
def test_a_repeated_synthetic_key_is_refused(sandbox: Sandbox, spec: str) -> None:
    sandbox.refused("marginals", spec, "-t", "whitespace", words=("twice",))


@pytest.mark.parametrize(
    "spec",
    [
        "synthetic:drift,n=300,length=16,vocab=50",
        "synthetic:shift,n=100,length=8,vocab=40,kappa=1e4,step=0",
        "synthetic:rough,n=100,length=8,vocab=40,amplitude=50,roughness=1",
        "synthetic:stationary,n=100,length=8,vocab=1",
    ],
    ids=["drift", "shift-extreme-kappa", "rough-extreme-amplitude", "stationary-one-token"],
)
def test_extreme_but_valid_synthetic_specs_give_finite_normalised_marginals(sandbox: Sandbox, spec: str) -> None:
    from geoanalyze.corpus.sources import parse_synthetic_spec
    from geoanalyze.corpus.synthetic import synthetic_corpus

    sandbox.accepted("marginals", spec, "-t", "whitespace", "-f", "json")
    kind, options = parse_synthetic_spec(spec)
    marginals = synthetic_corpus(kind, **options).marginals  # type: ignore[arg-type]
    assert np.all(np.isfinite(marginals)) and np.all(marginals >= 0)
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-12)


def test_synthesize_writes_finite_normalised_marginals(sandbox: Sandbox) -> None:
    sandbox.accepted("datasets", "synthesize", "shift", "-o", "out", "--n", "40", "--length", "8", "--vocab", "30")
    marginals = np.load(Path(sandbox.path("out")) / "shift.marginals.npy", allow_pickle=False)
    assert marginals.dtype == np.float64 and marginals.shape == (8, 30)
    assert np.all(np.isfinite(marginals))
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-12)


# --- learned:<checkpoint> tables are indexed by the checkpoint's own tokens -----------------


@pytest.mark.parametrize("tokenizer", ["whitespace", "char"])
def test_learned_table_against_counts_of_another_tokenizer_is_refused(
    sandbox: Sandbox, minilm_path: Path, tokenizer: str
) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(
        "stress",
        "rope:d=16",
        "--dataset",
        "drift.txt",
        "-t",
        tokenizer,
        "--compare",
        f"learned:{minilm_path}",
        "--null-draws",
        "2",
        words=("learned:", tokenizer, "tokenizer"),
    )


# --- encodings given as Python callables: the same dtype rule --------------------------------


@pytest.mark.parametrize(
    "values",
    [
        lambda n: np.ones((n, 2)) * (1 + 1j),
        lambda n: np.ones((n, 2)) + 0j,
        lambda n: np.array([["a", "b"]] * n),
        lambda n: np.ones((n, 2), dtype=bool),
        lambda n: np.array([[object(), object()]] * n, dtype=object),
    ],
    ids=["complex", "complex-real-valued", "strings", "bools", "objects"],
)
def test_a_callable_encoding_of_non_real_values_is_refused(values: Callable[[int], np.ndarray]) -> None:
    from geoanalyze.encodings import get_encoding
    from geoanalyze.errors import InputError

    with pytest.raises(InputError, match="real numbers"):
        get_encoding(lambda positions: values(len(positions))).vectors([0, 1, 2])


# --- encoding specs: parameters are numbers in range, each given once ------------------------


@pytest.mark.parametrize(
    ("spec", "word"),
    [
        ("rope:d=16,d=32", "twice"),
        ("rope:d=16,base=100,base=1000", "twice"),
        ("alibi:heads=8,heads=4", "twice"),
        ("mds:rank=2,rank=3", "twice"),
        ("rope:d=16,base=nan", "base"),
        ("rope:d=16,base=-1", "base"),
        ("random:d=1e12", "d"),
        ("sinusoidal:d=1e9", "d"),
        ("random:d=16,seed=-1", "seed"),
        ("rope:d=nan", "finite"),
        ("alibi:heads=nan", "finite"),
        ("rope:d=inf", "finite"),
        ("rope:d=1e400", "finite"),
        ("random:d=-inf", "finite"),
        ("rope:d=16,base=inf", "finite"),
        ("rope:d=2.5", "integer"),
        ("rope:d=abc", "not a number"),
    ],
)
def test_bad_encoding_parameters_are_refused(sandbox: Sandbox, spec: str, word: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused("stress", spec, *STRESS, words=(word,))


# --- consistent but degenerate counts: refused with a hint that can work ---------------------


def _counts_of_rows(data: bytes, rows: int | None, zero: bool = False) -> bytes:
    """The real counts cut to its first ``rows`` positions (None: all), or with every count removed."""
    arrays, document = unpack(data)
    n = document["shape"][0] if rows is None else rows
    for name in ("counts", "half"):
        indptr = arrays[f"{name}.indptr"][: n + 1].copy()
        if zero:
            indptr[:] = 0
        end = int(indptr[-1])
        arrays[f"{name}.indptr"] = indptr
        arrays[f"{name}.indices"] = arrays[f"{name}.indices"][:end].copy()
        arrays[f"{name}.data"] = arrays[f"{name}.data"][:end].copy()
    document["shape"] = [n, document["shape"][1]]
    return pack(arrays, document)


@pytest.mark.parametrize(
    ("rows", "zero", "args", "word"),
    [
        (0, False, ("distances",), "need 2"),
        (None, True, ("distances",), "need 2"),
        (1, False, ("distances",), "need 2"),
        (1, False, ("mds", "--dim", "4"), "need 2"),
        (None, False, ("distances", "--min-count", "100000"), "lower --min-count to 2000"),
        (None, False, ("mds", "--dim", "4", "--min-count", "100000"), "lower --min-count to 2000"),
    ],
    ids=["no-position", "all-zero", "one-position", "one-position-mds", "min-count-too-high", "min-count-too-high-mds"],
)
def test_degenerate_counts_get_a_hint_that_works(
    sandbox: Sandbox, real: dict[str, bytes], rows: int | None, zero: bool, args: tuple[str, ...], word: str
) -> None:
    sandbox.write("c.safetensors", _counts_of_rows(real["c.safetensors"], rows, zero))
    command, *options = args
    sandbox.refused(command, "c.safetensors", *options, words=(word,))


@pytest.mark.parametrize(
    ("length", "word"), [(2, "fewer than 3 positions"), (64, "lower --min-count to 300")], ids=["short", "high"]
)
def test_stress_on_too_few_positions_gets_a_hint_that_works(sandbox: Sandbox, length: int, word: str) -> None:
    spec = f"synthetic:drift,n=300,length={length},vocab=50"
    min_count = "100000" if length == 64 else "1"
    sandbox.refused("stress", "rope:d=16", "--dataset", spec, "--compare", "", "--min-count", min_count, words=(word,))
