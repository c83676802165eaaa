r"""Landmark MDS: classical MDS of many positions in O(n k) memory, never an n x n matrix.

de Silva & Tenenbaum (2004), "Sparse multidimensional scaling using landmark points". Take k
landmarks, run classical MDS on their k x k distances (Delta_L = D_L^2, B_L = -1/2 J Delta_L J,
L = V_r Lambda_r^{1/2} over the r positive eigenvalues), then place every position a by
distance-based triangulation from its squared distances delta_a to the landmarks:

    x_a = -1/2 L^# (delta_a - delta_mu),   L^# = Lambda_r^{-1/2} V_r^T,   delta_mu = mean column of Delta_L.

A landmark is placed at its own MDS coordinates; with every position a landmark the result is
classical MDS of D (signs as :func:`~geoanalyze.geometry.mds.flip_signs`); for a Euclidean
configuration of rank <= r spanned by the landmarks it recovers the distances exactly. The distances
of a block of positions to the landmarks are one BC product of their square-root marginals
(:func:`~geoanalyze.geometry.distances.bc_matrix`), so memory is O(block k + n r) beyond the counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .distances import Counts, bc_matrix, bc_to_distance, sqrt_marginals
from .mds import classical_mds

#: positions triangulated per BC product (a block x k float64 matrix each)
BLOCK_ROWS = 8192
#: landmarks by default: enough for a 1e-3 agreement of scaled stress with classical MDS at n = 4096 on
#: the synthetic drift (tests/unit/geometry/test_landmark.py), and a k x k eigenproblem of a few seconds
DEFAULT_LANDMARKS = 1024
#: a stream of its own for the landmark draw
_LANDMARK_STREAM = 0x6C616E64


@dataclass(frozen=True)
class LandmarkMDS:
    """What :func:`landmark_mds` found: coordinates of every position and how they were placed.

    Attributes
    ----------
    embedding : (n, r) coordinates over the r positive eigenvalues of the landmarks' B kept.
    landmarks : (k,) row indices of the landmarks, ascending.
    eigenvalues : the k eigenvalues of the landmarks' B, descending.
    seed : the seed of the landmark draw.
    """

    embedding: np.ndarray
    landmarks: np.ndarray
    eigenvalues: np.ndarray
    seed: int


def choose_landmarks(n: int, k: int, seed: int = 0) -> np.ndarray:
    """k distinct row indices of 0..n-1 drawn with ``seed`` (all of them when k >= n), ascending."""
    if n < 2 or k < 2:
        raise InputError(f"landmark MDS needs at least 2 positions and 2 landmarks, got n = {n}, k = {k}")
    if k >= n:
        return np.arange(n)
    rng = np.random.default_rng(np.random.SeedSequence([seed, _LANDMARK_STREAM]))
    return np.sort(rng.choice(n, size=k, replace=False))


def triangulate(
    landmark_distances: np.ndarray,
    squared_to_landmarks: Callable[[int, int], np.ndarray],
    n: int,
    n_components: int | None = None,
    block: int = BLOCK_ROWS,
) -> tuple[np.ndarray, np.ndarray]:
    """(the (n, r) embedding, the landmarks' eigenvalues) of de Silva & Tenenbaum's triangulation.

    ``landmark_distances``: the k x k distances D_L; ``squared_to_landmarks(start, stop)``: the
    squared distances of rows start..stop-1 to the k landmarks, (stop - start, k).
    """
    fitted = classical_mds(landmark_distances, n_components=n_components, method="full")
    coordinates = fitted.embedding  # (k, r): V_r Lambda_r^{1/2}
    if coordinates.shape[1] == 0:
        raise InputError("the landmarks' distances are all zero, so MDS has no dimension; use more landmarks")
    values = fitted.eigenvalues[: coordinates.shape[1]]
    pseudo_inverse = (coordinates / values).T  # Lambda^{-1/2} V^T, (r, k)
    mean_squared = np.square(np.asarray(landmark_distances, dtype=np.float64)).mean(axis=0)
    embedding = np.empty((n, coordinates.shape[1]))
    for start in range(0, n, block):
        stop = min(n, start + block)
        embedding[start:stop] = -0.5 * (squared_to_landmarks(start, stop) - mean_squared) @ pseudo_inverse.T
    return embedding, fitted.eigenvalues


def landmark_mds(
    counts: Counts,
    metric: str = "hellinger",
    landmarks: int = DEFAULT_LANDMARKS,
    n_components: int | None = None,
    seed: int = 0,
) -> LandmarkMDS:
    """Landmark MDS of the naive distances between every position of ``counts`` (select the kept ones
    first), in O(n k) memory: the BC of each block of rows against the landmarks, never n x n."""
    roots = sqrt_marginals(counts)
    n = int(roots.shape[0])
    chosen = choose_landmarks(n, landmarks, seed)
    landmark_roots = roots[chosen]
    landmark_distances = bc_to_distance(bc_matrix(landmark_roots), metric)

    def squared(start: int, stop: int) -> np.ndarray:
        bc = np.clip(bc_matrix(roots[start:stop], landmark_roots), 0.0, 1.0)
        return 1.0 - bc if metric == "hellinger" else np.square(np.arccos(bc))

    embedding, values = triangulate(landmark_distances, squared, n, n_components)
    return LandmarkMDS(embedding, chosen, values, seed)
