"""Classical MDS, the stress curve and the low-rank encoding P = A W, against independent computations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from safetensors import safe_open
from safetensors.numpy import load_file
from sklearn.manifold import ClassicalMDS

from geoanalyze.checkpoints.write import write_into_checkpoint
from geoanalyze.corpus.marginals import PositionalCounts
from geoanalyze.errors import IncompatibleError, InputError
from geoanalyze.geometry.distances import hellinger_distances
from geoanalyze.geometry.mds import (
    DEFAULT_CURVE_RANKS,
    LowRankEncoding,
    MDSResult,
    classical_mds,
    low_rank_encoding,
    orthonormal_rows,
    stress_curve,
)

FAST = settings(max_examples=30, deadline=None)
TABLE = "embeddings.position_embeddings.weight"


# --- independent references -------------------------------------------------------------------


def pairwise(points: np.ndarray) -> np.ndarray:
    """Euclidean distances ||x_i - x_j|| by broadcasting differences."""
    return np.sqrt(np.square(points[:, None, :] - points[None, :, :]).sum(axis=2))


def loop_stress(embedding: np.ndarray, target: np.ndarray, rank: int) -> float:
    """Raw stress sum_{i<j} (||x_i - x_j|| - D_ij)^2 / sum_{i<j} D_ij^2 of the first ``rank`` coordinates."""
    n = target.shape[0]
    residual = total = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            e = math.sqrt(sum((embedding[i, c] - embedding[j, c]) ** 2 for c in range(rank)))
            residual += (e - target[i, j]) ** 2
            total += target[i, j] ** 2
    return residual / total


def explicit_b(distances: np.ndarray) -> np.ndarray:
    """B = -1/2 J D^2 J with the centring matrix J written out."""
    n = distances.shape[0]
    j = np.eye(n) - np.ones((n, n)) / n
    return -0.5 * j @ np.square(distances) @ j


def gaussian_points(seed: int, n: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, k)) * np.linspace(3.0, 1.0, k) + rng.standard_normal(k)


def random_marginals(seed: int, n: int, v: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.full(v, 0.3), size=n)


@st.composite
def grid_points(draw: st.DrawFn) -> np.ndarray:
    """Any small configuration in R^k on a half-integer grid: duplicates and collinear sets included."""
    n = draw(st.integers(2, 12))
    k = draw(st.integers(1, 5))
    points = draw(hnp.arrays(np.float64, (n, k), elements=st.integers(-20, 20).map(lambda v: v / 2)))
    assume(bool(np.ptp(points, axis=0).max() > 0))  # not all points equal
    return points


# --- classical MDS ----------------------------------------------------------------------------


@FAST
@given(grid_points())
def test_reproduces_any_euclidean_matrix(points: np.ndarray) -> None:
    target = pairwise(points)
    mds = classical_mds(target)
    n = points.shape[0]
    centred = points - points.mean(axis=0)
    # The affine dimension of the configuration (exact for these small half-integer coordinates).
    assert mds.effective_rank_ == np.linalg.matrix_rank(centred, tol=1e-6)
    assert mds.embedding_.shape == (n, mds.effective_rank_)
    reproduced = pairwise(mds.embedding_)
    scale = float(np.square(target).max())
    np.testing.assert_allclose(np.square(reproduced), np.square(target), rtol=0, atol=1e-9 * scale)
    rank = mds.embedding_.shape[1]
    assert stress_curve(mds.embedding_, target, ranks=[rank])[rank] < 1e-10
    assert mds.negative_mass_ == 0.0


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(0, 15))
def test_points_in_general_position(seed: int, k: int, extra: int) -> None:
    points = gaussian_points(seed, n=k + 2 + extra, k=k)
    target = pairwise(points)
    mds = classical_mds(target)
    assert mds.effective_rank_ == k
    assert mds.embedding_.shape == (points.shape[0], k)
    # The embedding is the centred configuration up to a rotation: equal Gram matrices.
    centred = points - points.mean(axis=0)
    np.testing.assert_allclose(mds.embedding_ @ mds.embedding_.T, centred @ centred.T, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mds.embedding_.mean(axis=0), 0.0, atol=1e-10)
    # eigenvalues_ are those of B, descending; the kept ones are the squared column norms.
    np.testing.assert_allclose(mds.eigenvalues_, np.sort(np.linalg.eigvalsh(explicit_b(target)))[::-1], atol=1e-9)
    np.testing.assert_allclose(np.square(mds.embedding_).sum(axis=0), mds.eigenvalues_[:k], rtol=1e-10)


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(3, 15))
def test_distances_invariant_under_rotation_and_translation(seed: int, k: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    points = gaussian_points(seed, n=n, k=k)
    rotation, _ = np.linalg.qr(rng.standard_normal((k, k)))
    moved = points @ rotation + 10.0 * rng.standard_normal(k)
    first, second = classical_mds(pairwise(points)), classical_mds(pairwise(moved))
    np.testing.assert_allclose(pairwise(second.embedding_), pairwise(first.embedding_), rtol=0, atol=1e-7)
    np.testing.assert_allclose(
        second.embedding_ @ second.embedding_.T, first.embedding_ @ first.embedding_.T, rtol=0, atol=1e-9
    )


@pytest.mark.parametrize("n_components", [2, 4])
def test_matches_scikit_learn(n_components: int) -> None:
    for target in (pairwise(gaussian_points(7, n=15, k=4)), hellinger_distances(random_marginals(2, 15, 40))):
        ours = classical_mds(target, n_components=n_components)
        theirs = ClassicalMDS(n_components=n_components, metric="precomputed").fit(target)
        # Same sign convention (svd_flip), so the coordinates themselves agree, not only their distances.
        np.testing.assert_allclose(ours.embedding_, theirs.embedding_, rtol=0, atol=1e-10)
        np.testing.assert_allclose(ours.eigenvalues_[:n_components], theirs.eigenvalues_, rtol=1e-10)
        np.testing.assert_allclose(pairwise(ours.embedding_), pairwise(theirs.embedding_), rtol=0, atol=1e-10)


def test_deterministic_signs() -> None:
    target = pairwise(gaussian_points(3, n=20, k=5))
    first, second = classical_mds(target), classical_mds(target.copy())
    np.testing.assert_array_equal(first.embedding_, second.embedding_)
    columns = np.arange(first.embedding_.shape[1])
    largest = first.embedding_[np.argmax(np.abs(first.embedding_), axis=0), columns]
    assert np.all(largest > 0)

    order = np.random.default_rng(0).permutation(20)
    permuted = classical_mds(target[np.ix_(order, order)])
    back = np.empty_like(permuted.embedding_)
    back[order] = permuted.embedding_
    np.testing.assert_allclose(pairwise(back), pairwise(first.embedding_), rtol=0, atol=1e-10)
    # The sign rule follows the entry, not the row index, so even the coordinates come back.
    np.testing.assert_allclose(back, first.embedding_, rtol=0, atol=1e-8)


def test_partial_eigensolve_matches_the_full_one() -> None:
    points = np.random.default_rng(5).standard_normal((150, 6)) * np.array([8.0, 6.0, 4.0, 3.0, 2.0, 1.0])
    target = pairwise(points)
    full = classical_mds(target, method="full")
    for rank in (1, 3, 5):
        partial = classical_mds(target, n_components=rank, method="partial")
        assert partial.partial_ and not full.partial_
        assert partial.negative_mass_ is None
        assert partial.eigenvalues_.shape == (rank,)
        np.testing.assert_allclose(partial.eigenvalues_, full.eigenvalues_[:rank], rtol=0, atol=1e-8)
        assert partial.embedding_.shape == (150, rank)
        np.testing.assert_allclose(pairwise(partial.embedding_), pairwise(full.coordinates(rank)), rtol=0, atol=1e-8)
    with pytest.raises(InputError):
        classical_mds(target, method="partial")  # a partial solve needs n_components


def test_auto_method_is_full_below_the_partial_size() -> None:
    mds = classical_mds(pairwise(gaussian_points(1, n=40, k=3)), n_components=2)
    assert not mds.partial_
    assert mds.eigenvalues_.shape == (40,)
    assert mds.embedding_.shape == (40, 2)


@pytest.mark.parametrize("n", [16, 64, 256])
def test_collinear_points_have_rank_one(n: int) -> None:
    # ALiBi-like geometry: D_ij = m |i - j| is the distance of points m i on a line.
    line = 0.25 * np.arange(n, dtype=np.float64)
    mds = classical_mds(np.abs(line[:, None] - line[None, :]))
    assert mds.effective_rank_ == 1
    np.testing.assert_allclose(np.abs(mds.embedding_[:, 0]), np.abs(line - line.mean()), rtol=0, atol=1e-10)


def test_rounding_is_not_a_dimension() -> None:
    # Three points on a line. With a threshold of n eps lambda_max alone, the rounding of B
    # (~1.4e-16 here, against lambda_max = 1/6) counted as a second dimension.
    mds = classical_mds(pairwise(np.array([[0.5], [0.0], [0.0]])))
    assert mds.effective_rank_ == 1
    np.testing.assert_allclose(mds.embedding_[:, 0], [1 / 3, -1 / 6, -1 / 6], rtol=0, atol=1e-12)


def test_effective_rank_of_a_hellinger_matrix() -> None:
    # n square-root marginals in general position on the sphere span an (n - 1)-dimensional affine space.
    target = hellinger_distances(random_marginals(0, 25, 60))
    mds = classical_mds(target)
    assert mds.effective_rank_ == 24
    scale = max(mds.eigenvalues_[0], np.square(target).max())
    assert mds.tolerance_ == pytest.approx(4 * 25 * np.finfo(np.float64).eps * scale, rel=1e-12)
    assert mds.negative_mass_ == 0.0


def test_negative_mass_of_a_non_euclidean_matrix() -> None:
    # A star: a centre 1 from three leaves that are 2 from each other. A metric (the triangle
    # inequality holds with equality), but each leaf-centre-leaf would have to be a straight line.
    target = np.array([[0.0, 1.0, 1.0, 1.0], [1.0, 0.0, 2.0, 2.0], [1.0, 2.0, 0.0, 2.0], [1.0, 2.0, 2.0, 0.0]])
    for i, j, k in np.ndindex(4, 4, 4):
        assert target[i, k] <= target[i, j] + target[j, k]
    mds = classical_mds(target)
    eigenvalues = np.sort(np.linalg.eigvalsh(explicit_b(target)))[::-1]
    np.testing.assert_allclose(mds.eigenvalues_, eigenvalues, atol=1e-12)
    negative = eigenvalues[eigenvalues < -1e-12]
    assert negative.size > 0
    assert mds.negative_mass_ is not None and mds.negative_mass_ > 0
    assert mds.negative_mass_ == pytest.approx(np.abs(negative).sum() / np.abs(eigenvalues).sum(), abs=1e-12)
    assert mds.effective_rank_ == int((eigenvalues > 1e-12).sum())
    assert mds.embedding_.shape == (4, mds.effective_rank_)


def test_coordinates_by_rank() -> None:
    mds = classical_mds(pairwise(gaussian_points(0, n=10, k=3)))
    assert mds.coordinates() is mds.embedding_
    np.testing.assert_array_equal(mds.coordinates(2), mds.embedding_[:, :2])
    for rank in (0, 4):
        with pytest.raises(InputError):
            mds.coordinates(rank)


INVALID_MATRICES = {
    "non-square": np.zeros((2, 3)),
    "1-d": np.zeros(3),
    "one-point": np.zeros((1, 1)),
    "asymmetric": np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.5, 1.0, 0.0]]),
    "nan": np.array([[0.0, np.nan], [np.nan, 0.0]]),
    "inf": np.array([[0.0, np.inf], [np.inf, 0.0]]),
}


@pytest.mark.parametrize("name", list(INVALID_MATRICES))
def test_invalid_matrices_raise_input_error(name: str) -> None:
    with pytest.raises(InputError):
        classical_mds(INVALID_MATRICES[name])


@pytest.mark.parametrize("options", [{"n_components": 0}, {"n_components": 5}, {"method": "lanczos"}])
def test_invalid_options_raise_input_error(options: dict[str, object]) -> None:
    with pytest.raises(InputError):
        classical_mds(pairwise(gaussian_points(0, n=4, k=2)), **options)  # type: ignore[arg-type]


# --- stress curve -----------------------------------------------------------------------------


def test_stress_curve_matches_a_loop_over_pairs() -> None:
    rng = np.random.default_rng(4)
    noise = rng.random((14, 14)) * 0.3
    target = pairwise(gaussian_points(4, n=14, k=6)) + noise + noise.T  # not Euclidean: stress stays > 0
    np.fill_diagonal(target, 0.0)
    embedding = classical_mds(target).embedding_
    max_rank = embedding.shape[1]
    curve = stress_curve(embedding, target, ranks=[1, 2, 3, 5, max_rank, max_rank + 10])
    assert sorted(curve) == sorted({1, 2, 3, 5, max_rank})  # ranks beyond the embedding are left out
    for rank, value in curve.items():
        assert value == pytest.approx(loop_stress(embedding, target, rank), abs=1e-12)
        assert value > 0
    default = stress_curve(embedding, target)
    assert sorted(default) == sorted({r for r in DEFAULT_CURVE_RANKS if r <= max_rank} | {max_rank})
    for rank, value in default.items():
        assert value == pytest.approx(loop_stress(embedding, target, rank), abs=1e-12)


def test_full_rank_stress_of_hellinger_matrices_is_zero(drift_counts: PositionalCounts) -> None:
    for target in (hellinger_distances(random_marginals(1, 30, 80)), hellinger_distances(drift_counts)):
        mds = classical_mds(target)
        rank = mds.embedding_.shape[1]
        assert rank == target.shape[0] - 1
        stress = stress_curve(mds.embedding_, target)[rank]
        assert stress < 1e-12
        assert loop_stress(mds.embedding_, target, rank) < 1e-12


# --- the low-rank encoding P = A W ------------------------------------------------------------


@FAST
@given(st.integers(1, 40), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_orthonormal_rows(rank: int, extra: int, seed: int) -> None:
    dim = rank + extra
    for basis in ("random", "identity"):
        w = orthonormal_rows(rank, dim, basis=basis, seed=seed)
        assert w.shape == (rank, dim)
        np.testing.assert_allclose(w @ w.T, np.eye(rank), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(orthonormal_rows(rank, dim, "identity"), np.eye(dim)[:rank])
    np.testing.assert_array_equal(orthonormal_rows(rank, dim, seed=seed), orthonormal_rows(rank, dim, seed=seed))


def test_orthonormal_rows_rejects_bad_arguments() -> None:
    with pytest.raises(InputError):
        orthonormal_rows(5, 3)
    with pytest.raises(InputError):
        orthonormal_rows(2, 3, basis="hadamard")
    assert not np.allclose(orthonormal_rows(3, 10, seed=0), orthonormal_rows(3, 10, seed=1))


@pytest.fixture(scope="module")
def hellinger_mds() -> tuple[np.ndarray, MDSResult]:
    target = hellinger_distances(random_marginals(3, 64, 200))
    return target, classical_mds(target)


@pytest.mark.parametrize("basis", ["random", "identity"])
@pytest.mark.parametrize(("rank", "dim", "scale"), [(5, 32, 1.0), (20, 20, 2.5), (None, 384, 1.0)])
def test_low_rank_encoding_keeps_distances(
    hellinger_mds: tuple[np.ndarray, MDSResult], basis: str, rank: int | None, dim: int, scale: float
) -> None:
    target, mds = hellinger_mds
    positions = np.arange(100, 164)
    encoding = low_rank_encoding(mds, positions, dim=dim, rank=rank, basis=basis, seed=3, scale=scale)
    r = min(63, dim) if rank is None else rank
    n = 64
    assert (encoding.rank, encoding.dim) == (r, dim)
    np.testing.assert_array_equal(encoding.A, scale * mds.embedding_[:, :r])
    np.testing.assert_allclose(encoding.W @ encoding.W.T, np.eye(r), rtol=0, atol=1e-12)
    p = encoding.position_embeddings
    assert p.shape == (n, dim)
    np.testing.assert_allclose(p, encoding.A @ encoding.W, rtol=0, atol=0)
    np.testing.assert_allclose(pairwise(p), pairwise(encoding.A), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(encoding.positions, positions)
    if rank is None:  # full rank: P reproduces the (Euclidean) Hellinger matrix, times the scale
        np.testing.assert_allclose(pairwise(p), scale * target, rtol=0, atol=1e-7)
    counts = encoding.parameter_counts()
    assert counts["factored"] == r * (n + dim)
    assert counts["dense"] == n * dim
    assert counts["saving"] == pytest.approx(1 - r * (n + dim) / (n * dim))
    assert encoding.metadata["rank"] == r and encoding.metadata["dim"] == dim


@pytest.mark.parametrize(
    "options",
    [{"dim": 3, "rank": 5}, {"dim": 384, "rank": 64}, {"dim": 384, "rank": 0}, {"dim": 0}, {"dim": 8, "scale": 0.0}],
    ids=["rank-above-dim", "rank-above-mds", "rank-0", "dim-0", "scale-0"],
)
def test_low_rank_encoding_rejects_bad_options(
    hellinger_mds: tuple[np.ndarray, MDSResult], options: dict[str, float]
) -> None:
    with pytest.raises(InputError):
        low_rank_encoding(hellinger_mds[1], np.arange(64), **options)  # type: ignore[arg-type]


def test_save_writes_a_safetensors_pe_file(tmp_path: Path, hellinger_mds: tuple[np.ndarray, MDSResult]) -> None:
    encoding = low_rank_encoding(hellinger_mds[1], np.arange(64), dim=48, rank=10, metadata={"metric": "hellinger"})
    path = tmp_path / "pe.safetensors"
    encoding.save(path)
    arrays = load_file(str(path))
    assert set(arrays) == {"position_embeddings", "A", "W", "positions"}
    assert arrays["position_embeddings"].shape == (64, 48)
    assert arrays["position_embeddings"].dtype == np.float32
    np.testing.assert_array_equal(arrays["position_embeddings"], (encoding.A @ encoding.W).astype(np.float32))
    np.testing.assert_array_equal(arrays["A"], encoding.A.astype(np.float32))
    np.testing.assert_array_equal(arrays["W"], encoding.W.astype(np.float32))
    assert arrays["positions"].dtype == np.int64
    np.testing.assert_array_equal(arrays["positions"], np.arange(64))
    with safe_open(str(path), framework="numpy") as handle:
        document = json.loads(handle.metadata()["geoanalyze"])
    assert document["kind"] == "mds"
    assert (document["rank"], document["dim"], document["metric"]) == (10, 48, "hellinger")


# --- writing into a real checkpoint -----------------------------------------------------------


@pytest.fixture(scope="module")
def encoding_384(hellinger_mds: tuple[np.ndarray, MDSResult]) -> LowRankEncoding:
    return low_rank_encoding(hellinger_mds[1], np.arange(64), dim=384, scale=0.1)


def test_write_into_checkpoint(tmp_path: Path, minilm_path: Path, encoding_384: LowRankEncoding) -> None:
    from transformers import AutoModel

    original = load_file(str(minilm_path / "model.safetensors"))[TABLE]
    assert original.shape == (512, 384)
    output = tmp_path / "out"
    report = write_into_checkpoint(encoding_384, minilm_path, output)
    assert report["rows_replaced"] == 64
    assert report["rows_kept"] == 448
    assert report["table"] == TABLE
    assert (output / "config.json").is_file() and (output / "vocab.txt").is_file()

    model = AutoModel.from_pretrained(str(output))
    weight = model.embeddings.position_embeddings.weight.detach().cpu().numpy()
    assert weight.shape == (512, 384)
    np.testing.assert_array_equal(weight[:64], encoding_384.position_embeddings.astype(np.float32))
    np.testing.assert_array_equal(weight[100], original[100])
    np.testing.assert_array_equal(weight[64:], original[64:])
    # The source checkpoint is untouched.
    np.testing.assert_array_equal(load_file(str(minilm_path / "model.safetensors"))[TABLE], original)


def test_write_with_the_wrong_width_creates_nothing(
    tmp_path: Path, minilm_path: Path, hellinger_mds: tuple[np.ndarray, MDSResult]
) -> None:
    narrow = low_rank_encoding(hellinger_mds[1], np.arange(64), dim=128)
    output = tmp_path / "out"
    with pytest.raises(IncompatibleError):
        write_into_checkpoint(narrow, minilm_path, output)
    assert not output.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_past_the_last_position_creates_nothing(
    tmp_path: Path, minilm_path: Path, hellinger_mds: tuple[np.ndarray, MDSResult]
) -> None:
    late = low_rank_encoding(hellinger_mds[1], np.arange(480, 544), dim=384)
    with pytest.raises(IncompatibleError):
        write_into_checkpoint(late, minilm_path, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_write_into_an_existing_folder_raises(tmp_path: Path, minilm_path: Path, encoding_384: LowRankEncoding) -> None:
    output = tmp_path / "out"
    output.mkdir()
    with pytest.raises(InputError):
        write_into_checkpoint(encoding_384, minilm_path, output)
    assert list(output.iterdir()) == []
