"""The captured query/key centroids of blocks that do more than one attention of their own, or reshape the
sequence inside, against an independent recomputation (the method of test_capture_independent.py).

- LongCat-Flash: each decoder layer runs two MLA attention modules (``self_attn[0]``, ``self_attn[1]``),
  each once; the capture keeps the layer's number and holds both modules' queries and keys side by
  side, in the order they run. Recomputed here from what enters each module, with the module's own
  weights and this file's arithmetic: the LoRA query (q_a -> norm -> q_b) and latent key (kv_a ->
  norm -> kv_b) with LongCat's LoRA scales, one rotary key shared by every head, rotary in
  (2i, 2i + 1) pairs put back evens then odds, base from the config.
- PegasusX: the encoder pads the batch to a multiple of ``block_size``, and every second layer pads
  ``block_size // 2`` more at each end (staggered local blocks); the projections also run on the
  global tokens. Recomputed from the layer's input (whose position p is the input's position p): its
  own layer norm, then the query and key projections (the attention's ``scaling`` is left out, as the
  capture leaves it out for every model captured at its projections).

Each sequence alone, unpadded, eager; the capture: padded batches of mixed lengths, the default attention.
Both cases are slow (a model each, 10-30 s on the loaded 2 cores); the default run checks the
recorder's rules on tensors made here (test_capture_rules.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .test_capture_independent import (
    HEADS,
    capture_and_recompute,
    compare_rows,
    heads,
    linear,
    qk_centroids,
    rotate_pairs,
)
from .test_capture_models import SEQ2SEQ, build, capture_tokenizer

__all__ = ["capture_tokenizer"]

#: (the block, the inputs of its hooked modules in the order they ran, config) -> the block's (q, k), (T, width)
BlockQK = Callable[[Any, list[Any], Any], tuple[Any, Any]]


def longcat_attention(attention: Any, x: Any, config: Any) -> tuple[Any, Any]:
    """One LongcatFlashMLA's q and k (T, H * (nope + rope)) from its input x (T, w)."""
    import torch

    nope, rope = config.qk_nope_head_dim, config.qk_rope_head_dim
    base = float(config.rope_parameters["rope_theta"])
    length = x.shape[0]
    q = linear(attention.q_b_proj, attention.q_a_layernorm(linear(attention.q_a_proj, x).float()).double())
    q = heads(q, nope + rope) * (config.hidden_size / config.q_lora_rank) ** 0.5
    q = torch.cat([q[..., :nope], rotate_pairs(q[..., nope:], base, split=True)], dim=-1)
    latent = linear(attention.kv_a_proj_with_mqa, x)
    compressed, shared = latent[:, : config.kv_lora_rank], latent[:, config.kv_lora_rank :]
    normed = attention.kv_a_layernorm(compressed.float()).double() * (config.hidden_size / config.kv_lora_rank) ** 0.5
    plain = heads(linear(attention.kv_b_proj, normed), nope + config.v_head_dim)
    rotary = rotate_pairs(shared.view(length, 1, rope), base, split=True).expand(length, HEADS, rope)
    k = torch.cat([plain[..., :nope], rotary], dim=-1)
    return q.flatten(1), k.flatten(1)


def longcat(block: Any, inputs: list[Any], config: Any) -> tuple[Any, Any]:
    """Both attention modules' q and k, side by side in the order they ran."""
    import torch

    pairs = [longcat_attention(attention, x, config) for attention, x in zip(block.self_attn, inputs, strict=True)]
    return torch.cat([q for q, _ in pairs], dim=1), torch.cat([k for _, k in pairs], dim=1)


def pegasus_x(block: Any, inputs: list[Any], config: Any) -> tuple[Any, Any]:
    """The layer's own layer norm, then q_proj and k_proj (no bias), on the layer's input."""
    normed = block.self_attn_layer_norm(inputs[0].float()).double()
    return linear(block.self_attn.q_proj, normed), linear(block.self_attn.k_proj, normed)


