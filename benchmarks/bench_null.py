"""What the position-shuffle null costs: `stress --layers all` now against the same command before it.

Requirement (issue "The right null for every verdict"): `geoanalyze stress
sentence-transformers/all-MiniLM-L6-v2 --dataset sst2 --data-dir ../shared/data --layers all`
takes at most 1.5x the time it took with the 39 random Gaussian tables, warm caches.

The peer is the same command at the commit before the shuffle null (``--baseline``, default
5556084), checked out into a temporary git worktree and run with this interpreter
(``PYTHONPATH`` pointing at it); both share the counts and centroid caches, warmed by one run
each first. Then ``--repeats`` interleaved rounds; CPU time (user + system of the child) is the
verdict's measure, as other work on a shared machine disturbs it far less than wall time. The
shuffle tests' own share of the command is printed beside it, timed in this process on the same
tables the command scores.

    python benchmarks/bench_null.py [--baseline REF] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DATA_DIR, machine, print_table, verdict

REPO = Path(__file__).resolve().parents[1]
BASELINE = "5556084"
LIMIT = 1.5


def command(dataset_args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "geoanalyze",
        "stress",
        "sentence-transformers/all-MiniLM-L6-v2",
        *dataset_args,
        "--layers",
        "all",
        "-f",
        "json",
    ]


def run(source: Path, args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``args`` with ``source`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(source), "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def shuffle_share(dataset_args: list[str]) -> tuple[float, int, int]:
    """(seconds, tables, draws) of the shuffle tests alone for as many rows as the command scores (an upper
    bound: the layer rows are tested on the full set of kept positions here, on fewer in the command)."""
    import geoanalyze as ga
    from geoanalyze.geometry.shuffle import ShuffleNull

    result = ga.score(
        "sentence-transformers/all-MiniLM-L6-v2", dataset=dataset_args[1], data_dir=str(DATA_DIR), layers="all"
    )
    nulls = ShuffleNull(result.distances, result.positions, None, 0)
    for table in result.vectors.values():
        nulls.register(table)
    # a layer row stands in as the target's table on every kept position: its tests cost at most that
    for _ in result.layers:
        nulls.register(next(iter(result.vectors.values())))
    start = time.perf_counter()
    nulls.run()
    return time.perf_counter() - start, len(result.vectors) + len(result.layers), nulls.draws()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="the commit before the shuffle null")
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    if not (DATA_DIR / "sst2").is_dir():
        print(f"skipped: the SST-2 corpus is not in {DATA_DIR}")
        return 0
    dataset_args = ["--dataset", "sst2", "--data-dir", str(DATA_DIR)]
    args = command(dataset_args)
    with tempfile.TemporaryDirectory() as scratch:
        peer = Path(scratch) / "baseline"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(peer), options.baseline], check=True
        )
        try:
            for source in (REPO, peer):  # warm the caches (counts, centroids) and the OS file cache
                run(source, args)
            ours, theirs = [], []
            for _ in range(options.repeats):
                ours.append(run(REPO, args))
                theirs.append(run(peer, args))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(peer)], check=False)
    best = {
        name: (min(w for w, _ in times), min(c for _, c in times)) for name, times in (("ours", ours), ("peer", theirs))
    }
    seconds, tables, draws = shuffle_share(dataset_args)
    print(f"machine: {machine()}; best of {options.repeats} interleaved rounds, warm caches")
    rows = [
        ("shuffle null (this tree)", f"{best['ours'][0]:.2f}", f"{best['ours'][1]:.2f}"),
        (f"39 Gaussian tables ({options.baseline})", f"{best['peer'][0]:.2f}", f"{best['peer'][1]:.2f}"),
        ("ratio", f"{best['ours'][0] / best['peer'][0]:.2f}", f"{best['ours'][1] / best['peer'][1]:.2f}"),
    ]
    print_table(rows, ("stress MiniLM sst2 --layers all", "wall s", "CPU s"))
    print(
        f"shuffle tests alone: {seconds:.2f} s for {tables} rows x 4 aspects, {draws} shuffles each "
        f"({seconds / best['ours'][0]:.0%} of the command's wall time)"
    )
    ratio = best["ours"][1] / best["peer"][1]
    verdict(f"stress --layers all within {LIMIT}x of the 39-table null (CPU time)", ratio <= LIMIT, f"{ratio:.2f}x")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    raise SystemExit(main())
