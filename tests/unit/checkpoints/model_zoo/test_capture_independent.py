"""The captured query/key centroids against an independent recomputation, one family at a time.

The capture (``forward_pass``) runs padded batches of sequences of mixed lengths through the
model's default attention (sdpa where it has it), through transformers' attention interface or
the projection hooks. The recomputation runs each sequence alone, unpadded, with the eager
attention path, and takes only what enters each attention module (a forward pre-hook on it: its
hidden states); from those it computes q and k with the module's own weights and this file's
own arithmetic: the projections, the fused layouts as the model cards document them, and RoPE
from the config's base alone (rotate-half, interleaved pairs, or DeepSeek's de-interleaved
pairs; partial rotary on the first dims; no rotation on NoPE layers), MLA's low-rank query and
shared rotary key. Then the mean over the sequences reaching each position.

One entry per mechanism family: learned table (BERT), fixed sinusoidal table (M2M100), RoPE
(Llama) and partial RoPE (Phi, half the head), ALiBi (BLOOM: fused projections), relative (T5),
none (Jamba's attention block), MLA (DeepSeek-V3; V2 without query compression), sliding window (Mistral; Gemma2 alternating;
Cohere2, RoPE in its sliding layers only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass

from .test_capture_models import SEQ2SEQ, T5, build, capture_tokenizer, texts
from .zoo import JAMBA

__all__ = ["capture_tokenizer"]

LENGTHS = [20, 7, 13, 16, 20, 11, 5, 18, 20, 9, 14, 20]
HEADS = 4
QK = Callable[[Any, Any, int, Any], tuple[Any, Any]]  # (attention module, x (T, w), block, config) -> q, k


# --- this file's own arithmetic ---------------------------------------------------------------------


def linear(module: Any, x: Any) -> Any:
    """x W^T + b in float64."""
    out = x @ module.weight.double().T
    return out + module.bias.double() if module.bias is not None else out


def angles(length: int, dims: int, base: float) -> Any:
    """(T, dims / 2): position p times base^(-2i/dims)."""
    import torch

    inverse = base ** (-torch.arange(0, dims, 2, dtype=torch.float64) / dims)
    return torch.arange(length, dtype=torch.float64)[:, None] * inverse[None]


def rotate_half(x: Any, base: float, dims: int | None = None) -> Any:
    """(T, H, d): the first ``dims`` of each head rotated in (i, i + dims/2) pairs (Llama, Phi)."""
    import torch

    dims = dims or x.shape[-1]
    theta = angles(x.shape[0], dims, base)[:, None]
    first, second, rest = x[..., : dims // 2], x[..., dims // 2 : dims], x[..., dims:]
    c, s = torch.cos(theta), torch.sin(theta)
    return torch.cat([first * c - second * s, second * c + first * s, rest], dim=-1)


def rotate_pairs(x: Any, base: float, split: bool = False) -> Any:
    """(T, H, d) rotated in (2i, 2i + 1) pairs: interleaved back (Cohere), or evens then odds (DeepSeek-V3)."""
    import torch

    theta = angles(x.shape[0], x.shape[-1], base)[:, None]
    even, odd = x[..., 0::2], x[..., 1::2]
    c, s = torch.cos(theta), torch.sin(theta)
    new_even, new_odd = even * c - odd * s, odd * c + even * s
    if split:
        return torch.cat([new_even, new_odd], dim=-1)
    return torch.stack([new_even, new_odd], dim=-1).flatten(-2)


def numbered(blocks: Any) -> dict[int, Any]:
    """Block number (1-based) -> block."""
    return dict(enumerate(blocks, 1))


def heads(x: Any, size: int) -> Any:
    return x.view(x.shape[0], -1, size)


# --- q and k per family, from the attention module's input -------------------------------------------


def separate(query: str, key: str) -> QK:
    """No position transform inside attention: q = x W_Q, k = x W_K."""
    return lambda attention, x, block, config: (
        linear(getattr(attention, query), x),
        linear(getattr(attention, key), x),
    )


def roped(dims: float = 1.0, pairs: bool = False, nope: Callable[[int, Any], bool] = lambda block, config: False) -> QK:
    """q_proj/k_proj, then RoPE on the first ``dims`` of each head (rotate-half, or interleaved pairs)."""

    def qk(attention: Any, x: Any, block: int, config: Any) -> tuple[Any, Any]:
        size = (
            config.head_dim if getattr(config, "head_dim", None) else config.hidden_size // config.num_attention_heads
        )
        base = float(config.rope_parameters["rope_theta"])
        out = []
        for projection in (attention.q_proj, attention.k_proj):
            states = heads(linear(projection, x), size)
            if not nope(block, config):
                states = rotate_pairs(states, base) if pairs else rotate_half(states, base, int(size * dims))
            out.append(states.flatten(1))
        return out[0], out[1]

    return qk


def bloom(attention: Any, x: Any, block: int, config: Any) -> tuple[Any, Any]:
    """BLOOM's fused query_key_value: per head [q | k | v] (the model card's layout)."""
    fused = linear(attention.query_key_value, x).view(x.shape[0], HEADS, 3, -1)
    return fused[:, :, 0].flatten(1), fused[:, :, 1].flatten(1)


def openai_gpt(attention: Any, x: Any, block: int, config: Any) -> tuple[Any, Any]:
    """OpenAI-GPT's Conv1D c_attn (x W + b, W in x 3w): [Q | K | V] along the width."""
    fused = x @ attention.c_attn.weight.double() + attention.c_attn.bias.double()
    width = fused.shape[1] // 3
    return fused[:, :width], fused[:, width : 2 * width]


