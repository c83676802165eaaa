"""Adversarial inputs on the corpus side: empty names, binary files, broken compression, odd paths,
seeds out of range, experiment overrides. Every case is refused with exit 2 and one error line
naming the problem, leaves no file behind and changes no input (see harness.py)."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import struct
import zipfile
from collections.abc import Callable

import numpy as np
import pytest

from .harness import Sandbox, running_as_root, unreadable

DRIFT = "drift.txt"
SMALL = ("-t", "whitespace")
QUICK_STRESS = ("--null-draws", "2", "--compare", "")


def _text(lines: int = 40) -> bytes:
    return "".join(f"w{i % 7} w{i % 5} w{i % 3} w{i % 11}\n" for i in range(lines)).encode()


def _safetensors_bytes() -> bytes:
    header = json.dumps({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * 8


def _npy_bytes() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.arange(6.0))
    return buffer.getvalue()


def _zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("corpus.txt", _text().decode())
    return buffer.getvalue()


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 20
PICKLE = pickle.dumps({"texts": ["a b c"]}, protocol=4)
PDF = b"%PDF-1.4\n% not a corpus\n"
BZ2 = b"BZh91AY&SY" + b"\x00" * 30
XZ = b"\xfd7zXZ\x00" + b"\x00" * 30
ZSTD = b"\x28\xb5\x2f\xfd" + b"\x00" * 30
ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 30
HDF5 = b"\x89HDF\r\n\x1a\n" + b"\x00" * 30

#: (file name, bytes, a word the error must hold): binary formats given where a corpus goes
BINARY_FILES: list[tuple[str, Callable[[], bytes], str]] = [
    ("table.npy", _npy_bytes, "numpy"),
    ("weights.pt", _zip_bytes, "pytorch"),
    ("pytorch_model.bin", lambda: b"\x80\x02}q\x00." + b"\x00" * 10, "binary"),
    ("data.pkl", lambda: PICKLE, "pickle"),
    ("data.pickle", lambda: PICKLE, "pickle"),
    ("archive.zip", _zip_bytes, "zip"),
    ("figure.png", lambda: PNG, "png"),
    ("photo.jpg", lambda: b"\xff\xd8\xff\xe0" + b"\x00" * 20, "jpeg"),
    ("paper.pdf", lambda: PDF, "pdf"),
    ("foreign.safetensors", _safetensors_bytes, "safetensors"),
    ("arrays.npz", _zip_bytes, "numpy"),
    ("model.onnx", lambda: b"\x08\x07\x12\x04" + b"\x00" * 10, "onnx"),
    ("model.h5", lambda: HDF5, "hdf5"),
    ("corpus.txt.bz2", lambda: BZ2, "bzip2"),
    ("corpus.txt.xz", lambda: XZ, "xz"),
    ("corpus.txt.zst", lambda: ZSTD, "zstd"),
    # the name says text, the bytes do not
    ("disguised-pickle.txt", lambda: PICKLE, "pickle"),
    ("disguised-zip.txt", _zip_bytes, "zip"),
    ("disguised-png.txt", lambda: PNG, "png"),
    ("disguised-npy.txt", _npy_bytes, "numpy"),
    ("disguised-safetensors.jsonl", _safetensors_bytes, "safetensors"),
    ("disguised-pdf.csv", lambda: PDF, "pdf"),
    ("disguised-elf.tokens", lambda: ELF, "executable"),
    ("disguised-bz2.txt", lambda: BZ2, "bzip2"),
    ("gzip-without-gz.txt", lambda: gzip.compress(_text()), ".gz"),
    ("nul-bytes.txt", lambda: b"w1 w2\nw3\x00w4\n", "nul"),
    ("nul-bytes.jsonl", lambda: b'{"text": "a"}\n{"text": "b\x00"}\n', "nul"),
    ("nul-bytes.tsv", lambda: b"text\nab\ncd\x00\n", "nul"),
    ("latin1.txt", lambda: "caf\xe9 cr\xe8me\n".encode("latin-1"), "utf-8"),
    ("utf16.txt", lambda: "w1 w2\n".encode("utf-16"), "utf-8"),
]


@pytest.mark.parametrize(("name", "content", "word"), BINARY_FILES, ids=[case[0] for case in BINARY_FILES])
def test_a_binary_file_is_never_a_corpus_of_marginals(sandbox: Sandbox, name: str, content, word: str) -> None:
    sandbox.write(name, content())
    sandbox.refused("marginals", name, *SMALL, "--no-cache", words=(name, word))


@pytest.mark.parametrize(("name", "content", "word"), BINARY_FILES, ids=[case[0] for case in BINARY_FILES])
def test_a_binary_file_is_never_the_dataset_of_stress(sandbox: Sandbox, name: str, content, word: str) -> None:
    sandbox.write(name, content())
    sandbox.refused("stress", "rope:d=16", "--dataset", name, *SMALL, *QUICK_STRESS, "--no-cache", words=(name, word))


def test_a_counts_file_given_as_dataset_says_what_to_pass(sandbox: Sandbox) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.accepted("marginals", DRIFT, *SMALL, "-o", "counts.safetensors")
    sandbox.refused(
        "stress", "rope:d=16", "--dataset", "counts.safetensors", *SMALL, *QUICK_STRESS, words=("counts", "corpus")
    )


# --- empty and odd source strings -------------------------------------------------------------

EMPTY_SOURCES = [
    ("marginals", ""),
    ("marginals", " "),
    ("marginals", "\t"),
    ("marginals", "\n"),
    ("distances", ""),
    ("mds", ""),
]


@pytest.mark.parametrize(("command", "source"), EMPTY_SOURCES, ids=[f"{c}-{s!r}" for c, s in EMPTY_SOURCES])
def test_an_empty_source_is_refused_not_the_current_folder(sandbox: Sandbox, command: str, source: str) -> None:
    # a folder of .txt files is right here: an empty name must not count it
    sandbox.copy_sample(DRIFT)
    sandbox.write("notes/a.txt", "w1 w2 w3\n")
    sandbox.refused(command, source, *SMALL, words=("empty",))


@pytest.mark.parametrize("dataset", ["", " ", "  \t "])
def test_an_empty_dataset_of_stress_is_refused(sandbox: Sandbox, dataset: str) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.refused("stress", "rope:d=16", "--dataset", dataset, *SMALL, *QUICK_STRESS, words=("empty",))


def test_an_empty_dataset_of_train_is_refused(sandbox: Sandbox) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.refused("train", "-o", "run", "--task", "mlm", "--dataset", "", "--steps", "1", words=("empty",))


def test_an_empty_source_among_good_ones_is_refused(sandbox: Sandbox) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.refused("marginals", DRIFT, "", *SMALL, words=("empty",))


ODD_SOURCES = [
    ("nul-character", "drift\x00.txt", "nul"),
    ("long-component", "a" * 300 + ".txt", "too long"),
    ("long-folder", "b" * 300 + "/corpus.txt", "too long"),
]


@pytest.mark.parametrize(("source", "word"), [c[1:] for c in ODD_SOURCES], ids=[c[0] for c in ODD_SOURCES])
def test_an_impossible_path_is_one_line(sandbox: Sandbox, source: str, word: str) -> None:
    sandbox.refused("marginals", source, *SMALL, words=(word,))


@pytest.mark.parametrize("command", ["marginals", "stress"])
def test_a_fifo_is_not_called_missing(sandbox: Sandbox, command: str) -> None:
    os.mkfifo(sandbox.path("corpus.txt"))
    args = ["corpus.txt"] if command == "marginals" else ["rope:d=16", "--dataset", "corpus.txt", *QUICK_STRESS]
    result = sandbox.refused(command, *args, *SMALL, words=("named pipe", "not a regular file"))
    assert "not found" not in result.errors[0]


def test_a_broken_link_is_named_as_such(sandbox: Sandbox) -> None:
    os.symlink("gone.txt", sandbox.path("corpus.txt"))
    sandbox.refused("marginals", "corpus.txt", *SMALL, words=("broken symbolic link", "gone.txt"))


def test_a_path_with_a_newline_is_one_line(sandbox: Sandbox) -> None:
    sandbox.refused("marginals", "two\nlines.txt", *SMALL, words=("not found",))


@pytest.mark.skipif(running_as_root(), reason="root reads any file whatever its permissions")
def test_an_unreadable_folder_on_the_way(sandbox: Sandbox) -> None:
    sandbox.write("locked/corpus.txt", _text())
    with unreadable(sandbox.path("locked"), 0o755):
        sandbox.refused("marginals", "locked/corpus.txt", *SMALL, words=("permission",))


# --- broken compression -----------------------------------------------------------------------


def _gzip_of(suffix: str) -> bytes:
    if suffix.startswith(".jsonl"):
        return gzip.compress(
            b"".join(json.dumps({"text": line}).encode() + b"\n" for line in _text(200).decode().split("\n") if line)
        )
    if suffix.startswith((".tsv", ".csv")):
        return gzip.compress(b"text\n" + _text(200))
    return gzip.compress(_text(200))


def _corrupt(kind: str, data: bytes) -> bytes:
    if kind == "truncated":
        return data[: len(data) // 2]
    if kind == "header-only":
        return data[:10]
    if kind == "not-gzip":
        return b"this is plain text, not gzip\n" * 5
    if kind == "bad-crc":
        return data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:]
    if kind == "bad-deflate":
        return data[:10] + bytes([data[10] ^ 0xFF]) + data[11:]
    if kind == "trailing-garbage":
        return data + b"garbage after the stream"
    raise AssertionError(kind)


GZ_SUFFIXES = [".txt.gz", ".jsonl.gz", ".csv.gz", ".tsv.gz", ".tokens.gz"]
GZ_DAMAGE = ["truncated", "header-only", "not-gzip", "bad-crc", "bad-deflate", "trailing-garbage"]


@pytest.mark.parametrize("suffix", GZ_SUFFIXES)
@pytest.mark.parametrize("damage", GZ_DAMAGE)
def test_corrupt_gzip_is_exit_2_naming_the_file(sandbox: Sandbox, suffix: str, damage: str) -> None:
    name = f"corpus{suffix}"
    sandbox.write(name, _corrupt(damage, _gzip_of(suffix)))
    sandbox.refused("marginals", name, *SMALL, "--no-cache", words=(name,))


@pytest.mark.parametrize("damage", ["truncated", "bad-deflate", "bad-crc"])
def test_corrupt_gzip_shards_and_datasets(sandbox: Sandbox, damage: str) -> None:
    sandbox.write("shards/a.jsonl.gz", _gzip_of(".jsonl.gz"))
    sandbox.write("shards/b.jsonl.gz", _corrupt(damage, _gzip_of(".jsonl.gz")))
    sandbox.refused("marginals", "shards", *SMALL, "--no-cache", words=("b.jsonl.gz",))
    sandbox.refused(
        "stress",
        "rope:d=16",
        "--dataset",
        "shards/b.jsonl.gz",
        *SMALL,
        *QUICK_STRESS,
        "--no-cache",
        words=("b.jsonl.gz",),
    )


# --- seeds ------------------------------------------------------------------------------------

SEED_CASES = [
    ("stress", ["rope:d=16", "--dataset", DRIFT, *SMALL], "--seed", "-1"),
    ("stress", ["rope:d=16", "--dataset", DRIFT, *SMALL], "--seed", str(2**32)),
    ("stress", ["rope:d=16", "--dataset", DRIFT, *SMALL], "--seed", str(10**30)),
    ("report", ["rope:d=16", "--dataset", DRIFT, *SMALL], "--seed", "-1"),
    ("marginals", [DRIFT, *SMALL], "--split-seed", "-5"),
    ("marginals", [DRIFT, *SMALL], "--sample-seed", "-2"),
    ("marginals", [DRIFT, *SMALL, "--sample", "0.5"], "--sample-seed", str(2**40)),
    ("distances", [DRIFT, *SMALL], "--split-seed", "-1"),
    ("mds", [DRIFT, *SMALL], "--seed", "-1"),
    ("mds", [DRIFT, *SMALL], "--seed", str(2**32)),
    ("mds", [DRIFT, *SMALL], "--split-seed", "-3"),
    ("train", ["-o", "run", "--task", "order", "--steps", "1"], "--seed", "-1"),
    ("train", ["-o", "run", "--task", "order", "--steps", "1"], "--seed", str(2**33)),
    ("verify", ["journey", "-o", "out"], "--seed", "-1"),
    ("datasets synthesize", ["-o", "syn"], "--seed", "-7"),
]


@pytest.mark.parametrize(
    ("command", "args", "option", "value"), SEED_CASES, ids=[f"{c[0]}{c[2]}={c[3][:6]}" for c in SEED_CASES]
)
def test_a_seed_out_of_range_is_refused_naming_the_option(
    sandbox: Sandbox, command: str, args: list[str], option: str, value: str
) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.refused(*command.split(), *args, option, value, words=(option,))


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("stress", ["rope:d=16", "--dataset", DRIFT, *SMALL, *QUICK_STRESS, "-f", "json"]),
        ("mds", [DRIFT, *SMALL, "-f", "json"]),
        ("marginals", [DRIFT, *SMALL, "--sample", "0.5", "--sample-seed", str(2**32 - 1), "--no-cache", "-f", "json"]),
    ],
    ids=["stress", "mds", "marginals-sample"],
)
def test_the_largest_seed_is_accepted(sandbox: Sandbox, command: str, args: list[str]) -> None:
    sandbox.copy_sample(DRIFT)
    extra = [] if "--sample-seed" in args else ["--seed" if command != "marginals" else "--split-seed", str(2**32 - 1)]
    sandbox.accepted(command, *args, *extra)


# --- experiment overrides ---------------------------------------------------------------------

OVERRIDE_CASES = [
    ("journey", "bogus=1", "journey"),
    ("journey", "seed=3", "journey"),
    ("journey", "steps=abc", "journey"),
    ("edelta", "bogus=1", "edelta"),
    ("sinusoidal-optimality", "bogus=1", "bogus"),
    ("sinusoidal-optimality", "steps=abc", "steps"),
    ("alibi-rank1", "bogus=1", "bogus"),
    ("alibi-rank1", "steps=1.5", "steps"),
    ("mds-parameters", "bogus=1", "bogus"),
    ("joformer-reference", "bogus=1", "bogus"),
    ("joformer-reference", "steps=abc", "steps"),
    ("vision-2d", "bogus=1", "bogus"),
    ("edelta-benchmarks", "bogus=1", "bogus"),
    ("necessity", "bogus=1", "bogus"),
    ("necessity", "steps=abc", "steps"),
    ("length-generalization", "bogus=1", "bogus"),
    ("separation", "novalue", "key=value"),
]


@pytest.mark.parametrize(
    ("experiment", "setting", "word"), OVERRIDE_CASES, ids=[f"{c[0]}-{c[1]}" for c in OVERRIDE_CASES]
)
def test_every_experiment_refuses_a_bad_override(sandbox: Sandbox, experiment: str, setting: str, word: str) -> None:
    sandbox.refused("verify", experiment, "--set", setting, "-o", "out", words=(word,))


def _parquet_bytes(values: list) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"text": values}), buffer)
    return buffer.getvalue()


PARQUET_DAMAGE = {
    "cut": lambda: _parquet_bytes(["w1 w2 w3"] * 50)[:-40],
    "flipped-byte": lambda: _flip(_parquet_bytes(["w1 w2 w3"] * 50), None),
    "not-parquet": lambda: b"plain text named .parquet\n",
    "numbers-not-text": lambda: _parquet_bytes([1, 2, 3]),
}


def _flip(data: bytes, at: int | None) -> bytes:
    at = len(data) // 2 if at is None else at
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


@pytest.mark.parametrize("damage", list(PARQUET_DAMAGE))
def test_a_damaged_parquet_corpus_is_named(sandbox: Sandbox, damage: str) -> None:
    sandbox.write("corpus.parquet", PARQUET_DAMAGE[damage]())
    sandbox.refused("marginals", "corpus.parquet", *SMALL, "--no-cache", words=("corpus.parquet",))


JSON_BEYOND = {
    "nested-too-deep": "[" * 100_000 + "]" * 100_000 + "\n",
    "integer-of-10000-digits": '{"text": "a b", "n": ' + "9" * 10_000 + "}\n",
}


@pytest.mark.parametrize("case", list(JSON_BEYOND))
def test_json_lines_beyond_what_is_read_are_named(sandbox: Sandbox, case: str) -> None:
    sandbox.write("corpus.jsonl", JSON_BEYOND[case])
    sandbox.refused("marginals", "corpus.jsonl", *SMALL, "--no-cache", words=("corpus.jsonl", "line 1"))
