r"""How faithfully position vectors reproduce a target geometry (docs/scores.md, sections 2 to 4).

P is an n x k array of position vectors, D the n x n target distances; every sum runs over
the m = n(n-1)/2 pairs i < j, and E_ij = ||p_i - p_j|| (computed by ``pdist``: O(n^2 k)
work, never an n x n x k tensor). The scores: stress, scaled stress, the monotonicity
violation (global and anchored), the lag violation and separation. (The null calibration
against K i.i.d. Gaussian encodings of the same shape is :mod:`.null`'s.)

Every score is computed on P / s with s = max |P| (and D / max |D|), so the scale-free scores of
c P are those of P for every c in [1e-300, 1e300]; the raw quantities (stress, separation) are
put back at the true scale at the end, ``inf`` when beyond float64, never a finite-looking value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import kendalltau

from ..errors import InputError

SCORES = (
    "stress",
    "scaled_stress",
    "monotonicity_violation",
    "anchored_monotonicity_violation",
    "lag_violation",
    "separation",
)


def _upper(matrix: np.ndarray) -> np.ndarray:
    return matrix[np.triu_indices(matrix.shape[0], k=1)]


def check_inputs(positions: Any, distances: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate (P, D); return P as float64 (n, k) and the condensed upper triangle of D."""
    p = np.asarray(positions, dtype=np.float64)
    if p.ndim == 1:
        p = p[:, None]
    if p.ndim != 2:
        raise InputError(f"position vectors must be an (n, k) array, got shape {p.shape}")
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim == 2:
        if d.shape != (p.shape[0], p.shape[0]):
            raise InputError(f"{p.shape[0]} position vectors but a {d.shape} distance matrix; they must match")
        d = _upper(d)
    elif d.shape != (p.shape[0] * (p.shape[0] - 1) // 2,):
        raise InputError(f"condensed distances of length {d.shape} do not fit {p.shape[0]} positions")
    if p.shape[0] < 3:
        raise InputError(f"scores need at least 3 positions, got {p.shape[0]}; lower --min-count or use more data")
    if not np.all(np.isfinite(p)):
        raise InputError("the position vectors contain NaN or infinity; check the encoding")
    if not np.all(np.isfinite(d)):
        raise InputError("the target distances contain NaN or infinity")
    return p, d


def unit_distances(positions: Any) -> tuple[np.ndarray, float]:
    """(e, s): condensed distances of P / s with s = max |P|, so E = s e exactly up to rounding.

    Dividing first keeps every square inside pdist representable: ||c p_i - c p_j|| of a table
    scaled by c = 1e300 (or 1e-300) would over- (under-)flow to inf (0). ``s`` is 0 for an
    all-zero table (then e is all zeros too).
    """
    p = np.asarray(positions, dtype=np.float64)
    if p.ndim == 1:
        p = p[:, None]
    if not np.all(np.isfinite(p)):
        raise InputError("the position vectors contain NaN or infinity; check the encoding")
    scale = float(np.max(np.abs(p))) if p.size else 0.0
    return pdist(p / scale if scale > 0 else p), scale


def _product(factors: tuple[float, ...], divisors: tuple[float, ...] = ()) -> float:
    """prod(factors) / prod(divisors) of non-negative finite numbers without an intermediate over- or
    underflow: inf only when the true result is above float64's range (0 when below it)."""
    mantissa, exponent = 1.0, 0
    for value in factors:
        part, power = math.frexp(value)
        mantissa, exponent = mantissa * part, exponent + power
    for value in divisors:
        part, power = math.frexp(value)
        mantissa, exponent = mantissa / part, exponent - power
    if mantissa == 0:
        return 0.0
    try:
        return math.ldexp(mantissa, exponent)
    except OverflowError:
        return math.inf


def embedding_distances(positions: Any) -> np.ndarray:
    """Condensed E_ij = ||p_i - p_j|| over i < j (scipy's pdist order), computed at unit scale.

    An entry whose true value exceeds float64's range is inf; none is ever NaN.
    """
    e, scale = unit_distances(positions)
    with np.errstate(over="ignore"):
        return e * scale


def stress(positions: Any, distances: Any) -> float:
    """Raw stress sum (E - D)^2 / sum D^2 over pairs i < j (inf when it exceeds float64's range)."""
    p, d = check_inputs(positions, distances)
    e, scale = unit_distances(p)
    return _stress(e, d, scale)


def _stress(e: np.ndarray, d: np.ndarray, *scale: float) -> float:
    """Raw stress of the distances ``prod(scale) * e`` against ``d``, every product at unit scale.

    With u = e / max e, delta = D / max D and r = scale max(e) / max(D) (E = r max(D) u):
    stress = sum (r u - delta)^2 / sum delta^2 when r <= 1, else r^2 sum (u - delta / r)^2 /
    sum delta^2 with r^2 applied last, so the result is inf only when the true stress is above
    float64's range (a table scaled by 1e300), and never NaN for finite inputs.
    """
    top = float(np.max(np.abs(d))) if d.size else 0.0
    if top == 0:
        raise InputError(
            "every target distance is 0, so stress is undefined: the kept positions' token distributions "
            "do not differ (a corpus of one repeated word, or one too small to tell positions apart), or "
            "the distances table holds only zeros; use a larger corpus of varied texts, keep more "
            "positions (a lower --min-count), or regenerate the distances"
        )
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(d)) and all(math.isfinite(f) for f in scale)):
        return math.nan
    delta = d / top
    denominator = float(np.dot(delta, delta))
    e_top = float(np.max(e)) if e.size else 0.0
    if e_top == 0 or 0 in scale:
        return 1.0  # E = 0: the residual is all of D
    u = e / e_top
    ratio = _product((*scale, e_top), (top,))
    if ratio <= 1:
        residual = ratio * u - delta
        return float(np.dot(residual, residual)) / denominator
    residual = u - _product((top,), (*scale, e_top)) * delta
    unit = float(np.dot(residual, residual)) / denominator
    return _product((unit, *scale, e_top, *scale, e_top), (top, top))


