"""RoPE scaling encodings against transformers' own LlamaRotaryEmbedding, and the identity at factor 1."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from geoanalyze.encodings import get_encoding
from geoanalyze.errors import InputError

D, BASE, ORIGINAL = 16, 10000.0, 64
POSITIONS = np.arange(0, 256, 3)  # within factor x original, where dynamic and longrope are evaluated

SCALINGS = {
    "linear": ({"factor": 4.0}, ""),
    "dynamic": ({"factor": 4.0, "original_max_position_embeddings": ORIGINAL}, f",original={ORIGINAL}"),
    "yarn": (
        {"factor": 4.0, "original_max_position_embeddings": ORIGINAL, "beta_fast": 16.0, "beta_slow": 2.0},
        f",original={ORIGINAL},beta_fast=16,beta_slow=2",
    ),
    "llama3": (
        {"factor": 8.0, "original_max_position_embeddings": ORIGINAL, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        f",original={ORIGINAL}",
    ),
    "longrope": (
        {
            "factor": 4.0,
            "original_max_position_embeddings": ORIGINAL,
            "short_factor": [1.5] * (D // 2),
            "long_factor": [3.0] * (D // 2),
        },
        f",original={ORIGINAL},short_factor=1.5,long_factor=3",
    ),
}


def llama_table(rope_type: str, parameters: dict, positions: np.ndarray) -> np.ndarray:
    """The table from the inv_freq and attention scaling LlamaRotaryEmbedding holds, (cos, sin) interleaved."""
    factor = parameters["factor"]
    original = parameters.get("original_max_position_embeddings", ORIGINAL)
    length = int(factor * original)
    config = LlamaConfig(
        hidden_size=D,
        num_attention_heads=1,
        head_dim=D,
        max_position_embeddings=original if rope_type == "dynamic" else length,
        rope_parameters={"rope_type": rope_type, "rope_theta": BASE, **parameters},
    )
    module = LlamaRotaryEmbedding(config)
    inv_freq = module.inv_freq.double().numpy()
    scaling = float(module.attention_scaling)
    if rope_type in ("dynamic", "longrope"):  # evaluated at factor x original, as the encoding states
        import torch

        x = torch.zeros(1, length, D)
        cos, sin = module(x, torch.arange(length)[None])
        cos, sin = cos[0].double().numpy(), sin[0].double().numpy()
        table = np.empty((len(positions), D))
        table[:, 0::2], table[:, 1::2] = cos[positions, : D // 2], sin[positions, : D // 2]
        return table
    angles = positions[:, None] * inv_freq[None, :]
    table = np.empty((len(positions), D))
    table[:, 0::2], table[:, 1::2] = np.cos(angles) * scaling, np.sin(angles) * scaling
    return table


@pytest.mark.parametrize("name", list(SCALINGS))
def test_scaled_table_equals_llama_rotary_embedding(name: str) -> None:
    parameters, extra = SCALINGS[name]
    spec = f"rope:d={D},base={BASE:g},scaling={name},factor={parameters['factor']:g}{extra}"
    ours = get_encoding(spec).vectors(POSITIONS)
    theirs = llama_table(name, parameters, POSITIONS)
    # the model's forward pass multiplies in float32: agreement to float32 angles at position < 256
    tolerance = 1e-6 if name not in ("dynamic", "longrope") else 2e-4
    np.testing.assert_allclose(ours, theirs, atol=tolerance)
    assert not np.allclose(ours, get_encoding(f"rope:d={D}").vectors(POSITIONS), atol=1e-3)


@pytest.mark.parametrize(
    "spec",
    [
        "rope:d=16,scaling=linear,factor=1",
        "rope:d=16,scaling=dynamic,factor=1,original=64",
        "rope:d=16,scaling=yarn,factor=1,original=64",
        "rope:d=16,scaling=llama3,factor=1,original=64",
        "rope:d=16,scaling=longrope,factor=1,original=64",
    ],
)
def test_factor_one_is_plain_rope(spec: str) -> None:
    positions = np.arange(0, 4096, 13)
    scaled = get_encoding(spec).vectors(positions)
    plain = get_encoding("rope:d=16").vectors(positions)
    # the same frequencies, held in float32 by transformers: angles agree to i * 2^-24 relative
    np.testing.assert_allclose(scaled, plain, atol=positions.max() * 2.0**-23)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("rope:d=16,scaling=bogus,factor=2", "linear, dynamic, yarn"),
        ("rope:d=16,scaling=linear,factor=0", "factor must be > 0"),
        ("rope:d=16,scaling=linear,factor=-1", "factor must be > 0"),
        ("rope:d=16,scaling=yarn,factor=4,original=0", "original"),
        ("rope:d=16,scaling=yarn,factor=4", "needs original"),
        ("rope:d=16,scaling=yarn,original=64", "needs factor"),
        ("rope:d=16,factor=4", "needs a scaling"),
        ("rope:d=16,scaling=linear,factor=2,beta_fast=3", "takes no beta_fast"),
        ("rope:d=16,scaling=yarn,factor=2,original=64,beta_fast=-1", "beta_fast must be > 0"),
        ("rope:d=16,scaling=,factor=2", "unknown rope scaling"),
    ],
)
def test_hostile_scaling_specs_name_the_fix(spec: str, words: str) -> None:
    with pytest.raises(InputError, match=words):
        get_encoding(spec).check()
