r"""RoPE's frequencies under a scaling: transformers' own ``ROPE_INIT_FUNCTIONS``, no re-implementation.

``rope:d=128,base=500000,scaling=yarn,factor=8,original=8192`` builds a minimal
:class:`transformers.PretrainedConfig` (one head of width d, ``rope_parameters`` from the spec) and
calls ``ROPE_INIT_FUNCTIONS[scaling](config, "cpu", seq_len)``: it returns the scaled inverse
frequencies (float32, as the model holds them) and the attention scaling the model multiplies
cos and sin by. The table is ``scaling * (cos, sin)(i * inv_freq_k)`` interleaved, as plain rope.

Parameters (the spec's keys, transformers' ``rope_parameters`` names in brackets):

factor            the scaling factor [factor], > 0 (1: no scaling for linear, dynamic, yarn, llama3)
original          the training length [original_max_position_embeddings], >= 1: required by every
                  scaling but linear; the figure of scores against position marks it
length            the sequence length dynamic and longrope are evaluated at (default factor x original,
                  the extended length the scaling targets; ``max_position_embeddings`` is factor x original)
beta_fast, beta_slow          yarn's ramp (default 32, 1) [beta_fast, beta_slow]
low_freq_factor, high_freq_factor   llama3's band (default 1, 4) [the same names]
short_factor, long_factor     longrope's rescale, one value for every frequency (default 1; a
                  checkpoint's per-frequency lists come from its config) [short_factor, long_factor]

Dynamic NTK (and longrope's choice between its short and long factors) depends on the sequence
length: it is evaluated at ``length``, once for the whole table, so every position of one spec has
the same frequencies (as in one forward pass of that length).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InputError

#: the spec keys each scaling reads beyond factor and original (others given are refused)
EXTRA: dict[str, tuple[str, ...]] = {
    "yarn": ("beta_fast", "beta_slow"),
    "llama3": ("low_freq_factor", "high_freq_factor"),
    "longrope": ("short_factor", "long_factor", "length"),
    "dynamic": ("length",),
}
#: every key a scaling may take (the rope family's parameters beyond d and base)
KEYS = (
    *("scaling", "factor", "original", "length", "beta_fast", "beta_slow"),
    *("low_freq_factor", "high_freq_factor", "short_factor", "long_factor"),
)
#: llama3's defaults (Meta's Llama 3.1 values)
LLAMA3_DEFAULTS = {"low_freq_factor": 1.0, "high_freq_factor": 4.0}


def init_functions() -> Mapping[str, Any]:
    """transformers' ``ROPE_INIT_FUNCTIONS`` (imported on use: torch is slow to import)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS


def check_scaling(values: Mapping[str, Any]) -> str | None:
    """The scaling name (None: plain rope), after every hostile value is refused with its fix."""
    name = values.get("scaling")
    given = sorted(key for key in KEYS if key != "scaling" and values.get(key) is not None)
    if name is None:
        if given:
            raise InputError(f"rope {given[0]}= needs a scaling; add scaling=<one of {', '.join(init_functions())}>")
        return None
    known = init_functions()
    if name not in known:
        raise InputError(f"unknown rope scaling {name!r}; choose one of {', '.join(known)}")
    allowed = {"factor", "original", *EXTRA.get(name, ())}
    extra = [key for key in given if key not in allowed]
    if extra:
        raise InputError(f"rope scaling {name} takes no {extra[0]}=; it takes {', '.join(sorted(allowed))}")
    for key in ("factor", *EXTRA.get(name, ())):
        value = values.get(key)
        if value is not None and not value > 0:
            raise InputError(f"rope {key} must be > 0, got {value}")
    if values.get("factor") is None:
        raise InputError(f"rope scaling {name} needs factor=<the scaling factor, e.g. 8>")
    original = values.get("original")
    if original is not None and original < 1:
        raise InputError(f"rope original (the training length) must be >= 1, got {original}")
    if original is None and name != "linear":
        raise InputError(f"rope scaling {name} needs original=<the training length, e.g. 8192>")
    return str(name)


def scaled_frequencies(d: int, base: float, name: str, values: Mapping[str, Any]) -> tuple[np.ndarray, float]:
    """(inv_freq (d/2,) float32 as transformers computes it, the attention scaling) of a checked scaling."""
    from transformers import PretrainedConfig

    factor = float(values["factor"])
    original = values.get("original")
    parameters: dict[str, Any] = {"rope_type": name, "rope_theta": float(base), "factor": factor}
    length = None
    if original is not None:
        parameters["original_max_position_embeddings"] = int(original)
        length = int(values.get("length") or round(factor * original))
    for key in EXTRA.get(name, ()):
        if key in ("short_factor", "long_factor"):
            parameters[key] = [float(values.get(key) or 1.0)] * (d // 2)
        elif key != "length" and values.get(key) is not None:
            parameters[key] = float(values[key])
    if name == "llama3":
        parameters = {**LLAMA3_DEFAULTS, **parameters}
    config = PretrainedConfig()
    config.hidden_size, config.num_attention_heads, config.head_dim = d, 1, d
    # dynamic reads its training length as max_position_embeddings; the others the extended length
    config.max_position_embeddings = int(original or 1) if name == "dynamic" else max(1, length or 1)
    config.rope_parameters = parameters
    try:
        inv_freq, attention = init_functions()[name](config, "cpu", seq_len=length)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
        raise InputError(f"transformers cannot build rope scaling {name} from these parameters: {exc}") from exc
    return np.asarray(inv_freq.detach().cpu().numpy(), dtype=np.float32), float(attention)


def scaled_table(positions: np.ndarray, d: int, base: float, name: str, values: Mapping[str, Any]) -> np.ndarray:
    """``attention * (cos, sin)(i * inv_freq_k)``, interleaved, (n, d), float64 angles of float32 frequencies."""
    inv_freq, attention = scaled_frequencies(d, base, name, values)
    angles = np.asarray(positions, dtype=np.float64).reshape(-1)[:, None] * inv_freq.astype(np.float64)
    table = np.empty((angles.shape[0], d))
    table[:, 0::2] = np.cos(angles) * attention
    table[:, 1::2] = np.sin(angles) * attention
    return table


def training_length(spec: str) -> int | None:
    """The training length a rope scaling spec names (``original=8192``), or None (no such key, or no rope)."""
    from .registry import parse_parameters  # the registry imports this module's encodings

    name, _, args = spec.partition(":")
    if name != "rope":
        return None
    original = parse_parameters(args, spec, text=("scaling",)).get("original")
    return None if original is None else int(float(original))
