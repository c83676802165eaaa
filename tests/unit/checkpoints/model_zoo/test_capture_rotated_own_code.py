"""Queries and keys of attentions that rotate them in their own code, against an independent recomputation.

RoFormer, GPT-NeoX-Japanese and Falcon (RoPE) compute attention themselves, outside transformers'
attention interface, so the capture hooks their query/key projections and rotates what they give
as the attention does (:data:`geoanalyze.checkpoints.capture.ROTATIONS`). Falcon does up to
transformers 5.24; from 5.25 its attention calls the interface, which the capture takes instead
(the route follows the model's file: see expected_route), with the same rows. The recomputation here
shares nothing with that: each sequence alone, unpadded, eager (but see Case.implementation); a forward pre-hook on the attention
module takes its input x; q and k are this file's arithmetic on the module's weights, in the layout
the model code documents (separate query/key; GPT-NeoX-Japanese's per head [q | k | v]; Falcon's
groups of H/kv queries beside one key, or H queries beside one shared key: one key per key/value head,
as the interface receives any grouped-query model's keys), then RoPE from the
config's base alone, with this file's own angles: RoFormer in (2i, 2i + 1) pairs, the others
rotate-half, GPT-NeoX-Japanese on the first ``rotary_pct`` of each head. Falcon with ALiBi rotates
nothing (its attention rotates only where it is handed no ALiBi bias). Then the mean over the
sequences reaching each position, compared with the captured centroids (padded batches of 4, the
model's default attention).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .test_capture_independent import (
    Recomputed,
    capture_and_recompute,
    compare_rows,
    heads,
    hook_inputs,
    linear,
    numbered,
    qk_centroids,
    rotate_half,
    rotate_pairs,
)
from .test_capture_models import build, capture_tokenizer

__all__ = ["capture_tokenizer"]

HEADS = 4
SIZE = 8  # head size: width 32 / 4 heads
QK = Callable[[Any, Any, Any], tuple[Any, Any]]  # (attention module, x (T, w) float64, config) -> q, k (T, width)


def roformer(attention: Any, x: Any, config: Any) -> tuple[Any, Any]:
    """Separate query and key; RoFormer's fixed sinusoidal RoPE (base 10000) in (2i, 2i + 1) pairs."""
    return tuple(  # type: ignore[return-value]
        rotate_pairs(heads(linear(projection, x), SIZE), 10000.0).flatten(1)
        for projection in (attention.query, attention.key)
    )


def neox_japanese(attention: Any, x: Any, config: Any) -> tuple[Any, Any]:
    """query_key_value (no bias) per head [q | k | v]; rotate-half on the first rotary_pct of each head."""
    fused = linear(attention.query_key_value, x).view(x.shape[0], HEADS, 3 * SIZE)
    base = float(config.rope_parameters["rope_theta"])
    dims = int(SIZE * config.rope_parameters["partial_rotary_factor"])
    q, k = fused[..., :SIZE], fused[..., SIZE : 2 * SIZE]
    return rotate_half(q, base, dims).flatten(1), rotate_half(k, base, dims).flatten(1)


