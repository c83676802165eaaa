"""Campaign 4, caches (docs/reliability.md): two rules, one per class.

* ``--no-cache`` neither reads nor writes: the campaign found counts and centroid entries written
  by ``stress``, ``marginals`` and ``track`` with ``--no-cache`` (docs/scores.md §12 says neither).
* An entry is served only if the key recorded in its header is the key asked for: a valid counts
  or centroids entry of another input, copied over this input's, was served as this input's result.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from geoanalyze.io import read_metadata

from .harness import SAMPLES, Sandbox

WS = ["-t", "whitespace", "-f", "json"]
QUICK = ["--null-draws", "2", "--compare", "", "--limit", "40", "--min-count", "5"]
MINILM = ["--layers", "2", "--max-sequences", "40", *QUICK]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this case's own, empty at the start."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("GEOANALYZE_CACHE_DIR", str(folder))
    return folder


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def two_corpora(sandbox: Sandbox) -> None:
    """a.txt and b.txt: different texts, so different counts."""
    lines = (SAMPLES / "drift-words.txt").read_text(encoding="utf-8").splitlines()
    sandbox.write("a.txt", "\n".join(lines[:120]) + "\n")
    sandbox.write("b.txt", "\n".join(" ".join(reversed(line.split())) for line in lines[120:200]) + "\n")


@pytest.mark.parametrize(
    "command",
    [
        ["marginals", "a.txt", *WS],
        ["stress", "rope:d=16", "--dataset", "a.txt", *WS, *QUICK],
        ["mds", "a.txt", *WS],
    ],
    ids=["marginals", "stress", "mds"],
)
def test_no_cache_writes_nothing_to_the_cache(sandbox: Sandbox, cache: Path, command: list[str]) -> None:
    two_corpora(sandbox)
    sandbox.accepted(*command, "--no-cache")
    assert files_under(cache) == []


def test_no_cache_reads_no_entry(sandbox: Sandbox, cache: Path) -> None:
    two_corpora(sandbox)
    sandbox.accepted("marginals", "a.txt", *WS)
    before = {name: (cache / name).read_bytes() for name in files_under(cache)}
    assert any(name.startswith("counts/") for name in before)
    document = json.loads(sandbox.accepted("marginals", "a.txt", *WS, "--no-cache").stdout)
    assert document["sources"] != [{"source": "a.txt", "from": "cache"}]
    assert {name: (cache / name).read_bytes() for name in files_under(cache)} == before


def test_a_counts_entry_of_another_input_copied_over_is_not_served(sandbox: Sandbox, cache: Path) -> None:
    two_corpora(sandbox)
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "a.safetensors")
    (entry_a,) = (cache / "counts").glob("*.safetensors")
    sandbox.accepted("marginals", "b.txt", *WS)
    (entry_b,) = set((cache / "counts").glob("*.safetensors")) - {entry_a}
    metadata = read_metadata(entry_a)
    assert metadata is not None and metadata["cache_key"] == entry_a.stem  # the entry records its key
    shutil.copyfile(entry_b, entry_a)  # a valid entry, of b.txt, under a.txt's key
    document = json.loads(sandbox.accepted("marginals", "a.txt", *WS, "-o", "again.safetensors").stdout)
    assert document["sources"] != [{"source": "a.txt", "from": "cache"}]
    assert sandbox.path("again.safetensors").read_bytes() == sandbox.path("a.safetensors").read_bytes()
    served = json.loads(sandbox.accepted("marginals", "a.txt", *WS).stdout)  # the entry was rewritten
    assert served["sources"] == [{"source": "a.txt", "from": "cache"}]


def test_a_counts_file_written_from_the_cache_carries_no_cache_key(sandbox: Sandbox, cache: Path) -> None:
    two_corpora(sandbox)
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "first.safetensors")
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "second.safetensors")  # from the cache
    for name in ("first.safetensors", "second.safetensors"):
        metadata = read_metadata(sandbox.path(name))
        assert metadata is not None and "cache_key" not in metadata
    assert sandbox.path("first.safetensors").read_bytes() == sandbox.path("second.safetensors").read_bytes()


@pytest.mark.slow  # three forward passes of the real MiniLM
def test_a_centroids_entry_of_another_input_copied_over_is_not_served(
    sandbox: Sandbox, cache: Path, minilm_path: Path
) -> None:
    two_corpora(sandbox)
    first = json.loads(sandbox.accepted("stress", minilm_path, "--dataset", "a.txt", *MINILM, "-f", "json").stdout)
    (entry_a,) = (cache / "centroids").glob("*.safetensors")
    sandbox.accepted("stress", minilm_path, "--dataset", "b.txt", *MINILM, "-f", "json")
    (entry_b,) = set((cache / "centroids").glob("*.safetensors")) - {entry_a}
    shutil.copyfile(entry_b, entry_a)
    again = json.loads(sandbox.accepted("stress", minilm_path, "--dataset", "a.txt", *MINILM, "-f", "json").stdout)
    assert any(row["projection"] == "hidden" for row in first["layers"])
    assert again["layers"] == first["layers"]


@pytest.mark.slow  # a forward pass of the real MiniLM per command
@pytest.mark.parametrize("command", ["stress", "track"])
def test_no_cache_writes_no_centroids(sandbox: Sandbox, cache: Path, minilm_path: Path, command: str) -> None:
    two_corpora(sandbox)
    args = [command, minilm_path, "--dataset", "a.txt", *MINILM, "-f", "json", "--no-cache"]
    if command == "track":
        args = [a for a in args if a != "--compare" and a != ""] + ["--order", "given"]
    sandbox.accepted(*args)
    assert files_under(cache) == []


@pytest.mark.parametrize("corpus", ["blank", "counted"])
def test_no_cache_leaves_no_temporary_job_folder(
    sandbox: Sandbox, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corpus: str
) -> None:
    """Our own adversary: --no-cache counts in a temporary folder, which a refused run left behind."""
    import tempfile

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    if corpus == "blank":
        sandbox.write("blank.txt", "\n\n\n")
        sandbox.refused("marginals", "blank.txt", "-t", "whitespace", "--no-cache", words=("holds no text",))
    else:
        two_corpora(sandbox)
        sandbox.accepted("marginals", "a.txt", *WS, "--no-cache")
    assert list(temporary.iterdir()) == [] and files_under(cache) == []


def test_a_no_cache_switch_read_outside_a_command_does_not_outlive_it(tmp_path: Path) -> None:
    """cache_option(no_cache=True) read outside the console script's caching() block (a command run by
    typer's test runner, or its options read by hand) left caches off for the rest of the process: a
    later count in the same process was never served from the cache. Outside a block it changes
    nothing; inside one it ends with the block."""
    from geoanalyze.cache import cache_enabled, caching
    from geoanalyze.cli.common import cache_option

    assert cache_option(True) is False
    assert cache_enabled()  # outside every block: nothing to turn off, nothing leaks
    with caching():
        cache_option(True)
        assert not cache_enabled()
    assert cache_enabled()
