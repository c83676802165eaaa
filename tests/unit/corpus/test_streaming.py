"""geoanalyze.corpus.streaming: streamed, sharded, parallel and resumable counts equal one pass.

The reference is :func:`count_positions` over the list of texts read without geoanalyze's
streaming code; "identical" means the same matrices (counts and split-half counts), the same
vocabulary and the same metadata.
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.corpus.marginals import PositionalCounts, count_positions
from geoanalyze.corpus.sources import HubSource, SyntheticSource, resolve_source
from geoanalyze.corpus.streaming import (
    CountJob,
    Shard,
    compute_counts,
    count_stream,
    shard_size,
    shards_of,
    uniforms,
)
from geoanalyze.corpus.tokenize import HFTokenizer, WhitespaceTokenizer, get_tokenizer
from geoanalyze.errors import FormatError, IncompatibleError, InputError

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]


def identical(a: PositionalCounts, b: PositionalCounts, metadata: bool = True) -> None:
    """Bit for bit: the same CSR arrays (canonical), vocabulary and metadata."""
    for x, y in ((a.counts, b.counts), (a.half, b.half)):
        x, y = sp.csr_array(x), sp.csr_array(y)
        x.sum_duplicates()
        y.sum_duplicates()
        x.eliminate_zeros()
        y.eliminate_zeros()
        assert x.shape == y.shape
        assert np.array_equal(x.indptr, y.indptr)
        assert np.array_equal(x.indices, y.indices)
        assert np.array_equal(x.data, y.data)
        assert x.data.dtype == y.data.dtype == np.int64
    assert a.vocab == b.vocab
    if metadata:
        keep = ("tokenizer", "max_length", "exclude_special", "add_special_tokens", "split_seed", "n_sequences")
        assert {k: a.metadata.get(k) for k in keep} == {k: b.metadata.get(k) for k in keep}


def write_jsonl_shards(folder: Path, texts: list[str], cuts: list[int], gz: bool = True) -> list[Path]:
    """The texts cut at ``cuts`` into numbered .jsonl(.gz) shards, with blank records mixed in."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = [0, *cuts, len(texts)]
    paths = []
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        path = folder / (f"part-{k:03d}.jsonl" + (".gz" if gz else ""))
        lines = [json.dumps({"text": t, "id": i}) for i, t in enumerate(texts[a:b])] + [json.dumps({"text": "  "})]
        data = ("\n".join(lines) + "\n").encode()
        path.write_bytes(gzip.compress(data) if gz else data)
        paths.append(path)
    return paths


def stream(source: str, tokenizer: Any, tmp_path: Path, **kwargs: Any) -> PositionalCounts:
    resolved = resolve_source(source)
    job = {"corpus": resolved.name, "source": resolved.fingerprint, "tokenizer": tokenizer.identity()}
    job.update({k: v for k, v in kwargs.items() if k in ("limit", "sample", "sample_seed", "split_seed")})
    return count_stream(
        shards_of(resolved), tokenizer, CountJob(work_dir=tmp_path / "work", fresh=True, **kwargs), job
    )[0]


@pytest.fixture(scope="module")
def bert(minilm_path: Path) -> HFTokenizer:
    return HFTokenizer(str(minilm_path))


@pytest.fixture(scope="module")
def imdb_head(imdb_reviews: list[str]) -> list[str]:
    return imdb_reviews[:400]


# --- the coin -----------------------------------------------------------------------------


@given(seed=st.integers(0, 2**63), start=st.integers(0, 10**6), count=st.integers(0, 50))
@settings(max_examples=30, deadline=None)
def test_uniform_at_an_index_is_the_sequential_draw(seed: int, start: int, count: int) -> None:
    """PCG64.advance reaches draw g without the ones before: the same numbers as drawing them all."""
    rng = np.random.default_rng(seed)
    if start:
        rng.random(start)
    assert np.array_equal(uniforms(seed, start, count), rng.random(count))


# --- identical to one pass over the list ---------------------------------------------------


