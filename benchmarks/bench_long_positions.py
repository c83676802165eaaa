"""Positions by the hundred thousand: the scaling path of issue 34 end to end, and landmark MDS against dense MDS.

Requirements (issue 34, "Performance"):

(a) n = 131,072 positions (synthetic drift, 64 sequences, V = 256): ``geoanalyze stress
    rope:d=128,base=500000 ... --max-length 131072 --min-count 32 -f json`` (the scaling path: scores
    on a seeded sample of the kept positions, geometry/sampled.py) exits 0 within 2 GB peak RSS and
    300 s; the same with ``--positions log:256`` when this tree has that option (skipped otherwise).
    Each run is a fresh process measured by ``/usr/bin/time -v`` (its own peak RSS), counting included
    (``--no-cache``). Figures are printed as ratios to the goals (<= 1 passes).
(b) n = 4096 (the same corpus at length 4096): the scaled stress of landmark MDS (1024 seeded
    landmarks, geometry/landmark.py) against D within 1e-3 of classical MDS's; both times, as a ratio.

Run: .venv/bin/python benchmarks/bench_long_positions.py [--part all|long|landmark]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, print_table, time_once, verdict

RSS_GOAL_GB, TIME_GOAL_S, STRESS_TOLERANCE = 2.0, 300.0, 1e-3
LENGTH = 131_072
COMMAND = [
    "stress",
    "rope:d=128,base=500000",
    "--dataset",
    f"synthetic:drift,length={LENGTH},n=64,vocab=256",
    "--max-length",
    str(LENGTH),
    "-f",
    "json",
    "--no-cache",
]


def measured(arguments: list[str]) -> tuple[int, float, float]:
    """(exit code, seconds, peak RSS in GB) of one fresh ``geoanalyze`` process under /usr/bin/time -v."""
    argv = [sys.executable, "-m", "geoanalyze", *arguments]
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-v", *argv], cwd=folder, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return done.returncode, seconds, int(peak.group(1)) / 1e6 if peak else float("nan")


def has_positions_option() -> bool:
    done = subprocess.run([sys.executable, "-m", "geoanalyze", "stress", "--help"], capture_output=True, text=True)
    return "--positions" in done.stdout


def long_runs() -> bool:
    print(f"\n(a) n = {LENGTH:,} positions end to end (goals: {RSS_GOAL_GB} GB peak RSS, {TIME_GOAL_S:.0f} s)")
    if shutil.which("/usr/bin/time") is None:
        print("SKIP: /usr/bin/time is not installed (it measures each run's own peak RSS)")
        return True
    runs = {"every position, --min-count 32 (scaling path)": [*COMMAND, "--min-count", "32"]}
    if has_positions_option():
        runs["--positions log:256"] = [*COMMAND, "--positions", "log:256"]
    else:
        print("SKIP: --positions log:256 (this tree's stress has no --positions option)")
    rows, passed = [], True
    for name, arguments in runs.items():
        code, seconds, peak = measured(arguments)
        rows.append(
            (
                name,
                str(code),
                f"{seconds:.1f}",
                f"{seconds / TIME_GOAL_S:.2f}",
                f"{peak:.2f}",
                f"{peak / RSS_GOAL_GB:.2f}",
            )
        )
        ok = code == 0 and seconds <= TIME_GOAL_S and peak <= RSS_GOAL_GB
        passed &= verdict(
            f"{name}: exit 0, <= {TIME_GOAL_S:.0f} s, <= {RSS_GOAL_GB} GB",
            ok,
            f"exit {code}, {seconds:.1f} s, {peak:.2f} GB",
        )
    print_table(rows, ("run", "exit", "seconds", "/ goal", "peak GB", "/ goal"))
    return passed


def landmark_against_dense() -> bool:
    from geoanalyze.corpus.marginals import count_positions
    from geoanalyze.corpus.synthetic import synthetic_corpus
    from geoanalyze.corpus.tokenize import get_tokenizer
    from geoanalyze.geometry.distances import hellinger_distances
    from geoanalyze.geometry.landmark import DEFAULT_LANDMARKS, landmark_mds
    from geoanalyze.geometry.mds import classical_mds
    from geoanalyze.geometry.scores import scaled_stress

    n = 4096
    print(f"\n(b) n = {n}: landmark MDS ({DEFAULT_LANDMARKS} landmarks) against classical MDS")
    corpus = synthetic_corpus("drift", n_sequences=64, length=n, vocab_size=256, seed=0)
    counts = count_positions(list(corpus.texts), get_tokenizer("whitespace", max_length=n))
    counts = counts.select(counts.kept_positions(1))
    d = hellinger_distances(counts)
    dense_time, dense = time_once(lambda: classical_mds(d))
    sparse_time, sparse = time_once(lambda: landmark_mds(counts, landmarks=DEFAULT_LANDMARKS))
    dense_stress, sparse_stress = scaled_stress(dense.embedding, d), scaled_stress(sparse.embedding, d)
    difference = abs(sparse_stress - dense_stress)
    print_table(
        [
            ("classical MDS (dense)", f"{dense_stress:.3g}", f"{dense_time:.1f}"),
            ("landmark MDS", f"{sparse_stress:.3g}", f"{sparse_time:.1f}"),
        ],
        ("method", "scaled stress vs D", "seconds"),
    )
    print(f"time landmark / dense: {sparse_time / dense_time:.3f}")
    return verdict(
        f"scaled stresses within {STRESS_TOLERANCE:g}", difference <= STRESS_TOLERANCE, f"|difference| {difference:.2e}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "long", "landmark"), default="all")
    part = parser.parse_args().part
    print(f"machine: {machine()}")
    passed = True
    if part in ("all", "long"):
        passed &= long_runs()
    if part in ("all", "landmark"):
        passed &= landmark_against_dense()
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