def mla(split: bool) -> QK:
    """DeepSeek's multi-head latent attention: q from q_proj, or the low-rank q_a -> norm -> q_b, split
    into a plain and a rotary part; k: the latent kv_a -> norm -> kv_b (plain part per head) beside
    one rotary key shared by every head; rotary in (2i, 2i + 1) pairs, put back interleaved (V2's
    complex product) or evens then odds (``split``: V3's rope_interleave)."""

    def qk(attention: Any, x: Any, block: int, config: Any) -> tuple[Any, Any]:
        import torch

        nope, rope = config.qk_nope_head_dim, config.qk_rope_head_dim
        base = float(config.rope_parameters["rope_theta"])
        length = x.shape[0]
        if config.q_lora_rank is None:
            q = linear(attention.q_proj, x)
        else:
            q = linear(attention.q_b_proj, attention.q_a_layernorm(linear(attention.q_a_proj, x).float()).double())
        q = heads(q, nope + rope)
        q = torch.cat([q[..., :nope], rotate_pairs(q[..., nope:], base, split=split)], dim=-1)
        latent = linear(attention.kv_a_proj_with_mqa, x)
        compressed, shared = latent[:, : config.kv_lora_rank], latent[:, config.kv_lora_rank :]
        normed = attention.kv_a_layernorm(compressed.float()).double()
        plain = heads(linear(attention.kv_b_proj, normed), nope + config.v_head_dim)
        rotary = rotate_pairs(shared.view(length, 1, rope), base, split=split).expand(length, HEADS, rope)
        k = torch.cat([plain[..., :nope], rotary], dim=-1)
        return q.flatten(1), k.flatten(1)

    return qk


@dataclass(frozen=True)
class Recomputed:
    """A model type whose queries and keys are recomputed from what enters its attention modules."""

    model_type: str
    config: dict[str, Any]
    blocks: Callable[[Any], Any]  # the model -> its blocks (or those with attention)
    attention: Callable[[Any], Any]  # a block -> the attention module whose input is hooked
    qk: Callable[..., tuple[Any, Any]]  # (attention module, its input x (T, w) float64, ...) -> q, k


@dataclass(frozen=True)
class Family(Recomputed):
    qk: QK
    tolerance: float = 1e-5
    notes: dict[str, Any] = field(default_factory=dict)


