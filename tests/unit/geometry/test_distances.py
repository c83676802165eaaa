"""Hellinger / Fisher-Rao distances, the noise floor and the bias-corrected matrix, against brute force.

Brute-force references loop over pairs and tokens in plain Python, so they share no code (and no
BLAS product) with geoanalyze.geometry.distances.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from geoanalyze.corpus.marginals import PositionalCounts
from geoanalyze.corpus.synthetic import synthetic_corpus
from geoanalyze.errors import FormatError, InputError
from geoanalyze.geometry import distances
from geoanalyze.geometry.distances import (
    PositionGeometry,
    bc_matrix,
    fisher_rao_distances,
    hellinger_distances,
    position_geometry,
)

# sqrt(1 - BC) and arccos(BC) turn an eps-sized rounding of BC near 1 into a sqrt(eps) ~ 1.5e-8 one,
# so distances near 0 are only good to a few sqrt(eps); BC itself (1 - d^2, cos d) is good to 1e-12.
ROUNDING = 1e-7
BC_TOL = 1e-12
FAST = settings(max_examples=40, deadline=None)
DISTANCE_FUNCTIONS = {"hellinger": hellinger_distances, "fisher-rao": fisher_rao_distances}


# --- brute-force references -------------------------------------------------------------------


def loop_bc(p: dict[int, float], q: dict[int, float]) -> float:
    """BC(p, q) = sum_t sqrt(p_t q_t), one token at a time."""
    total = 0.0
    for token, mass in p.items():
        if token in q:
            total += math.sqrt(mass * q[token])
    return total


def bc_to_loop_distance(bc: float, metric: str) -> float:
    bc = min(max(bc, 0.0), 1.0)
    return math.sqrt(1.0 - bc) if metric == "hellinger" else math.acos(bc)


def loop_distances(rows: list[dict[int, float]], metric: str) -> np.ndarray:
    n = len(rows)
    result = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                result[i, j] = bc_to_loop_distance(loop_bc(rows[i], rows[j]), metric)
    return result


def dict_rows(matrix: np.ndarray | sp.sparray) -> list[dict[int, float]]:
    """Rows of a dense or sparse matrix as {column: value} dictionaries (duplicates added)."""
    coo = sp.coo_array(matrix)
    rows: list[dict[int, float]] = [{} for _ in range(matrix.shape[0])]
    for i, t, value in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True):
        rows[i][t] = rows[i].get(t, 0.0) + value
    return [{t: v for t, v in row.items() if v != 0} for row in rows]


def normalised(row: dict[int, float]) -> dict[int, float]:
    total = sum(row.values())
    return {t: v / total for t, v in row.items()}


def halves(counts: PositionalCounts) -> tuple[list[dict[int, float]], list[dict[int, float]]]:
    """Empirical marginals of split-half A (counts.half) and half B (counts - half), by loops."""
    full, half_a = dict_rows(counts.counts), dict_rows(counts.half)
    half_b = []
    for row_full, row_a in zip(full, half_a, strict=True):
        half_b.append({t: c - row_a.get(t, 0.0) for t, c in row_full.items() if c - row_a.get(t, 0.0) > 0})
    return [normalised(r) for r in half_a], [normalised(r) for r in half_b]


def assert_distances_match(actual: np.ndarray, expected: np.ndarray, metric: str) -> None:
    """Equal BCs to 1e-12 (1 - d^2 for Hellinger, cos d for Fisher-Rao) and equal distances to ROUNDING."""
    to_bc = (lambda d: 1.0 - d**2) if metric == "hellinger" else np.cos
    np.testing.assert_allclose(to_bc(actual), to_bc(expected), rtol=0, atol=BC_TOL)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=ROUNDING)


@st.composite
def marginal_matrices(draw: st.DrawFn, min_n: int = 1, max_n: int = 6, max_v: int = 8) -> np.ndarray:
    """Row-stochastic matrices with zeros (disjoint and shared supports) and spread-out masses."""
    n = draw(st.integers(min_n, max_n))
    v = draw(st.integers(1, max_v))
    weights = draw(hnp.arrays(np.float64, (n, v), elements=st.one_of(st.just(0.0), st.floats(1e-9, 1.0))))
    assume(bool(np.all(weights.sum(axis=1) > 0)))
    return weights / weights.sum(axis=1, keepdims=True)


def random_marginals(seed: int, n: int, v: int, zero_fraction: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(v, 0.5), size=n) * (rng.random((n, v)) >= zero_fraction)
    weights[np.arange(n), rng.integers(0, v, size=n)] += 0.1  # no empty row
    return weights / weights.sum(axis=1, keepdims=True)


# --- the naive distances ----------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["hellinger", "fisher-rao"])
def test_matches_brute_force_loops(metric: str) -> None:
    marginals = random_marginals(0, n=9, v=15)
    expected = loop_distances(dict_rows(marginals), metric)
    assert_distances_match(DISTANCE_FUNCTIONS[metric](marginals), expected, metric)


@pytest.mark.parametrize("metric", ["hellinger", "fisher-rao"])
def test_counts_dense_and_sparse_inputs_agree(metric: str, drift_counts: PositionalCounts) -> None:
    totals = drift_counts.totals.astype(np.float64)
    dense = drift_counts.counts.toarray() / totals[:, None]
    function = DISTANCE_FUNCTIONS[metric]
    from_counts = function(drift_counts)
    np.testing.assert_allclose(function(dense), from_counts, rtol=0, atol=1e-12)
    np.testing.assert_allclose(function(sp.csr_array(dense)), from_counts, rtol=0, atol=1e-12)
    np.testing.assert_allclose(function(sp.csc_matrix(dense)), from_counts, rtol=0, atol=1e-12)
    assert_distances_match(
        from_counts, loop_distances([normalised(r) for r in dict_rows(drift_counts.counts)], metric), metric
    )


@FAST
@given(marginal_matrices(min_n=3))
def test_metric_laws(marginals: np.ndarray) -> None:
    for metric, upper in (("hellinger", 1.0), ("fisher-rao", math.pi / 2)):
        d = DISTANCE_FUNCTIONS[metric](marginals)
        assert d.shape == (marginals.shape[0],) * 2
        assert d.dtype == np.float64
        np.testing.assert_array_equal(d, d.T)
        np.testing.assert_array_equal(np.diag(d), 0.0)
        assert d.min() >= 0.0
        assert d.max() <= upper
        # d_ik <= d_ij + d_jk for every triple; each distance carries up to ROUNDING of rounding.
        slack = d[:, None, :] - (d[:, :, None] + d[None, :, :])
        assert slack.max() <= 3 * ROUNDING
        assert_distances_match(d, loop_distances(dict_rows(marginals), metric), metric)


@FAST
@given(marginal_matrices())
def test_dense_and_sparse_marginals_agree(marginals: np.ndarray) -> None:
    for function in DISTANCE_FUNCTIONS.values():
        dense = function(marginals)
        np.testing.assert_allclose(function(sp.csr_array(marginals)), dense, rtol=0, atol=1e-12)
        np.testing.assert_allclose(function(sp.coo_matrix(marginals)), dense, rtol=0, atol=1e-12)


@FAST
@given(marginal_matrices(min_n=2))
def test_hellinger_is_the_scaled_chord_between_square_roots(marginals: np.ndarray) -> None:
    d = hellinger_distances(marginals)
    rows = dict_rows(marginals)
    for i, p in enumerate(rows):
        for j, q in enumerate(rows):
            tokens = set(p) | set(q)
            chord_sq = sum((math.sqrt(p.get(t, 0.0)) - math.sqrt(q.get(t, 0.0))) ** 2 for t in tokens)
            assert abs(d[i, j] ** 2 - chord_sq / 2.0) <= BC_TOL
            assert abs(d[i, j] - math.sqrt(chord_sq / 2.0)) <= ROUNDING


@FAST
@given(marginal_matrices(min_n=2))
def test_fisher_rao_is_the_angle_of_the_hellinger_chord(marginals: np.ndarray) -> None:
    # cos d_FR = BC = 1 - d_H^2.
    np.testing.assert_allclose(
        np.cos(fisher_rao_distances(marginals)), 1.0 - hellinger_distances(marginals) ** 2, rtol=0, atol=BC_TOL
    )


def test_identical_rows_give_zero_and_disjoint_supports_give_the_maximum() -> None:
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(50))
    q = np.zeros(60)
    q[:10] = rng.dirichlet(np.ones(10))
    r = np.zeros(60)
    r[10:] = rng.dirichlet(np.ones(50))
    p_wide = np.concatenate([p, np.zeros(10)])
    identical = np.stack([p_wide, p_wide, p_wide])
    disjoint = np.stack([q, r])
    for function in DISTANCE_FUNCTIONS.values():
        assert np.abs(function(identical)).max() <= ROUNDING
        assert np.abs(function(sp.csr_array(identical))).max() <= ROUNDING
    for matrix in (disjoint, sp.csr_array(disjoint)):
        np.testing.assert_array_equal(hellinger_distances(matrix), [[0.0, 1.0], [1.0, 0.0]])
        np.testing.assert_array_equal(fisher_rao_distances(matrix), [[0.0, math.pi / 2], [math.pi / 2, 0.0]])


def test_sparse_input_with_duplicate_entries() -> None:
    # A valid non-canonical CSR: row 0 holds column 0 twice (0.25 + 0.25); scipy sums duplicates.
    data = np.array([0.25, 0.25, 0.5, 0.1, 0.9])
    indices = np.array([0, 0, 1, 0, 2])
    indptr = np.array([0, 3, 5])
    marginals = sp.csr_array((data, indices, indptr), shape=(2, 3))
    before = (marginals.data.copy(), marginals.indices.copy(), marginals.indptr.copy())
    for metric, function in DISTANCE_FUNCTIONS.items():
        expected = loop_distances([{0: 0.5, 1: 0.5}, {0: 0.1, 2: 0.9}], metric)
        assert_distances_match(function(marginals), expected, metric)
    for array, original in zip((marginals.data, marginals.indices, marginals.indptr), before, strict=True):
        np.testing.assert_array_equal(array, original)  # the caller's matrix is left alone


# --- the two BC backends ----------------------------------------------------------------------


def used_fill(a: sp.csr_array, b: sp.csr_array | None = None) -> float:
    """The fill bc_matrix uses to choose a backend: nonzeros over (rows x columns any row uses)."""
    columns = {int(t) for t in a.indices} | ({int(t) for t in b.indices} if b is not None else set())
    n_rows = a.shape[0] + (b.shape[0] if b is not None else a.shape[0])
    nnz = a.nnz + (b.nnz if b is not None else a.nnz)
    return nnz / (n_rows * len(columns))


def loop_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    rows_a, rows_b = dict_rows(a), dict_rows(b)
    return np.array([[sum(v * q.get(t, 0.0) for t, v in p.items()) for q in rows_b] for p in rows_a])


def sparse_roots(seed: int, n: int, v: int, per_row: int) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    weights = np.zeros((n, v))
    for i in range(n):
        weights[i, rng.choice(v, size=per_row, replace=False)] = rng.random(per_row) + 0.01
    return sp.csr_array(np.sqrt(weights / weights.sum(axis=1, keepdims=True)))


def backends(a: sp.csr_array, b: sp.csr_array | None) -> dict[str, np.ndarray]:
    """bc_matrix's answer by its own choice, forced dense, and forced sparse."""
    results = {"auto": bc_matrix(a, b)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(distances, "_DENSE_ABOVE", 0.0)
        results["dense"] = bc_matrix(a, b)
        patch.setattr(distances, "_DENSE_ABOVE", math.inf)
        results["sparse"] = bc_matrix(a, b)
    return results


@pytest.mark.parametrize(
    ("per_row", "v", "sparse_side"),
    [(3, 2000, True), (40, 60, False)],
    ids=["very-sparse", "dense"],
)
def test_bc_backends_agree(per_row: int, v: int, sparse_side: bool) -> None:
    a = sparse_roots(0, n=120, v=v, per_row=per_row)
    b = sparse_roots(1, n=37, v=v, per_row=per_row)
    assert (used_fill(a) < distances._DENSE_ABOVE) is sparse_side
    assert (used_fill(a, b) < distances._DENSE_ABOVE) is sparse_side
    for left, right in ((a, None), (a, b)):
        reference = loop_products(left.toarray(), (left if right is None else right).toarray())
        assert reference.max() > 0  # some rows share tokens, so the products are not trivially 0
        for name, result in backends(left, right).items():
            np.testing.assert_allclose(result, reference, rtol=0, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(
            bc_matrix(left.toarray(), None if right is None else right.toarray()), reference, atol=1e-12
        )


def test_bc_backends_agree_on_duplicate_entries() -> None:
    # S as a non-canonical CSR: row 0 stores 0.3 + 0.4 in column 2; scipy's meaning is their sum.
    roots = sp.csr_array(
        (np.array([0.3, 0.4, 0.5, 0.7, 0.2]), np.array([2, 2, 0, 2, 1]), np.array([0, 3, 5])), shape=(2, 4)
    )
    reference = loop_products(roots.toarray(), roots.toarray())
    for name, result in backends(roots, None).items():
        np.testing.assert_allclose(result, reference, rtol=0, atol=1e-12, err_msg=name)


def test_bc_matrix_with_no_used_column() -> None:
    empty = sp.csr_array((3, 5))
    np.testing.assert_array_equal(bc_matrix(empty), np.zeros((3, 3)))


# --- invalid input ----------------------------------------------------------------------------


def _empty_position_counts() -> PositionalCounts:
    counts = sp.csr_array(np.array([[3, 1, 0], [0, 0, 0], [1, 1, 2]], dtype=np.int64))
    half = sp.csr_array(np.array([[1, 1, 0], [0, 0, 0], [1, 0, 1]], dtype=np.int64))
    return PositionalCounts(counts, half)


INVALID: dict[str, Callable[[], object]] = {
    "negative": lambda: np.array([[1.5, -0.5], [0.5, 0.5]]),
    "row-sum": lambda: np.array([[0.5, 0.4], [0.5, 0.5]]),
    "nan": lambda: np.array([[np.nan, 1.0], [0.5, 0.5]]),
    "inf": lambda: np.array([[np.inf, 0.0], [0.5, 0.5]]),
    "1-d": lambda: np.array([0.5, 0.5]),
    "3-d": lambda: np.full((2, 2, 2), 0.5),
    "no-rows": lambda: np.zeros((0, 3)),
    "sparse-negative": lambda: sp.csr_array(np.array([[1.5, -0.5], [0.5, 0.5]])),
    "sparse-row-sum": lambda: sp.csr_array(np.array([[0.5, 0.4], [0.5, 0.5]])),
    "sparse-nan": lambda: sp.csr_array(np.array([[np.nan, 1.0], [0.5, 0.5]])),
    "sparse-empty-row": lambda: sp.csr_array(np.array([[0.0, 0.0], [0.5, 0.5]])),
    "counts-empty-position": _empty_position_counts,
}


@pytest.mark.parametrize("metric", ["hellinger", "fisher-rao"])
@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_marginals_raise_input_error(name: str, metric: str) -> None:
    with pytest.raises(InputError):
        DISTANCE_FUNCTIONS[metric](INVALID[name]())


# --- position_geometry: kept positions --------------------------------------------------------


def sample_sizes(texts: list[str]) -> np.ndarray:
    """N_i = number of texts with more than i tokens, by a loop over the texts."""
    longest = max(len(t.split()) for t in texts)
    sizes = [0] * longest
    for text in texts:
        for i in range(len(text.split())):
            sizes[i] += 1
    return np.array(sizes)


@pytest.mark.parametrize("threshold_position", [1, 3, 6, 11])
def test_kept_positions_are_those_with_enough_sequences(
    threshold_position: int, ragged_texts: list[str], ragged_counts: PositionalCounts
) -> None:
    sizes = sample_sizes(ragged_texts)
    np.testing.assert_array_equal(ragged_counts.totals, sizes)
    min_count = int(sizes[threshold_position])
    expected = [i for i, size in enumerate(sizes) if size >= min_count]
    dropped = [i for i, size in enumerate(sizes) if size < min_count]
    geometry = position_geometry(ragged_counts, min_count=min_count)
    assert geometry.positions.tolist() == expected
    assert geometry.totals.tolist() == [int(sizes[i]) for i in expected]
    assert geometry.left_out["count"] == len(dropped)
    assert geometry.left_out["min_count"] == min_count
    listed = [i for start, stop in geometry.left_out["positions"] for i in range(start, stop + 1)]
    assert listed == dropped
    n = len(expected)
    for array in (geometry.naive, geometry.corrected):
        assert array.shape == (n, n)
    assert geometry.noise_floor.shape == (n,)


def test_fewer_than_two_kept_positions_raise(ragged_texts: list[str], ragged_counts: PositionalCounts) -> None:
    sizes = sample_sizes(ragged_texts)
    assert sizes[0] > sizes[1]  # some texts have one token, so min_count = N_1 + 1 keeps position 0 only
    for min_count in (int(sizes[0]) + 1, int(sizes[1]) + 1):
        with pytest.raises(InputError):
            position_geometry(ragged_counts, min_count=min_count)


@pytest.mark.parametrize("options", [{"min_count": 0}, {"metric": "euclidean"}])
def test_bad_options_raise(options: dict[str, object], drift_counts: PositionalCounts) -> None:
    with pytest.raises(InputError):
        position_geometry(drift_counts, **options)  # type: ignore[arg-type]


def test_position_geometry_needs_counts() -> None:
    with pytest.raises(InputError):
        distances.split_half_bc(random_marginals(0, 3, 4))


# --- position_geometry: naive, noise floor, corrected -----------------------------------------


@pytest.mark.parametrize("metric", ["hellinger", "fisher-rao"])
def test_noise_floor_naive_and_corrected_match_brute_force(metric: str, ragged_counts: PositionalCounts) -> None:
    min_count = 100
    geometry = position_geometry(ragged_counts, metric=metric, min_count=min_count)
    assert geometry.metric == metric
    kept = [i for i, size in enumerate(ragged_counts.totals) if size >= min_count]
    assert geometry.positions.tolist() == kept
    full = [normalised(dict_rows(ragged_counts.counts)[i]) for i in kept]
    all_a, all_b = halves(ragged_counts)
    half_a, half_b = [all_a[i] for i in kept], [all_b[i] for i in kept]
    n = len(kept)

    # Noise floor: the distance between the two halves of the same position.
    floor = np.array([bc_to_loop_distance(loop_bc(half_a[i], half_b[i]), metric) for i in range(n)])
    assert_distances_match(geometry.noise_floor, floor, metric)

    # Naive: the plug-in distance between the full-sample marginals.
    assert_distances_match(geometry.naive, loop_distances(full, metric), metric)

    # Corrected: (BC(A_i, B_j) + BC(B_i, A_j)) / 2 / sqrt(BC(A_i, B_i) BC(A_j, B_j)), clipped to [0, 1].
    corrected_bc = np.ones((n, n))
    corrected = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                cross = (loop_bc(half_a[i], half_b[j]) + loop_bc(half_b[i], half_a[j])) / 2.0
                value = cross / math.sqrt(loop_bc(half_a[i], half_b[i]) * loop_bc(half_a[j], half_b[j]))
                corrected_bc[i, j] = min(max(value, 0.0), 1.0)
                corrected[i, j] = bc_to_loop_distance(value, metric)
    assert np.all(np.isfinite(geometry.corrected))
    assert_distances_match(geometry.corrected, corrected, metric)
    np.testing.assert_array_equal(geometry.corrected, geometry.corrected.T)
    np.testing.assert_array_equal(np.diag(geometry.corrected), 0.0)
    assert geometry.matrix("naive") is geometry.naive
    assert geometry.matrix("corrected") is geometry.corrected

    # Noise fraction: mean over pairs of the naive squared Hellinger distance that the correction removes.
    naive_bc = np.array([[loop_bc(p, q) for q in full] for p in full])
    upper = np.triu_indices(n, k=1)
    naive_sq = 1.0 - np.clip(naive_bc[upper], 0.0, 1.0)
    noise_sq = np.maximum(naive_sq - (1.0 - corrected_bc[upper]), 0.0)
    assert geometry.summary["noise_fraction"] == pytest.approx(noise_sq.mean() / naive_sq.mean(), abs=1e-10)
    assert geometry.summary["undefined_pairs"] == 0


def test_unknown_matrix_name_raises(drift_counts: PositionalCounts) -> None:
    with pytest.raises(InputError):
        position_geometry(drift_counts, min_count=1).matrix("denoised")


SUMMARY_KEYS = {
    "noise_fraction",
    "snr",
    "pairs_above_floor",
    "median_noise_floor",
    "max_noise_floor",
    "median_naive",
    "median_corrected",
    "undefined_pairs",
}


def test_stationary_corpus_is_almost_all_noise(count_texts: Callable[..., PositionalCounts]) -> None:
    corpus = synthetic_corpus("stationary", n_sequences=500, length=16, vocab_size=2000, seed=5)
    assert np.abs(corpus.marginals - corpus.marginals[0]).max() == 0.0  # true distances are all 0
    geometry = position_geometry(count_texts(corpus.texts), min_count=100)
    assert set(geometry.summary) >= SUMMARY_KEYS
    assert 0.9 <= geometry.summary["noise_fraction"] <= 1.0
    assert geometry.summary["snr"] < 0.1
    assert np.median(geometry.naive[np.triu_indices(16, k=1)]) > 0.3  # the naive matrix is far from 0
    assert geometry.summary["median_noise_floor"] > 0.3


def test_save_load_round_trip(tmp_path, ragged_counts: PositionalCounts) -> None:
    geometry = position_geometry(ragged_counts, metric="fisher-rao", min_count=100)
    path = tmp_path / "distances.safetensors"
    geometry.save(path)
    loaded = PositionGeometry.load(path)
    for name in ("positions", "totals", "naive", "corrected", "noise_floor"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(geometry, name), err_msg=name)
    assert loaded.metric == "fisher-rao"
    assert loaded.left_out == geometry.left_out
    assert loaded.summary == geometry.summary
    assert loaded.metadata == geometry.metadata
    assert loaded.metadata["tokenizer"]["kind"] == "whitespace"


def test_loading_a_counts_file_as_distances_raises(tmp_path, drift_counts: PositionalCounts) -> None:
    path = tmp_path / "counts.safetensors"
    drift_counts.save(path)
    with pytest.raises(FormatError):
        PositionGeometry.load(path)
