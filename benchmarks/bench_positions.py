"""--positions log:N at long lengths: the whole stress command, wall time and peak RSS, against the goal and `all`.

Measured in one run, ratios printed:

1. ``geoanalyze stress rope:d=128,base=500000 --dataset synthetic:drift,length=131072,n=64,vocab=256
   --max-length 131072 --positions log:256 -f json`` (counting, pooling, distances, scores, null),
   against issue 34's goal: <= 2 GB peak RSS and <= 5 min on 2 cores.
2. The same command at length 1024 with ``--positions log:64`` against every position (``all``,
   the only path today), both with ``--min-count 32``: time and peak RSS, and their ratio.

Each command runs in a fresh process with --no-cache (counts made in the run); peak RSS is the
child's ``ru_maxrss``. Run: .venv/bin/python benchmarks/bench_positions.py [--length 131072]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from _common import machine, print_table, verdict

GOAL_SECONDS, GOAL_BYTES = 300.0, 2 * 1024**3


def run(length: int, spec: str, extra: tuple[str, ...] = ()) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one stress command in its own process."""
    dataset = f"synthetic:drift,length={length},n=64,vocab=256"
    args = [sys.executable, "-m", "geoanalyze", "stress", "rope:d=128,base=500000", "--dataset", dataset]
    args += ["--max-length", str(length), "--positions", spec, "--no-cache", "-f", "json", *extra]
    start = time.perf_counter()
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)  # this child's own peak, not the largest child's so far
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args[2:])} failed")
    return seconds, int(usage.ru_maxrss) * 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--length", type=int, default=131072)
    length = parser.parse_args().length
    print(machine())
    seconds, peak = run(length, "log:256")
    rows = [(f"length {length}, log:256", f"{seconds:.1f} s", f"{peak / 1024**2:.0f} MB", "goal 300 s, 2048 MB")]
    small = [run(1024, spec, ("--min-count", "32")) for spec in ("log:64", "all")]
    for spec, (wall, rss) in zip(("log:64", "all"), small, strict=True):
        rows.append((f"length 1024, {spec}", f"{wall:.1f} s", f"{rss / 1024**2:.0f} MB", ""))
    print_table(rows, ("run", "wall", "peak RSS", "against"))
    verdict("log:256 time <= goal", seconds <= GOAL_SECONDS, f"{seconds / GOAL_SECONDS:.2f} x the goal")
    verdict("log:256 peak RSS <= goal", peak <= GOAL_BYTES, f"{peak / GOAL_BYTES:.2f} x the goal")
    (fast, fast_peak), (slow, slow_peak) = small
    print(f"length 1024: log:64 takes {fast / slow:.2f} x the time and {fast_peak / slow_peak:.2f} x the memory of all")


if __name__ == "__main__":
    main()
