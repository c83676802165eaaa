"""Hostile or broken checkpoints: one `error:` line, exit 2, before any corpus work; no code from files.

Each case starts from a real zoo checkpoint (Llama or BERT, saved by transformers) and breaks
one thing, as a careless download or a hostile upload would.
"""

from __future__ import annotations

import json
import pickle
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import Run, invoke

from .conftest import CORPUS


def geoanalyze(*args: Any, cwd: Path) -> Run:
    """The command in this process (a subprocess per case would spend minutes importing torch), with
    load_checkpoint's per-process cache empty, as in a new process."""
    from geoanalyze.checkpoints import load_checkpoint

    load_checkpoint.cache_clear()
    return invoke(args, cwd)


def refused(result: Run, *words: str) -> None:
    assert result.code == 2, str(result)
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("note:")]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def copy_with(source: Path, target: Path, **changes: Any) -> Path:
    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    for key, value in changes.items():
        if value is ...:
            config.pop(key, None)
        else:
            config[key] = value
    (target / "config.json").write_text(json.dumps(config))
    return target


CASES = {
    "rope_theta is text": ("Llama", {"rope_theta": "abc"}, "rope_theta"),
    "rope_parameters theta is text": (
        "Llama",
        {"rope_parameters": {"rope_type": "default", "rope_theta": "abc"}},
        "rope_parameters.rope_theta",
    ),
    "architectures is a number": ("Llama", {"architectures": 5}, "architectures"),
    "max_position_embeddings is true": ("BERT", {"max_position_embeddings": True}, "max_position_embeddings"),
    "max_position_embeddings is 1e9": ("BERT", {"max_position_embeddings": 10**9}, "max_position_embeddings"),
    "hidden_size is negative": ("BERT", {"hidden_size": -4}, "hidden_size"),
    "rope_theta is infinite": ("Llama", {"rope_theta": 1e400}, "rope_theta"),
    "model_type unknown": ("BERT", {"model_type": "no-such-model"}, "transformers cannot read"),
    "heads do not divide the width": ("BERT", {"num_attention_heads": 5}, "cannot build"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_config_values_are_refused_at_once(zoo: dict[str, Path], tmp_path: Path, case: str) -> None:
    base, changes, word = CASES[case]
    folder = copy_with(zoo[base], tmp_path / "ckpt", **changes)
    started = time.perf_counter()
    result = geoanalyze("stress", folder, "--dataset", CORPUS, "--layers", "none", cwd=tmp_path)
    refused(result, word)
    assert time.perf_counter() - started < 60


def test_config_that_is_not_an_object(zoo: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    shutil.copytree(zoo["BERT"], folder)
    (folder / "config.json").write_text("[1, 2, 3]")
    refused(geoanalyze("stress", folder, "--dataset", CORPUS, cwd=tmp_path), "config.json")


def _rewrite_header(file: Path, edit: Any) -> None:
    data = file.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    edit(header)
    encoded = json.dumps(header).encode()
    encoded += b" " * ((8 - len(encoded) % 8) % 8)
    file.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data[8 + length :])


def test_a_weights_header_that_lies_about_shapes(zoo: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    shutil.copytree(zoo["BERT"], folder)

    def grow(header: dict[str, Any]) -> None:
        header["embeddings.position_embeddings.weight"]["shape"] = [6400, 32]

    _rewrite_header(folder / "model.safetensors", grow)
    refused(geoanalyze("stress", folder, "--dataset", CORPUS, "--layers", "none", cwd=tmp_path), "model.safetensors")


def test_a_one_dimensional_position_table(zoo: dict[str, Path], tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "ckpt"
    shutil.copytree(zoo["BERT"], folder)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["embeddings.position_embeddings.weight"] = tensors["embeddings.position_embeddings.weight"].reshape(-1)
    save_file(tensors, str(folder / "model.safetensors"))
    refused(geoanalyze("stress", folder, "--dataset", CORPUS, "--layers", "none", cwd=tmp_path), "position table")


class _Payload:
    """Unpickling this writes a file: proof that a pickle ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.write_text, (self.marker, "pwned"))


def test_a_malicious_bin_beside_safetensors_is_never_unpickled(zoo: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    shutil.copytree(zoo["Llama"], folder)
    marker = tmp_path / "pwned.txt"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    result = geoanalyze(
        "stress", folder, "--dataset", CORPUS, "--max-sequences", "64", "--max-length", "16", "-f", "json", cwd=tmp_path
    )
    assert result.code == 0, result.stderr
    assert not marker.exists()
    assert json.loads(result.stdout)["checkpoint"]["rows"]["query_key"].startswith("measured")


def test_a_model_too_large_for_memory_is_refused_before_loading(zoo: dict[str, Path], tmp_path: Path) -> None:
    """A config claiming 64 layers of width 65,536 (hundreds of GB): refused with the size, exit 2."""
    folder = copy_with(
        zoo["Llama"],
        tmp_path / "huge",
        hidden_size=65536,
        intermediate_size=262144,
        num_hidden_layers=64,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=1024,
    )
    started = time.perf_counter()
    result = geoanalyze("stress", folder, "--dataset", CORPUS, "--max-length", "16", "--compare", "", cwd=tmp_path)
    refused(result, "needs", "GiB")
    assert time.perf_counter() - started < 120


def test_a_model_larger_than_free_memory_but_sane_tensors(
    zoo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate before loading: weights + activations against the free memory (shrunk here to 1 MiB)."""
    from geoanalyze.checkpoints import hidden

    monkeypatch.setattr(hidden, "available_memory", lambda device: 1 << 20)
    result = geoanalyze(
        "stress",
        zoo["Llama"],
        "--dataset",
        CORPUS,
        "--max-length",
        "16",
        "--compare",
        "",
        "--no-cache",
        "--batch-size",
        "512",
        cwd=tmp_path,
    )
    refused(result, "needs about", "MiB", "lower --batch-size")


def test_bad_device_and_dtype(zoo: dict[str, Path], tmp_path: Path) -> None:
    refused(geoanalyze("stress", zoo["Llama"], "--dataset", CORPUS, "--dtype", "float8", cwd=tmp_path), "--dtype")
    refused(geoanalyze("stress", zoo["Llama"], "--dataset", CORPUS, "--device", "tpu", cwd=tmp_path), "--device")


def test_report_writes_the_page_past_an_unanalysable_target(zoo: dict[str, Path], tmp_path: Path) -> None:
    """One broken target gets its own section; the page and the others' figures are written; exit 1."""
    broken = copy_with(zoo["Llama"], tmp_path / "broken", rope_theta="abc")
    page = tmp_path / "out" / "report.md"
    work = tmp_path / "work"  # run outside the folder of the targets: the page shows their paths as given
    work.mkdir()
    result = geoanalyze(
        "report",
        zoo["Qwen3"],
        broken,
        "--dataset",
        CORPUS,
        "--max-length",
        "16",
        "--max-sequences",
        "64",
        "--compare",
        "sinusoidal",
        "-o",
        page,
        cwd=work,
    )
    assert result.code == 1, result.stderr
    assert "1 of 2 targets could not be analysed" in result.stderr
    text = page.read_text()
    import os

    def shown(path: Path) -> str:  # the page shows a target's path relative to the folder it was run in
        return os.path.relpath(path, work)

    assert f"## {shown(broken)}\n\nnot analysed: " in text and "rope_theta" in text
    assert f"| {shown(broken)} | - |" in text
    assert f"## {shown(zoo['Qwen3'])} on drift-words.txt" in text
    figures = sorted(p.name for p in (tmp_path / "out" / "report_files").iterdir())
    assert figures == ["0-hellinger.png", "0-layers.png", "0-mds.png", "0-null.png", "0-shepard.png"]