LLAMA = {"num_key_value_heads": 2, "rope_theta": 10000.0}
MLA = {
    "q_lora_rank": 16,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4,
    "v_head_dim": 8,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
    "first_k_dense_replace": 2,
    "n_group": 1,
    "topk_group": 1,
    "rope_interleave": True,
    "rope_theta": 10000.0,
    "num_key_value_heads": HEADS,
}
FAMILIES: dict[str, Family] = {
    "learned table (BERT)": Family(
        "bert", {}, lambda m: numbered(m.encoder.layer), lambda b: b.attention.self, separate("query", "key")
    ),
    "fixed sinusoidal table (M2M100)": Family(
        "m2m_100", SEQ2SEQ, lambda m: numbered(m.layers), lambda b: b.self_attn, separate("q_proj", "k_proj")
    ),
    "RoPE (Llama)": Family("llama", LLAMA, lambda m: numbered(m.layers), lambda b: b.self_attn, roped()),
    "RoPE, two attention calls per block (DiffLlama)": Family(
        "diffllama", LLAMA, lambda m: numbered(m.layers), lambda b: b.self_attn, roped()
    ),
    "partial RoPE (Phi, half the head)": Family(
        "phi",
        {"partial_rotary_factor": 0.5, "rope_theta": 10000.0},
        lambda m: numbered(m.layers),
        lambda b: b.self_attn,
        roped(0.5),
    ),
    "ALiBi (BLOOM, fused projections)": Family(
        "bloom", {"n_layer": 2, "n_head": HEADS}, lambda m: numbered(m.h), lambda b: b.self_attention, bloom
    ),
    "learned table, fused Conv1D (OpenAI-GPT)": Family(
        "openai-gpt",
        {"n_embd": 32, "n_layer": 2, "n_head": HEADS, "n_positions": 64},
        lambda m: numbered(m.h),
        lambda b: b.attn,
        openai_gpt,
    ),
    "relative (T5)": Family(
        "t5", T5, lambda m: numbered(m.block), lambda b: b.layer[0].SelfAttention, separate("q", "k")
    ),
    "none (Jamba's attention block)": Family(
        "jamba",
        {**JAMBA, "use_mamba_kernels": False},
        lambda m: {2: m.layers[1]},
        lambda b: b.self_attn,
        separate("q_proj", "k_proj"),
    ),
    "MLA (DeepSeek-V3)": Family("deepseek_v3", MLA, lambda m: numbered(m.layers), lambda b: b.self_attn, mla(True)),
    "MLA (DeepSeek-V2, no query compression)": Family(
        "deepseek_v2",
        {**MLA, "q_lora_rank": None, "n_shared_experts": 1, "topk_method": "greedy"},
        lambda m: numbered(m.layers),
        lambda b: b.self_attn,
        mla(False),
    ),
    "sliding window (Mistral, window 8)": Family(
        "mistral", {**LLAMA, "sliding_window": 8}, lambda m: numbered(m.layers), lambda b: b.self_attn, roped()
    ),
    "sliding window (Gemma2, alternating)": Family(
        "gemma2",
        {**LLAMA, "head_dim": 8, "sliding_window": 8},
        lambda m: numbered(m.layers),
        lambda b: b.self_attn,
        roped(),
    ),
    "sliding window (Cohere2: RoPE in sliding layers, NoPE in full)": Family(
        "cohere2",
        {**LLAMA, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]},
        lambda m: numbered(m.layers),
        lambda b: b.self_attn,
        roped(pairs=True, nope=lambda block, config: config.layer_types[block - 1] == "full_attention"),
    ),
}
#: run by default: one per mechanism kind (sliding window: Cohere2's, with its NoPE layers); the rest are slow
DEFAULT = {
    "learned table (BERT)",
    "RoPE (Llama)",
    "ALiBi (BLOOM, fused projections)",
    "relative (T5)",
    "MLA (DeepSeek-V3)",
    "sliding window (Cohere2: RoPE in sliding layers, NoPE in full)",
}


def hook_inputs(attention: dict[int, Any]) -> tuple[dict[int, Any], list[Any]]:
    """Forward pre-hooks recording each attention module's input of the pass under way (its first
    sequence): block -> input, and the handles to remove."""
    seen: dict[int, Any] = {}

    def hook(number: int) -> Callable[..., None]:
        def record(_: Any, args: Any, kwargs: Any) -> None:
            seen[number] = (args[0] if args else kwargs["hidden_states"])[0]

        return record

    return seen, [module.register_forward_pre_hook(hook(n), with_kwargs=True) for n, module in attention.items()]


