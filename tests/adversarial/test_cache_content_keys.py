"""Cache keys from content (issue: the third bad-input catalogue): a corpus replaced by another
file of the same size and modification time (`cp -p`, `tar x`, a container image with fixed
mtimes) was served the old counts, since the key was path, size and mtime. The key is now the
SHA-256 of the bytes (remembered per file version: device, inode, size, mtime and ctime)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from geoanalyze.cache import DIGEST_CHARS, file_digests
from geoanalyze.corpus.marginals import PositionalCounts

from .harness import SAMPLES, Sandbox

WS = ["-t", "whitespace", "-f", "json"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache of this case's own: another case's corpus of the same bytes would be a hit."""
    monkeypatch.setenv("GEOANALYZE_CACHE_DIR", str(tmp_path / "cache"))


def two_versions(sandbox: Sandbox) -> tuple[Path, Path]:
    """a.txt and new.txt: the same size and mtime, each line's words in reverse order."""
    lines = (SAMPLES / "drift-words.txt").read_text(encoding="utf-8").splitlines()[:200]
    a = sandbox.write("a.txt", "\n".join(lines) + "\n")
    new = sandbox.write("new.txt", "\n".join(" ".join(reversed(line.split())) for line in lines) + "\n")
    assert a.stat().st_size == new.stat().st_size and a.read_bytes() != new.read_bytes()
    for path in (a, new):  # whole seconds, as a tar archive keeps them
        os.utime(path, (1_700_000_000, 1_700_000_000))
    return a, new


def counted(sandbox: Sandbox, *extra: str) -> dict[str, object]:
    return json.loads(sandbox.accepted("marginals", "a.txt", *WS, *extra).stdout)


def counts_written(sandbox: Sandbox, name: str, *extra: str) -> dict[str, list[str]]:
    """Each position's tokens, from the counts the run wrote to ``name``."""
    sandbox.accepted("marginals", "a.txt", *WS, "-o", name, *extra)
    counts = PositionalCounts.load(sandbox.path(name))
    assert counts.vocab is not None
    rows = counts.counts.tocsr()
    return {str(i): sorted(counts.vocab[j] for j in rows[[i]].indices) for i in range(rows.shape[0])}


@pytest.mark.parametrize("how", ["cp -p", "rename", "tar"])
def test_a_replaced_file_of_the_same_size_and_mtime_is_counted_again(sandbox: Sandbox, how: str) -> None:
    a, new = two_versions(sandbox)
    old = counts_written(sandbox, "old.safetensors")
    assert counted(sandbox)["sources"] == [{"source": "a.txt", "from": "cache"}]
    stat = a.stat()
    if how == "cp -p":
        shutil.copy2(new, a)  # over the file: the same inode, size and mtime
    elif how == "rename":
        os.replace(shutil.copy2(new, sandbox.path("staged.txt")), a)
    else:
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            tar.add(new, arcname="a.txt")
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(sandbox.root, filter="data")
    assert (a.stat().st_size, a.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert counted(sandbox)["sources"] != [{"source": "a.txt", "from": "cache"}]
    fresh = counts_written(sandbox, "fresh.safetensors")
    assert fresh == counts_written(sandbox, "recounted.safetensors", "--no-cache") != old


def test_an_unchanged_file_is_served_from_the_cache(sandbox: Sandbox) -> None:
    two_versions(sandbox)
    counted(sandbox)
    assert counted(sandbox)["sources"] == [{"source": "a.txt", "from": "cache"}]


def test_a_copy_with_its_mtime_is_the_same_corpus_to_the_cache(sandbox: Sandbox) -> None:
    """The key holds no path: `cp -p a.txt b.txt` is served a.txt's counts (the same bytes)."""
    a, _ = two_versions(sandbox)
    counted(sandbox)
    shutil.copy2(a, sandbox.path("b.txt"))
    run = json.loads(sandbox.accepted("marginals", "b.txt", *WS).stdout)
    assert run["sources"] == [{"source": "b.txt", "from": "cache"}]


def test_file_digests_are_the_sha256_of_the_bytes(tmp_path: Path) -> None:
    files = [tmp_path / "x", tmp_path / "y"]
    files[0].write_bytes(b"one\n")
    files[1].write_bytes(b"")
    expected = [hashlib.sha256(f.read_bytes()).hexdigest()[:DIGEST_CHARS] for f in files]
    assert file_digests(files) == expected
    assert file_digests(files) == expected  # remembered
    memo = list((Path(os.environ["GEOANALYZE_CACHE_DIR"]) / "digests").glob("*.json"))
    assert memo


def test_a_rewrite_that_restores_the_mtime_is_hashed_again(tmp_path: Path) -> None:
    """The memo is keyed by ctime too, which no tool can set back."""
    path = tmp_path / "x.txt"
    path.write_text("abc\n", encoding="utf-8")
    first = file_digests([path])[0]
    stat = path.stat()
    path.write_text("abd\n", encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_digests([path])[0] == hashlib.sha256(b"abd\n").hexdigest()[:DIGEST_CHARS] != first


def test_a_damaged_memo_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("abc\n", encoding="utf-8")
    file_digests([path])
    for memo in (Path(os.environ["GEOANALYZE_CACHE_DIR"]) / "digests").glob("*.json"):
        memo.write_text('["not a digest"]', encoding="utf-8")
    assert file_digests([path]) == [hashlib.sha256(b"abc\n").hexdigest()[:DIGEST_CHARS]]
