r"""Distances between positions: Hellinger and Fisher-Rao, naive and bias-corrected.

Bhattacharyya coefficient   BC(p, q) = \sum_t \sqrt{p_t q_t}
Hellinger distance          d_H(p, q) = \sqrt{1 - BC(p, q)}  in [0, 1]
Fisher-Rao distance         d_FR(p, q) = \arccos BC(p, q)  in [0, \pi/2]

Every BC matrix is one product of square-root matrices, S_a S_b^T, computed sparse or dense
BLAS depending on the density (:func:`bc_matrix`); nothing is looped over in Python.
The noise floor (split halves A and B) and the bias-corrected BC (Spearman's correction for
attenuation of the cross-half matrix) are defined, with their rationale and validation, in
docs/definitions.md, sections 3 to 6. The corrected matrix is symmetric with zero diagonal but,
unlike the naive one, need not be exactly Euclidean.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypedDict, runtime_checkable

import numpy as np
import scipy.sparse as sp

from ..errors import FormatError, InputError
from ..io import INTEGER, REAL, check_tensors, header_field, load_arrays, save_arrays

METRICS = ("hellinger", "fisher-rao")
# Above this fill of the used columns the dense BLAS product beats the sparse one.
_DENSE_ABOVE = 0.02


@runtime_checkable
class Counts(Protocol):
    """Per-position token counts, as the geometry reads them (a corpus's ``PositionalCounts`` is one).

    ``counts[i, t]`` is the number of sequences with token t at position i and ``half`` the same
    for the sequences of split-half A (both (n, V) sparse, integer); ``totals`` is N_i.
    """

    @property
    def counts(self) -> Any: ...

    @property
    def half(self) -> Any: ...

    @property
    def totals(self) -> np.ndarray: ...

    @property
    def metadata(self) -> dict[str, Any]: ...

    def kept_positions(self, min_count: int = ...) -> np.ndarray:
        """Indices i with N_i >= min_count."""
        ...

    def left_out(self, min_count: int = ...) -> dict[str, Any]:
        """Which positions ``min_count`` leaves out, and why."""
        ...

    def select(self, positions: np.ndarray) -> Counts:
        """The counts of the given positions only (rows in that order)."""
        ...


def normalise_rows(matrix: sp.csr_array) -> sp.csr_array:
    """Counts to probabilities mu_i(t) = counts[i, t] / N_i, row by row (float64 CSR; rows that sum to 0 stay 0)."""
    totals = np.asarray(matrix.sum(axis=1), dtype=np.float64).ravel()
    scale = np.divide(1.0, totals, out=np.zeros_like(totals), where=totals > 0)
    result = sp.csr_array(matrix, dtype=np.float64, copy=True)
    result.data *= np.repeat(scale, np.diff(result.indptr))
    return result


def bc_matrix(sqrt_a: Any, sqrt_b: Any | None = None) -> np.ndarray:
    """Bhattacharyya coefficients BC = S_a S_b^T from square-root marginals (n_a x V, n_b x V).

    Dense input uses BLAS directly. Sparse input keeps only the columns some row uses and
    takes the dense BLAS path once they are more than 2% full, the sparse product otherwise.
    """
    same = sqrt_b is None
    if not sp.issparse(sqrt_a):
        a = np.asarray(sqrt_a, dtype=np.float64)
        b = a if same else np.asarray(sqrt_b, dtype=np.float64)
        return a @ b.T
    a = sp.csr_array(sqrt_a)
    b = a if same else sp.csr_array(sqrt_b)
    column_of, n_used = _used_columns(a, b)
    if n_used == 0:
        return np.zeros((a.shape[0], b.shape[0]))
    fill = (a.nnz + b.nnz) / ((a.shape[0] + b.shape[0]) * n_used)
    if fill < _DENSE_ABOVE:
        return np.asarray((a @ b.T).toarray(), dtype=np.float64)
    dense_a = _densify(a, column_of, n_used)
    dense_b = dense_a if same else _densify(b, column_of, n_used)
    return dense_a @ dense_b.T


def _used_columns(a: sp.csr_array, b: sp.csr_array) -> tuple[Any, int]:
    """(original column ids -> their index among the used ones, how many are used).

    The used columns are marked in a mask (O(nnz + V), no sort of the indices) unless the
    vocabulary is far wider than the entries (token ids near 2**33 in a few thousand counts):
    then they are sorted (O(nnz log nnz)), so memory follows the counts, never V.
    """
    width = max(a.shape[1], b.shape[1])
    if width > 8 * (a.nnz + b.nnz) + (1 << 24):
        used = np.unique(np.concatenate([a.indices, b.indices]).astype(np.int64))
        return (lambda indices: np.searchsorted(used, indices)), int(used.size)
    in_use = np.zeros(width, dtype=bool)
    in_use[a.indices] = True
    in_use[b.indices] = True
    index = np.cumsum(in_use) - 1  # original column -> its index among the used ones
    return (lambda indices: index[indices]), int(np.count_nonzero(in_use))


def _densify(matrix: sp.csr_array, column_of: Any, width: int) -> np.ndarray:
    """The rows of ``matrix`` over the used columns only, as a dense (n, width) float64 array."""
    n = matrix.shape[0]
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(matrix.indptr))
    # bincount adds, as scipy does: a non-canonical CSR may hold one column twice in a row.
    flat = np.bincount(rows * width + column_of(matrix.indices), weights=matrix.data, minlength=n * width)
    return flat.reshape(n, width)


def bc_to_distance(bc: np.ndarray, metric: str = "hellinger") -> np.ndarray:
    """Map a BC matrix to distances; symmetrise, clip rounding, zero the diagonal."""
    _check_metric(metric)
    bc = np.clip((bc + bc.T) / 2.0, 0.0, 1.0)
    distances = np.sqrt(1.0 - bc) if metric == "hellinger" else np.arccos(bc)
    np.fill_diagonal(distances, 0.0)
    return distances


def sqrt_marginals(marginals: Any) -> sp.csr_array | np.ndarray:
    """Element-wise square root of validated marginals (dense stays dense, sparse sparse).

    Accepts :class:`Counts` (a PositionalCounts; normalised here), a dense row-stochastic
    array, or a scipy sparse row-stochastic matrix. Raises InputError on anything else.
    """
    if isinstance(marginals, Counts):
        empty = np.flatnonzero(marginals.totals == 0)
        if empty.size:
            raise InputError(
                f"position {int(empty[0])} has no counted token; drop it first "
                "(counts.select(counts.kept_positions(min_count)))"
            )
        root = normalise_rows(marginals.counts)
        root.data = np.sqrt(root.data)
        return root
    if sp.issparse(marginals):
        matrix = sp.csr_array(marginals, dtype=np.float64, copy=True)
        matrix.sum_duplicates()  # sqrt of the summed entry, not the sum of sqrts; in place on our copy
        _check_stochastic(matrix.data, np.asarray(matrix.sum(axis=1)).ravel(), matrix.shape)
        root = matrix.copy()
        root.data = np.sqrt(root.data)
        return root
    array = np.asarray(marginals, dtype=np.float64)
    if array.ndim != 2:
        raise InputError(f"marginals must be a 2-D (positions x vocabulary) array, got shape {array.shape}")
    _check_stochastic(array, array.sum(axis=1), array.shape)
    return np.sqrt(array)


def _check_stochastic(values: np.ndarray, row_sums: np.ndarray, shape: tuple[int, ...]) -> None:
    if shape[0] == 0:
        raise InputError("marginals have no positions (0 rows)")
    if not np.all(np.isfinite(values)):
        raise InputError("marginals contain NaN or infinity; check the input")
    if values.size and values.min() < 0:
        raise InputError("marginals contain negative entries; pass probabilities or counts")
    bad = np.flatnonzero(np.abs(row_sums - 1.0) > 1e-6)
    if bad.size:
        raise InputError(
            f"row {int(bad[0])} of the marginals sums to {row_sums[bad[0]]:.6g}, not 1; "
            "normalise the rows or pass a PositionalCounts"
        )


def hellinger_distances(marginals: Any) -> np.ndarray:
    """Naive Hellinger distance matrix d_H(mu_i, mu_j) = sqrt(1 - sum_t sqrt(mu_i(t) mu_j(t))).

    Parameters
    ----------
    marginals : PositionalCounts, dense (n, V) row-stochastic array, or scipy sparse one.

    Returns
    -------
    (n, n) float64, symmetric, zero diagonal, entries in [0, 1].
    """
    return bc_to_distance(bc_matrix(sqrt_marginals(marginals)), "hellinger")


def fisher_rao_distances(marginals: Any) -> np.ndarray:
    """Fisher-Rao (Bhattacharyya angle) matrix arccos(sum_t sqrt(mu_i(t) mu_j(t))), in [0, pi/2]."""
    return bc_to_distance(bc_matrix(sqrt_marginals(marginals)), "fisher-rao")


def split_half_bc(counts: Any) -> np.ndarray:
    """The cross-half matrix C_ij = BC(mu_i^A, mu_j^B) of :class:`Counts` (not symmetric)."""
    if not isinstance(counts, Counts):
        raise InputError("the noise floor and the corrected distance need counts (a PositionalCounts), not marginals")
    halves = []
    for half in (counts.half, counts.counts - counts.half):
        root = normalise_rows(sp.csr_array(half))
        root.data = np.sqrt(root.data)
        halves.append(root)
    return bc_matrix(halves[0], halves[1])


def corrected_bc(cross: np.ndarray) -> np.ndarray:
    """Attenuation-corrected BC from the cross-half matrix (module docstring); NaN where undefined."""
    self_bc = np.diag(cross).copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.sqrt(np.where(self_bc > 0, self_bc, np.nan))
        result = ((cross + cross.T) / 2.0) / np.outer(scale, scale)
    result = np.clip(result, 0.0, 1.0)
    np.fill_diagonal(result, 1.0)
    return result


@dataclass
class PositionGeometry:
    """Distances between the kept positions of a corpus, with their noise.

    Attributes
    ----------
    positions : indices of the kept positions (N_i >= min_count), shape (n,).
    totals : N_i of the kept positions.
    metric : "hellinger" or "fisher-rao".
    naive : (n, n) plug-in distances between the empirical marginals.
    corrected : (n, n) bias-corrected distances (module docstring).
    noise_floor : (n,) split-half distance of each position to itself.
    left_out : the positions min_count removed, and why.
    summary : signal-to-noise figures (see :func:`noise_summary`).
    metadata : tokenizer, corpus and options of the counts.
    """

    positions: np.ndarray
    totals: np.ndarray
    metric: str
    naive: np.ndarray
    corrected: np.ndarray
    noise_floor: np.ndarray
    left_out: dict[str, Any] = field(default_factory=dict)
    summary: NoiseSummary = field(default_factory=lambda: NoiseSummary())
    metadata: dict[str, Any] = field(default_factory=dict)

    def select(self, keep: np.ndarray, min_count: int | None = None) -> PositionGeometry:
        """The geometry of the positions where ``keep`` is true (e.g. a higher --min-count).

        The noise summary is recomputed only by :func:`position_geometry`; a selection keeps
        the figures of the full matrix and says so in ``left_out``.
        """
        keep = np.asarray(keep, dtype=bool)
        if keep.all():
            return self
        if keep.sum() < 2:
            raise InputError(
                f"{int(keep.sum())} position(s) of the distances file have N_i >= --min-count {min_count}; "
                + ("recompute the distances from a larger corpus" if min_count == 1 else "lower --min-count")
            )
        left_out = {**self.left_out, "also_dropped": self.positions[~keep].tolist(), "min_count": min_count}
        return replace(
            self,
            positions=self.positions[keep],
            totals=self.totals[keep],
            naive=self.naive[np.ix_(keep, keep)],
            corrected=self.corrected[np.ix_(keep, keep)],
            noise_floor=self.noise_floor[keep],
            left_out=left_out,
        )

    def matrix(self, which: str = "naive") -> np.ndarray:
        """The naive or corrected matrix by name."""
        if which not in ("naive", "corrected"):
            raise InputError(f"unknown distance {which!r}; choose naive or corrected")
        return self.naive if which == "naive" else self.corrected

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a distances file (safetensors; atomically)."""
        arrays = {
            "positions": self.positions.astype(np.int64),
            "totals": self.totals.astype(np.int64),
            "naive": self.naive,
            "corrected": self.corrected,
            "noise_floor": self.noise_floor,
        }
        document = {
            "metric": self.metric,
            "left_out": self.left_out,
            "summary": self.summary,
            "counts": self.metadata,
        }
        save_arrays(path, arrays, kind="distances", metadata=document)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PositionGeometry:
        """Read a distances file written by :meth:`save`, its internal consistency checked.

        Exactly the five tensors (integer positions and totals, float matrices); n >= 1 kept
        positions, distinct, ascending and non-negative; totals non-negative; both matrices
        n x n, symmetric, zero on the diagonal, inside the metric's range ([0, 1] Hellinger,
        [0, pi/2] Fisher-Rao), the naive one finite (the corrected one may hold NaN for an
        undefined pair); a known metric and object-typed header fields.
        """
        arrays, document = load_arrays(path, kind="distances")
        check_tensors(
            path,
            arrays,
            {
                "positions": (INTEGER, 1),
                "totals": (INTEGER, 1),
                "naive": (REAL, 2),
                "corrected": (REAL, 2),
                "noise_floor": (REAL, 1),
            },
            kind="distances",
        )
        metric = header_field(path, document, "metric", str, "distances")
        if metric not in METRICS:
            raise FormatError(
                f"{path}: unknown metric {metric[:40]!r} in the header (known: {', '.join(METRICS)}); {_REGENERATE}"
            )
        left_out = header_field(path, document, "left_out", dict, "distances", default={})
        summary = header_field(path, document, "summary", dict, "distances", default={})
        counts = header_field(path, document, "counts", dict, "distances", default={})
        positions, totals = _checked_positions(path, arrays)
        n = positions.shape[0]
        naive = _checked_matrix(path, "naive", arrays["naive"], n, metric)
        corrected = _checked_matrix(path, "corrected", arrays["corrected"], n, metric)
        floor = np.asarray(arrays["noise_floor"], dtype=np.float64)
        if np.isinf(floor).any() or np.any(floor[np.isfinite(floor)] < -1e-9):
            raise FormatError(f"{path}: the noise floor holds a negative or infinite value; {_REGENERATE}")
        return cls(
            positions=positions,
            totals=totals,
            metric=metric,
            naive=naive,
            corrected=corrected,
            noise_floor=floor,
            left_out=left_out,
            summary=summary,
            metadata=counts,
        )


_REGENERATE = "regenerate it with `geoanalyze distances`"


def _checked_positions(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The positions and totals of a distances file: n >= 1 positions, distinct, ascending and
    non-negative; totals and noise floor of n entries, totals non-negative."""
    positions = arrays["positions"].astype(np.int64)
    n = positions.shape[0]
    if n == 0:
        raise FormatError(f"{path} holds no position; {_REGENERATE} from more data")
    if positions.min() < 0 or np.any(np.diff(positions) <= 0):
        raise FormatError(f"{path}: the positions are not distinct, ascending and non-negative; {_REGENERATE}")
    for name in ("totals", "noise_floor"):
        if arrays[name].shape != (n,):
            raise FormatError(
                f"{path}: {name} has shape {arrays[name].shape}, expected ({n},) for {n} positions; {_REGENERATE}"
            )
    totals = arrays["totals"].astype(np.int64)
    if totals.min() < 0:
        raise FormatError(f"{path}: a total N_i is negative; {_REGENERATE}")
    return positions, totals


def _checked_matrix(path: str | os.PathLike[str], name: str, array: np.ndarray, n: int, metric: str) -> np.ndarray:
    """One distance matrix of a distances file: n x n, symmetric, zero diagonal, inside the
    metric's range, no infinity, and no NaN in the naive one."""
    top = 1.0 if metric == "hellinger" else np.pi / 2
    matrix = np.asarray(array, dtype=np.float64)
    if matrix.shape != (n, n):
        raise FormatError(f"{path}: {name} is {matrix.shape}, expected ({n}, {n}); {_REGENERATE}")
    finite = np.isfinite(matrix)
    if name == "naive" and not finite.all():
        raise FormatError(f"{path}: the naive distances hold NaN or infinity; {_REGENERATE}")
    if np.isinf(matrix).any():
        raise FormatError(f"{path}: the {name} distances hold infinity; {_REGENERATE}")
    values = matrix[finite]
    if values.size and (values.min() < -1e-9 or values.max() > top + 1e-9):
        raise FormatError(
            f"{path}: a {name} distance lies outside [0, {top:.4g}], the range of {metric} distances; {_REGENERATE}"
        )
    if np.any(np.abs(np.diag(matrix)) > 1e-9) or not np.allclose(matrix, matrix.T, rtol=0, atol=1e-9, equal_nan=True):
        raise FormatError(f"{path}: the {name} matrix is not symmetric with a zero diagonal; {_REGENERATE}")
    return matrix


def _one_position_hint(counts: Counts, n_positions: int) -> str:
    """Why counts of fewer than 2 positions hold so few, and the fix: the --max-length they were
    counted with, when it cut every text there; else every text is that short."""
    max_length = counts.metadata.get("max_length")
    if isinstance(max_length, int) and not isinstance(max_length, bool) and max_length <= n_positions:
        return (
            f"the counts hold {n_positions} position(s) only, as --max-length {max_length} cut every text "
            "there, and distances need 2; raise --max-length to 2 or more"
        )
    if n_positions == 0:
        return "the counts hold no position (no text has a token) and distances need 2; use a corpus of texts"
    return (
        f"the counts hold {n_positions} position(s) only, as every text is {n_positions} token(s) long "
        "after tokenization, and distances need 2; use texts of 2 or more tokens (a text a line, not "
        "a word a line)"
    )


def position_geometry(counts: Counts, metric: str = "hellinger", min_count: int = 100) -> PositionGeometry:
    """Naive and corrected distances, noise floors and the SNR summary of a PositionalCounts.

    Positions with N_i < min_count are left out (and listed in ``left_out``). Costs two
    BC products: the full-sample one and the cross-half one.
    """
    _check_metric(metric)
    if min_count < 1:
        raise InputError(f"--min-count must be at least 1, got {min_count}")
    kept = counts.kept_positions(min_count)
    if kept.size < 2:
        totals = np.sort(counts.totals)[::-1]
        most = int(totals[0]) if totals.size else 0
        reached = int((totals > 0).sum())
        if totals.size < 2:  # the counts stop before position 1: a --max-length of 1, or texts of one token
            hint = _one_position_hint(counts, totals.size)
        elif reached < 2:
            hint = (
                f"the corpus has tokens at {reached} position(s) only and distances need 2; "
                "use longer texts or a larger corpus"
            )
        else:  # a lower --min-count keeps two positions: say how low
            hint = f"lower --min-count to {int(totals[1])} or below, or use a larger corpus"
        raise InputError(
            f"{kept.size} position(s) have N_i >= --min-count {min_count} (the largest N_i is {most}); {hint}"
        )
    selected = counts.select(kept)
    bc = bc_matrix(sqrt_marginals(selected))
    cross = split_half_bc(selected)
    corrected = corrected_bc(cross)
    floor_bc = np.clip(np.diag(cross), 0.0, 1.0)
    floor = np.sqrt(1.0 - floor_bc) if metric == "hellinger" else np.arccos(floor_bc)
    naive = bc_to_distance(bc, metric)
    corrected_d = bc_to_distance(corrected, metric)
    return PositionGeometry(
        positions=kept,
        totals=selected.totals,
        metric=metric,
        naive=naive,
        corrected=corrected_d,
        noise_floor=floor,
        left_out=counts.left_out(min_count),
        summary=noise_summary(np.clip((bc + bc.T) / 2, 0, 1), corrected, naive, corrected_d, floor),
        metadata=dict(counts.metadata),
    )


class NoiseSummary(TypedDict, total=False):
    """The signal-to-noise figures of a distance matrix (:func:`noise_summary`; empty when unknown)."""

    noise_fraction: float
    snr: float
    pairs_above_floor: float
    median_noise_floor: float
    max_noise_floor: float
    median_naive: float
    median_corrected: float
    undefined_pairs: int


def noise_summary(
    bc: np.ndarray, corrected: np.ndarray, naive: np.ndarray, corrected_distances: np.ndarray, floor: np.ndarray
) -> NoiseSummary:
    """Signal-to-noise figures of a distance matrix (pairs i < j), each defined in docs/definitions.md, section 6.

    Means run over the pairs whose correction is defined; with none, the figures are NaN.
    """
    upper = np.triu_indices(bc.shape[0], k=1)
    naive_sq = 1.0 - bc[upper]
    signal_sq = 1.0 - corrected[upper]
    noise_sq = np.maximum(naive_sq - signal_sq, 0.0)
    finite = np.isfinite(signal_sq)
    total = float(naive_sq[finite].mean()) if finite.any() else float("nan")
    noise = float(noise_sq[finite].mean()) if finite.any() else float("nan")
    signal = float(signal_sq[finite].mean()) if finite.any() else float("nan")
    above = naive[upper] > np.maximum(floor[upper[0]], floor[upper[1]])
    nan = float("nan")
    return {
        "noise_fraction": (noise / total if total > 0 else 0.0) if finite.any() else nan,
        "snr": (signal / noise if noise > 0 else float("inf")) if finite.any() else nan,
        "pairs_above_floor": float(above.mean()),
        "median_noise_floor": float(np.median(floor)),
        "max_noise_floor": float(np.max(floor)),
        "median_naive": float(np.median(naive[upper])),
        "median_corrected": float(np.nanmedian(corrected_distances[upper])) if finite.any() else float("nan"),
        "undefined_pairs": int((~finite).sum()),
    }


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
