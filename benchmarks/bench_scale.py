"""Counting at scale: bounded memory, throughput against the tokenizer alone, workers, Dask, V = 262,144.

Measured in one run, ratios printed:

1. Peak RSS (the whole process tree: the command and its workers, sampled every 20 ms) of
   ``geoanalyze marginals SHARDS --no-cache`` on IMDB train x1 and x16, both as 16 shards
   (x1: the file cut in 16; x16: 16 copies of it; built here in a temporary folder), with
   bert-base-uncased and the default --workers (every core), so the two runs differ in corpus
   size only. Requirements: x16 <= 1.0 GB; x16 / x1 <= 1.25. The x16 counts are checked to be
   exactly 16 x the x1 counts. x1 as one file (one shard, counted in the command's own
   process) is printed too.
2. Throughput: ``count_stream`` (pool start, first pass, reading, tokenizing, counting,
   merging) against the tokenizer's own batch encoding (``encode_batch_fast``, the ids taken
   as lists as ``tok(texts)["input_ids"]`` gives them) of the same texts, already in memory,
   in the same number of processes with the same threads each.
   Requirement: ours <= 1.15 x the tokenizer alone.
3. ``--workers 2`` against ``--workers 1``, and a local Dask cluster against the process pool.
4. Hellinger distances and the noise floor (``position_geometry``) at n = 512, V = 262,144 on
   synthetic Zipf counts of IMDB-like sparsity, time and peak traced memory, against one dense
   product S S^T of the n x V square-root marginals.

Run: nice -n 10 .venv/bin/python benchmarks/bench_scale.py [--copies 16] [--skip-rss] [--skip-geometry]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import IMDB_FILE, machine, print_table, tokenizer_path, verdict

RSS_LIMIT_GB = 1.0
RSS_RATIO = 1.25
THROUGHPUT_LIMIT = 1.15
SCRIPT = shutil.which("geoanalyze", path=str(Path(sys.executable).parent)) or "geoanalyze"


# --- 1. peak RSS of the command -----------------------------------------------------------


def peak_rss(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(seconds, peak GB of the summed RSS of the process and all its descendants, stdout)."""
    import psutil

    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                total = 0
                for member in tree:
                    with contextlib.suppress(psutil.Error):
                        total += member.memory_info().rss
                peak = max(peak, total)
            except psutil.Error:
                pass
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, _ = process.communicate()
    done.set()
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"{' '.join(command)} failed with exit {process.returncode}")
    return time.perf_counter() - start, peak / 1e9, stdout


def replicate(folder: Path, copies: int) -> Path:
    """IMDB x copies as ``copies`` shards (each a copy of the whole file)."""
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(copies):
        shutil.copyfile(IMDB_FILE, folder / f"imdb-{k:03d}.jsonl.gz")
    return folder


