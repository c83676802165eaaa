"""Forward passes over long sequences: chunked prefill through the model's key/value cache, and their memory.

A sequence longer than the chunk size asked for (``--chunk-size``), or longer than :data:`LONG_SEQUENCE`
tokens where one pass does not fit in memory, is fed to a causal decoder in chunks of C tokens: chunk [s, e) runs with the keys and values of positions 0 .. s - 1 held in
a ``DynamicCache``, ``position_ids`` s .. e - 1 and the attention mask of positions 0 .. e - 1, so each
position sees what it sees in one pass (causal attention never looks ahead). Each chunk's hidden states
and rotated queries and keys are added at their true positions. The attention is the model's own
(``sdpa`` wherever transformers gives the model one: never an n x n matrix held for a whole layer). One pass is the default wherever it fits: fused attention
with a causal mask is as lean in one pass, and on CPU a chunk's masked attention over the cache is slower);
a model that only runs ``eager`` attention holds B x H x C x n scores per layer, which must fit the
memory left (:func:`check_attention`), else the pass is refused before it runs.

A model without a cache the pass can continue (an encoder: its positions see ahead; an encoder-decoder;
a model with padding or pooling rules of its own) runs in one pass, with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InputError

__all__ = [
    "DEFAULT_CHUNK",
    "LONG_SEQUENCE",
    "automatic_chunk",
    "cache_parameter",
    "check_attention",
    "chunk_width",
    "long_memory",
]

#: sequences longer than this run in chunks (where the model has a cache) unless a chunk size is given
LONG_SEQUENCE = 8192
#: the tokens of one chunk of a chunked prefill, unless a chunk size is given
DEFAULT_CHUNK = 2048
#: the attention implementations that never hold a layer's n x n scores
FUSED_ATTENTION = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


def chunk_width(max_length: int, chunk_size: int | None) -> int | None:
    """The tokens per forward asked for (``--chunk-size``) of a pass over sequences of up to ``max_length``:
    None (one pass) where none is asked for or the sequences fit one chunk."""
    whole = isinstance(chunk_size, int) and not isinstance(chunk_size, bool)
    if chunk_size is not None and not (whole and chunk_size >= 1):
        raise InputError(f"--chunk-size must be a whole number of tokens, at least 1, got {chunk_size!r}")
    return chunk_size if chunk_size is not None and max_length > chunk_size else None


def automatic_chunk(max_length: int, chunk: int | None, fits: Callable[[int | None], bool]) -> tuple[int | None, bool]:
    """The chunk of a pass (None: one pass), and whether it was chosen here: the one asked for; else one pass
    where it ``fits`` in memory or the sequences are no longer than :data:`LONG_SEQUENCE`; else
    :data:`DEFAULT_CHUNK` tokens (the memory check that follows refuses a pass that fits neither way)."""
    if chunk is not None or max_length <= LONG_SEQUENCE or fits(None):
        return chunk, False
    return DEFAULT_CHUNK, True


def cache_parameter(model: Any, config: Any, blocks: int, special: bool) -> tuple[str | None, str]:
    """The name of the forward's cache argument (``cache`` in transformers 5.25, ``past_key_values`` before)
    and '' where a chunked prefill continues the model's own pass; (None, why not) otherwise.

    ``special``: the model pads or splits batches by rules of its own (Reformer, Funnel, CPM-Ant)."""
    import inspect

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    name = type(model).__name__
    model_type = str(getattr(config, "model_type", ""))
    if bool(getattr(config, "is_encoder_decoder", False)) or model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return None, f"{name} is not a causal decoder (its positions may see ahead), so it cannot run in chunks"
    causal = [module.is_causal for module in model.modules() if isinstance(getattr(module, "is_causal", None), bool)]
    if not causal or not all(causal):
        return None, f"{name}'s attention is not causal (its positions may see ahead), so it cannot run in chunks"
    if special or not blocks:
        return None, f"{name} pads, pools or splits its sequences by rules of its own, so it cannot run in chunks"
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        parameters = {}  # type: ignore[assignment]
    found = next((key for key in ("cache", "past_key_values") if key in parameters), None)
    if found is None or "position_ids" not in parameters:
        return None, f"{name}'s forward takes no key/value cache and position ids, so it cannot run in chunks"
    return found, ""


def new_cache(config: Any) -> Any:
    """An empty ``DynamicCache`` laid out for the model's layers (full or sliding-window)."""
    from transformers import DynamicCache

    return DynamicCache(config=config)


def _heads(config: Any, hidden: int) -> tuple[int, int]:
    """(query heads, key/value heads) of a config; a head of 64 where it names none."""
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    heads = heads if isinstance(heads, int) and heads > 0 else max(hidden // 64, 1)
    kv = getattr(config, "num_key_value_heads", None)
    return heads, kv if isinstance(kv, int) and kv > 0 else heads


def long_memory(
    config: Any, layers: int, hidden: int, dtype_size: int, shape: tuple[int, int], chunk: int | None
) -> int:
    """Bytes a pass over ``shape`` = (batch, length) holds beyond one forward's hidden states: the float64
    sums of every layer's hidden states and every block's queries and keys (length x width x layers), the
    key/value cache of a chunked pass (in ``dtype_size`` bytes), and one chunk's attention workspace (the
    boolean mask, B x C x n bytes, and a block of fused-attention scores: B x H x C x 256 floats)."""
    batch, length = shape
    heads, kv_heads = _heads(config, hidden)
    head = max(hidden // heads, 1)
    width = chunk or length
    sums = (layers + 1) * length * hidden * 8 + layers * length * (heads + kv_heads) * head * 8
    cache = 2 * layers * batch * length * kv_heads * head * dtype_size if chunk else 0
    workspace = batch * width * length + batch * heads * width * 256 * 4
    return int(sums + cache + workspace)


def eager_scores(config: Any, hidden: int, shape: tuple[int, int], chunk: int | None) -> int:
    """Bytes of one layer's eager attention scores and probabilities, float32: 2 x B x H x C x n."""
    batch, length = shape
    heads, _ = _heads(config, hidden)
    return 2 * batch * heads * (chunk or length) * length * 4


def check_attention(
    model: Any, config: Any, hidden: int, shape: tuple[int, int], chunk: int | None, free: int
) -> list[str]:
    """Refuse (InputError) a model that only runs eager attention where its n x n scores pass the budget,
    the memory ``free`` after the rest of the pass (:func:`eager_scores`); the notes a long pass gets."""
    implementation = str(getattr(config, "_attn_implementation", None) or "eager")
    batch, length = shape
    if implementation in FUSED_ATTENTION or implementation.startswith("geoanalyze_capture_sdpa"):
        return []
    name = type(model).__name__
    needed = eager_scores(config, hidden, shape, chunk)
    what = f"{batch} x {chunk or length} queries x {length} keys"
    if needed > free:
        raise InputError(
            f"{name} runs only eager attention ({implementation}): its attention scores need "
            f"{needed / 2**30:.1f} GiB per layer ({what}) but {free / 2**30:.1f} GiB is free; "
            "lower --max-length or --batch-size"
        )
    if length <= LONG_SEQUENCE and chunk is None:
        return []
    return [
        f"{name} runs only eager attention ({implementation}) at this length: each layer holds its "
        f"{what} attention scores ({needed / 2**30:.2f} GiB, within the {free / 2**30:.1f} GiB free)"
    ]
