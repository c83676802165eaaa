"""JoFormer's algebra (models/journey.py): the laws as property tests, each against an independent computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import expm

from geoanalyze.errors import InputError
from geoanalyze.models import journey as jr
from geoanalyze.models.positional import apply_rope, rope_angles

SETTINGS = settings(max_examples=25, deadline=None)
seeds = st.integers(0, 2**32 - 1)
halves = st.integers(1, 6)  # d / 2


def toral(rng: np.random.Generator, half: int) -> jr.Toral:
    return jr.Toral(rng.uniform(-np.pi, np.pi, half))


def datum(rng: np.random.Generator, half: int, axes: int, dense: bool) -> jr.Datum:
    gens = tuple(jr.random_dense(2 * half, rng) if dense else toral(rng, half) for _ in range(axes))
    return jr.Datum(rng.standard_normal(2 * half), gens)


def close(a: jr.Datum, b: jr.Datum, atol: float = 1e-10) -> bool:
    same = np.allclose(a.content, b.content, atol=atol)
    return same and all(
        np.allclose(x.matrix(), y.matrix(), atol=atol) for x, y in zip(a.generators, b.generators, strict=True)
    )


# --- rotations ---------------------------------------------------------------------------------


@given(seeds, halves)
@SETTINGS
def test_toral_matrix_is_block_diagonal_rotation(seed: int, half: int) -> None:
    """Toral.apply equals the explicit 2x2 blocks [[c, -s], [s, c]] built entry by entry."""
    rng = np.random.default_rng(seed)
    R, x = toral(rng, half), rng.standard_normal(2 * half)
    expected = np.zeros(2 * half)
    for i, phi in enumerate(R.angles):
        expected[2 * i] = np.cos(phi) * x[2 * i] - np.sin(phi) * x[2 * i + 1]
        expected[2 * i + 1] = np.sin(phi) * x[2 * i] + np.cos(phi) * x[2 * i + 1]
    np.testing.assert_allclose(R.apply(x), expected, atol=1e-12)
    np.testing.assert_allclose(R.matrix() @ x, expected, atol=1e-12)
    np.testing.assert_allclose(R.matrix().T @ R.matrix(), np.eye(2 * half), atol=1e-12)
    assert np.linalg.det(R.matrix()) == pytest.approx(1.0)


@given(seeds, halves)
@SETTINGS
def test_rotate_pairs_matches_rope_and_preserves_norms(seed: int, half: int) -> None:
    """The torch hot path is RoPE's rotation (positional.apply_rope) and an isometry; -angles inverts it."""
    rng = np.random.default_rng(seed)
    x = torch.as_tensor(rng.standard_normal((3, 5, 2 * half)))
    angles = rope_angles(torch.arange(5), 2 * half, 100.0)  # (5, half)
    rotated = jr.rotate_pairs(x, angles)
    torch.testing.assert_close(rotated, apply_rope(x, angles.cos(), angles.sin()))
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(jr.rotate_pairs(rotated, -angles), x)


def test_rotate_dense_applies_each_frame_and_its_transpose() -> None:
    rng = np.random.default_rng(0)
    frames = torch.as_tensor(np.stack([jr.random_dense(6, rng).matrix() for _ in range(4)]))  # (4, 6, 6)
    x = torch.as_tensor(rng.standard_normal((2, 3, 4, 6)))
    expected = torch.stack([x[:, :, t] @ frames[t].T for t in range(4)], dim=2)
    torch.testing.assert_close(jr.rotate_dense(x, frames), expected)
    torch.testing.assert_close(jr.rotate_dense(jr.rotate_dense(x, frames), frames, transpose=True), x)


def test_rotations_reject_odd_dimensions() -> None:
    with pytest.raises(InputError, match="even head dimension"):
        jr.check_even(7)
    with pytest.raises(InputError, match="one angle per pair"):
        jr.rotate_pairs(torch.zeros(2, 7), torch.zeros(2, 3))