@pytest.mark.parametrize("name", ["sst2/train.tsv", "wikitext2/validation.tokens", "imdb/train.jsonl.gz"])
def test_streamed_real_corpus_equals_one_pass(
    shared_data: Path, bert: HFTokenizer, tmp_path: Path, name: str, imdb_reviews: list[str]
) -> None:
    """A real corpus file streamed (one shard) gives today's counts exactly: counts, halves, metadata."""
    source = resolve_source(str(shared_data / name))
    limit = 1000
    texts = source.read(limit)
    streamed = stream(str(shared_data / name), bert, tmp_path, limit=limit, split_seed=3)
    identical(streamed, count_positions(texts, bert, split_seed=3))


def test_jsonl_shards_equal_one_pass_and_workers_change_nothing(
    bert: HFTokenizer, imdb_head: list[str], tmp_path: Path
) -> None:
    write_jsonl_shards(tmp_path / "shards", imdb_head, [100, 101, 250])
    reference = count_positions(imdb_head, bert, split_seed=5)
    one = stream(str(tmp_path / "shards"), bert, tmp_path, split_seed=5, workers=1)
    two = stream(str(tmp_path / "shards" / "*.jsonl.gz"), bert, tmp_path, split_seed=5, workers=2)
    identical(one, reference)
    identical(two, one)  # bit for bit, metadata included
    assert one.metadata == two.metadata


def test_txt_and_parquet_shards(bert: HFTokenizer, imdb_head: list[str], tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [t.replace("\n", " ") for t in imdb_head[:300]]
    (tmp_path / "txt").mkdir()
    (tmp_path / "txt" / "a.txt").write_text("\n".join(texts[:120]) + "\n\n", encoding="utf-8")
    (tmp_path / "txt" / "b.txt.gz").write_bytes(gzip.compress("\n".join(texts[120:]).encode()))
    reference = count_positions([t.strip() for t in texts], bert)
    identical(stream(str(tmp_path / "txt" / "*.txt*"), bert, tmp_path, workers=2), reference)
    (tmp_path / "pq").mkdir()
    for k, (a, b) in enumerate([(0, 77), (77, 300)]):
        pq.write_table(pa.table({"review": texts[a:b], "n": list(range(b - a))}), tmp_path / "pq" / f"{k}.parquet")
    source = resolve_source(str(tmp_path / "pq"))
    assert source.kind == "shards" and len(source.files) == 2
    identical(stream(str(tmp_path / "pq"), bert, tmp_path), count_positions(texts, bert))


@settings(max_examples=25, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), max_size=7).map(" ".join), min_size=1, max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    seed=st.integers(0, 100),
    batch_size=st.integers(1, 9),
)
def test_any_sharding_of_a_built_vocabulary_equals_one_pass(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], cuts: list[int], seed: int, batch_size: int
) -> None:
    """Whitespace tokens: even the vocabulary order (first appearance) survives the sharding."""
    if not any(t.strip() for t in texts):
        return
    tmp = tmp_path_factory.mktemp("shards")
    write_jsonl_shards(tmp / "s", texts, sorted(min(c, len(texts)) for c in cuts), gz=False)
    kept = [t for t in texts if t.strip()]
    reference = count_positions(kept, WhitespaceTokenizer(5), split_seed=seed)
    resolved = resolve_source(str(tmp / "s"))
    job = {"source": resolved.fingerprint, "seed": seed, "batch": batch_size}
    shards = shards_of(resolved)
    streamed, _ = count_stream(
        shards, WhitespaceTokenizer(5), CountJob(split_seed=seed, work_dir=tmp / "w", workers=1), job
    )
    identical(streamed, reference)


def test_limit_and_sample_while_streaming(bert: HFTokenizer, imdb_head: list[str], tmp_path: Path) -> None:
    write_jsonl_shards(tmp_path / "shards", imdb_head, [100, 200, 300])
    for workers in (1, 2):
        limited = stream(str(tmp_path / "shards"), bert, tmp_path, limit=321, workers=workers)
        identical(limited, count_positions(imdb_head[:321], bert))
    # --sample keeps text r when the r-th uniform of its own seeded stream is below the fraction;
    # drawn here independently, all at once.
    draws = np.random.default_rng(np.random.SeedSequence([7, 0x53414D50])).random(len(imdb_head))
    chosen = [t for t, u in zip(imdb_head, draws, strict=True) if u < 0.3]
    for workers in (1, 2):
        sampled = stream(str(tmp_path / "shards"), bert, tmp_path, sample=0.3, sample_seed=7, workers=workers)
        identical(sampled, count_positions(chosen, bert))
    both = stream(str(tmp_path / "shards"), bert, tmp_path, sample=0.3, sample_seed=7, limit=50, workers=2)
    identical(both, count_positions(chosen[:50], bert))


