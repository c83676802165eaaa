"""One record per model type of what its attention does outside transformers' common shapes.

Most checkpoints need nothing here: the position mechanism is read from the skeleton
(:mod:`~geoanalyze.checkpoints.mechanism`) and the queries and keys are captured through transformers'
attention interface (:mod:`~geoanalyze.checkpoints.capture`). A model type whose attention code does
something of its own (a fused projection in a layout of its own, queries rotated in its own code,
query/key maps held as Parameters, prompt positions before the input's, a forward that pads
the sequence) has one :class:`Quirks` entry in :data:`QUIRKS`, as TransformerLens keeps one place per
architecture: adding an architecture is one entry here plus a zoo config (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: last components of the module names of query and key projections
QUERY_NAMES = ("query", "q_proj", "q_lin", "q", "query_proj", "wq")
KEY_NAMES = ("key", "k_proj", "k_lin", "k", "key_proj", "wk")
#: the arguments of one call of an attention module, by the names its forward's signature gives them
Call = Mapping[str, Any]
Split = Callable[[Any, Any], tuple[Any, Any]]  # (attention module, fused (B, T, 3w)) -> (q, k), each (B, T, w')
Rotation = Callable[[Any, Call, Any], Any]  # (attention module, its call's arguments, (B, H, T, d)) -> rotated
ParameterProjection = Callable[[Any, Call], tuple[Any, Any]]  # (attention, its call) -> q, k (T, B, w)


@dataclass(frozen=True)
class Quirks:
    """What one model type's attention does that the generic capture cannot see (all empty: nothing).

    fused_names : names of its fused query/key/value projection that other models use for other maps
        (DeBERTa's ``in_proj``; Mamba's in_proj is no attention's), sought only in this type.
    split : how its fused (or shared query/key) projection's output splits into q and k, as its attention does.
    rotation : how its attention rotates the projections' q and k in its own code, outside the interface.
    parameters : (the attention module's name in its block, how q and k come from its call's arguments),
        for query/key maps held as Parameters multiplied in its own code (no module to hook).
    query_bias : (its attention's class, the Parameter its content score adds to the queries).
    prefix : the config value counting the positions its blocks see before the input's.
    alibi : its ALiBi slopes, one per head, from its own slope function (heads, config) -> slopes.
    pad_multiple : the multiple its forward pads a sequence's length to, where that changes the output.
    unpadded : whether it must get batches without padding.
    """

    fused_names: tuple[str, ...] = ()
    split: Split | None = None
    rotation: Rotation | None = None
    parameters: tuple[str, ParameterProjection] | None = None
    query_bias: tuple[str, str] | None = None
    prefix: str = ""
    alibi: Callable[[int, Any], list[float]] | None = None
    pad_multiple: Callable[[Any], int] | None = None
    unpadded: Callable[[Any], bool] | None = None


# --- fused projections -----------------------------------------------------------------------------


def _bloom(attention: Any, fused: Any) -> tuple[Any, Any]:
    """BLOOM and Falcon (classic): (B, T, H, 3, d), per head [q | k | v]."""
    heads = fused.view(*fused.shape[:2], attention.num_heads, 3, attention.head_dim)
    return heads[..., 0, :], heads[..., 1, :]


def _falcon(attention: Any, fused: Any) -> tuple[Any, Any]:
    """Falcon up to transformers 5.24 (its own attention code; from 5.25 it calls the attention interface):
    new decoder architecture (groups of H/kv queries, one key, one value), multi-query (H queries, one key,
    one value), or BLOOM's layout. One key per key/value head, as the interface receives Falcon's keys
    from 5.25 (and every grouped-query model's): 5.24's own code repeats each per query head of its group,
    which gives the same key rows repeated, so a checkpoint's rows are the same under either version."""
    batch, length = fused.shape[:2]
    if getattr(attention, "new_decoder_architecture", False):
        groups = fused.view(batch, length, -1, attention.num_heads // attention.num_kv_heads + 2, attention.head_dim)
        return groups[:, :, :, :-2].flatten(2, 3), groups[:, :, :, -2]
    if not getattr(attention, "multi_query", False):
        return _bloom(attention, fused)
    heads = fused.view(batch, length, attention.num_heads + 2, attention.head_dim)
    return heads[..., :-2, :], heads[..., [-2], :]


def _neox_japanese(attention: Any, fused: Any) -> tuple[Any, Any]:
    """GPT-NeoX-Japanese: (B, T, H, 3d), per head [q | k | v]."""
    size = attention.head_size
    heads = fused.view(*fused.shape[:2], attention.num_attention_heads, 3 * size)
    return heads[..., :size], heads[..., size : 2 * size]


def _shared_query_key(attention: Any, shared: Any) -> tuple[Any, Any]:
    """Reformer's LSH attention (LSHSelfAttention.forward): one projection ``query_key`` gives the queries,
    and the keys are ``_len_and_dim_norm`` of the same vectors per head, x * rsqrt(mean(x^2) + 1e-6) /
    sqrt(head size) (``_len_norm``'s epsilon). The 1/sqrt(head size) is the score scaling (the model's
    LocalSelfAttention divides its keys by it too), left out as everywhere the capture reads projections."""
    import torch

    heads = shared.view(*shared.shape[:2], attention.num_attention_heads, attention.attention_head_size)
    variance = torch.mean(heads.float() ** 2, -1, keepdim=True)
    return shared, heads.float() * torch.rsqrt(variance + 1e-6)


def _deberta(attention: Any, fused: Any) -> tuple[Any, Any]:
    """DeBERTa (DisentangledSelfAttention.forward): in_proj's (B, T, 3w) viewed per head, (B, T, H, 3d),
    then ``chunk(3, dim=-1)``: per head [q | k | v]; the queries get ``q_bias``, viewed per head the same
    way (``transpose_for_scores(self.q_bias[None, None, :])``). Its division of the queries by
    sqrt(d * (1 + len(pos_att_type))) is the score scaling, left out as for every block; its relative
    terms (c2p, p2c) are the relative mechanism, not queries or keys of the positions."""
    heads, size = attention.num_attention_heads, attention.attention_head_size
    split = fused.view(*fused.shape[:2], heads, 3 * size)
    return split[..., :size] + attention.q_bias.view(heads, size), split[..., size : 2 * size]


def _thirds(_: Any, fused: Any) -> tuple[Any, Any]:
    """MPT, OpenAI-GPT: [Q | K | V] along the width."""
    query, key, _value = fused.chunk(3, dim=-1)
    return query, key


# --- query/key maps held as Parameters ----------------------------------------------------------


def _xlnet(attention: Any, call: Call) -> tuple[Any, Any]:
    """XLNet (XLNetRelativeAttention.forward, both branches): the content stream h, (T, B, d) sequence-first,
    gives ``q_head_h = torch.einsum("ibh,hnd->ibnd", h, self.q)`` and ``k_head_h = torch.einsum("ibh,hnd->ibnd",
    cat, self.k)``, cat = h (with ``mems``, cat = [mems, h]: the positions' own keys are h's). The biases its
    scores add to q (r_w_bias on the content term, r_r_bias on the relative one, r_s_bias on the segment one)
    and the relative keys k_head_r are the relative mechanism, left out: q and k as projected. The query
    stream g (two-stream pretraining, target_mapping) is no position's query here."""
    import torch

    h = call["h"]
    query = torch.einsum("ibh,hnd->ibnd", h, attention.q).flatten(2)
    key = torch.einsum("ibh,hnd->ibnd", h, attention.k).flatten(2)
    return query, key


# --- attentions that rotate q and k in their own code ------------------------------------------


def _sinusoidal_pairs(attention: Any, call: Call, heads: Any) -> Any:
    """RoFormer (RoFormerSelfAttention.forward): a self-attention call (no ``encoder_hidden_states``) handed
    ``sinusoidal_pos`` (the encoder's embed_positions table at the input's positions) rotates its queries
    and keys with its own ``apply_rotary_position_embeddings``, in (2i, 2i + 1) pairs."""
    table = call.get("sinusoidal_pos")
    if table is None or call.get("encoder_hidden_states") is not None:
        return heads
    rotated, _ = attention.apply_rotary_position_embeddings(table, heads, heads)
    return rotated


def _cos_sin(attention: Any, call: Call, heads: Any) -> Any:
    """Falcon up to transformers 5.24 (FalconAttention.forward, where it is handed no ``alibi``) and GPT-NeoX-Japanese
    (GPTNeoXJapaneseAttention.forward): the (cos, sin) the model's rotary_emb hands the call as
    ``position_embeddings``, applied by the attention's file's ``apply_rotary_pos_emb`` to the first
    cos.shape[-1] dims of each head (GPT-NeoX-Japanese's rotary_ndims); the rest passes unrotated. Falcon with
    ALiBi rotates nothing: 5.24 hands it ``alibi``, 5.25 hands it the tables too but reads ``config.alibi``."""
    import torch

    tables = call.get("position_embeddings")
    alibi = call.get("alibi") is not None or bool(getattr(getattr(attention, "config", None), "alibi", False))
    if tables is None or alibi:
        return heads
    cos, sin = tables
    apply = importlib.import_module(_FILE_ROTARY[type(attention).__name__]).apply_rotary_pos_emb
    dims = cos.shape[-1]
    rotated, _ = apply(heads[..., :dims], heads[..., :dims], cos, sin)
    return torch.cat((rotated, heads[..., dims:]), dim=-1) if dims < heads.shape[-1] else rotated


# --- ALiBi slopes, from the model's own slope function ---------------------------------------------


def _slopes(values: Any, heads: int) -> list[float]:
    """Slope per head of an ALiBi tensor over two positions, (..., H, ..., 2): the step from position 0 to 1."""
    import torch

    values = values.reshape(heads, -1).to(torch.float64)
    return (values[:, -1] - values[:, 0]).tolist()  # type: ignore[no-any-return]


def _build_alibi(module: str) -> Callable[[int, Any], list[float]]:
    """BLOOM and Falcon: ``build_alibi_tensor(attention_mask, num_heads, dtype)`` of the model's file, (H, 1, 2)."""

    def slopes(heads: int, _: Any) -> list[float]:
        import torch

        build = importlib.import_module(module).build_alibi_tensor
        with torch.no_grad():
            return _slopes(build(torch.ones(1, 2, dtype=torch.long), heads, torch.float32), heads)

    return slopes


def _mpt_alibi(heads: int, attn_config: Any) -> list[float]:
    """MPT: ``build_mpt_alibi_tensor(num_heads, sequence_length, alibi_bias_max)``, slope * (j - (n - 1))."""
    import torch
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    bias_max = getattr(attn_config, "alibi_bias_max", 8) if attn_config is not None else 8
    with torch.no_grad():
        return _slopes(build_mpt_alibi_tensor(heads, 2, alibi_bias_max=bias_max), heads)


# --- forwards that pad or may not be padded ---------------------------------------------------------


def _reformer_multiple(config: Any) -> int:
    """Reformer (modeling_reformer's _get_least_common_mult_chunk_len): the least common multiple of the
    chunk lengths of its layer types. Its local attention looks one chunk back circularly, so chunk 0
    of a sequence sees the sequence's tail when it is padded to one multiple, and padding when a longer
    batch pads it further (block 2's keys moved by 8e-5 on the zoo's model)."""
    layers = getattr(config, "attn_layers", None)
    if not layers:
        return 1
    chunks = {"lsh": config.lsh_attn_chunk_length, "local": config.local_attn_chunk_length}
    return math.lcm(*[int(chunks[kind]) for kind in set(layers) if kind in chunks] or [1])


def _funnel_pools(config: Any) -> bool:
    """Funnel where it pools (more than one block: its FunnelAttentionStructure pools the padded batch, so a
    sequence's last pooled position averages its last token with the padding after it, and truncate_seq
    drops the batch's last position, not the sequence's: a sequence's rows alone differed by up to 0.40)."""
    return len(getattr(config, "block_sizes", ()) or ()) > 1


def _always(_: Any) -> bool:
    """CPM-Ant (CpmAntModel.forward takes no attention mask; its _prepare_attention_mask counts the ids != 0
    as a sequence's length and takes the LAST that many positions as the real ones, left padding, so a
    right-padded sequence would attend to its padding: its rows differed by 186)."""
    return True


#: attention class -> its model's file, whose ``apply_rotary_pos_emb`` its own forward calls
_FILE_ROTARY = {
    "FalconAttention": "transformers.models.falcon.modeling_falcon",
    "GPTNeoXJapaneseAttention": "transformers.models.gpt_neox_japanese.modeling_gpt_neox_japanese",
}

#: model_type -> its quirks; every other type has none (``QUIRKS.get(model_type, NONE)``)
QUIRKS: dict[str, Quirks] = {
    "bloom": Quirks(split=_bloom, alibi=_build_alibi("transformers.models.bloom.modeling_bloom")),
    "cpmant": Quirks(prefix="prompt_length", unpadded=_always),
    "deberta": Quirks(fused_names=("in_proj",), split=_deberta),
    "falcon": Quirks(
        split=_falcon, rotation=_cos_sin, alibi=_build_alibi("transformers.models.falcon.modeling_falcon")
    ),
    "funnel": Quirks(unpadded=_funnel_pools),
    "gpt_neox_japanese": Quirks(split=_neox_japanese, rotation=_cos_sin),
    "mpt": Quirks(split=_thirds, alibi=_mpt_alibi),
    "openai-gpt": Quirks(split=_thirds),
    "reformer": Quirks(split=_shared_query_key, pad_multiple=_reformer_multiple),
    "roformer": Quirks(rotation=_sinusoidal_pairs),
    "xlnet": Quirks(parameters=("rel_attn", _xlnet), query_bias=("XLNetRelativeAttention", "r_w_bias")),
}
NONE = Quirks()


def quirks(model_type: str) -> Quirks:
    """The quirks of a model type (none for most)."""
    return QUIRKS.get(model_type, NONE)