# --- composition ---------------------------------------------------------------------------------


@given(seeds, halves, st.integers(1, 3), st.booleans())
@SETTINGS
def test_composition_is_associative_along_each_axis(seed: int, half: int, axes: int, dense: bool) -> None:
    rng = np.random.default_rng(seed)
    x, y, z = (datum(rng, half, axes, dense) for _ in range(3))
    for axis in range(axes):
        left = jr.compose(jr.compose(x, y, axis), z, axis)
        right = jr.compose(x, jr.compose(y, z, axis), axis)
        assert close(left, right)


@given(seeds, halves)
@SETTINGS
def test_composition_formula_and_non_commutativity(seed: int, half: int) -> None:
    """(a, A) o (b, B) = (a + A b, A B), by explicit matrices; swapping the operands changes the content."""
    rng = np.random.default_rng(seed)
    x, y = datum(rng, half, 1, True), datum(rng, half, 1, True)
    A, B = x.generators[0].matrix(), y.generators[0].matrix()
    xy = jr.compose(x, y)
    np.testing.assert_allclose(xy.content, x.content + A @ y.content, atol=1e-12)
    np.testing.assert_allclose(xy.generators[0].matrix(), A @ B, atol=1e-12)
    assert not np.allclose(jr.compose(y, x).content, xy.content)


def test_composition_along_one_axis_leaves_the_others() -> None:
    rng = np.random.default_rng(3)
    x, y = datum(rng, 3, 2, False), datum(rng, 3, 2, False)
    xy = jr.compose(x, y, axis=1)
    np.testing.assert_allclose(xy.content, x.content + x.generators[1].apply(y.content))
    np.testing.assert_allclose(xy.generators[0].angles, x.generators[0].angles)
    np.testing.assert_allclose(xy.generators[1].angles, x.generators[1].angles + y.generators[1].angles)


def test_composition_rejects_bad_data() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="axis 2 out of range"):
        jr.compose(datum(rng, 2, 2, False), datum(rng, 2, 2, False), axis=2)
    with pytest.raises(InputError, match="same number of generators"):
        jr.compose(datum(rng, 2, 1, False), datum(rng, 2, 2, False))
    with pytest.raises(InputError, match="make them equal"):
        jr.Datum(np.zeros(4), (toral(rng, 3),))


# --- journeys --------------------------------------------------------------------------------------


@given(seeds, halves, st.integers(1, 5), st.integers(1, 5))
@SETTINGS
def test_path_independence_iff_generators_commute(seed: int, half: int, rows: int, cols: int) -> None:
    """Toral axis generators commute: every lattice path gives one operator, the closed form R_0^r R_1^c.
    Dense ones do not (commutator > 0) and the two L-shaped paths differ."""
    rng = np.random.default_rng(seed)
    gens = (toral(rng, half), toral(rng, half))
    moves = rng.permutation([0] * rows + [1] * cols).tolist()
    closed = np.linalg.matrix_power(gens[0].matrix(), rows) @ np.linalg.matrix_power(gens[1].matrix(), cols)
    np.testing.assert_allclose(jr.grid_path_operator(gens, moves).matrix(), closed, atol=1e-10)
    assert jr.path_dependence(gens, rows, cols) < 1e-10
    assert jr.commutator_norm(*gens) < 1e-12
    if half >= 2:  # SO(2) is commutative: dense generators need d >= 3 to be curved
        dense = (jr.random_dense(2 * half, rng), jr.random_dense(2 * half, rng))
        assert jr.commutator_norm(*dense) > 1e-6
        assert jr.path_dependence(dense, rows, cols) > 1e-6