def falcon(rotary: bool) -> QK:
    """Falcon's query_key_value: new decoder architecture (T, kv, H/kv + 2, d), per group H/kv queries then
    one key and one value (a key per group); multi-query (T, H + 2, d), H queries, one key shared by all.
    Rotate-half on the whole head when ``rotary`` (no ALiBi)."""

    def qk(attention: Any, x: Any, config: Any) -> tuple[Any, Any]:
        fused = linear(attention.query_key_value, x)
        length = x.shape[0]
        if config.new_decoder_architecture:
            groups = fused.view(length, config.num_kv_heads, HEADS // config.num_kv_heads + 2, SIZE)
            q = groups[:, :, :-2].reshape(length, HEADS, SIZE)
            k = groups[:, :, -2]
        else:
            flat = fused.view(length, HEADS + 2, SIZE)
            q, k = flat[:, :HEADS], flat[:, [HEADS]]
        if rotary:
            base = float(config.rope_parameters["rope_theta"])
            q, k = rotate_half(q, base), rotate_half(k, base)
        return q.flatten(1), k.flatten(1)

    return qk


@dataclass(frozen=True)
class Case(Recomputed):
    qk: QK
    #: the recomputation's attention: eager, but for Falcon with ALiBi, whose eager path in transformers 5.24
    #: adds the ALiBi bias twice (FalconAttention: (scores + alibi) * scale + a mask FalconModel already added
    #: alibi / sqrt(d) into) where sdpa, the capture's default, adds it once: block 2's input differs by 3.5e-3
    implementation: str = "eager"


def _falcon_case(**config: Any) -> Case:
    """A Falcon case: rotated where the config gives it no ALiBi; with ALiBi, recomputed through sdpa."""
    alibi = bool(config.get("alibi"))
    return Case(
        "falcon",
        config,
        lambda m: m.h,
        lambda b: b.self_attention,
        falcon(rotary=not alibi),
        "sdpa" if alibi else "eager",
    )


CASES: dict[str, Case] = {
    "RoFormer": Case(
        "roformer", {"embedding_size": 32}, lambda m: m.encoder.layer, lambda b: b.attention.self, roformer
    ),
    "GPT-NeoX-Japanese (rotary_pct 0.5)": Case(
        "gpt_neox_japanese",
        {"rotary_pct": 0.5, "rotary_emb_base": 5000, "intermediate_multiple_size": 2},
        lambda m: m.layers,
        lambda b: b.attention,
        neox_japanese,
    ),
    "Falcon (RoPE, new decoder architecture, 2 key heads)": _falcon_case(
        new_decoder_architecture=True, num_kv_heads=2, rope_theta=10000.0
    ),
    "Falcon (RoPE, multi-query)": _falcon_case(new_decoder_architecture=False, multi_query=True, rope_theta=10000.0),
    "Falcon (ALiBi: no rotation)": _falcon_case(alibi=True, new_decoder_architecture=True, num_kv_heads=2),
}


def _recompute(folder: Path, case: Case, sequences: list[str], tokenizer: Any) -> dict[int, tuple[Any, Any]]:
    """Block (1-based) -> (query, key) centroids (n, width), each sequence alone, unpadded."""
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder), attn_implementation=case.implementation).eval()
    attention = {number: case.attention(block) for number, block in numbered(case.blocks(model)).items()}
    seen, handles = hook_inputs(attention)

    def step(ids: Any) -> Iterator[tuple[int, tuple[Any, Any]]]:
        model(input_ids=ids)
        for number, x in seen.items():
            yield number, case.qk(attention[number], x.double(), model.config)

    return qk_centroids(sequences, tokenizer, step, handles)


def expected_route(folder: Path) -> str:
    """How the capture must take the model's queries and keys: through the attention interface where the
    model's file defines the interface's ``eager_attention_forward`` (Falcon from transformers 5.25), else at
    the projections (its attention computes scores in its own code)."""
    import importlib

    import torch
    from transformers import AutoConfig, AutoModel

    with torch.device("meta"):
        model = AutoModel.from_config(AutoConfig.from_pretrained(str(folder)))
    module = importlib.import_module(type(model).__module__)
    return "attention interface" if hasattr(module, "eager_attention_forward") else "projections"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_rotated_queries_and_keys_equal_an_independent_recomputation(
    name: str, capture_tokenizer: Any, tmp_path: Path
) -> None:
    case = CASES[name]
    folder = build(tmp_path / "model", capture_tokenizer, case.model_type, case.config)
    _, result, expected = capture_and_recompute(folder, capture_tokenizer, _recompute, case)
    assert result.capture == expected_route(folder), (result.capture, result.notes)
    assert sorted(result.queries) == sorted(result.keys) == sorted(expected) == [1, 2], result.notes
    assert not [note for note in result.notes if "rotates" in note], result.notes
    worst, _ = compare_rows(result, expected)
    print(f"\n{name}: max |diff| {worst:.2e}")


@pytest.mark.parametrize("alibi", [False, True])
def test_falcon_projections_rotate_only_without_alibi(alibi: bool) -> None:
    """The projections route's Falcon rotation (taken where the interface cannot be: 5.24, or an attention
    implementation the capture does not wrap) rotates as the model's file does: with ALiBi nothing, though
    5.25's model hands every block the rotary tables; without, rotate-half at the config's base."""
    import torch
    from transformers import FalconConfig
    from transformers.models.falcon.modeling_falcon import FalconAttention, FalconRotaryEmbedding

    from geoanalyze.checkpoints.quirks import quirks

    config = FalconConfig(hidden_size=32, num_attention_heads=HEADS, num_hidden_layers=1, alibi=alibi)
    attention = FalconAttention(config, 0)
    length = 6
    heads = torch.randn(1, HEADS, length, SIZE, dtype=torch.float64)
    tables = FalconRotaryEmbedding(config)(heads, torch.arange(length)[None])
    rotation = quirks("falcon").rotation
    assert rotation is not None
    rotated = rotation(attention, {"position_embeddings": tables}, heads)
    if alibi:
        assert torch.equal(rotated, heads)
    else:
        base = float(config.rope_parameters["rope_theta"])
        expected = rotate_half(heads[0].transpose(0, 1), base).transpose(0, 1)[None]
        torch.testing.assert_close(rotated, expected, rtol=0, atol=1e-6)
