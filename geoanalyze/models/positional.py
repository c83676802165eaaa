r"""Positional encodings as modules, built from a :class:`ModelConfig` by :func:`positional_encoding`.

Every encoding answers the same four questions, so the transformer never asks which kind it holds:

add_to(x)               x + P[:T] for the table kinds, x otherwise                 (B, T, d)
rotation(T)             (cos, sin) of the RoPE angles for rope, None otherwise      (T, hs/2) each
attention_bias(T, c)    ALiBi's -m_h |i - j| (causal: -m_h (i - j), j > i masked), None otherwise (nh, T, T)
position_vectors(n)     the vectors the stress scores use: the table rows, RoPE's unit-circle vectors
                        or ALiBi's m_h i (encodings.standard), all positions equal for none   (n, k)

Rotary embedding as pure functions (the module below only caches their cos / sin):
\theta_k = b^{-2k/hs}, angle_{i,k} = i \theta_k, and each interleaved pair (x_{2k}, x_{2k+1}) is
rotated by angle_{i,k}. The rotation of (1, 0) is (\cos, \sin): encodings.standard.rope's layout,
and <R_i q, R_j k> depends on i - j only.
"""

from __future__ import annotations

import os
from typing import cast

import numpy as np
import torch
from torch import nn

from ..encodings import standard
from ..errors import IncompatibleError, InputError
from .config import ModelConfig

# --- rotary: pure functions -------------------------------------------------------------------


def rope_angles(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angles i theta_k with theta_k = base^(-2k/head_dim), k < head_dim / 2; shape (T, head_dim / 2).

    Computed in float64 (as encodings.standard.rope), so long positions keep their precision.
    """
    if head_dim < 2 or head_dim % 2:
        raise InputError(f"rope needs an even head dimension >= 2, got {head_dim}")
    k = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    theta = base ** (-2.0 * k / head_dim)  # (hs/2,)
    return positions.to(torch.float64)[:, None] * theta  # (T, hs/2)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each interleaved pair (x_2k, x_2k+1) of the last axis by the angle whose cos / sin are given.

    x: (..., T, hs); cos, sin: (T, hs/2), broadcast over the leading axes. Returns x's shape and dtype.
    (x_2k, x_2k+1) -> (x_2k cos - x_2k+1 sin, x_2k sin + x_2k+1 cos).
    """
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, hs/2)
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, hs/2, 2)
    return rotated.flatten(-2).to(x.dtype)  # (..., T, hs)


def alibi_bias(slopes: torch.Tensor, length: int, causal: bool = False) -> torch.Tensor:
    """ALiBi's additive attention bias, (nh, T, T): -m_h |i - j|; causal: -m_h (i - j), -inf where j > i.

    ``slopes`` are m_h (nh,); query i is the row, key j the column.
    """
    index = torch.arange(length, device=slopes.device)
    offset = index[:, None] - index[None, :]  # (T, T): i - j
    bias = -slopes[:, None, None] * offset.abs().to(slopes.dtype)  # (nh, T, T)
    if causal:
        bias = bias.masked_fill(offset < 0, float("-inf"))
    return bias


# --- the modules ------------------------------------------------------------------------------


class PositionalEncoding(nn.Module):
    """The protocol every encoding follows; by default it does nothing (``pe = "none"``)."""

    def add_to(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, d) with the position signal added (unchanged unless a table kind)."""
        return x

    def rotation(self, length: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(cos, sin), each (T, hs/2), to rotate queries and keys by; None unless rope."""
        return None

    def attention_bias(self, length: int, causal: bool) -> torch.Tensor | None:
        """An additive (nh, T, T) bias on the attention scores; None unless alibi."""
        return None

    def position_vectors(self, n: int) -> np.ndarray:
        """The (n, k) float64 vectors of positions 0..n-1 the stress scores use.

        Without an encoding every position is the same point: zeros (n, 1).
        """
        _check_count(n)
        return np.zeros((n, 1))