def qk_centroids(
    sequences: list[str],
    tokenizer: Any,
    step: Callable[[Any], Iterator[tuple[int, tuple[Any, Any]]]],
    handles: list[Any],
) -> dict[int, tuple[Any, Any]]:
    """Block -> (query, key) centroids (20, width) of ``sequences``, each run alone: ``step(ids)`` runs one
    sequence's ids (1, T) and yields each block's (q, k), each (T, width) float64; then the hooks' ``handles``
    are removed."""
    import torch

    sums: dict[int, list[Any]] = {}
    counts = torch.zeros(20, dtype=torch.float64)
    with torch.no_grad():
        for text in sequences:
            ids = torch.tensor([tokenizer(text)["input_ids"]])
            length = ids.shape[1]
            for number, (q, k) in step(ids):
                total = sums.setdefault(number, [torch.zeros(20, t.shape[1], dtype=torch.float64) for t in (q, k)])
                total[0][:length] += q
                total[1][:length] += k
            counts[:length] += 1
    for handle in handles:
        handle.remove()
    return {number: (q / counts[:, None], k / counts[:, None]) for number, (q, k) in sums.items()}


def capture_and_recompute(
    folder: Path, tokenizer: Any, recompute: Callable[..., dict[int, tuple[Any, Any]]], case: Any, **options: Any
) -> tuple[Any, Any, dict[int, tuple[Any, Any]]]:
    """The checkpoint in ``folder``, its capture (``forward_pass``: batches of 4 on the cpu, ``options``) on
    texts of :data:`LENGTHS`, and ``recompute(folder, case, texts, tokenizer)`` of the same texts."""
    sequences = texts(LENGTHS, tokenizer)
    checkpoint = load_checkpoint(str(folder))
    result = forward_pass(checkpoint, sequences, max_length=20, batch_size=4, device="cpu", **options)
    return checkpoint, result, recompute(folder, case, sequences, tokenizer)


def compare_rows(
    result: Any,
    expected: dict[int, tuple[Any, Any]],
    atol: float = 1e-5,
    rtol: float = 1e-5,
    shape: tuple[int, int] | None = None,
    check: Callable[[int, Any, Any], None] | None = None,
) -> tuple[float, float]:
    """Assert that each block's captured query and key rows (their first 20 positions) have ``expected``'s
    shape (and ``shape``, where given), pass ``check`` and equal them within ``atol`` and ``rtol``; the
    largest absolute and relative differences."""
    worst_abs = worst_rel = 0.0
    for block, (q, k) in expected.items():
        for captured, reference in ((result.queries[block], q.numpy()), (result.keys[block], k.numpy())):
            got = captured[:20]
            assert got.shape == reference.shape and shape in (None, got.shape), (block, got.shape, reference.shape)
            if check is not None:
                check(block, got, reference)
            np.testing.assert_allclose(got, reference, atol=atol, rtol=rtol)
            difference = np.abs(got - reference)
            worst_abs = max(worst_abs, float(np.nanmax(difference)))
            worst_rel = max(worst_rel, float(np.nanmax(difference / np.maximum(np.abs(reference), 1e-3))))
    return worst_abs, worst_rel


def _recompute(folder: Path, family: Family, sequences: list[str], tokenizer: Any) -> dict[int, tuple[Any, Any]]:
    """Block (1-based) -> (query, key) centroids (n, width), each sequence alone, eager, unpadded."""
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    if getattr(model.config, "is_encoder_decoder", False):
        model = model.get_encoder()
    config = model.config
    attention = {number: family.attention(block) for number, block in family.blocks(model).items()}
    seen, hooks = hook_inputs(attention)

    def step(ids: Any) -> Iterator[tuple[int, tuple[Any, Any]]]:
        model(input_ids=ids)
        for number, x in seen.items():
            yield number, family.qk(attention[number], x.double(), number, config)

    return qk_centroids(sequences, tokenizer, step, hooks)


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow) for n in FAMILIES])
def test_captured_centroids_equal_an_independent_recomputation(
    name: str, capture_tokenizer: Any, tmp_path: Path
) -> None:
    family = FAMILIES[name]
    folder = build(tmp_path / "model", capture_tokenizer, family.model_type, family.config)
    _, result, expected = capture_and_recompute(folder, capture_tokenizer, _recompute, family, dtype="float32")
    assert sorted(result.queries) == sorted(expected), (result.capture, result.notes)
    worst_abs, worst_rel = compare_rows(result, expected, family.tolerance, family.tolerance)
    print(f"\n{name} [{result.capture}]: max |diff| {worst_abs:.2e}, max rel {worst_rel:.2e}")