@dataclass(frozen=True)
class Case:
    model_type: str
    config: dict[str, Any]
    blocks: Callable[[Any], Any]  # the (encoder) model -> its blocks
    hooked: Callable[[Any], list[Any]]  # a block -> the modules whose first input is taken, in run order
    qk: BlockQK
    note: str  # the forward pass's one query/key note
    tolerance: float = 1e-5


CASES = {
    "two attention modules per block (LongCat-Flash, MLA)": Case(
        "longcat_flash",
        {
            "num_hidden_layers": 4,  # LongCat's config counts 2 attentions per layer: num_layers 2
            "num_key_value_heads": HEADS,
            "q_lora_rank": 16,
            "kv_lora_rank": 16,
            "qk_nope_head_dim": 4,
            "qk_rope_head_dim": 4,
            "head_dim": 4,  # the rotary width (LongCat's own config: head_dim = qk_rope_head_dim = 64)
            "v_head_dim": 8,
            "ffn_hidden_size": 64,
            "expert_ffn_hidden_size": 16,
            "n_routed_experts": 4,
            "zero_expert_num": 2,
            "moe_topk": 2,
            "rope_theta": 10000.0,
        },
        lambda m: m.layers,
        lambda b: list(b.self_attn),
        longcat,
        "blocks 1, 2 each run 2 attention modules (LongcatFlashMLA, LongcatFlashMLA); a block's query and key rows "
        "hold the queries and keys of all of them side by side (every head of each), in the order they run",
    ),
    "staggered local blocks and global tokens (PegasusX)": Case(
        "pegasus_x",
        {**SEQ2SEQ, "encoder_layers": 3, "block_size": 8, "num_global_tokens": 4, "max_position_embeddings": 64},
        lambda m: m.layers,
        lambda b: [b],
        pegasus_x,
        "block 2 pads its attention's input with 4 positions at each end (staggered local blocks); its query and "
        "key rows are read from position 4 on, where the input's positions are",
    ),
}


def _recompute(folder: Path, case: Case, sequences: list[str], tokenizer: Any) -> dict[int, tuple[Any, Any]]:
    """Block (1-based) -> (query, key) centroids (20, width), each sequence alone, eager, unpadded."""
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    if getattr(model.config, "is_encoder_decoder", False):
        model = model.get_encoder()
    seen: dict[int, dict[int, Any]] = {}
    hooks = []
    for number, block in enumerate(case.blocks(model), 1):
        for order, module in enumerate(case.hooked(block)):

            def hook(_: Any, args: Any, kwargs: Any, number: int = number, order: int = order) -> None:
                seen.setdefault(number, {})[order] = (args[0] if args else kwargs["hidden_states"])[0]

            hooks.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    blocks = dict(enumerate(case.blocks(model), 1))

    def step(ids: Any) -> Iterator[tuple[int, tuple[Any, Any]]]:
        length = ids.shape[1]
        seen.clear()
        model(input_ids=ids)
        for number, inputs in seen.items():
            # the input's positions 0 .. length - 1 (PegasusX's layer input is padded at the end only)
            xs = [inputs[order][:length].double() for order in sorted(inputs)]
            yield number, case.qk(blocks[number], xs, model.config)

    return qk_centroids(sequences, tokenizer, step, hooks)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_captured_centroids_equal_an_independent_recomputation(
    name: str, capture_tokenizer: Any, tmp_path: Path
) -> None:
    case = CASES[name]
    folder = build(tmp_path / "model", capture_tokenizer, case.model_type, case.config)
    checkpoint, result, expected = capture_and_recompute(folder, capture_tokenizer, _recompute, case, dtype="float32")
    assert sorted(expected) == list(range(1, checkpoint.mechanism.layers + 1))
    assert sorted(result.queries) == sorted(expected), (result.capture, result.notes)
    assert result.notes == [case.note]
    worst, _ = compare_rows(result, expected, case.tolerance, case.tolerance)
    print(f"\n{name} [{result.capture}]: max |diff| {worst:.2e}")