@given(seeds, halves, st.integers(0, 30), st.integers(0, 30))
@SETTINGS
def test_flat_regime_operator_is_power_of_the_step(seed: int, half: int, j: int, k: int) -> None:
    """Equal steps R: P_{j->k} = R^{k-j} (matrix power, negative = inverse) = F_k F_j^{-1} with F_t = R^t."""
    rng = np.random.default_rng(seed)
    R = toral(rng, half)
    steps = np.repeat(R.angles[None], 31, axis=0)
    P = jr.journey_operator_1d(steps, j, k).matrix()
    power = np.linalg.matrix_power(R.matrix() if k >= j else R.matrix().T, abs(k - j))
    np.testing.assert_allclose(P, power, atol=1e-9)
    np.testing.assert_allclose(P, R.power(k).then(R.power(j).inverse()).matrix(), atol=1e-9)


@given(seeds, halves, st.integers(2, 12))
@SETTINGS
def test_path_operator_composes_in_order(seed: int, half: int, n: int) -> None:
    """P = S_m ... S_1 against a product written out; dense steps."""
    rng = np.random.default_rng(seed)
    steps = [jr.random_dense(2 * half, rng) for _ in range(n)]
    expected = np.eye(2 * half)
    for step in steps:
        expected = step.matrix() @ expected
    np.testing.assert_allclose(jr.path_operator(steps).matrix(), expected, atol=1e-10)


@given(seeds, st.integers(2, 10), st.integers(1, 6), st.integers(-50, 50))
@SETTINGS
def test_value_transport_is_translation_equivariant_in_the_flat_regime(seed: int, n: int, half: int, s: int) -> None:
    """Relative weights w_kj = f(k - j) and frames F_t = R^t: shifting all positions by s changes nothing."""
    rng = np.random.default_rng(seed)
    R = toral(rng, half)
    kernel = rng.random(2 * n)
    weights = np.array([[kernel[k - j + n] for j in range(n)] for k in range(n)])
    values = rng.standard_normal((n, 2 * half))
    base = jr.value_transport(weights, values, [R.power(t) for t in range(n)])
    moved = jr.value_transport(weights, values, [R.power(t + s) for t in range(n)])
    np.testing.assert_allclose(base, moved, atol=1e-9)


def test_value_transport_in_the_curved_regime_depends_on_absolute_position() -> None:
    """Dense 2-D frames exp(r S1 + c S2) with non-commuting S: the shifted grid transports differently."""
    rng = np.random.default_rng(0)
    S = [rng.standard_normal((6, 6)) for _ in range(2)]
    S = [a - a.T for a in S]
    cells = [(r, c) for r in range(3) for c in range(3)]
    values, weights = rng.standard_normal((9, 6)), rng.random((9, 9))

    def frames(dr: int, dc: int) -> list[jr.Rotation]:
        return [jr.Dense(expm((r + dr) * S[0] + (c + dc) * S[1])) for r, c in cells]

    gap = np.abs(jr.value_transport(weights, values, frames(0, 0)) - jr.value_transport(weights, values, frames(1, 2)))
    assert gap.max() > 1e-3


@given(st.integers(1, 40), seeds)
@SETTINGS
def test_dft_is_value_transport(N: int, seed: int) -> None:
    signal = np.random.default_rng(seed).standard_normal(N)
    np.testing.assert_allclose(jr.dft_by_transport(signal), np.fft.fft(signal), atol=1e-9)


@given(seeds, halves, st.integers(1, 8))
@SETTINGS
def test_norms_are_preserved_by_every_generator_and_composition(seed: int, half: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    composed = datum(rng, half, 2, True)
    for _ in range(n):
        composed = jr.compose(composed, datum(rng, half, 2, bool(rng.integers(2))), int(rng.integers(2)))
    for generator in composed.generators:
        x = rng.standard_normal(2 * half)
        assert np.linalg.norm(generator.apply(x)) == pytest.approx(np.linalg.norm(x))
        np.testing.assert_allclose(generator.matrix().T @ generator.matrix(), np.eye(2 * half), atol=1e-10)


def test_an_empty_path_is_refused() -> None:
    with pytest.raises(InputError, match="at least one step"):
        jr.path_operator([])