def test_replica_counts_are_exactly_k_times(bert: HFTokenizer, imdb_head: list[str], tmp_path: Path) -> None:
    """IMDB x k as k identical shards: the counts are exactly k x those of x1 (the halves differ)."""
    k = 4
    base = tmp_path / "x1.jsonl.gz"
    write_jsonl_shards(tmp_path / "one", imdb_head, [])[0].rename(base)
    (tmp_path / "xk").mkdir()
    for i in range(k):
        (tmp_path / "xk" / f"copy-{i}.jsonl.gz").write_bytes(base.read_bytes())
    x1 = stream(str(base), bert, tmp_path)
    xk = stream(str(tmp_path / "xk"), bert, tmp_path, workers=2)
    assert xk.counts.shape == x1.counts.shape
    assert np.array_equal(xk.counts.indices, x1.counts.indices)
    assert np.array_equal(xk.counts.data, k * x1.counts.data)
    assert xk.n_sequences == k * x1.n_sequences
    assert not np.array_equal(xk.half_totals, k * x1.half_totals)  # one coin per sequence, not per copy


def test_folder_of_one_text_files_is_sharded(tmp_path: Path) -> None:
    from geoanalyze.corpus import streaming

    rng = random.Random(2)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(0, 6))) for _ in range(25)]
    for i, text in enumerate(texts):
        (tmp_path / "docs" / f"{i // 10}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / f"{i // 10}" / f"{i:03d}.txt").write_text(text, encoding="utf-8")
    source = resolve_source(str(tmp_path / "docs"))
    assert source.kind == "folder"
    old = streaming.FILES_PER_SHARD
    streaming.FILES_PER_SHARD = 4
    try:
        shards = shards_of(source)
    finally:
        streaming.FILES_PER_SHARD = old
    assert len(shards) == 7
    job = {"source": source.fingerprint}
    counted, _ = count_stream(shards, WhitespaceTokenizer(), CountJob(work_dir=tmp_path / "w", workers=2), job)
    identical(counted, count_positions(source.read(), WhitespaceTokenizer()))


# --- the work folder ----------------------------------------------------------------------


def test_resume_counts_only_the_missing_shards(bert: HFTokenizer, imdb_head: list[str], tmp_path: Path) -> None:
    write_jsonl_shards(tmp_path / "shards", imdb_head, [70, 140, 210, 280, 350])
    whole = stream(str(tmp_path / "shards"), bert, tmp_path)
    source = resolve_source(str(tmp_path / "shards"))
    job = {"source": source.fingerprint}
    work = tmp_path / "resumed"
    _, first = count_stream(shards_of(source), bert, CountJob(work_dir=work), job)
    for k in (1, 4):
        (work / f"shard-{k:06d}.safetensors").unlink()
    resumed, again = count_stream(shards_of(source), bert, CountJob(work_dir=work, workers=2), job)
    assert (first.counted, again.counted, again.reused) == (6, 2, 4)
    identical(resumed, whole)


def test_work_folder_of_another_tokenizer_is_refused_before_counting(
    bert: HFTokenizer, imdb_head: list[str], tmp_path: Path
) -> None:
    write_jsonl_shards(tmp_path / "shards", imdb_head[:50], [20])
    source = resolve_source(str(tmp_path / "shards"))
    work = CountJob(work_dir=tmp_path / "w")
    count_stream(shards_of(source), bert, work, {"tokenizer": bert.identity()})
    whitespace = WhitespaceTokenizer()
    with pytest.raises(IncompatibleError, match="another tokenizer"):
        count_stream(shards_of(source), whitespace, work, {"tokenizer": whitespace.identity()})
    short = get_tokenizer(str(bert.resolved), max_length=64)
    with pytest.raises(IncompatibleError, match=r"another tokenizer|another max length"):
        count_stream(
            shards_of(source),
            short,
            work,
            {"tokenizer": short.identity(), "max_length": 64},
        )


def test_corrupt_shard_names_itself_and_keeps_the_shards_done(
    bert: HFTokenizer, imdb_head: list[str], tmp_path: Path
) -> None:
    paths = write_jsonl_shards(tmp_path / "shards", imdb_head, [100, 200, 300])
    good = paths[2].read_bytes()
    paths[2].write_bytes(good[: len(good) // 2])  # a truncated gzip member
    source = resolve_source(str(tmp_path / "shards"))
    job = {"source": "fixed"}
    with pytest.raises(FormatError, match=r"part-002\.jsonl\.gz"):
        count_stream(shards_of(source), bert, CountJob(work_dir=tmp_path / "w", workers=1), job)
    kept = sorted(p.name for p in (tmp_path / "w").glob("shard-*"))
    assert kept == ["shard-000000.safetensors", "shard-000001.safetensors"]
    paths[2].write_bytes(good)
    resumed, report = count_stream(shards_of(source), bert, CountJob(work_dir=tmp_path / "w"), job)
    assert (report.reused, report.counted) == (2, 2)
    identical(resumed, count_positions(imdb_head, bert))


# --- compute_counts and the hub -----------------------------------------------------------


def test_compute_counts_streams_and_caches(bert: HFTokenizer, imdb_head: list[str], tmp_path: Path) -> None:
    write_jsonl_shards(tmp_path / "shards", imdb_head, [300])
    source = resolve_source(str(tmp_path / "shards" / "*.jsonl.gz"))
    counts, first = compute_counts(source, CountJob(tokenizer=str(bert.resolved), workers=2, limit=400))
    again, second = compute_counts(source, CountJob(tokenizer=str(bert.resolved), workers=1, limit=400))
    assert (first.cached, second.cached) == (False, True)
    assert (first.shards, first.counted, first.engine) == (2, 2, "2 processes")
    identical(counts, count_positions(imdb_head[:400], bert))
    identical(again, counts)


def test_hub_streaming_reads_what_datasets_streams(bert: HFTokenizer, imdb_head: list[str], tmp_path: Path) -> None:
    """datasets' streaming mode over local files (a hub id streams through the same code)."""
    paths = write_jsonl_shards(tmp_path / "local", imdb_head[:200], [90], gz=False)
    shard = Shard("json", HubSource("json", "json", "", "train", data_files=tuple(str(p) for p in paths)))
    streamed, _ = count_stream([shard], bert, CountJob(work_dir=tmp_path / "w"), {"hub": "json"})
    identical(streamed, count_positions(imdb_head[:200], bert))


def test_bad_options(bert: HFTokenizer, tmp_path: Path) -> None:
    shard = Shard("s", SyntheticSource.of("synthetic:drift,n=20"))
    with pytest.raises(InputError, match="--sample"):
        count_stream([shard], bert, CountJob(sample=1.5, work_dir=tmp_path / "w"), {})
    with pytest.raises(InputError, match="--workers"):
        count_stream([shard], bert, CountJob(workers=0, work_dir=tmp_path / "w"), {})
    with pytest.raises(InputError, match="no file matches"):
        resolve_source(str(tmp_path / "nothing" / "*.jsonl"))


def test_an_aborted_pool_ends_its_workers_at_once() -> None:
    """A failed job stops its worker processes (found as this process's children, no private
    attribute of the pool), not waiting for the shards in flight; children started before stay."""
    import multiprocessing
    import time

    from geoanalyze.corpus.streaming import _ProcessPool

    before = set(multiprocessing.active_children())
    pool = _ProcessPool(2)
    assert pool.result(pool.submit(shard_size, Shard("s", SyntheticSource.of("synthetic:drift,n=5")))) == 5
    for _ in range(3):
        pool.submit(time.sleep, 60)  # shards in flight
    began = time.perf_counter()
    pool.close(abort=True)
    assert time.perf_counter() - began < 10
    for process in set(multiprocessing.active_children()) - before:
        process.join(10)
    assert set(multiprocessing.active_children()) <= before
