"""geoanalyze.corpus.sources: one class per corpus kind; shards carry their source; geometry reads counts by protocol."""

from __future__ import annotations

import gzip
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from geoanalyze.corpus.marginals import add_present, count_positions, merge_sorted
from geoanalyze.corpus.sources import (
    CorpusSource,
    FileSource,
    FolderSource,
    HubSource,
    Shard,
    ShardsSource,
    SyntheticSource,
    files_read,
    resolve_source,
)
from geoanalyze.corpus.streaming import shards_of
from geoanalyze.corpus.tokenize import WhitespaceTokenizer
from geoanalyze.geometry.distances import Counts, hellinger_distances


@pytest.fixture
def corpora(tmp_path: Path) -> dict[str, str]:
    """One source string of every local kind, and a synthetic spec."""
    (tmp_path / "one.txt").write_text("a b c\n\n d e \nf\n", encoding="utf-8")
    for i, text in enumerate(["x y", "  ", "z", "y x z"]):
        (tmp_path / "docs" / f"{i % 2}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / f"{i % 2}" / f"{i}.txt").write_text(text, encoding="utf-8")
    (tmp_path / "parts").mkdir()
    for k, texts in enumerate([["p q", "r"], ["s", " ", "t u"]]):
        lines = "\n".join(json.dumps({"text": t}) for t in texts) + "\n"
        (tmp_path / "parts" / f"{k}.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    return {
        "file": str(tmp_path / "one.txt"),
        "folder": str(tmp_path / "docs"),
        "shards": str(tmp_path / "parts"),
        "glob": str(tmp_path / "parts" / "*.jsonl.gz"),
        "synthetic": "synthetic:shift,n=30,length=8,vocab=20,seed=3",
    }


def test_each_kind_is_its_own_class(corpora: dict[str, str]) -> None:
    expected = {
        "file": FileSource,
        "folder": FolderSource,
        "shards": ShardsSource,
        "glob": ShardsSource,
        "synthetic": SyntheticSource,
    }
    for name, source in corpora.items():
        resolved = resolve_source(source)
        assert type(resolved) is expected[name], name
        assert isinstance(resolved, CorpusSource)
        assert resolved.describe()["kind"] == resolved.kind == expected[name].kind
    hub = resolve_source("someone/some-dataset", split="validation")
    assert isinstance(hub, HubSource) and hub.kind == "hub" and hub.fingerprint == "hub:someone/some-dataset:None:validation"
    assert files_read(hub) == set()


def test_shards_stream_what_read_reads_and_travel_to_workers(corpora: dict[str, str]) -> None:
    """The texts of a source's shards, in order, are those of read(); a shard pickles whole (its source with it)."""
    for name, source in corpora.items():
        resolved = resolve_source(source)
        shards = shards_of(resolved)
        assert all(isinstance(shard, Shard) for shard in shards)
        assert [text for shard in shards for text in shard.texts()] == resolved.read(), name
        assert list(resolved.stream()) == resolved.read(), name
        for shard in shards:
            copy = pickle.loads(pickle.dumps(shard))
            assert copy == shard and list(copy.texts()) == list(shard.texts())
            assert copy.fingerprint() == shard.fingerprint()


def test_a_folder_in_groups_reads_its_files_once(corpora: dict[str, str]) -> None:
    source = resolve_source(corpora["folder"])
    shards = source.shards(files_per_shard=3)
    assert [shard.name for shard in shards] == ["docs[0:]", "docs[3:]"]
    assert set().union(*(shard.source.files_read() for shard in shards)) == files_read(source)
    assert [text for shard in shards for text in shard.texts()] == source.read()


def test_a_shard_fingerprint_follows_its_file(corpora: dict[str, str]) -> None:
    source = resolve_source(corpora["shards"])
    shards = shards_of(source)
    before = [shard.fingerprint() for shard in shards]
    path = Path(source.files[1])
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    after = [shard.fingerprint() for shard in shards]
    assert after[0] == before[0] and after[1] != before[1]
    assert resolve_source(corpora["shards"]).fingerprint != source.fingerprint


def test_positional_counts_are_the_counts_geometry_reads() -> None:
    texts = ["a b c", "a c", "b b a c", "c"]
    counts = count_positions(texts, WhitespaceTokenizer())
    assert isinstance(counts, Counts)
    dense = counts.counts.toarray() / counts.totals[:, None]
    assert np.allclose(hellinger_distances(counts), hellinger_distances(dense), rtol=0, atol=1e-12)
    assert not isinstance(dense, Counts)


def test_add_present_and_merge_sorted() -> None:
    keys, values = np.array([1, 4, 9]), [np.array([10, 40, 90])]
    fresh = add_present(keys, values, np.array([0, 4, 9, 12]), [np.array([1, 2, 3, 4])])
    assert fresh.tolist() == [True, False, False, True]
    assert values[0].tolist() == [10, 42, 93]
    merged, (total,) = merge_sorted(keys, values, np.array([0, 4, 12]), [np.array([5, 6, 7])])
    assert merged.tolist() == [0, 1, 4, 9, 12] and total.tolist() == [5, 10, 48, 93, 7]
