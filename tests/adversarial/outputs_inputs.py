"""Inputs of the output-side adversarial cases (test_outputs*.py): made once, copied into each sandbox."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import SAMPLES, Sandbox, invoke, running_as_root

CORPUS = ["-t", "whitespace"]
QUICK = ["-t", "whitespace", "--null-draws", "2", "--compare", ""]

_made: dict[str, bytes] = {}


def _built(root: Path) -> dict[str, bytes]:
    """counts, distances and PE files of drift.txt, made once per session."""
    if not _made:
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLES / "drift.txt", root / "drift.txt")
        for args in (
            ["marginals", "drift.txt", *CORPUS, "-o", "c.safetensors"],
            ["distances", "c.safetensors", "-o", "d.safetensors"],
            ["mds", "d.safetensors", "-o", "p.safetensors", "--dim", "8"],
        ):
            run = invoke(args, root)
            assert run.code == 0, str(run)
        for name in ("c.safetensors", "d.safetensors", "p.safetensors"):
            _made[name] = (root / name).read_bytes()
    return _made


def populate(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory | None = None) -> None:
    """drift.txt, corpus.json (the same text), corp/drift.txt, the counts c, distances d and PE file p,
    a folder ckpt/ standing for a checkpoint and words.txt."""
    root = Path(os.environ.get("GEOANALYZE_CACHE_DIR", "/tmp")) / "adversarial-outputs-inputs"
    for name, content in _built(root).items():
        sandbox.write(name, content)
    sandbox.copy_sample("drift.txt")
    sandbox.copy_sample("drift.txt", "corpus.json")
    sandbox.copy_sample("drift.txt", "corp/drift.txt")
    sandbox.write("ckpt/config.json", '{"model_type": "bert"}')
    sandbox.write("words.txt", "\n".join(f"word{i}" for i in range(60)) + "\n")


@contextlib.contextmanager
def read_only_folder(path: Path) -> Iterator[Path]:
    """``path`` (a folder) read-only: chmod for a normal user, a read-only bind mount for root.

    Skips (with the reason) when neither can make it read-only here.
    """
    path.mkdir(parents=True, exist_ok=True)
    if not running_as_root():
        from .harness import read_only

        with read_only(path):
            yield path
        return
    if shutil.which("mount") is None:
        pytest.skip("running as root (chmod does not stop root) and no mount command for a read-only bind mount")
    made = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"running as root and a read-only bind mount is not allowed here: {made.stderr.decode()[:100]}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True, check=False)
        if ro.returncode != 0:
            pytest.skip(f"running as root and a bind mount cannot be made read-only here: {ro.stderr.decode()[:100]}")
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def full_disk(path: Path, size: str = "64k") -> Iterator[Path]:
    """``path`` (a folder) on a tiny tmpfs: writes of more than ``size`` fail with ENOSPC (root only)."""
    path.mkdir(parents=True, exist_ok=True)
    if not running_as_root() or shutil.which("mount") is None:
        pytest.skip("a full disk needs a tiny tmpfs, which only root can mount (RLIMIT_FSIZE cases cover others)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {made.stderr.decode()[:100]}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True, check=False)


def fill(folder: Path, block: int) -> None:
    """Write ``folder/filler`` in blocks of ``block`` bytes until the disk is full (an OSError, expected)."""
    descriptor = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError):
            while True:
                os.write(descriptor, b"\0" * block)
    finally:
        os.close(descriptor)
