"""Per-architecture knowledge: where the position table and each layer's query/key maps live.

An adapter reads tensors by name from the checkpoint's weights and returns numpy arrays
oriented so that ``P @ W_Q`` projects row vectors (in x out), bias left out (GEOMETRY.md).
Architectures without an absolute table report the position vectors their mechanism
implies (RoPE: the unit-circle vectors of its frequencies; ALiBi: the slopes times i).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import IncompatibleError

TensorReader = Callable[[str], np.ndarray]


@dataclass(frozen=True)
class Adapter:
    """How one architecture stores positions.

    kind : "absolute" (a learned table), "rope" or "alibi" (implied vectors).
    table : suffix of the position-embedding tensor name (absolute only).
    offset : row of position 0 in the table (RoBERTa: padding_idx + 1).
    query, key : name patterns of layer l's query / key weights, with ``{l}``.
    fused : GPT-2's c_attn holds [Q | K | V] in one (in x 3h) Conv1D matrix.
    implied : encoding spec of the implied vectors (rope / alibi).
    """

    architecture: str
    kind: str
    table: str = ""
    offset: int = 0
    query: str = ""
    key: str = ""
    fused: bool = False
    linear_out_in: bool = True
    implied: str = ""


def _int(config: dict[str, Any], *names: str, default: int | None = None) -> int | None:
    for name in names:
        value = config.get(name)
        if isinstance(value, int):
            return value
    return default


def rope_theta(config: dict[str, Any]) -> float | None:
    """RoPE base from a config (``rope_theta``, or transformers 5's ``rope_parameters``)."""
    value = config.get("rope_theta")
    parameters = config.get("rope_parameters")
    if value is None and isinstance(parameters, dict):
        value = parameters.get("rope_theta")
    if value is None and config.get("position_embedding_type") == "rotary":
        value = 10000.0
    return float(value) if value is not None else None


def adapter_for(config: dict[str, Any]) -> Adapter:
    """The adapter of a HF config; IncompatibleError naming the class for anything else."""
    model_type = str(config.get("model_type", ""))
    architectures = config.get("architectures") or [model_type or "unknown"]
    name = str(architectures[0])
    if model_type in ("bert", "roberta", "xlm-roberta", "camembert", "electra"):
        offset = 0
        if model_type in ("roberta", "xlm-roberta", "camembert"):
            offset = (_int(config, "pad_token_id", default=1) or 0) + 1
        return Adapter(
            name,
            "absolute",
            "embeddings.position_embeddings.weight",
            offset,
            "encoder.layer.{l}.attention.self.query.weight",
            "encoder.layer.{l}.attention.self.key.weight",
        )
    if model_type == "distilbert":
        return Adapter(
            name,
            "absolute",
            "embeddings.position_embeddings.weight",
            0,
            "transformer.layer.{l}.attention.q_lin.weight",
            "transformer.layer.{l}.attention.k_lin.weight",
        )
    if model_type == "gpt2":
        return Adapter(
            name, "absolute", "wpe.weight", 0, "h.{l}.attn.c_attn.weight", "", fused=True, linear_out_in=False
        )
    if model_type == "bloom" or (model_type == "mpt" and (config.get("attn_config") or {}).get("alibi")):
        attn_config = config.get("attn_config") or {}
        heads = _int({**attn_config, **config}, "n_head", "n_heads", "num_attention_heads")
        if heads is None:
            raise IncompatibleError(f"{name}: the config names no head count; ALiBi's slopes depend on it")
        return Adapter(name, "alibi", implied=f"alibi:heads={heads}")
    theta = rope_theta(config)
    if theta is not None:
        hidden = _int(config, "hidden_size", "n_embd", "d_model", default=0) or 0
        heads = _int(config, "num_attention_heads", "n_head", default=1) or 1
        head_dim = _int(config, "head_dim", default=hidden // heads) or hidden // heads
        # Shortest round-trip form: 500000.0 -> "500000", and no rounding of a base like 1234567.
        base = np.format_float_positional(theta, trim="-")
        return Adapter(name, "rope", implied=f"rope:d={head_dim},base={base}")
    raise IncompatibleError(
        f"not supported yet: {name} (model_type {model_type or 'unknown'}); "
        "supported: BERT, RoBERTa, DistilBERT, GPT-2, and RoPE / ALiBi models through their implied vectors"
    )


def find_tensor(names: list[str], suffix: str) -> str:
    """The one tensor name ending with ``suffix`` (a model prefix such as 'bert.' may precede it)."""
    pattern = re.compile(r"(^|\.)" + re.escape(suffix) + r"$")
    found = [n for n in names if pattern.search(n)]
    if len(found) != 1:
        raise IncompatibleError(
            f"expected one tensor named *{suffix}, found {len(found)}; is this checkpoint complete?"
        )
    return found[0]


def layer_count(config: dict[str, Any]) -> int:
    count = _int(config, "num_hidden_layers", "n_layer", "n_layers", default=0)
    return int(count or 0)


def query_key_maps(
    adapter: Adapter, config: dict[str, Any], names: list[str], read: TensorReader
) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(W_Q, W_K)] per layer, each (hidden_in, hidden_out) so that q = p @ W_Q."""
    maps = []
    for layer in range(layer_count(config)):
        if adapter.fused:
            fused = read(find_tensor(names, adapter.query.format(l=layer)))  # (in, 3 h)
            width = fused.shape[1] // 3
            maps.append((fused[:, :width], fused[:, width : 2 * width]))
            continue
        w_q = read(find_tensor(names, adapter.query.format(l=layer)))
        w_k = read(find_tensor(names, adapter.key.format(l=layer)))
        maps.append((w_q.T, w_k.T) if adapter.linear_out_in else (w_q, w_k))
    return maps
