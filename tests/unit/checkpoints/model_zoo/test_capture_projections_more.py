"""Projection-hook captures of three attentions written in their models' own code, against an
independent recomputation (the pattern of test_capture_independent.py): the capture runs padded
batches of mixed lengths; the recomputation runs each sequence alone, unpadded, eager, takes what
enters each attention module (a forward pre-hook) and computes q and k with the module's weights
and this file's own arithmetic, then the mean over the sequences reaching each position.

- DeBERTa (v1): in_proj's weight rows are per head [q | k | v] blocks of d rows; the query and key
  maps are gathered from those blocks (as DisentangledSelfAttention does when given query_states),
  the query gets q_bias. The relative terms (c2p, p2c) are the relative mechanism, not q or k.
- SqueezeBERT: q and k are grouped 1x1 convolutions on (C, T); here a block-diagonal matrix.
- I-BERT (quant_mode False, the config's default): q = x W^T + b of its QuantLinear query and key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .test_capture_independent import capture_and_recompute, compare_rows, qk_centroids
from .test_capture_models import WIDTH, build, capture_tokenizer, texts

__all__ = ["capture_tokenizer"]

LENGTHS = [20, 7, 13, 16, 20, 11, 5, 18, 20, 9, 14, 20]
HEADS = 4
QK = Callable[[Any, Any], tuple[Any, Any]]  # (attention module, its input x (T, C), float64) -> q, k (T, C)


def linear(weight: Any, bias: Any, x: Any) -> Any:
    """x W^T + b in float64."""
    out = x @ weight.double().T
    return out + bias.double() if bias is not None else out


def deberta(attention: Any, x: Any) -> tuple[Any, Any]:
    """in_proj.weight (3w, C) in 3H blocks of d rows: block 3h is head h's query map, 3h + 1 its key map."""
    import torch

    blocks = attention.in_proj.weight.double().chunk(3 * HEADS, dim=0)
    query = torch.cat([blocks[3 * h] for h in range(HEADS)])
    key = torch.cat([blocks[3 * h + 1] for h in range(HEADS)])
    return linear(query, attention.q_bias, x), linear(key, None, x)


def grouped(conv: Any, x: Any) -> Any:
    """A 1x1 Conv1d with ``groups`` on x (T, C): output channel o reads only the input channels of its group."""
    import torch

    weight = conv.weight.double()[..., 0]  # (C_out, C_in / groups)
    out_channels, group_width = weight.shape
    per_group = out_channels // conv.groups
    full = torch.zeros(out_channels, group_width * conv.groups, dtype=torch.float64)
    for o in range(out_channels):
        start = (o // per_group) * group_width
        full[o, start : start + group_width] = weight[o]
    return linear(full, conv.bias, x)


def squeezebert(attention: Any, x: Any) -> tuple[Any, Any]:
    return grouped(attention.query, x), grouped(attention.key, x)


def ibert(attention: Any, x: Any) -> tuple[Any, Any]:
    return (
        linear(attention.query.weight, attention.query.bias, x),
        linear(attention.key.weight, attention.key.bias, x),
    )


@dataclass(frozen=True)
class Case:
    model_type: str
    config: dict[str, Any]
    attention: Callable[[Any], list[Any]]  # the model -> its attention modules, block by block
    qk: QK
    channels_first: bool = False  # the attention's input is (B, C, T)


CASES: dict[str, Case] = {
    "DeBERTa (fused in_proj, q_bias)": Case(
        "deberta",
        {"relative_attention": True, "pos_att_type": ["c2p", "p2c"]},
        lambda m: [layer.attention.self for layer in m.encoder.layer],
        deberta,
    ),
    "SqueezeBERT (grouped 1x1 convolutions)": Case(
        "squeezebert",
        {"embedding_size": WIDTH},
        lambda m: [layer.attention for layer in m.encoder.layers],
        squeezebert,
        channels_first=True,
    ),
    "I-BERT (QuantLinear, quant_mode False)": Case(
        "ibert", {}, lambda m: [layer.attention.self for layer in m.encoder.layer], ibert
    ),
}


def biased(folder: Path) -> Path:
    """The built checkpoint with random attention biases (a tiny model starts them at zero, which would
    hide a bias added in the wrong place: DeBERTa's q_bias, the convolutions' and QuantLinears' biases)."""
    import torch
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder)).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "attention" in name and name.endswith("bias") and "LayerNorm" not in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator))
    model.save_pretrained(str(folder))
    return folder


def thirds(attention: Any, x: Any) -> tuple[Any, Any]:
    """The wrong layout for DeBERTa, [Q | K | V] along in_proj's width: the check must tell it apart."""
    fused = linear(attention.in_proj.weight, None, x)
    width = fused.shape[1] // 3
    return fused[:, :width] + attention.q_bias.double(), fused[:, width : 2 * width]


def _recompute(folder: Path, case: Case, sequences: list[str], tokenizer: Any) -> dict[int, tuple[Any, Any]]:
    """Block (1-based) -> (query, key) centroids (20, width), each sequence alone, eager, unpadded."""
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    attention = dict(enumerate(case.attention(model), 1))
    seen: dict[int, Any] = {}

    def hook(number: int) -> Callable[..., None]:
        def record(_: Any, args: Any, kwargs: Any) -> None:
            x = (args[0] if args else kwargs["hidden_states"])[0]
            seen[number] = x.T if case.channels_first else x

        return record

    hooks = [module.register_forward_pre_hook(hook(number), with_kwargs=True) for number, module in attention.items()]

    def step(ids: Any) -> Iterator[tuple[int, tuple[Any, Any]]]:
        seen.clear()
        model(input_ids=ids)
        assert sorted(seen) == sorted(attention)
        for number, x in seen.items():
            yield number, case.qk(attention[number], x.double())

    return qk_centroids(sequences, tokenizer, step, hooks)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_projection_captures_equal_an_independent_recomputation(
    name: str, capture_tokenizer: Any, tmp_path: Path
) -> None:
    case = CASES[name]
    folder = biased(build(tmp_path / "model", capture_tokenizer, case.model_type, case.config))
    _, result, expected = capture_and_recompute(folder, capture_tokenizer, _recompute, case, dtype="float32")
    assert result.capture == "projections", (result.capture, result.notes)
    assert sorted(result.queries) == sorted(expected) == sorted(result.keys), result.notes
    worst, _ = compare_rows(result, expected, shape=(20, WIDTH))
    print(f"\n{name}: max |diff| {worst:.2e}")
    if case.model_type == "deberta":  # the per-head layout matters: [Q | K | V] thirds are far off
        wrong = _recompute(
            folder,
            Case(case.model_type, case.config, case.attention, thirds),
            texts(LENGTHS, capture_tokenizer),
            capture_tokenizer,
        )
        assert max(float(np.abs(result.queries[b][:20] - wrong[b][0].numpy()).max()) for b in wrong) > 1e-2