class AdditiveTable(PositionalEncoding):
    """An (n, d) table whose first T rows are added to the token embeddings; subclasses give :meth:`table`."""

    n_positions: int

    def table(self, length: int) -> torch.Tensor:
        """Rows 0..T-1, (T, d)."""
        raise NotImplementedError

    def _check_length(self, length: int) -> None:
        if length > self.n_positions:
            raise InputError(
                f"{length} positions asked for but the position table has n_positions {self.n_positions}; "
                f"truncate the inputs (stress, report, track: --max-length {self.n_positions}) or build the model "
                "with a larger n_positions"
            )

    def add_to(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table(x.shape[1])  # (B, T, d) + (T, d)

    def position_vectors(self, n: int) -> np.ndarray:
        _check_count(n)
        return self.table(n).detach().cpu().double().numpy()


class PositionTable(AdditiveTable):
    """A dense table: sinusoidal, learned or mds. ``weight`` is a Parameter when trained, else a saved buffer."""

    weight: torch.Tensor

    def __init__(self, table: torch.Tensor, trainable: bool) -> None:
        super().__init__()
        self.n_positions = int(table.shape[0])
        _register(self, "weight", table.to(torch.float32), trainable)

    def table(self, length: int) -> torch.Tensor:
        self._check_length(length)
        return self.weight[:length]  # (T, d)


class LowRankTable(AdditiveTable):
    """P = A W with A (n, r) and W (r, d): r (n + d) parameters instead of n d.

    A ~ N(0, 0.02^2) and W ~ N(0, 1/r) entries, so P's entries have the learned table's variance 0.02^2.
    """

    A: torch.Tensor
    W: torch.Tensor

    def __init__(self, n_positions: int, d_model: int, rank: int, trainable: bool) -> None:
        super().__init__()
        self.n_positions = n_positions
        _register(self, "A", torch.randn(n_positions, rank) * 0.02, trainable)
        _register(self, "W", torch.randn(rank, d_model) / rank**0.5, trainable)

    def table(self, length: int) -> torch.Tensor:
        self._check_length(length)
        return self.A[:length] @ self.W  # (T, r) @ (r, d) -> (T, d)


class Rotary(PositionalEncoding):
    """RoPE: caches cos / sin of :func:`rope_angles` for n_positions; longer inputs are computed on demand."""

    cos: torch.Tensor
    sin: torch.Tensor

    def __init__(self, head_dim: int, n_positions: int, base: float = 10000.0) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.base = base
        angles = rope_angles(torch.arange(n_positions), head_dim, base)  # (n, hs/2)
        # Derived from the config, so not saved with the weights.
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def rotation(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        if length <= self.cos.shape[0]:
            return self.cos[:length], self.sin[:length]
        angles = rope_angles(torch.arange(length, device=self.cos.device), self.head_dim, self.base)
        return angles.cos().to(self.cos.dtype), angles.sin().to(self.sin.dtype)

    def position_vectors(self, n: int) -> np.ndarray:
        """RoPE's unit-circle vectors (cos i theta_k, sin i theta_k), interleaved: (n, head_dim)."""
        _check_count(n)
        return standard.rope(np.arange(n), d=self.head_dim, base=self.base)


class Alibi(PositionalEncoding):
    """ALiBi with the slopes m_h = 2^(-8h/H) of encodings.standard.alibi_slopes."""

    slopes: torch.Tensor

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        slopes = torch.as_tensor(standard.alibi_slopes(n_heads), dtype=torch.float32)
        self.register_buffer("slopes", slopes, persistent=False)

    def attention_bias(self, length: int, causal: bool) -> torch.Tensor:
        return alibi_bias(self.slopes, length, causal)  # (nh, T, T)

    def position_vectors(self, n: int) -> np.ndarray:
        """ALiBi's implied vectors (m_1 i, ..., m_H i): (n, n_heads)."""
        _check_count(n)
        return standard.alibi(np.arange(n), heads=self.n_heads)


def positional_encoding(config: ModelConfig, *, read_file: bool = True) -> PositionalEncoding:
    """The encoding ``config.pe`` names.

    ``read_file=False`` gives an mds table of zeros of the right shape, to be filled from saved
    weights (``Transformer.load``), so a saved model does not need its PE file any more.
    """
    kind, n, d = config.pe, config.n_positions, config.d_model
    trainable = config.pe_is_trained
    if kind == "sinusoidal":
        return PositionTable(torch.as_tensor(standard.sinusoidal(np.arange(n), d=d)), trainable)
    if kind == "learned":
        return PositionTable(torch.randn(n, d) * 0.02, trainable)
    if kind == "lowrank":
        return LowRankTable(n, d, cast(int, config.pe_rank), trainable)
    if kind == "mds":
        path = cast(str, config.pe_file)
        table = load_pe_table(path, n, d) if read_file else torch.zeros(n, d)
        return PositionTable(table, trainable)
    if kind == "rope":
        return Rotary(config.head_dim, n, config.rope_base)
    if kind == "alibi":
        return Alibi(config.n_heads)
    return PositionalEncoding()


def load_pe_table(path: str | os.PathLike[str], n_positions: int, d_model: int) -> torch.Tensor:
    """Rows 0..n_positions-1 of a PE file's ``position_embeddings``, (n_positions, d_model) float32.

    The file's ``positions`` array says which position each row holds (``geoanalyze mds`` keeps only
    positions with enough counts), so every position 0..n_positions-1 must be among them.
    """
    from ..io import load_arrays

    arrays, _ = load_arrays(path, kind="mds")
    if "position_embeddings" not in arrays:
        raise InputError(f"{path} has no position_embeddings; regenerate it with `geoanalyze mds --width {d_model}`")
    table = arrays["position_embeddings"]
    if table.ndim != 2:
        raise InputError(f"{path}: position_embeddings has shape {table.shape}, expected (n, d)")
    rows, width = table.shape
    if width != d_model:
        raise IncompatibleError(
            f"{path} has width d = {width} but the model has d_model {d_model}; "
            f"rerun `geoanalyze mds --width {d_model}` or set d_model to {width}"
        )
    positions = arrays.get("positions", np.arange(rows)).astype(np.int64)
    lookup = {int(p): row for row, p in enumerate(positions.tolist())}
    missing = next((p for p in range(n_positions) if p not in lookup), None)
    if missing is not None:
        raise IncompatibleError(
            f"{path} covers {rows} positions but has no row for position {missing}, and the model needs "
            f"0..{n_positions - 1}; set n_positions to at most {missing} or make a PE file with more positions"
        )
    selected = table[[lookup[p] for p in range(n_positions)]]
    if not np.all(np.isfinite(selected)):
        raise InputError(f"{path} has NaN or infinite entries; regenerate it with `geoanalyze mds`")
    return torch.as_tensor(selected, dtype=torch.float32)


def _register(module: nn.Module, name: str, value: torch.Tensor, trainable: bool) -> None:
    if trainable:
        module.register_parameter(name, nn.Parameter(value))
    else:
        module.register_buffer(name, value)


def _check_count(n: int) -> None:
    if n < 1:
        raise InputError(f"ask for at least 1 position vector, got {n}")