def scaled_stress(positions: Any, distances: Any) -> float:
    """Stress after the best global scale: 1 - (sum E D)^2 / (sum E^2 sum D^2)."""
    p, d = check_inputs(positions, distances)
    return condensed_scaled_stress(unit_distances(p)[0], d)


def fitted_distances(table: Any, target: np.ndarray) -> np.ndarray:
    """A table's pairwise distances at the best global scale against ``target`` (condensed D):
    s E with s = <E, D> / <E, E>, E taken at unit scale first (entries near 1e300 stay finite)."""
    e = unit_distances(table)[0]
    scale = float(e @ target / (e @ e)) if float(e @ e) > 0 else 1.0
    return scale * e


def condensed_scaled_stress(e: np.ndarray, d: np.ndarray) -> float:
    """Scaled stress of two condensed distance vectors (E of the encoding, D of the corpus).

    Scale-free in E and in D, so both are brought to unit scale before any product (NaN, never a
    clamped value, if an input is not finite)."""
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(d))):
        return math.nan
    e_top = float(np.max(np.abs(e))) if e.size else 0.0
    d_top = float(np.max(np.abs(d))) if d.size else 0.0
    if e_top == 0 or d_top == 0:
        return 1.0  # no geometry in E (or D): the best scale is 0, leaving all of D unexplained
    e, d = e / e_top, d / d_top
    ee, dd = float(np.dot(e, e)), float(np.dot(d, d))
    if ee == 0 or dd == 0:
        return 1.0
    value = 1.0 - float(np.dot(e, d)) ** 2 / (ee * dd)
    return max(0.0, value) if math.isfinite(value) else math.nan


