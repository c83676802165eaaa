"""The standard encodings against GEOMETRY.md's formulas, and the registry of spec strings.

The formulas are written out here element by element (GEOMETRY.md, "Position vectors of the
standard encodings"); files are real .npy / .safetensors files written to tmp_path.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import rope_reference
from safetensors import safe_open
from safetensors.numpy import save_file

from geoanalyze.encodings import (
    REGISTRY,
    EncodingContext,
    get_encoding,
    is_encoding_spec,
    list_encodings,
    standard,
)
from geoanalyze.errors import FormatError, InputError
from geoanalyze.geometry.mds import LowRankEncoding, orthonormal_rows
from geoanalyze.geometry.scores import stress

# --- independent references -------------------------------------------------------------------


def sinusoidal_reference(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    """PE(i, 2k) = sin(i / base^(2k/d)), PE(i, 2k+1) = cos(same)."""
    table = np.zeros((n, d))
    for i in range(n):
        for k in range(d // 2):
            angle = i / base ** (2 * k / d)
            table[i, 2 * k] = math.sin(angle)
            table[i, 2 * k + 1] = math.cos(angle)
    return table


def pairwise(points: np.ndarray) -> np.ndarray:
    return np.sqrt(np.square(points[:, None, :] - points[None, :, :]).sum(axis=2))


# --- sinusoidal -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("d", "base"), [(2, 10000.0), (10, 10000.0), (16, 100.0)])
def test_sinusoidal_matches_formula(d: int, base: float) -> None:
    np.testing.assert_allclose(
        standard.sinusoidal(np.arange(9), d=d, base=base), sinusoidal_reference(9, d, base), atol=1e-12
    )


def test_sinusoidal_through_the_registry() -> None:
    np.testing.assert_allclose(
        get_encoding("sinusoidal:d=12").vectors(range(7)), sinusoidal_reference(7, 12), atol=1e-12
    )
    np.testing.assert_allclose(
        get_encoding("sinusoidal:base=50").vectors(range(5), EncodingContext(width=8)),
        sinusoidal_reference(5, 8, 50.0),
        atol=1e-12,
    )
    # Without a context the default width is 768.
    assert get_encoding("sinusoidal").vectors(range(4)).shape == (4, 768)


# --- RoPE ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("d", "base"), [(2, 10000.0), (8, 10000.0), (64, 500000.0)])
def test_rope_matches_formula(d: int, base: float) -> None:
    positions = [0, 1, 2, 5, 17, 100]
    np.testing.assert_allclose(
        standard.rope(np.array(positions), d=d, base=base), rope_reference(positions, d, base), atol=1e-12
    )


def test_rope_inner_product_is_the_relative_kernel() -> None:
    d, base = 16, 10000.0
    r = standard.rope(np.arange(30), d=d, base=base)
    thetas = [base ** (-2 * k / d) for k in range(d // 2)]
    for i in range(0, 30, 3):
        for j in range(30):
            kernel = sum(math.cos((i - j) * theta) for theta in thetas)
            assert float(r[i] @ r[j]) == pytest.approx(kernel, abs=1e-10)
    gram = r @ r.T
    # Relative: <r_{i+s}, r_{j+s}> = <r_i, r_j>; every vector on a product of unit circles.
    np.testing.assert_allclose(gram[5:, 5:], gram[:-5, :-5], atol=1e-10)
    np.testing.assert_allclose(np.diag(gram), d / 2, atol=1e-12)


def test_rope_spec_string() -> None:
    vectors = get_encoding("rope:d=64,base=500000").vectors(range(12))
    np.testing.assert_allclose(vectors, rope_reference(list(range(12)), 64, 500000.0), atol=1e-12)
    with_width = get_encoding("rope").vectors([3, 1, 4], EncodingContext(width=10))
    np.testing.assert_allclose(with_width, rope_reference([3, 1, 4], 10), atol=1e-12)
    # Spaces around parameters are tolerated.
    np.testing.assert_allclose(
        get_encoding("rope: d=8 , base=100").vectors(range(3)), rope_reference([0, 1, 2], 8, 100.0)
    )


# --- ALiBi -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("heads", [1, 8, 12])
def test_alibi_slopes(heads: int) -> None:
    expected = [2.0 ** (-8.0 * h / heads) for h in range(1, heads + 1)]
    np.testing.assert_allclose(standard.alibi_slopes(heads), expected, rtol=1e-15)


def test_alibi_slopes_for_eight_heads_are_the_papers() -> None:
    np.testing.assert_allclose(
        standard.alibi_slopes(8), [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    )


def test_alibi_all_heads_and_single_head() -> None:
    positions = [0, 1, 2, 7, 30]
    all_heads = get_encoding("alibi:heads=8").vectors(positions)
    assert all_heads.shape == (5, 8)
    for row, i in enumerate(positions):
        for h in range(1, 9):
            assert all_heads[row, h - 1] == pytest.approx(2.0 ** (-h) * i, rel=1e-15)
    third = get_encoding("alibi:heads=8,head=3").vectors(positions)
    assert third.shape == (5, 1)
    np.testing.assert_allclose(third[:, 0], [i / 8 for i in positions], rtol=1e-15)
    assert standard.alibi(np.array(positions), heads=8, head=3).shape == (5, 1)
    assert get_encoding("alibi").vectors(positions).shape == (5, 12)


@pytest.mark.parametrize("spec", ["alibi:heads=8,head=0", "alibi:heads=8,head=9", "alibi:heads=0", "alibi:heads=-2"])
def test_alibi_bad_heads(spec: str) -> None:
    with pytest.raises(InputError):
        get_encoding(spec).vectors(range(4))


# --- random ----------------------------------------------------------------------------------------


def test_random_is_a_seeded_gaussian() -> None:
    first = get_encoding("random:d=64,seed=3").vectors(range(200))
    assert first.shape == (200, 64)
    np.testing.assert_array_equal(get_encoding("random:d=64,seed=3").vectors(range(200)), first)
    assert not np.allclose(get_encoding("random:d=64,seed=4").vectors(range(200)), first)
    # 12 800 i.i.d. N(0, 1) draws: mean within ~5 sd of 0, variance near 1.
    assert abs(first.mean()) < 0.05
    assert first.var() == pytest.approx(1.0, abs=0.06)
    assert get_encoding("random").vectors(range(3), EncodingContext(width=5)).shape == (3, 5)


# --- bad parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 3, 63])
@pytest.mark.parametrize("name", ["sinusoidal", "rope"])
def test_odd_width_is_an_input_error(name: str, d: int) -> None:
    with pytest.raises(InputError, match="even"):
        get_encoding(f"{name}:d={d}").vectors(range(4))
    with pytest.raises(InputError):
        getattr(standard, name)(np.arange(4), d=d)
    with pytest.raises(InputError):
        get_encoding(name).vectors(range(4), EncodingContext(width=d))


@pytest.mark.parametrize(
    "spec", ["rope:d=0", "sinusoidal:d=0", "random:d=0", "rope:d=-4", "rope:base=1", "rope:base=0.5"]
)
def test_degenerate_parameters_are_input_errors(spec: str) -> None:
    with pytest.raises(InputError):
        get_encoding(spec).vectors(range(4))


def test_unknown_name_lists_the_choices() -> None:
    with pytest.raises(InputError) as info:
        get_encoding("nope:d=3")
    message = str(info.value)
    assert "'nope'" in message
    for name in REGISTRY:
        assert name in message
    assert {"sinusoidal", "rope", "alibi", "random", "mds", "learned", "file"} <= set(REGISTRY)


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ("rope:dim=64", "'dim'"),
        ("alibi:d=4", "'d'"),
        ("random:base=3", "'base'"),
        ("rope:d64", "key=value"),
        ("rope:d=abc", "not a number"),
        ("rope:d=6.5", "integer"),
        ("alibi:heads=2.5", "integer"),
    ],
)
def test_bad_parameters(spec: str, pattern: str) -> None:
    with pytest.raises(InputError, match=pattern):
        get_encoding(spec).vectors(range(4))


def test_listing_and_spec_detection() -> None:
    records = list_encodings()
    assert [r["name"] for r in records] == list(REGISTRY)
    assert all(r["summary"] for r in records)
    assert {r["name"] for r in records if r["takes_path"]} == {"mds", "learned", "file", "model"}
    assert is_encoding_spec("rope:d=64,base=500000")
    assert is_encoding_spec("mds:pe.safetensors")
    assert is_encoding_spec("sinusoidal")
    assert not is_encoding_spec("bert-base-uncased")
    assert not is_encoding_spec("sentence-transformers/all-MiniLM-L6-v2")


# --- callables ----------------------------------------------------------------------------------------


def test_callable_is_accepted() -> None:
    def quadratic(positions: np.ndarray) -> np.ndarray:
        return np.stack([positions, positions**2], axis=1)

    encoding = get_encoding(quadratic)
    assert encoding.name == "quadratic"
    vectors = encoding.vectors([0, 2, 3])
    assert vectors.dtype == np.float64
    np.testing.assert_array_equal(vectors, [[0, 0], [2, 4], [3, 9]])
    # A callable giving one number per position is a 1-D encoding.
    assert get_encoding(lambda positions: positions * 0.5).vectors(range(4)).shape == (4, 1)


@pytest.mark.parametrize(
    "function",
    [
        lambda positions: np.zeros((len(positions) + 1, 2)),
        lambda positions: np.zeros((len(positions), 2, 2)),
        lambda positions: np.full((len(positions), 2), np.nan),
        lambda positions: np.full((len(positions), 2), np.inf),
    ],
    ids=["wrong rows", "three axes", "nan", "inf"],
)
def test_callable_with_bad_output_is_an_input_error(function) -> None:
    with pytest.raises(InputError):
        get_encoding(function).vectors(range(4))


# --- mds ------------------------------------------------------------------------------------------------


def test_mds_without_a_file_uses_the_context_distances() -> None:
    points = np.random.default_rng(0).standard_normal((15, 4))
    distances = pairwise(points)
    vectors = get_encoding("mds").vectors(range(15), EncodingContext(distances=distances))
    assert vectors.shape[0] == 15
    assert stress(vectors, distances) == pytest.approx(0.0, abs=1e-20)
    np.testing.assert_allclose(pairwise(vectors), distances, atol=1e-9)
    with pytest.raises(InputError, match="distances"):
        get_encoding("mds").vectors(range(15))


def test_mds_file_rows_follow_its_positions_array(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    table = rng.standard_normal((6, 4)).astype(np.float32)
    positions = np.array([10, 3, 7, 0, 5, 1], dtype=np.int64)
    path = tmp_path / "pe.safetensors"
    save_file({"position_embeddings": table, "positions": positions}, str(path))
    vectors = get_encoding(f"mds:{path}").vectors([0, 1, 3, 10])
    np.testing.assert_array_equal(vectors, table[[3, 5, 1, 0]].astype(np.float64))
    with pytest.raises(InputError, match="position 2"):
        get_encoding(f"mds:{path}").vectors([0, 1, 2])


def test_mds_file_written_by_the_toolkit(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 3))
    encoding = LowRankEncoding(a, orthonormal_rows(3, 16, seed=1), np.arange(8), {"source": "test"})
    path = tmp_path / "mds.safetensors"
    encoding.save(path)
    with safe_open(str(path), framework="numpy") as handle:
        stored = handle.get_tensor("position_embeddings")
    vectors = get_encoding(f"mds:{path}").vectors(range(8))
    np.testing.assert_array_equal(vectors, stored.astype(np.float64))
    # P = A W keeps the distances of A (up to float32 storage).
    np.testing.assert_allclose(pairwise(vectors), pairwise(a), atol=1e-5)


def test_mds_file_with_nan_or_wrong_shape(tmp_path: Path) -> None:
    table = np.ones((4, 3), dtype=np.float32)
    table[2, 1] = np.nan
    nan_file = tmp_path / "nan.safetensors"
    save_file({"position_embeddings": table, "positions": np.arange(4, dtype=np.int64)}, str(nan_file))
    np.testing.assert_array_equal(get_encoding(f"mds:{nan_file}").vectors([0, 1, 3]), np.ones((3, 3)))
    with pytest.raises(InputError, match="NaN"):
        get_encoding(f"mds:{nan_file}").vectors(range(4))
    flat = tmp_path / "flat.safetensors"
    save_file({"position_embeddings": np.ones(5, dtype=np.float32)}, str(flat))
    with pytest.raises(FormatError, match="shape"):
        get_encoding(f"mds:{flat}").vectors(range(3))


# --- file -------------------------------------------------------------------------------------------------


def test_npy_file(tmp_path: Path) -> None:
    table = np.random.default_rng(3).standard_normal((10, 5))
    path = tmp_path / "table.npy"
    np.save(path, table)
    np.testing.assert_array_equal(get_encoding(f"file:{path}").vectors([0, 4, 9, 2]), table[[0, 4, 9, 2]])
    with pytest.raises(InputError, match="position 10"):
        get_encoding(f"file:{path}").vectors(range(11))


def test_safetensors_file_with_one_tensor_of_any_name(tmp_path: Path) -> None:
    table = np.random.default_rng(4).standard_normal((7, 3)).astype(np.float32)
    path = tmp_path / "table.safetensors"
    save_file({"whatever": table}, str(path))
    np.testing.assert_array_equal(get_encoding(f"file:{path}").vectors(range(7)), table.astype(np.float64))


@pytest.mark.parametrize(
    ("array", "error", "pattern"),
    [
        (np.ones(6), FormatError, "shape"),
        (np.ones((3, 2, 2)), FormatError, "shape"),
        (np.array([[1.0, 2.0], [np.nan, 0.0], [3.0, 4.0]]), InputError, "NaN"),
        (np.array([[1.0, 2.0], [np.inf, 0.0], [3.0, 4.0]]), InputError, "NaN or infinite"),
    ],
    ids=["1-d", "3-d", "nan", "inf"],
)
def test_bad_npy_tables(tmp_path: Path, array: np.ndarray, error: type[Exception], pattern: str) -> None:
    path = tmp_path / "bad.npy"
    np.save(path, array)
    with pytest.raises(error, match=pattern):
        get_encoding(f"file:{path}").vectors(range(3))


def test_unreadable_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        get_encoding(f"file:{tmp_path / 'absent.npy'}").vectors(range(3))
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"not numpy at all")
    with pytest.raises(FormatError):
        get_encoding(f"file:{garbage}").vectors(range(3))
    pickled = tmp_path / "objects.npy"
    np.save(pickled, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(FormatError):
        get_encoding(f"file:{pickled}").vectors(range(2))
    garbage_st = tmp_path / "garbage.safetensors"
    garbage_st.write_bytes(b"\x00" * 32)
    with pytest.raises(FormatError):
        get_encoding(f"file:{garbage_st}").vectors(range(3))
    several = tmp_path / "several.safetensors"
    save_file({"a": np.ones((3, 2), dtype=np.float32), "b": np.ones((3, 2), dtype=np.float32)}, str(several))
    with pytest.raises(FormatError, match="position_embeddings"):
        get_encoding(f"file:{several}").vectors(range(3))
    text = tmp_path / "table.csv"
    text.write_text("1,2\n3,4\n")
    with pytest.raises(InputError, match="unsupported"):
        get_encoding(f"file:{text}").vectors(range(2))


@pytest.mark.parametrize("name", ["file", "learned"])
def test_path_encodings_need_a_path(name: str) -> None:
    with pytest.raises(InputError, match="needs a path"):
        get_encoding(name)
    with pytest.raises(InputError, match="needs a path"):
        get_encoding(f"{name}:")


# --- learned ---------------------------------------------------------------------------------------------


def test_learned_equals_the_checkpoint_table(minilm_path: Path) -> None:
    with safe_open(str(minilm_path / "model.safetensors"), framework="numpy") as handle:
        table = handle.get_tensor("embeddings.position_embeddings.weight").astype(np.float64)
    assert table.shape == (512, 384)
    positions = [0, 1, 2, 100, 511]
    vectors = get_encoding(f"learned:{minilm_path}").vectors(positions)
    np.testing.assert_array_equal(vectors, table[positions])
    np.testing.assert_array_equal(get_encoding(f"learned:{minilm_path}").vectors(range(512)), table)
    with pytest.raises(InputError, match="512"):
        get_encoding(f"learned:{minilm_path}").vectors([0, 512])
