r"""Classical MDS of a distance matrix, and its low-rank positional encoding P = A W.

Classical MDS (Torgerson): B = -1/2 J D^2 J, X = U_r Lambda_r^{1/2} over the positive eigenvalues,
eigenvector signs fixed as scikit-learn's ``svd_flip``; the effective rank, negative mass and the
partial (Lanczos) solver for n >= 2048 are defined in docs/definitions.md, section 7.
Low-rank encoding: P = A W with A = X_r (n x r) and W (r x d) with orthonormal rows, so distances
are kept exactly at r (n + d) parameters instead of n d (docs/definitions.md, section 9).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..io import save_arrays

PARTIAL_FROM = 2048
DEFAULT_CURVE_RANKS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


@dataclass(frozen=True)
class MDSResult:
    """What :func:`classical_mds` found for an n x n distance matrix: a plain result, not an estimator.

    Attributes
    ----------
    embedding : (n, k) coordinates over the k positive eigenvalues kept.
    eigenvalues : eigenvalues of B computed, descending (all n, or the top ones when partial).
    effective_rank : number of eigenvalues above ``tolerance`` (a lower bound when partial:
        only the computed eigenpairs are counted).
    tolerance : the eigenvalue threshold used.
    negative_mass : sum |negative eigenvalues| / sum |eigenvalues|; None when partial.
    partial : whether only the top eigenpairs were computed.

    The scikit-learn-style names with a trailing underscore (``embedding_``, ``eigenvalues_``,
    ...) of earlier versions still read the same values; they are deprecated.
    """

    embedding: np.ndarray
    eigenvalues: np.ndarray
    effective_rank: int
    tolerance: float
    negative_mass: float | None
    partial: bool = False

    def __getattr__(self, name: str) -> Any:
        """``embedding_`` and the other old names: the value of the plain name, with a DeprecationWarning."""
        if name.endswith("_") and name[:-1] in _MDS_FIELDS:
            import warnings

            warnings.warn(
                f"MDSResult.{name} is deprecated; use MDSResult.{name[:-1]}", DeprecationWarning, stacklevel=2
            )
            return getattr(self, name[:-1])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def coordinates(self, rank: int | None = None) -> np.ndarray:
        """The first ``rank`` MDS coordinates (all kept ones by default)."""
        if rank is None:
            return self.embedding
        if rank < 1 or rank > self.embedding.shape[1]:
            raise InputError(
                f"rank {rank} is out of range: the MDS has {self.embedding.shape[1]} positive dimensions; "
                f"choose 1..{self.embedding.shape[1]}"
            )
        return self.embedding[:, :rank]


_MDS_FIELDS = ("embedding", "eigenvalues", "effective_rank", "tolerance", "negative_mass", "partial")


def _check_distance_matrix(distances: Any) -> np.ndarray:
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise InputError(f"a distance matrix must be square, got shape {d.shape}")
    if d.shape[0] < 2:
        raise InputError("MDS needs at least 2 points")
    if not np.all(np.isfinite(d)):
        raise InputError("the distance matrix has NaN or infinite entries; drop the undefined positions first")
    if not np.allclose(d, d.T, rtol=0, atol=1e-10):
        raise InputError("the distance matrix is not symmetric")
    return d


def double_centre(distances: np.ndarray) -> np.ndarray:
    """B = -1/2 J D^2 J (J the centring matrix), computed by subtracting means."""
    b = np.square(distances)
    b -= b.mean(axis=0)
    b -= b.mean(axis=1, keepdims=True)
    b *= -0.5
    return (b + b.T) / 2.0


def flip_signs(vectors: np.ndarray) -> np.ndarray:
    """Make the largest-|.| entry of each column positive (deterministic eigenvector signs)."""
    rows = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[rows, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


def classical_mds(
    distances: Any,
    n_components: int | None = None,
    *,
    method: str = "auto",
    rtol: float | None = None,
) -> MDSResult:
    """Classical MDS (see the module docstring).

    Parameters
    ----------
    distances : (n, n) symmetric matrix with a zero diagonal.
    n_components : keep at most this many dimensions (default: every positive one).
    method : "full" (dense eigh), "partial" (top ``n_components`` by Lanczos), or "auto":
        partial when n >= 2048 and ``n_components`` is given and small, full otherwise.
    rtol : relative eigenvalue tolerance for the effective rank (default 4 n eps), times
        max(lambda_max, max D_ij^2).

    Returns
    -------
    MDSResult
    """
    d = _check_distance_matrix(distances)
    n = d.shape[0]
    if n_components is not None and not 1 <= n_components <= n:
        raise InputError(f"n_components must be within 1..{n}, got {n_components}")
    if method not in ("auto", "full", "partial"):
        raise InputError(f"unknown MDS method {method!r}; choose auto, full or partial")
    b = double_centre(d)
    partial = method == "partial" or (
        method == "auto" and n >= PARTIAL_FROM and n_components is not None and n_components <= n // 8
    )
    # values: descending (all n, or the top k when partial); column j of vectors belongs to values[j].
    if partial:
        if n_components is None:
            raise InputError("a partial eigensolve needs n_components")
        from scipy.sparse.linalg import eigsh

        k = min(n_components, n - 1)
        values, vectors = eigsh(b, k=k, which="LA", v0=np.ones(n) / np.sqrt(n) + 1e-3 * np.arange(n) / n)
        order = np.argsort(values)[::-1]
        values, vectors = values[order], vectors[:, order]
    elif n_components is None:
        from scipy.linalg import eigh

        # Divide and conquer ("evd") is the fastest LAPACK driver when every eigenpair is wanted
        # (about 1.3x scipy's default "evr" at n = 512), for O(n^2) extra workspace.
        values, vectors = eigh(b, overwrite_a=True, check_finite=False, driver="evd")
        values, vectors = values[::-1], vectors[:, ::-1]
    else:
        values, vectors = _top_eigenpairs(b, n_components)
    rtol = 4 * n * np.finfo(np.float64).eps if rtol is None else rtol
    # Relative to lambda_max alone, rounding of B counted as a dimension (3 points on a line: rank 2).
    tolerance = rtol * max(float(values[0]), float(np.abs(d).max()) ** 2)
    positive = values > tolerance
    effective_rank = int(positive.sum())
    keep = effective_rank if n_components is None else min(n_components, effective_rank)
    vectors = flip_signs(vectors[:, :keep])
    embedding = vectors * np.sqrt(values[:keep])
    negative_mass = None
    if not partial:
        magnitude = np.abs(values).sum()
        negative_mass = float(np.abs(values[values < -tolerance]).sum() / magnitude) if magnitude > 0 else 0.0
    return MDSResult(embedding, values, effective_rank, tolerance, negative_mass, partial)


def _top_eigenpairs(b: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every eigenvalue of the symmetric ``b`` (descending) and the eigenvectors of the top ``k``.

    What LAPACK's dsyevr does for a subset of eigenvectors, keeping all eigenvalues: one
    Householder tridiagonalisation B = Q T Q^T (dsytrd); every eigenvalue of T (dsterf, O(n^2));
    the top k eigenvectors of T (MRRR, dstemr); and their back-transform by Q (dormqr on k
    columns). A full eigh spends most of its time back-transforming all n vectors.
    """
    from scipy.linalg import LinAlgError, lapack

    n = b.shape[0]
    lwork, info = lapack.dsytrd_lwork(n, lower=1)
    reflectors, diagonal, off_diagonal, tau, info = lapack.dsytrd(b, lower=1, lwork=int(lwork))
    values, info_values = lapack.dsterf(diagonal, off_diagonal)
    # dstemr: eigenpairs of T by index (range 3), the k largest; its e needs one spare entry.
    found, _, tridiagonal_vectors, info_vectors = lapack.dstemr(
        diagonal, np.append(off_diagonal, 0.0), 3, 0.0, 0.0, n - k + 1, n
    )
    if info or info_values or info_vectors or found != k:
        raise LinAlgError(f"the eigensolver failed (LAPACK info {info}, {info_values}, {info_vectors})")
    vectors = np.asfortranarray(tridiagonal_vectors[:, :k])
    # Q = H(1) ... H(n-1) is stored below the subdiagonal: the reflectors of a QR factorisation
    # of reflectors[1:, :-1], acting on rows 1.. of the vectors (row 0 is left as is).
    qr = reflectors[1:, :-1]
    _, work, _ = lapack.dormqr("L", "N", qr, tau, vectors[1:], lwork=-1)  # workspace query
    vectors[1:], _, info = lapack.dormqr("L", "N", qr, tau, vectors[1:], lwork=int(work[0]))
    if info:
        raise LinAlgError(f"the eigenvector back-transform failed (LAPACK info {info})")
    return values[::-1], vectors[:, ::-1]


