r"""JoFormer's algebra: data as (content, per-axis generators), their composition and journey operators.

A datum is x = (a, A_1..A_D): content a in R^d and one generator A_k in O(d) per axis;
composition along axis k is (a, A) o_k (b, B) = (a + A_k b, A with A_k replaced by A_k B_k),
associative and not commutative. The journey operator P_{j->k} is the product of the step
generators met on a path from j to k: path-independent for commuting (flat) generators, not for
dense, LieRE-like ones (docs/joformer.md states the algebra in full).

Rotations are represented two ways:

- :class:`Toral`: an element of SO(2)^{d/2}, one angle per interleaved pair (x_2i, x_2i+1). This is
  the hot path: composition adds angles, acting rotates pairs, and no d x d matrix is ever built
  (:meth:`Toral.matrix` exists for oracles only).
- :class:`Dense`: any orthogonal d x d matrix, for the curved comparison.

The torch side of the hot path is two pure functions, :func:`rotate_pairs` (angles) and
:func:`rotate_dense` (a batch of d x d frames); the attention modules in :mod:`.joformer` call them.
Everything else here is numpy float64, for the checks of ``geoanalyze verify journey``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Union

import numpy as np
import torch

from ..errors import InputError

# --- torch: the hot path ------------------------------------------------------------------------


def check_even(head_dim: int, what: str = "a rotation") -> None:
    """InputError unless ``head_dim`` is even and >= 2 (SO(2)^{d/2} rotates pairs)."""
    if head_dim < 2 or head_dim % 2:
        raise InputError(
            f"{what} rotates pairs of coordinates and needs an even head dimension, got {head_dim}; "
            "choose d_model and n_heads so that d_model / n_heads is even"
        )


def rotor(angles: torch.Tensor) -> torch.Tensor:
    r"""e^{i\phi}: the complex form of the rotations, (..., hs/2) complex64 (complex128 for float64 angles).

    Computing it once per attention call lets every rotation of q, k, v and the output share it.
    """
    real = angles if angles.dtype == torch.float64 else angles.float()
    return torch.polar(torch.ones_like(real), real)


def rotate_by(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    r"""x's interleaved pairs as complex numbers x_{2i} + i x_{2i+1}, times ``rotation`` (:func:`rotor`).

    One complex multiply per pair: a single kernel forward and backward instead of the slice /
    multiply / stack sequence of the real form. x: (..., T, hs); rotation: (..., T, hs/2).
    """
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()  # complex halves do not exist
    pairs = work.unflatten(-1, (-1, 2))  # (..., T, hs/2, 2): a view
    try:
        as_complex = torch.view_as_complex(pairs)
    except RuntimeError:  # strides that a complex view cannot take (odd offsets): copy once
        as_complex = torch.view_as_complex(pairs.contiguous())
    return torch.view_as_real(as_complex * rotation.to(as_complex.dtype)).flatten(-2).to(x.dtype)  # (..., T, hs)


def rotate_pairs(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    r"""Rotate each interleaved pair (x_{2i}, x_{2i+1}) of the last axis by ``angles[..., i]``.

    (x_{2i}, x_{2i+1}) -> (x_{2i} \cos\phi_i - x_{2i+1} \sin\phi_i, x_{2i} \sin\phi_i + x_{2i+1} \cos\phi_i)

    x: (..., T, hs); angles: (..., T, hs/2), broadcast against x's leading axes. The rotation by
    -angles is the inverse. Returns x's shape and dtype; O(T hs) work.
    """
    if x.shape[-1] != 2 * angles.shape[-1]:
        raise InputError(
            f"{x.shape[-1]} coordinates but {angles.shape[-1]} angles; pass one angle per pair (hs / 2 angles)"
        )
    return rotate_by(x, rotor(angles))


def rotate_dense(x: torch.Tensor, frames: torch.Tensor, transpose: bool = False) -> torch.Tensor:
    """Apply one dense frame per position: y_t = F_t x_t (``transpose``: F_t^T x_t = F_t^{-1} x_t).

    x: (B, nh, T, hs); frames: (T, hs, hs) or (nh, T, hs, hs). O(T hs^2) work.
    """
    pattern = "...tji,bhtj->bhti" if transpose else "...tij,bhtj->bhti"
    return torch.einsum(pattern, frames.to(x.dtype), x)


def skew(parameters: torch.Tensor) -> torch.Tensor:
    """A skew-symmetric matrix S - S^T from an unconstrained square matrix (its exponential is a rotation)."""
    return parameters - parameters.transpose(-1, -2)


# --- numpy: the algebra -------------------------------------------------------------------------


@dataclass(frozen=True)
class Toral:
    r"""An element of SO(2)^{d/2}: one angle per interleaved pair; d = 2 len(angles).

    Its matrix is block diagonal with blocks [[\cos\phi_i, -\sin\phi_i], [\sin\phi_i, \cos\phi_i]].
    """

    angles: np.ndarray

    @property
    def dim(self) -> int:
        return 2 * int(np.shape(self.angles)[-1])

    def apply(self, x: np.ndarray) -> np.ndarray:
        """R x for x (..., d)."""
        cos, sin = np.cos(self.angles), np.sin(self.angles)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty(np.broadcast_shapes(np.shape(x), (self.dim,)))
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def then(self, other: Rotation) -> Rotation:
        """The product self * other (other acts first); toral times toral adds the angles."""
        if isinstance(other, Toral):
            return Toral(np.asarray(self.angles, dtype=np.float64) + other.angles)
        return Dense(self.matrix() @ other.matrix())

    def inverse(self) -> Toral:
        return Toral(-np.asarray(self.angles, dtype=np.float64))

    def power(self, n: int) -> Toral:
        """R^n: the angles times n (n may be negative)."""
        return Toral(n * np.asarray(self.angles, dtype=np.float64))

    def matrix(self) -> np.ndarray:
        """The dense (d, d) matrix, for oracles and comparisons only."""
        return block_rotation(np.asarray(self.angles, dtype=np.float64))


@dataclass(frozen=True)
class Dense:
    """Any orthogonal (d, d) matrix: the curved (non-commuting, LieRE-like) case."""

    matrix_: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.matrix_.shape[0])

    def apply(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x) @ self.matrix_.T

    def then(self, other: Rotation) -> Rotation:
        return Dense(self.matrix_ @ other.matrix())

    def inverse(self) -> Dense:
        return Dense(self.matrix_.T)

    def power(self, n: int) -> Dense:
        base = self.matrix_ if n >= 0 else self.matrix_.T
        return Dense(np.linalg.matrix_power(base, abs(n)))

    def matrix(self) -> np.ndarray:
        return self.matrix_


Rotation = Union[Toral, Dense]  # noqa: UP007 (a runtime alias used in isinstance-free annotations)


def block_rotation(angles: np.ndarray) -> np.ndarray:
    """The block-diagonal (d, d) matrix of SO(2)^{d/2} with the given (d/2,) angles."""
    half = len(angles)
    matrix = np.zeros((2 * half, 2 * half))
    cos, sin = np.cos(angles), np.sin(angles)
    index = np.arange(half)
    matrix[2 * index, 2 * index] = cos
    matrix[2 * index, 2 * index + 1] = -sin
    matrix[2 * index + 1, 2 * index] = sin
    matrix[2 * index + 1, 2 * index + 1] = cos
    return matrix


def random_dense(d: int, rng: np.random.Generator, scale: float = 1.0) -> Dense:
    """exp(scale * S) for a random skew-symmetric S: a random rotation near the identity for small scale."""
    from scipy.linalg import expm

    generator = rng.standard_normal((d, d))
    return Dense(expm(scale * (generator - generator.T) / np.sqrt(2 * d)))


@dataclass(frozen=True)
class Datum:
    """x = (content, generators): content (d,), one generator per axis (D = len(generators))."""

    content: np.ndarray
    generators: tuple[Rotation, ...]

    def __post_init__(self) -> None:
        if not self.generators:
            raise InputError("a datum needs at least one generator (one per axis); pass generators=(R,)")
        dims = {g.dim for g in self.generators}
        if dims != {len(self.content)}:
            raise InputError(
                f"content of size {len(self.content)} but generators of sizes {sorted(dims)}; make them equal"
            )


def compose(first: Datum, second: Datum, axis: int = 0) -> Datum:
    r"""Composition along ``axis`` k: (a, A) o_k (b, B) = (a + A_k b, A with A_k -> A_k B_k).

    In 1-D (one generator) this is (a + A b, A B). Associative, not commutative.
    """
    if len(first.generators) != len(second.generators):
        raise InputError(
            f"data with {len(first.generators)} and {len(second.generators)} axes cannot be composed; "
            "give both the same number of generators"
        )
    if not 0 <= axis < len(first.generators):
        raise InputError(
            f"axis {axis} out of range for {len(first.generators)} axes; choose 0..{len(first.generators) - 1}"
        )
    generator = first.generators[axis]
    generators = list(first.generators)
    generators[axis] = generator.then(second.generators[axis])
    return Datum(first.content + generator.apply(second.content), tuple(generators))


def path_operator(steps: Sequence[Rotation]) -> Rotation:
    """The journey operator of a path: P = S_m ... S_2 S_1 for the step generators met in order S_1..S_m.

    The identity (a toral zero) for an empty path needs the dimension, so ``steps`` must not be empty.
    """
    if not steps:
        raise InputError("a path needs at least one step; for j = k the operator is the identity")
    return reduce(lambda acc, step: step.then(acc), steps[1:], steps[0])


def grid_path_operator(generators: Sequence[Rotation], moves: Sequence[int]) -> Rotation:
    """P along a lattice path: ``moves`` lists the axis of each unit step (axis a's step applies generators[a])."""
    return path_operator([generators[a] for a in moves])


def journey_operator_1d(step_angles: np.ndarray, j: int, k: int) -> Toral:
    r"""P_{j->k} in 1-D with per-step toral generators: steps (T, d/2) hold the angles of R_1..R_{T-1}.

    P_{j->k} = R_k ... R_{j+1} for k >= j (angles summed), its inverse for k < j; with equal
    steps R this is R^{k-j}.
    """
    lo, hi = sorted((j, k))
    total = np.asarray(step_angles[lo + 1 : hi + 1]).sum(axis=0)
    return Toral(total if k >= j else -total)


def value_transport(weights: np.ndarray, values: np.ndarray, frames: Sequence[Rotation]) -> np.ndarray:
    r"""The materialized value path c_k = \sum_j w_{kj} P_{j->k} v_j with P_{j->k} = F_k F_j^{-1}.

    weights (n, n); values (n, d); frames: the frame F_t of every position. O(n^2 d^2): an oracle.
    """
    n = len(values)
    out = np.zeros_like(values, dtype=np.float64)
    for k in range(n):
        for j in range(n):
            if weights[k, j]:
                operator = frames[k].then(frames[j].inverse())
                out[k] += weights[k, j] * operator.apply(values[j])
    return out


def dft_by_transport(signal: np.ndarray) -> np.ndarray:
    r"""The DFT of a real signal x (N,) as value transport with uniform weights.

    Content v_t = x_t (1, 0) in each of N pairs; pair m's frame at position t is the rotation by
    \omega_m t with \omega_m = 2\pi m / N. Transporting every v_t to position 0 and summing,
    c_0 = \sum_t P_{t->0} v_t, gives in pair m (\sum_t x_t \cos \omega_m t, -\sum_t x_t \sin \omega_m t)
    = (Re X_m, Im X_m) with X_m = \sum_t x_t e^{-2\pi i m t / N}: numpy's FFT.
    """
    x = np.asarray(signal, dtype=np.float64)
    N = len(x)
    omega = 2.0 * np.pi * np.arange(N) / N  # (N,) one frequency per pair
    positions = np.arange(N)
    values = np.zeros((N, 2 * N))
    values[:, 0::2] = x[:, None]  # v_t = x_t (1, 0, 1, 0, ...)
    # P_{t->0} = F_0 F_t^{-1}: rotation by -omega t; vectorised over t (the sum over j of value_transport's row 0)
    transported = Toral(-positions[:, None] * omega[None, :]).apply(values)  # (N, 2N)
    c0 = transported.sum(axis=0)
    return c0[0::2] + 1j * c0[1::2]


def commutator_norm(a: Rotation, b: Rotation) -> float:
    """||A B - B A||_F: zero exactly when the generators commute."""
    return float(np.linalg.norm(a.matrix() @ b.matrix() - b.matrix() @ a.matrix()))


def path_dependence(generators: Sequence[Rotation], rows: int, cols: int) -> float:
    r"""||P_{rows first} - P_{cols first}||_F between (0, 0) and (rows, cols) on a 2-D lattice.

    Zero when the two axis generators commute (flat); positive in general otherwise (curved).
    """
    first = grid_path_operator(generators, [0] * rows + [1] * cols)
    second = grid_path_operator(generators, [1] * cols + [0] * rows)
    return float(np.linalg.norm(first.matrix() - second.matrix()))
