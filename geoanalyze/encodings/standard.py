r"""Position vectors of the standard encodings (GEOMETRY.md), for positions i (any integers).

sinusoidal  PE(i, 2k) = \sin(i / 10000^{2k/d}), PE(i, 2k+1) = \cos(i / 10000^{2k/d})
rope        r_i = (\cos(i\theta_k), \sin(i\theta_k))_{k < d/2}, \theta_k = b^{-2k/d}: the unit-circle
            embedding whose inner product <r_i, r_j> = \sum_k \cos((i-j)\theta_k) is RoPE's
            relative kernel
alibi       p_i = m_h i for one head (slopes m_h = 2^{-8h/H}, h = 1..H), or the all-head vector
            (m_1 i, ..., m_H i)
random      i.i.d. N(0, 1) entries, a null

Each is registered as a spec family (registry.py): ``rope:d=64,base=500000`` calls
``rope(positions, d=64, base=500000.0)``; a d left out is the context's width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError
from .registry import Parameter, encoding
from .rope_scaling import check_scaling, scaled_table

#: no encoding is wider, nor has more ALiBi heads, than this (a typo guard before any allocation)
MAX_WIDTH = 1 << 16

#: the base of the frequencies theta_k = base^(-2k/d)
BASE = Parameter("base", float, 10000.0, "10000")


Table = Callable[..., np.ndarray]


def _positions(positions: np.ndarray) -> np.ndarray:
    return np.asarray(positions, dtype=np.float64).reshape(-1)


def _unit_circles(positions: np.ndarray, d: int, base: float, name: str, sine_first: bool) -> np.ndarray:
    """Interleaved pairs of cos / sin of i theta_k, theta_k = base^(-2k/d), k < d/2, (n, d)."""
    if d < 2 or d % 2 or d > MAX_WIDTH:
        raise InputError(f"{name} needs an even d in 2..{MAX_WIDTH}, got {d}")
    if not base > 1:
        raise InputError(f"{name} base must exceed 1, got {base}")
    angles = _positions(positions)[:, None] * base ** (-2.0 * np.arange(d // 2, dtype=np.float64) / d)
    first, second = (np.sin, np.cos) if sine_first else (np.cos, np.sin)
    table = np.empty((angles.shape[0], d))
    table[:, 0::2] = first(angles)
    table[:, 1::2] = second(angles)
    return table


def _pairs_family(name: str, summary: str, shown: str, order: int) -> Callable[[Table], Table]:
    """Register a table of cos / sin pairs: parameters d (the width, default the model's) and base."""
    width = Parameter("d", int, shown=shown, default_width=True)
    return encoding(name, summary, params=(width, BASE), width="d", order=order)


@_pairs_family("sinusoidal", "sin/cos table of Vaswani et al.", "width (default: model width)", order=10)
def sinusoidal(positions: np.ndarray, d: int = 768, base: float = 10000.0) -> np.ndarray:
    """Vaswani et al.'s sinusoidal table, (sin, cos) per frequency, (n, d)."""
    return _unit_circles(positions, d, base, "sinusoidal", sine_first=True)


#: rope's scaling keys (rope_scaling.py, docs/long-context.md): a name, then numbers
SCALING = (
    Parameter("scaling", str, shown="none (linear, dynamic, yarn, llama3, longrope)"),
    Parameter("factor", float, shown="the scaling factor"),
    Parameter("original", int, shown="training length"),
    Parameter("length", int, shown="factor x original"),
    Parameter("beta_fast", float, shown="32"),
    Parameter("beta_slow", float, shown="1"),
    Parameter("low_freq_factor", float, shown="1"),
    Parameter("high_freq_factor", float, shown="4"),
    Parameter("short_factor", float, shown="1"),
    Parameter("long_factor", float, shown="1"),
)


@encoding(
    "rope",
    "RoPE's unit-circle vectors (cos, sin)(i theta_k)",
    params=(Parameter("d", int, shown="width", default_width=True), BASE, *SCALING),
    width="d",
    order=20,
)
def rope(positions: np.ndarray, d: int = 768, base: float = 10000.0, **scaling: Any) -> np.ndarray:
    """The unit-circle vectors of RoPE, interleaved (cos, sin) per frequency, (n, d); under ``scaling=``
    (linear, dynamic, yarn, llama3, longrope) transformers' scaled frequencies times its attention
    scaling (rope_scaling.py)."""
    name = check_scaling(scaling)
    if name is None:
        return _unit_circles(positions, d, base, "rope", sine_first=False)
    _unit_circles(np.arange(0), d, base, "rope", sine_first=False)  # d and base checked as plain rope's
    return scaled_table(positions, d, base, name, scaling)


def alibi_slopes(heads: int) -> np.ndarray:
    """m_h = 2^(-8h/H), h = 1..H (Press et al.; exact for H a power of two)."""
    if not 1 <= heads <= MAX_WIDTH:
        raise InputError(f"alibi needs heads in 1..{MAX_WIDTH}, got {heads}")
    return 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)


@encoding(
    "alibi",
    "ALiBi's implied vectors m_h i (all heads, or one head)",
    params=(Parameter("heads", int, 12, "12"), Parameter("head", int, shown="all (1..H)")),
    order=30,
    model_width=False,
)
def alibi(positions: np.ndarray, heads: int = 12, head: int | None = None) -> np.ndarray:
    """ALiBi's implied position vectors: (n, H) for all heads, (n, 1) for ``head`` (1-based)."""
    slopes = alibi_slopes(heads)
    i = _positions(positions)[:, None]
    if head is None:
        return i * slopes
    if not 1 <= head <= heads:
        raise InputError(f"alibi head must be within 1..{heads}, got {head}")
    return i * slopes[head - 1]


@encoding(
    "random",
    "i.i.d. Gaussian vectors (a null)",
    params=(Parameter("d", int, shown="width", default_width=True), Parameter("seed", int, 0, "0")),
    width="d",
    order=40,
)
def random(positions: np.ndarray, d: int = 768, seed: int = 0) -> np.ndarray:
    """I.i.d. standard Gaussian vectors, (n, d): the null encoding."""
    if not 1 <= d <= MAX_WIDTH:
        raise InputError(f"random needs d in 1..{MAX_WIDTH}, got {d}")
    if seed < 0:
        raise InputError(f"random needs a seed >= 0, got {seed}")
    return np.random.default_rng(seed).standard_normal((_positions(positions).shape[0], d))
