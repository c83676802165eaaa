"""Hellinger distances at n = 512, V = 30,522 from the IMDB counts.

Requirement: ``hellinger_distances(counts)`` (square roots, the BC product, the distances) is at
most 1.5x one dense float64 product sqrt(P) @ sqrt(P).T of the same shape, P the dense n x V
marginals (the square roots taken before timing: the product alone). Also reported: the speedup
over ``scipy.spatial.distance.cdist`` with a Python callable, what a user would write. That one
is slow, so it is timed on the first 64 rows against all 512 and extrapolated linearly to
512 x 512 (it does the same work per pair).

The counts are built once with count_positions (cached in the temp folder between runs).

Run: .venv/bin/python benchmarks/bench_hellinger.py [--repeats N] [--cdist-rows R]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _common import imdb_counts, machine, print_table, time_interleaved, time_once, verdict

LIMIT = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds after the warm-up (default 5)")
    parser.add_argument("--cdist-rows", type=int, default=64, help="rows of the timed cdist subset (default 64)")
    args = parser.parse_args()

    from scipy.spatial.distance import cdist

    from geoanalyze.geometry.distances import hellinger_distances

    print(f"machine: {machine()}")
    counts = imdb_counts()
    n, v = counts.counts.shape
    p = counts.marginals().toarray()
    root = np.sqrt(p)
    used = int(np.count_nonzero(p.any(axis=0)))
    print(f"marginals: n = {n} positions, V = {v:,} (columns used: {used:,}, nonzeros {counts.counts.nnz:,})")

    def ours() -> np.ndarray:
        return hellinger_distances(counts)

    def product() -> np.ndarray:
        return root @ root.T

    timings = time_interleaved({"ours": ours, "product": product}, repeats=args.repeats)
    ratio = timings["ours"].best / timings["product"].best

    # The user's version, on a subset of rows, extrapolated; its values checked against ours.
    rows = min(args.cdist_rows, n)

    def user_cdist() -> np.ndarray:
        with np.errstate(invalid="ignore"):  # 1 - BC rounds below 0 on the diagonal: NaN there
            return cdist(p[:rows], p, lambda a, b: np.sqrt(1 - np.sum(np.sqrt(a * b))))

    cdist_seconds, reference = time_once(user_cdist)
    cdist_full = cdist_seconds * (n / rows)
    distances = ours()
    # Off the diagonal only: there the callable gives sqrt(rounding), ~1e-8, or NaN, and ours 0.
    compared = np.isfinite(reference) & (np.arange(n) != np.arange(rows)[:, None])
    error = float(np.max(np.abs(distances[:rows][compared] - reference[compared])))

    print(f"timing: best (median) of {args.repeats} interleaved rounds after one warm-up each")
    print_table(
        [
            (
                "geoanalyze: hellinger_distances(counts)",
                f"{timings['ours'].best:.3f}",
                f"{timings['ours'].median:.3f}",
                f"{ratio:.2f}",
            ),
            (
                f"numpy: sqrt(P) @ sqrt(P).T, dense float64 ({n} x {v})",
                f"{timings['product'].best:.3f}",
                f"{timings['product'].median:.3f}",
                "1.00",
            ),
            (
                f"scipy cdist(P, P, python callable): {rows} x {n} timed once, x{n / rows:g} to {n} x {n}",
                f"{cdist_full:.1f}",
                "-",
                f"{cdist_full / timings['product'].best:.1f}",
            ),
        ],
        ("contender", "best s", "median s", "ratio to product"),
    )
    print(
        f"cdist (python callable): {cdist_seconds:.2f} s measured on {rows} x {n} pairs, "
        f"extrapolated linearly to {cdist_full:.1f} s for {n} x {n}; "
        f"geoanalyze is {cdist_full / timings['ours'].best:.0f}x faster"
    )
    print(f"check: max |ours - cdist| over the {rows} x {n} pairs off the diagonal = {error:.1e}")
    passed = verdict(
        f"Hellinger at n = {n}, V = {v:,} within {LIMIT}x one dense product",
        ratio <= LIMIT and error < 1e-9,
        f"ours {timings['ours'].best:.3f} s / product {timings['product'].best:.3f} s = {ratio:.2f}x, limit {LIMIT}x",
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
