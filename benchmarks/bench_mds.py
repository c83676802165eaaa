"""Classical MDS: geoanalyze's classical_mds against scikit-learn and a full scipy eigh.

Requirements:

1. n = 512 (the Hellinger matrix of the 512 positions of IMDB train): ``classical_mds(D, k)``
   no slower than ``sklearn.manifold.ClassicalMDS(n_components=k, metric="precomputed")`` on
   the same matrix, and the raw stress sum_{i<j} (||x_i - x_j|| - D_ij)^2 of both embeddings
   equal to within 1e-8.
2. n = 4096 (Euclidean distances of 4096 random points in R^200): the top 64 eigenpairs,
   ``classical_mds(D, n_components=64, method="partial")``, at least 5x faster than a full
   ``scipy.linalg.eigh`` of the double-centred matrix. Our time includes checking D and double
   centring it; the peer's is the eigh call alone (B made before timing). The full eigh takes
   minutes on 2 cores, so it runs once (no warm-up; it has nothing to warm). The faster
   divide-and-conquer driver (``driver="evd"``) is reported as well, for information.

Run: .venv/bin/python benchmarks/bench_mds.py [--part all|small|large] [--repeats N] [--components K] [--no-evd]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _common import imdb_counts, machine, print_table, time_interleaved, time_once, verdict

STRESS_TOLERANCE = 1e-8
PARTIAL_SPEEDUP = 5.0


def raw_stress(embedding: np.ndarray, distances: np.ndarray) -> float:
    """sum_{i<j} (||x_i - x_j|| - D_ij)^2."""
    from scipy.spatial.distance import pdist

    upper = np.triu_indices(distances.shape[0], k=1)  # the order pdist lists the pairs in
    return float(np.sum((pdist(embedding) - distances[upper]) ** 2))


def small(repeats: int, components: int) -> bool:
    from sklearn.manifold import ClassicalMDS

    from geoanalyze.geometry.distances import hellinger_distances
    from geoanalyze.geometry.mds import classical_mds

    d = hellinger_distances(imdb_counts())
    n = d.shape[0]
    print(f"\n[1] n = {n}: Hellinger matrix of the IMDB train positions, {components} components")

    def ours() -> np.ndarray:
        return classical_mds(d, n_components=components).embedding_

    def peer() -> np.ndarray:
        return ClassicalMDS(n_components=components, metric="precomputed").fit_transform(d)

    timings = time_interleaved({"ours": ours, "peer": peer}, repeats=repeats)
    ratio = timings["ours"].best / timings["peer"].best
    ours_stress, peer_stress = raw_stress(ours(), d), raw_stress(peer(), d)
    difference = abs(ours_stress - peer_stress)
    print(f"timing: best (median) of {repeats} interleaved rounds after one warm-up each")
    print_table(
        [
            (
                f"geoanalyze: classical_mds(D, n_components={components})",
                f"{timings['ours'].best * 1e3:.1f}",
                f"{timings['ours'].median * 1e3:.1f}",
                f"{ratio:.2f}",
                f"{ours_stress:.12g}",
            ),
            (
                f'scikit-learn: ClassicalMDS(n_components={components}, metric="precomputed")',
                f"{timings['peer'].best * 1e3:.1f}",
                f"{timings['peer'].median * 1e3:.1f}",
                "1.00",
                f"{peer_stress:.12g}",
            ),
        ],
        ("contender", "best ms", "median ms", "ratio", "raw stress"),
    )
    print(f"stress: |ours - scikit-learn| = {difference:.1e} (tolerance {STRESS_TOLERANCE:g})")
    return verdict(
        f"classical MDS at n = {n} no slower than scikit-learn, same stress",
        ratio <= 1.0 and difference <= STRESS_TOLERANCE,
        f"ours {timings['ours'].best * 1e3:.1f} ms / scikit-learn {timings['peer'].best * 1e3:.1f} ms = {ratio:.2f}x, "
        f"limit 1.00x; stress difference {difference:.1e}",
    )


def large(repeats: int, evd: bool, n: int = 4096, dim: int = 200, components: int = 64) -> bool:
    from scipy.linalg import eigh
    from scipy.spatial.distance import cdist

    from geoanalyze.geometry.mds import classical_mds, double_centre

    points = np.random.default_rng(0).standard_normal((n, dim))
    d = cdist(points, points)
    print(f"\n[2] n = {n}: Euclidean distances of {n} random points in R^{dim}, top {components} eigenpairs")

    def ours() -> object:
        return classical_mds(d, n_components=components, method="partial")

    timings = time_interleaved({"ours": ours}, repeats=repeats)
    partial = classical_mds(d, n_components=components, method="partial")
    b = double_centre(d)
    peers = {"evr (default)": time_once(lambda: eigh(b, check_finite=False))}
    if evd:
        peers['evd (driver="evd")'] = time_once(lambda: eigh(b, check_finite=False, driver="evd"))
    full_values = peers["evr (default)"][1][0][::-1][:components]
    agreement = float(np.max(np.abs(partial.eigenvalues_[:components] - full_values)) / full_values[0])
    default_seconds = peers["evr (default)"][0]
    speedup = default_seconds / timings["ours"].best
    rows = [
        (
            f'geoanalyze: classical_mds(D, n_components={components}, method="partial")',
            f"{timings['ours'].best:.2f}",
            f"{timings['ours'].median:.2f}",
            "-",
        )
    ]
    for name, (seconds, _) in peers.items():
        rows.append(
            (
                f"scipy.linalg.eigh(B), full, {name}, timed once",
                f"{seconds:.2f}",
                "-",
                f"{seconds / timings['ours'].best:.1f}",
            )
        )
    print(f"timing: ours best (median) of {repeats} rounds after one warm-up; each full eigh once")
    print_table(rows, ("contender", "best s", "median s", "speedup of ours"))
    print(f"check: top {components} eigenvalues, max |partial - full| / lambda_max = {agreement:.1e}")
    return verdict(
        f"top-{components} MDS at n = {n} at least {PARTIAL_SPEEDUP:g}x faster than a full eigh",
        speedup >= PARTIAL_SPEEDUP and agreement < 1e-8,
        f"eigh {default_seconds:.2f} s / ours {timings['ours'].best:.2f} s = {speedup:.1f}x, limit {PARTIAL_SPEEDUP:g}x",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed rounds at n = 512 (default 15)")
    parser.add_argument("--large-repeats", type=int, default=3, help="timed rounds of ours at n = 4096 (default 3)")
    parser.add_argument("--components", type=int, default=64, help="components at n = 512 (default 64)")
    parser.add_argument("--part", choices=("all", "small", "large"), default="all", help="run [1], [2] or both")
    parser.add_argument("--no-evd", action="store_true", help='skip the informational eigh(driver="evd") at n = 4096')
    args = parser.parse_args()
    print(f"machine: {machine()}")
    passed = True
    if args.part in ("all", "small"):
        passed &= small(args.repeats, args.components)
    if args.part in ("all", "large"):
        passed &= large(args.large_repeats, evd=not args.no_evd)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