def cut(folder: Path, shards: int) -> Path:
    """IMDB x1 cut into ``shards`` shards: the same layout as the replica, 1/shards of the text."""
    import gzip

    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(IMDB_FILE, "rb") as handle:
        lines = [line for line in handle.read().split(b"\n") if line.strip()]
    size = -(-len(lines) // shards)
    for k in range(shards):
        part = b"\n".join(lines[k * size : (k + 1) * size]) + b"\n"
        (folder / f"imdb-{k:03d}.jsonl.gz").write_bytes(gzip.compress(part, compresslevel=1))
    return folder


def measure_rss(tmp: Path, copies: int) -> bool:
    from geoanalyze.corpus.marginals import PositionalCounts

    env = dict(os.environ, GEOANALYZE_CACHE_DIR=str(tmp / "cache"), HF_HUB_OFFLINE="1")
    rows, results = [], {}
    layouts = (
        ("x1", f"{copies} shards (IMDB cut in {copies})", cut(tmp / "x1", copies)),
        (f"x{copies}", f"{copies} shards (IMDB copies)", replicate(tmp / f"x{copies}", copies)),
        ("x1, one file", "1 shard, 1 process", replicate(tmp / "x1-file", 1)),
    )
    for label, layout, folder in layouts:
        output = tmp / f"{label}.safetensors"
        command = [SCRIPT, "marginals", str(folder), "--no-cache", "-o", str(output), "-f", "json"]
        seconds, gb, _ = peak_rss(command, env)
        counts = PositionalCounts.load(output)
        tokens = int(counts.counts.sum())
        results[label] = (seconds, gb, counts)
        rows.append((label, layout, f"{tokens / 1e6:.1f} M", f"{seconds:.1f}", f"{gb:.2f}"))
        print(f"  {label}: {seconds:.1f} s, peak RSS {gb:.2f} GB", flush=True)
    print_table(rows, ("corpus", "layout", "tokens", "wall s", "peak RSS GB (tree)"))
    one, many = results["x1"][2], results[f"x{copies}"][2]
    exact = (
        many.counts.shape == one.counts.shape
        and (many.counts != copies * one.counts).nnz == 0
        and many.n_sequences == copies * one.n_sequences
    )
    big, small = results[f"x{copies}"][1], results["x1"][1]
    ratio = max(big, small) / min(big, small)
    passed = verdict(f"counts of x{copies} are exactly {copies} x those of x1", exact, f"{many.n_sequences} sequences")
    passed &= verdict(f"peak RSS of x{copies} <= {RSS_LIMIT_GB} GB", big <= RSS_LIMIT_GB, f"{big:.2f} GB")
    passed &= verdict(
        f"peak RSS of x1 and x{copies} within {RSS_RATIO}x", ratio <= RSS_RATIO, f"{big:.2f} / {small:.2f} = {ratio:.2f}x"
    )
    return passed


# --- 2. throughput against the tokenizer alone ---------------------------------------------


def _encode_share(args: tuple[str, list[str], Any]) -> float:
    """One baseline process: read its shards (not timed), wait for the others, encode them."""
    backend_json, files, barrier = args
    from tokenizers import Tokenizer

    from geoanalyze.corpus.sources import iter_file_texts

    tokenizer = Tokenizer.from_str(backend_json)
    texts = [text for file in files for text in iter_file_texts(Path(file), None)]
    barrier.wait()
    start = time.perf_counter()
    for i in range(0, len(texts), 4096):
        # The ids as Python lists, as tok(texts)["input_ids"] gives them (bench_counting.py's peer).
        [encoding.ids for encoding in tokenizer.encode_batch_fast(texts[i : i + 4096], add_special_tokens=True)]
    return time.perf_counter() - start


_BARRIER: Any = None


def _set_barrier(barrier: Any, threads: int) -> None:
    global _BARRIER
    _BARRIER = barrier
    os.environ["RAYON_NUM_THREADS"] = str(threads)


def _encode_with_barrier(args: tuple[str, list[str]]) -> float:
    return _encode_share((args[0], args[1], _BARRIER))


def tokenizer_alone(backend_json: str, files: list[str], processes: int) -> float:
    """Wall seconds of the tokenizer alone: ``processes`` processes, each its share of the shards."""
    from geoanalyze.corpus.streaming import default_workers

    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    threads = max(1, default_workers() // processes)
    shares = [(backend_json, files[p::processes]) for p in range(processes)]
    with context.Pool(processes, initializer=_set_barrier, initargs=(barrier, threads)) as pool:
        seconds = pool.map(_encode_with_barrier, shares)
    return max(seconds)


def ours(files: list[str], tokenizer: Any, workers: int, cluster: str | None = None) -> tuple[float, Any]:
    from geoanalyze.corpus.sources import resolve_source
    from geoanalyze.corpus.streaming import CountJob, count_stream, shards_of

    source = resolve_source(str(Path(files[0]).parent))
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        job = CountJob(workers=workers, cluster=cluster, work_dir=Path(work))
        counts, _ = count_stream(shards_of(source), tokenizer, job, {"bench": time.time()})
        return time.perf_counter() - start, counts


def measure_throughput(tmp: Path) -> bool:
    from geoanalyze.corpus.streaming import default_workers
    from geoanalyze.corpus.tokenize import HFTokenizer

    folder = tmp / "throughput"
    folder.mkdir()
    # IMDB x2 as 8 shards of 6,250 reviews.
    import gzip

    with gzip.open(IMDB_FILE, "rb") as handle:
        lines = handle.read().split(b"\n")
    lines = [line for line in lines if line.strip()]
    quarter = len(lines) // 4
    for copy in range(2):
        for q in range(4):
            part = b"\n".join(lines[q * quarter : (q + 1) * quarter if q < 3 else None]) + b"\n"
            (folder / f"imdb-{copy}-{q}.jsonl.gz").write_bytes(gzip.compress(part, compresslevel=1))
    files = sorted(str(f) for f in folder.glob("*.jsonl.gz"))
    tokenizer = HFTokenizer(tokenizer_path())
    spec = tokenizer.spec()
    assert spec.backend_json is not None
    cores = default_workers()
    rows = []
    print(f"  corpus: IMDB x2 as {len(files)} shards; {cores} cores", flush=True)
    alone = tokenizer_alone(spec.backend_json, files, cores)
    print(f"  tokenizer alone, {cores} processes: {alone:.1f} s", flush=True)
    pool_s, pool_counts = ours(files, tokenizer, cores)
    print(f"  count_stream, --workers {cores}: {pool_s:.1f} s", flush=True)
    one_s, one_counts = ours(files, tokenizer, 1)
    print(f"  count_stream, --workers 1: {one_s:.1f} s", flush=True)
    dask_s, dask_counts = ours(files, tokenizer, cores, cluster="local")
    print(f"  count_stream, --cluster local --workers {cores}: {dask_s:.1f} s", flush=True)
    tokens = int(pool_counts.counts.sum())
    same = all(
        (c.counts != pool_counts.counts).nnz == 0 and (c.half != pool_counts.half).nnz == 0
        for c in (one_counts, dask_counts)
    )
    for label, seconds in (
        (f"tokenizer alone ({cores} processes, texts in memory)", alone),
        (f"geoanalyze --workers {cores} (process pool)", pool_s),
        ("geoanalyze --workers 1 (this process)", one_s),
        (f"geoanalyze --cluster local --workers {cores} (Dask)", dask_s),
    ):
        rows.append((label, f"{seconds:.1f}", f"{tokens / seconds / 1e3:.0f} k", f"{seconds / alone:.2f}"))
    print_table(rows, ("contender", "wall s", "tokens/s", "vs tokenizer"))
    print(f"  --workers {cores} vs 1: {one_s / pool_s:.2f}x faster; Dask local vs pool: {dask_s / pool_s:.2f}x the time")
    passed = verdict("workers 1, pool and Dask counts identical", same, f"{tokens:,} tokens")
    passed &= verdict(
        f"throughput within {THROUGHPUT_LIMIT}x the tokenizer alone at equal parallelism",
        pool_s / alone <= THROUGHPUT_LIMIT,
        f"{pool_s:.1f} s / {alone:.1f} s = {pool_s / alone:.2f}x",
    )
    return passed


# --- 4. geometry at V = 262,144 ----------------------------------------------------------


def synthetic_counts(n: int, vocab: int, seed: int = 0) -> Any:
    """n positions over a Zipf(1.1) vocabulary, N_i falling from 25,000 to 1,000 sequences (IMDB-like)."""
    import numpy as np
    import scipy.sparse as sp

    from geoanalyze.corpus.marginals import PositionalCounts

    rng = np.random.default_rng(seed)
    zipf = np.arange(1, vocab + 1, dtype=np.float64) ** -1.1
    zipf /= zipf.sum()
    rows, halves = [], []
    totals = np.linspace(25_000, 1_000, n).astype(np.int64)
    for i in range(n):
        # One Zipf law whose 2,000 most frequent ranks are reshuffled at each position, so the
        # positions differ in their frequent tokens and share the long tail, as in real text.
        p = zipf.copy()
        p[:2000] = p[:2000][rng.permutation(2000)]
        draws = rng.choice(vocab, size=int(totals[i]), p=p)
        count = np.bincount(draws, minlength=vocab)
        rows.append(sp.csr_array(count[None, :]))
        halves.append(sp.csr_array(rng.binomial(count, 0.5)[None, :]))
    counts = sp.csr_array(sp.vstack(rows), dtype=np.int64)
    half = sp.csr_array(sp.vstack(halves), dtype=np.int64)
    return PositionalCounts(counts, half, {"n_sequences": int(totals.max())}, None)


def measure_geometry(n: int, vocab: int) -> bool:
    import numpy as np

    from geoanalyze.geometry.distances import position_geometry

    counts = synthetic_counts(n, vocab)
    density = counts.counts.nnz / (n * vocab)
    used = np.unique(counts.counts.indices).size
    print(f"  counts: n = {n}, V = {vocab:,}, {counts.counts.nnz:,} non-zero ({density:.3%}), {used:,} columns used")
    tracemalloc.start()
    start = time.perf_counter()
    geometry = position_geometry(counts, metric="hellinger", min_count=100)
    ours_s = time.perf_counter() - start
    ours_peak = tracemalloc.get_traced_memory()[1] / 1e9
    tracemalloc.stop()
    tracemalloc.start()
    start = time.perf_counter()
    mu = counts.marginals().toarray()
    dense = np.sqrt(mu)
    del mu
    product = dense @ dense.T
    dense_s = time.perf_counter() - start
    dense_peak = tracemalloc.get_traced_memory()[1] / 1e9
    tracemalloc.stop()
    del dense
    close = np.allclose(np.sqrt(np.clip(1 - product, 0, None)), geometry.matrix("naive"), atol=1e-6)
    print_table(
        [
            ("position_geometry: Hellinger + noise floor + correction", f"{ours_s:.2f}", f"{ours_peak:.2f}"),
            ("one dense product S S^T (n x V float64)", f"{dense_s:.2f}", f"{dense_peak:.2f}"),
        ],
        ("contender", "seconds", "peak traced GB"),
    )
    print(f"  ratios: time {ours_s / dense_s:.2f}x, memory {ours_peak / dense_peak:.2f}x the dense product")
    return verdict("naive Hellinger equals the dense product's", close, f"V = {vocab:,}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=16, help="IMDB copies of the large corpus (default 16)")
    parser.add_argument("--skip-rss", action="store_true", help="skip the peak RSS runs (the x16 one takes minutes)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-geometry", action="store_true")
    args = parser.parse_args()
    if not IMDB_FILE.is_file():
        sys.exit(f"{IMDB_FILE} is missing: the benchmark needs the IMDB train split there")
    print(f"machine: {machine()}")
    passed = True
    with tempfile.TemporaryDirectory(prefix="geoanalyze-bench-scale-") as name:
        tmp = Path(name)
        if not args.skip_rss:
            print(f"1. peak RSS of geoanalyze marginals on IMDB x1 and x{args.copies}", flush=True)
            passed &= measure_rss(tmp, args.copies)
        if not args.skip_throughput:
            print("2-3. throughput: tokenizer alone, process pool, one process, Dask local cluster", flush=True)
            passed &= measure_throughput(tmp)
    if not args.skip_geometry:
        print("4. Hellinger and noise floor at n = 512, V = 262,144", flush=True)
        passed &= measure_geometry(512, 262_144)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