def stress_curve(embedding: np.ndarray, distances: np.ndarray, ranks: Any = None) -> dict[int, float]:
    """Raw stress sum_{i<j} (||x_i - x_j|| - D_ij)^2 / sum D_ij^2 of the first r coordinates, per r.

    Squared embedding distances are accumulated one coordinate at a time (n^2 work per rank).
    """
    d = np.asarray(distances, dtype=np.float64)
    max_rank = embedding.shape[1]
    wanted = sorted({int(r) for r in (ranks if ranks is not None else DEFAULT_CURVE_RANKS) if 1 <= int(r) <= max_rank})
    if max_rank and max_rank not in wanted and ranks is None:
        wanted.append(max_rank)
    upper = np.triu_indices(d.shape[0], k=1)
    # At unit scale (as every score): an embedding scaled by --scale 1e308 must not overflow to a
    # NaN; the ratio is scaled back at the end and is inf only when float64 cannot hold it.
    target_scale = float(np.max(np.abs(d))) if d.size else 0.0
    used = np.asarray(embedding[:, : (wanted[-1] if wanted else 0)], dtype=np.float64)
    common = max(target_scale, float(np.max(np.abs(used))) if used.size else 0.0)
    if target_scale <= 0 or not np.isfinite(common):
        return {r: 0.0 for r in wanted} if target_scale <= 0 else {r: float("inf") for r in wanted}
    target = d[upper] / common
    denominator = float(np.sum((d[upper] / target_scale) ** 2))
    squared = np.zeros_like(target)
    curve: dict[int, float] = {}
    for r in range(1, (wanted[-1] if wanted else 0) + 1):
        column = used[:, r - 1] / common
        squared += np.square(column[upper[0]] - column[upper[1]])
        if r in wanted:
            residual = np.sqrt(squared) - target
            with np.errstate(over="ignore"):
                ratio = float(np.sum(residual**2) / denominator) if denominator > 0 else 0.0
                curve[r] = float(np.float64(ratio) * np.float64(common / target_scale) ** 2) if ratio else 0.0
    return curve


