"""--dataset stdlib (issue 34, item 3): the Python standard library's own .py files, a real corpus
of long documents every machine has; listed against an independent walk of sysconfig's folder."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from geoanalyze.corpus.sources import FolderSource, StdlibSource, resolve_source
from geoanalyze.corpus.streaming import shards_of

LEFT_OUT = {"site-packages", "dist-packages", "test", "tests", "idle_test"}


def walked() -> list[Path]:
    """The stdlib's .py files by rglob under each top-level entry but site-packages, with no folder
    of LEFT_OUT and nothing hidden on the way; sorted."""
    root = Path(sysconfig.get_paths()["stdlib"]).resolve()
    found = [f for f in root.glob("*.py") if f.is_file()]
    for entry in root.iterdir():
        if entry.is_dir() and entry.name not in LEFT_OUT:
            found += [f for f in entry.rglob("*.py") if f.is_file()]
    return sorted(
        f
        for f in found
        if not any(p in LEFT_OUT or p.startswith(".") for p in f.relative_to(root).parts[:-1])
        and not f.name.startswith(".")
    )


def test_stdlib_lists_the_files_it_should() -> None:
    source = resolve_source("stdlib")
    assert isinstance(source, StdlibSource) and isinstance(source, FolderSource)
    assert source.name == "stdlib" and source.kind == "folder"
    assert Path(source.location) == Path(sysconfig.get_paths()["stdlib"]).resolve()
    files = source.listed()
    assert files == walked()
    assert len(files) > 300 and all(f.suffix == ".py" for f in files)
    names = {f.relative_to(source.location).as_posix() for f in files}
    assert {"os.py", "json/__init__.py", "typing.py"} <= names
    assert not any(part in LEFT_OUT for name in names for part in name.split("/")[:-1])


def test_stdlib_is_deterministic_and_reads_each_file_whole() -> None:
    first, second = resolve_source("stdlib"), resolve_source("stdlib")
    assert first.fingerprint == second.fingerprint and first.fingerprint.startswith("stdlib:")
    files = first.listed()
    shards = shards_of(first, "document")
    assert [s.read for s in shards] == ["document"] * len(shards)
    texts = list(shards[0].texts())
    expected = [t for t in (f.read_text(encoding="utf-8").strip() for f in files[: len(texts) + 40]) if t]
    assert texts == expected[: len(texts)]
    assert any(len(t) > 100_000 for t in texts)  # long documents (typing.py, ... run past 20k tokens)


def test_a_local_folder_named_stdlib_is_read_first(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "stdlib").mkdir()
    (tmp_path / "stdlib" / "a.txt").write_text("mine", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    source = resolve_source("stdlib")
    assert not isinstance(source, StdlibSource) and list(source.stream()) == ["mine"]