def _tie_pairs(values: np.ndarray) -> int:
    _, counts = np.unique(values, return_counts=True)
    return int(np.sum(counts * (counts - 1) // 2))


def _joint_tie_pairs(a: np.ndarray, b: np.ndarray) -> int:
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    change = np.flatnonzero((np.diff(a) != 0) | (np.diff(b) != 0))
    sizes = np.diff(np.concatenate([[0], change + 1, [a.size]]))
    return int(np.sum(sizes * (sizes - 1) // 2))


def discordance(e: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """(concordant, discordant) pair counts between two rankings, ties in either left out.

    From Kendall's tau-b (O(m log m)) and the tie counts:
    C + Dis = n0 - n1 - n2 + n3 and C - Dis = tau_b sqrt((n0 - n1)(n0 - n2)).
    """
    m = e.size
    n0 = m * (m - 1) // 2
    n1, n2, n3 = _tie_pairs(d), _tie_pairs(e), _joint_tie_pairs(d, e)
    untied = n0 - n1 - n2 + n3
    if untied <= 0:
        return 0.0, 0.0
    tau = kendalltau(e, d, variant="b").statistic
    if not np.isfinite(tau):
        return 0.0, 0.0
    # C - Dis is an integer: rounding removes tau's float error, which could push the
    # discordant share past 1 (or below 0).
    difference = float(np.rint(tau * np.sqrt(float(n0 - n1) * float(n0 - n2))))
    return (untied + difference) / 2.0, (untied - difference) / 2.0


#: distances closer than this, relative to the largest, count as tied (see tie_ranks)
TIE_RTOL = 1e-9


def tie_ranks(values: np.ndarray, rtol: float = TIE_RTOL) -> np.ndarray:
    """Dense ranks of ``values`` where neighbours closer than rtol * max|values| share a rank.

    Floating-point rounding splits exact ties: sinusoidal, RoPE and ALiBi distances depend only
    on |i - j| in exact arithmetic, but pdist returns values that differ in the last bits, and
    a rank statistic would then count those pairs as ordered at random. Merging values within
    a tolerance far above float64 rounding (~1e-13 here) and far below any meaningful
    difference restores the ties.
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    scale = float(np.max(np.abs(ordered))) if ordered.size else 0.0
    steps = np.diff(ordered) > rtol * scale
    ranks = np.empty(values.shape, dtype=np.float64)
    ranks[order] = np.concatenate([[0], np.cumsum(steps)]) if ordered.size else []
    return ranks


def _violation(e: np.ndarray, d: np.ndarray) -> float:
    return _violation_of_ranks(tie_ranks(e), tie_ranks(d))


def _violation_of_ranks(e: np.ndarray, d: np.ndarray) -> float:
    concordant, discordant = discordance(e, d)
    total = concordant + discordant
    return float(discordant / total) if total > 0 else float("nan")


def monotonicity_violation(positions: Any, distances: Any, anchored: bool = False) -> float:
    """Share of position-pair pairs ordered differently by E and D (ties left out).

    ``anchored=True``: only pairs (i,j), (i,l) sharing an anchor i, averaged over anchors.
    """
    p, d = check_inputs(positions, distances)
    e = unit_distances(p)[0]
    return _anchored_violation(e, d, p.shape[0]) if anchored else _violation(e, d)


_VECTORISED_ANCHORS_UP_TO = 160


def _anchored_violation(e: np.ndarray, d: np.ndarray, n: int) -> float:
    """Mean over anchors i of the violation rate among pairs (i,j), (i,l), j, l != i.

    Vectorised over blocks of anchors: sign(E_ij - E_il) sign(D_ij - D_il) for all j < l,
    ties (a zero sign) left out, in int8 blocks of about 2^23 entries.
    """
    from scipy.spatial.distance import squareform

    e_full, d_full = squareform(tie_ranks(e)), squareform(tie_ranks(d))
    if n > _VECTORISED_ANCHORS_UP_TO:
        # O(n log^2 n) per anchor by a batched merge count beats the O(n^2) sign blocks at this size.
        return _anchored_by_inversions(e_full, d_full, n)
    first, second = np.triu_indices(n, k=1)
    block = max(1, (1 << 23) // max(1, first.size))
    rates = []
    for start in range(0, n, block):
        anchors = np.arange(start, min(n, start + block))
        e_rows, d_rows = e_full[anchors], d_full[anchors]
        product = np.sign(e_rows[:, first] - e_rows[:, second]).astype(np.int8) * np.sign(
            d_rows[:, first] - d_rows[:, second]
        ).astype(np.int8)
        # Pairs that include the anchor itself are not pairs of two position-pairs (i,j), (i,l).
        valid = (first[None, :] != anchors[:, None]) & (second[None, :] != anchors[:, None])
        discordant = ((product < 0) & valid).sum(axis=1)
        decided = ((product != 0) & valid).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rates.append(np.where(decided > 0, discordant / np.maximum(decided, 1), np.nan))
    values = np.concatenate(rates)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def _anchored_by_inversions(e_full: np.ndarray, d_full: np.ndarray, n: int) -> float:
    """The anchored violation from integer ranks: per anchor i, over pairs (j, l) of the other
    positions, discordant = strict inversions of E after sorting by (D, E) (pairs tied in D sit in
    ascending E and never count; pairs tied in E are not strict inversions), decided = all pairs
    minus those tied in D or in E, plus those tied in both. Blocks of anchors bound the memory."""
    others = ~np.eye(n, dtype=bool)
    m = n - 1
    rates = []
    block = max(1, (1 << 21) // max(1, n))
    for start in range(0, n, block):
        rows = np.arange(start, min(n, start + block))
        e_rank = e_full[rows][others[rows]].reshape(rows.size, m).astype(np.int64)
        d_rank = d_full[rows][others[rows]].reshape(rows.size, m).astype(np.int64)
        span = int(e_rank.max()) + 1 if e_rank.size else 1
        joint = d_rank * span + e_rank
        order = np.argsort(joint, axis=1, kind="stable")
        discordant = _row_inversions(np.take_along_axis(e_rank, order, axis=1))
        decided = m * (m - 1) // 2 - _row_tied_pairs(d_rank) - _row_tied_pairs(e_rank) + _row_tied_pairs(joint)
        with np.errstate(invalid="ignore", divide="ignore"):
            rates.append(np.where(decided > 0, discordant / np.maximum(decided, 1), np.nan))
    values = np.concatenate(rates)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def check_index(index: Any, n: int) -> np.ndarray:
    """The position indices t of n rows as float64; ``None`` means 0..n-1. Distinct and finite."""
    if index is None:
        return np.arange(n, dtype=np.float64)
    t = np.asarray(index, dtype=np.float64).ravel()
    if t.shape != (n,):
        raise InputError(f"{n} position vectors but {t.size} position indices; pass one index per row")
    if not np.all(np.isfinite(t)):
        raise InputError("the position indices contain NaN or infinity")
    if np.unique(t).size != n:
        raise InputError("the position indices repeat; each row must be a distinct position")
    return t


def lag_violation(positions: Any, index: Any = None) -> float:
    r"""Monotonicity of the vectors in position distance (GEOMETRY.md, "lag violation").

    .. math::
        \frac{1}{n} \sum_i \frac{\#\{(j,l): |t_i-t_j| < |t_i-t_l|,\ E_{ij} > E_{il}\}
        + \tfrac12 \#\{(j,l): |t_i-t_j| < |t_i-t_l|,\ E_{ij} = E_{il}\}}
        {\#\{(j,l): |t_i-t_j| < |t_i-t_l|\}}

    over j, l != i; anchors with no such pair are left out of the mean.

    Parameters
    ----------
    positions : (n, k) position vectors, one row per kept position.
    index : the n position indices t (kept positions may have gaps); default 0..n-1.
    """
    p = np.asarray(positions, dtype=np.float64)
    if p.ndim == 1:
        p = p[:, None]
    if p.ndim != 2 or p.shape[0] < 3:
        raise InputError(f"lag violation needs an (n, k) array of at least 3 positions, got shape {p.shape}")
    return _lag_violation(unit_distances(p)[0], check_index(index, p.shape[0]))


def _lag_violation(e: np.ndarray, t: np.ndarray) -> float:
    from scipy.spatial.distance import squareform

    n = t.size
    others = ~np.eye(n, dtype=bool)
    # Integer ranks, ties within tie_ranks' tolerance merged (the same E ties as every other score).
    e_rank = squareform(tie_ranks(e)).astype(np.int64)[others].reshape(n, n - 1)
    lag = np.abs(t[:, None] - t[None, :])
    lag_rank = squareform(tie_ranks(squareform(lag, checks=False))).astype(np.int64)[others].reshape(n, n - 1)
    # Sorted by (lag, E) within each anchor's row, a strict inversion of E is a pair j, l with
    # lag_j < lag_l and E_j > E_l: pairs of equal lag sit in ascending E and never count.
    span = int(e_rank.max()) + 1
    order = np.argsort(lag_rank * span + e_rank, axis=1, kind="stable")
    greater = _row_inversions(np.take_along_axis(e_rank, order, axis=1))
    # E ties between different lags: all E-tied pairs minus those tied in lag as well.
    tied = _row_tied_pairs(e_rank) - _row_tied_pairs(lag_rank * span + e_rank)
    m = n - 1
    comparable = m * (m - 1) // 2 - _row_tied_pairs(lag_rank)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(comparable > 0, (greater + 0.5 * tied) / np.maximum(comparable, 1), np.nan)
    return float(np.nanmean(rates)) if np.isfinite(rates).any() else float("nan")


def _row_tied_pairs(values: np.ndarray) -> np.ndarray:
    """Per row, the number of unordered pairs of equal entries: sum over runs of C(size, 2)."""
    ordered = np.sort(values, axis=1)
    columns = np.arange(values.shape[1])
    starts = np.where(
        np.concatenate([np.ones((values.shape[0], 1), bool), np.diff(ordered, axis=1) != 0], axis=1), columns, 0
    )
    # Each entry is tied with the entries of its run before it.
    return (columns - np.maximum.accumulate(starts, axis=1)).sum(axis=1)


def _row_inversions(values: np.ndarray) -> np.ndarray:
    """Per row of non-negative integers, #{j < l: x_j > x_l}, by a bottom-up merge count.

    All rows and blocks at once: at each level the sorted left halves of every block lie in one
    increasing array (block b's values shifted by b times the value span), so one searchsorted
    counts, for every entry of a right half, the left-half entries above it. O(m log^2 m) per row
    in log2(m) numpy passes.
    """
    rows, m = values.shape
    size = 1 << max(0, (m - 1).bit_length())
    top = int(values.max()) + 1 if values.size else 1
    # Padding above every value, at the end of each row, adds no inversion.
    x = np.full((rows, size), top, dtype=np.int64)
    x[:, :m] = values
    counts = np.zeros(rows, dtype=np.int64)
    width = 1
    while width < size:
        blocks = size // (2 * width)
        halves = x.reshape(rows * blocks, 2, width)
        shift = (np.arange(rows * blocks, dtype=np.int64) * (top + 1))[:, None]
        left = (halves[:, 0, :] + shift).ravel()
        right = (halves[:, 1, :] + shift).ravel()
        at_most = np.searchsorted(left, right, side="right") - np.repeat(np.arange(rows * blocks) * width, width)
        counts += (width - at_most).reshape(rows, -1).sum(axis=1)
        x = np.sort(halves.reshape(rows, blocks, 2 * width), axis=2).reshape(rows, size)
        width *= 2
    return counts


def separation(positions: Any, relative: bool = False) -> float:
    """min_{i != j} ||p_i - p_j|| (``relative``: divided by the median pairwise distance)."""
    p = np.asarray(positions, dtype=np.float64)
    if p.ndim == 1:
        p = p[:, None]
    if p.shape[0] < 2:
        raise InputError("separation needs at least 2 positions")
    e, scale = unit_distances(p)
    smallest = float(e.min())
    if not relative:
        return _product((smallest, scale))
    median = float(np.median(e))
    return smallest / median if median > 0 else 0.0


def all_scores(
    positions: Any, distances: Any, anchored: bool = True, index: Any = None, scale: float = 1.0
) -> dict[str, float]:
    """Every score of one encoding, sharing one pdist (of P at unit scale: see the module's "Scale").

    ``index``: the position indices of the rows (kept positions may have gaps), which the lag
    violation measures lags with; default 0..n-1. ``scale``: the vectors are ``scale * positions``
    (a caller that divided a huge table down before a product passes the factor back here); it
    enters the raw stress and separation only.
    """
    p, d = check_inputs(positions, distances)
    if not (math.isfinite(scale) and scale >= 0):
        raise InputError(f"the scale of the position vectors must be finite and >= 0, got {scale}")
    t = check_index(index, p.shape[0])
    e, unit = unit_distances(p)
    median = float(np.median(e))
    smallest = float(e.min())
    result = {
        "stress": _stress(e, d, unit, scale),
        "scaled_stress": condensed_scaled_stress(e, d),
        "monotonicity_violation": _violation(e, d),
        "lag_violation": _lag_violation(e, t),
        "separation": _product((smallest, unit, scale)),
        "relative_separation": smallest / median if median > 0 else 0.0,
    }
    if anchored:
        result["anchored_monotonicity_violation"] = _anchored_violation(e, d, p.shape[0])
    return result