# --- the low-rank encoding -----------------------------------------------------------------


@dataclass
class LowRankEncoding:
    """An MDS positional encoding factorised for a model of width d: P = A W.

    Attributes
    ----------
    A : (n, r) MDS coordinates (times ``scale``).
    W : (r, d) with orthonormal rows.
    positions : the position index of each row.
    metadata : how it was made (source, metric, rank, stress, ...).
    """

    A: np.ndarray
    W: np.ndarray
    positions: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def position_embeddings(self) -> np.ndarray:
        """P = A W, shape (n, d)."""
        return self.A @ self.W

    @property
    def rank(self) -> int:
        return int(self.A.shape[1])

    @property
    def dim(self) -> int:
        return int(self.W.shape[1])

    def parameter_counts(self) -> dict[str, int | float]:
        """Parameters of the factorised form r (n + d) against the dense table n d."""
        n, r, d = self.A.shape[0], self.rank, self.dim
        factored, dense = r * (n + d), n * d
        return {"factored": factored, "dense": dense, "saving": 1.0 - factored / dense}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the PE file: ``position_embeddings`` (n x d, float32), ``A``, ``W``, ``positions``.

        Refused (InputError, nothing written) when float32 cannot hold the table: see
        :func:`check_float32`.
        """
        table = self.position_embeddings
        # W's rows are orthonormal, its entries at most 1: P and A are the arrays float32 may spoil
        check_float32([table, self.A], self.metadata.get("scale", 1.0))
        arrays: dict[str, np.ndarray] = {
            "position_embeddings": table.astype(np.float32),
            "A": self.A.astype(np.float32),
            "W": self.W.astype(np.float32),
            "positions": self.positions.astype(np.int64),
        }
        save_arrays(path, arrays, kind="mds", metadata=self.metadata)


#: float32's largest finite value, and the smallest largest entry of a table it holds with its full
#: precision: below FLOAT32_LOWEST the table's small entries fall under float32's smallest normal
#: number (tiny) while the rounding of the largest (its relative eps) would still be finer
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_LOWEST = float(np.finfo(np.float32).tiny / np.finfo(np.float32).eps)


def check_float32(tables: list[np.ndarray], scale: float = 1.0) -> None:
    """Refuse tables float32 would spoil (the largest entry of them all decides): an entry beyond its
    range (written as inf), or a largest entry below :data:`FLOAT32_LOWEST` (entries written subnormal
    or as zeros, so the file scores otherwise than the table). The fix named is a --scale 1% inside
    the range."""
    largest = max((float(np.max(np.abs(table))) for table in tables if table.size), default=0.0)
    if largest > FLOAT32_MAX:
        raise InputError(
            f"the encoding's largest entry ({largest:.3g}) exceeds float32's range ({FLOAT32_MAX:.3g}), the "
            f"type of a PE file, so it would be written as inf; lower --scale (now {scale:g}) to at most "
            f"{scale * (0.99 * FLOAT32_MAX / largest):.2g}"
        )
    if 0 < largest < FLOAT32_LOWEST:
        raise InputError(
            f"the encoding's largest entry ({largest:.3g}) is below {FLOAT32_LOWEST:.3g}, under which float32, "
            f"the type of a PE file, rounds its entries to fewer bits or to zero; raise --scale (now {scale:g}) "
            f"to at least {scale * (1.01 * FLOAT32_LOWEST / largest):.2g}"
        )


def orthonormal_rows(rank: int, dim: int, basis: str = "random", seed: int = 0) -> np.ndarray:
    """W (rank x dim) with W W^T = I: the first coordinate axes, or a seeded random frame."""
    if rank > dim:
        raise InputError(f"rank {rank} exceeds the model width {dim}; choose --rank <= --width")
    if basis == "identity":
        return np.eye(rank, dim)
    if basis != "random":
        raise InputError(f"unknown basis {basis!r}; choose random or identity")
    gaussian = np.random.default_rng(seed).standard_normal((dim, rank))
    q, r = np.linalg.qr(gaussian)
    q *= np.sign(np.diag(r))  # the QR factor with a positive diagonal is unique
    return q.T


def low_rank_encoding(
    mds: MDSResult,
    positions: np.ndarray,
    dim: int,
    rank: int | None = None,
    basis: str = "random",
    seed: int = 0,
    scale: float = 1.0,
    metadata: dict[str, Any] | None = None,
) -> LowRankEncoding:
    """Factor the top-``rank`` MDS coordinates into P = A W for a model of width ``dim``.

    ``rank`` defaults to min(effective rank, dim). ``scale`` multiplies A (distances scale with it).
    """
    if dim < 1:
        raise InputError(f"--width must be at least 1, got {dim}")
    if not np.isfinite(scale) or scale <= 0:
        raise InputError(f"--scale must be a positive number, got {scale}")
    available = mds.embedding.shape[1]
    rank = min(available, dim) if rank is None else rank
    if rank < 1 or rank > available:
        raise InputError(f"--rank {rank} is out of range: the MDS has {available} positive dimensions")
    w = orthonormal_rows(rank, dim, basis, seed)
    a = scale * mds.coordinates(rank)
    info = dict(metadata or {}, rank=rank, dim=dim, basis=basis, seed=seed, scale=scale)
    return LowRankEncoding(a, w, np.asarray(positions, dtype=np.int64), info)


def mds_encoding(
    distances: Any,
    positions: np.ndarray,
    *,
    dim: int | None = None,
    rank: int | None = None,
    method: str = "auto",
    metadata: dict[str, Any] | None = None,
    **factor: Any,
) -> tuple[MDSResult, dict[int, float], LowRankEncoding]:
    """The encoding ``geoanalyze mds`` writes: (the MDS, its stress curve, P = A W) of a distance matrix.

    Every eigenpair is computed (the curve then covers every rank) unless ``method`` is "partial",
    or "auto" with n >= PARTIAL_FROM and a ``rank`` (else ``dim``) asked for: then the top ones
    only, by :func:`classical_mds`'s solver for ``n_components`` (Lanczos for at most n / 8,
    all eigenvalues and the top eigenvectors otherwise). ``dim`` defaults to ``rank``, then to
    every positive dimension; ``rank`` to min(effective rank, dim). ``factor``: :func:`low_rank_encoding`'s
    ``basis``, ``seed`` and ``scale``. The metadata gain ``effective_rank`` and ``stress``: the raw stress
    of A as written (it carries ``scale``) against the unscaled ``distances``.
    """
    d = np.asarray(distances, dtype=np.float64)
    wanted = rank if rank is not None else dim
    top_only = method == "partial" or (method == "auto" and len(d) >= PARTIAL_FROM and wanted is not None)
    result = classical_mds(d, n_components=wanted if top_only else None, method=method)
    if result.embedding.shape[1] == 0:
        raise InputError(
            "the distances are all zero (every kept position has the same distribution), so MDS has no "
            "dimension to embed; use a corpus whose positions differ, or keep more positions (--min-count)"
        )
    curve = stress_curve(result.embedding, d)
    encoding = low_rank_encoding(
        result,
        positions,
        dim=dim or rank or result.embedding.shape[1],
        rank=rank,
        metadata=dict(metadata or {}, effective_rank=result.effective_rank),
        **factor,
    )
    encoding.metadata["stress"] = stress_curve(encoding.A, d, ranks=[encoding.rank])[encoding.rank]
    return result, curve, encoding
