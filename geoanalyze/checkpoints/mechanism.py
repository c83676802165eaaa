"""How a checkpoint encodes positions, read from the model transformers builds, not from a list of names.

The model is built as a *skeleton*: its parameters on the meta device (no memory, no weights
read) and its buffers real, so the rotary frequencies it computes at construction
(``inv_freq``, after any llama3 / yarn / linear scaling and partial-rotary cut) are the
model's own. :func:`detect` reads from it one of the kinds of :mod:`~geoanalyze.checkpoints.kinds`
(ALiBi, rotary, an absolute table, relative only, none; docs/checkpoints.md, "How the mechanism
is read", says how each is found).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from . import kinds
from .kinds import LearnedTable, Mechanism, RopeSet, TableMechanism, axial_error, axial_table, check_rope_matches
from .observe import Observed, caller_rope, observe
from .quirks import KEY_NAMES, QUERY_NAMES, quirks

__all__ = [  # the kinds tests and callers reach through here beside detection's own names
    "LearnedTable",
    "Mechanism",
    "TableMechanism",
    "axial_table",
    "blocks_run",
    "caller_rope",
    "check_rope_matches",
    "config_attr",
    "detect",
    "layer_list",
]

_POSITION_NAME = re.compile(
    r"(^|[._])(position_embeddings?|wpe|embed_positions|pos_embed(dings)?|positions_embed|pos_encoding)$"
)
_RELATIVE_NAME = re.compile(r"relative_attention_bias|rel_embeddings|relative_positional|distance_embedding")
#: classes of relative schemes that no module name marks (XLNet, Funnel, CPM-Ant) -> what to call them
_RELATIVE_CLASSES = (
    (re.compile(r"RelativeAttention$|RelMultiheadAttention$"), "relative positional attention"),
    (re.compile(r"SegmentPositionEmbedding$"), "bucketed relative position bias"),
)


# --- detection on a skeleton ------------------------------------------------------------------------


def config_attr(config: Any, key: str, default: Any = None, layer: int | None = None) -> Any:
    """``config.<key>``, reading a per-layer attribute per layer.

    A heterogeneous config (``per_layer_config``: DOTS.3's heads differ by layer) refuses a global
    read of an attribute its layers set apart. Such an attribute is read from layer ``layer``
    (0-based) when one is named, else from every layer: their one value where they all agree,
    ``default`` where they differ (the caller has no single value to use). Any other attribute is
    ``getattr(config, key, default)``.
    """
    try:
        per_layer = getattr(config, "per_layer_attributes", None)
    except Exception:  # a config object of another kind
        per_layer = None
    if not per_layer or key not in per_layer:
        return getattr(config, key, default)
    layers = config.per_layer_config
    if layer is not None:
        return getattr(layers[layer], key, default)
    values = [getattr(layers[index], key, default) for index in range(len(layers))]
    return values[0] if values and all(value == values[0] for value in values) else default


def layer_list(model: Any, config: Any) -> list[Any]:
    """The model's blocks: the shallowest ModuleList as long as the config's layer count (else the longest);
    of lists alike, the one beside the token embeddings (:func:`_text_depth`)."""
    import torch

    wanted = _config_layers(config) or _embedding_stack_layers(model)
    lists = [
        (name.count("."), -len(module), name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) > 0
    ]
    if not lists:
        return []
    exact = [item for item in lists if len(item[3]) == wanted]
    # LongCat-Flash's num_hidden_layers counts two attention calls per layer (its num_layers the layers):
    # a list of num_layers blocks shallower than every list of num_hidden_layers is the blocks (with one
    # layer, each layer's self_attn pair is the only list of 2).
    layers = config_attr(config, "num_layers", None)
    if isinstance(layers, int) and not isinstance(layers, bool) and layers != wanted:
        top = min((item[0] for item in exact), default=None)
        shallower = [item for item in lists if len(item[3]) == layers and (top is None or item[0] < top)]
        exact = shallower or exact
    # Without a list of the configured length, the shallowest: the experts of one block are deeper than
    # the blocks.
    text = _text_depth(model)
    chosen = min(exact or lists, key=lambda item: (item[0], item[1], -text(item[2])))
    return list(chosen[3])


def blocks_run(config: Any, blocks: Sequence[Any]) -> int:
    """The blocks a forward runs, in the order they run: the config's layer count, which exceeds the
    listed blocks where modules are reused (ALBERT shares one block among num_hidden_layers; HRM runs
    two stacks of two layers over H and L cycles, 16 blocks), else the listed blocks."""
    n_blocks = config_attr(config, "num_hidden_layers", None)
    if not isinstance(n_blocks, int) or isinstance(n_blocks, bool):
        return len(blocks)
    if n_blocks != len(blocks) and len(blocks) in (config_attr(config, "num_layers", None), _decoder_layers(config)):
        # LongCat-Flash: num_hidden_layers counts its 2 attention calls per layer; a seq2seq decoder alone
        # (BlenderbotForCausalLM): num_hidden_layers is its config's encoder_layers
        return len(blocks)
    return n_blocks


def _decoder_layers(config: Any) -> Any:
    """The decoder's layer count of a seq2seq config read as a decoder alone (is_decoder, not an encoder-decoder)."""
    alone = config_attr(config, "is_decoder", False) and not config_attr(config, "is_encoder_decoder", False)
    return config_attr(config, "decoder_layers", None) if alone else None


def _config_layers(config: Any) -> Any:
    """The config's layer count; a composite config without one, its text config's (MusicFlamingo,
    AudioFlamingo 3: their audio encoder has as many or more layers than their language model)."""
    wanted = config_attr(config, "num_hidden_layers", None)
    if wanted is None and callable(config_attr(config, "get_text_config", None)):
        try:
            wanted = getattr(config.get_text_config(), "num_hidden_layers", None)
        except ValueError:  # several text configs: ambiguous, as transformers says
            return None
    return wanted


def _embedding_stack_layers(model: Any) -> Any:
    """The layer count of the sub-model that holds the token embeddings, by its own config, for a config that
    states none: BLT keeps its four stacks' sizes in sub-configs, and its bytes enter the local encoder
    (``get_input_embeddings()`` is local_encoder.embed_tokens), whose layers are the ones at the input's
    positions (the global transformer's run over patches). None without such a sub-model."""
    for owner in _embedding_owners(model):
        layers = getattr(getattr(model.get_submodule(owner), "config", None), "num_hidden_layers", None)
        if isinstance(layers, int) and not isinstance(layers, bool):
            return layers
    return None


def _text_depth(model: Any) -> Callable[[str], int]:
    """name -> how deep the module ``name`` lies inside the sub-model that holds the token embeddings
    (``get_input_embeddings()``): the length of the longest of the embeddings' ancestors that contains it.
    A multimodal model's language_model.layers scores above its audio_tower.layers; in a model of one
    stack every name scores alike."""
    ancestors = [owner + "." for owner in _embedding_owners(model)]
    return lambda name: next((len(prefix) for prefix in ancestors if name.startswith(prefix)), 0)


def _embedding_owners(model: Any) -> list[str]:
    """The names of the modules holding the token embeddings (``get_input_embeddings()``), innermost first;
    [] without token embeddings, or where the getter (remote code) fails."""
    try:
        embeddings = model.get_input_embeddings()
    except Exception:  # no token embeddings, or a getter (remote code) that fails
        return []
    path = next((name for name, module in model.named_modules() if module is embeddings), "")
    parts = path.split(".")[:-1] if path else []
    return [".".join(parts[:count]) for count in range(len(parts), 0, -1)]


def detect(model: Any, config: Any, prefix: str = "") -> Mechanism:
    """The position mechanism of a skeleton model (parameters on meta, buffers real); ``prefix`` is
    the skeleton's place in the checkpoint's tensor names ('encoder.' for an encoder-decoder).
    The kinds are tried in order: ALiBi, rotary, an absolute table, relative only, none."""
    blocks = layer_list(model, config)
    n_blocks = blocks_run(config, blocks)
    attention = _attention_layers(blocks)
    common: dict[str, Any] = {
        "architecture": str((list(config_attr(config, "architectures", None) or []) or [type(model).__name__])[0]),
        "model_type": str(config_attr(config, "model_type", "")),
        "layers": n_blocks,
        "hidden_size": _hidden_size(config) or _input_width(model),
        "relative": _relative_scheme(model, config),
        "attention_layers": _attention_run(attention, len(blocks), n_blocks),
        "qk_weights": _qk_weights(model, blocks, prefix) if len(blocks) == n_blocks else (),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "buffers": int(sum(b.numel() for b in model.buffers())),
    }
    # ALiBi: the model's own slope function, unless the config switches it off (Falcon, MPT).
    slopes = _alibi_slopes(config)
    if slopes is not None:
        return kinds.AlibiMechanism(**common, alibi_slopes=tuple(slopes))
    # Rotary: frequency buffers, or a sin/cos table (GPT-J, CodeGen).
    rope_sets = _rope_sets(model, config, blocks)
    if rope_sets:
        return _rope_mechanism(common, config, rope_sets, n_blocks, attention, observe(model, blocks))
    # An absolute table: learned (a parameter, read from the checkpoint) or fixed (a buffer).
    table = _position_table(model, config)
    if table is not None:
        name, module, tensor, fixed = table
        shape, offset = tuple(int(s) for s in tensor.shape), _offset(model, name, module)
        if not fixed:
            factors = tuple(f"{prefix}{name}.{factor}" for factor, _ in _axial_factors(module))
            return LearnedTable(**common, table=prefix + name, table_shape=shape, offset=offset, factors=factors)
        rows = tensor.detach().double().cpu().numpy().tolist()
        values = tuple(tuple(row) for row in rows)
        return kinds.FixedTable(**common, table=prefix + name, table_shape=shape, offset=offset, table_values=values)
    return kinds.RelativeMechanism(**common) if common["relative"] else kinds.NoMechanism(**common)


def _relative_scheme(model: Any, config: Any) -> str:
    """The relative schemes a model has (noted beside a table, or the mechanism itself), comma-separated."""
    relative = sorted({_relative_kind(name) for name, _ in model.named_modules() if _RELATIVE_NAME.search(name)})
    relative = [r for r in relative if r]
    classes = {type(module).__name__ for module in model.modules()}
    relative += sorted({text for pattern, text in _RELATIVE_CLASSES if any(pattern.search(name) for name in classes)})
    pet = config_attr(config, "position_embedding_type", None)
    if isinstance(pet, str) and pet.startswith("relative"):
        relative.append(f"{pet} distance embeddings")
    return ", ".join(relative)


def _rope_mechanism(
    common: dict[str, Any],
    config: Any,
    sets: dict[str, RopeSet],
    n_blocks: int,
    attention: dict[int, list[Any]],
    seen: Observed,
) -> kinds.RopeMechanism:
    main = _main_set(sets)
    layers = _rope_layers(config, sets, main, n_blocks, attention, seen)
    notes = []
    if len(sets) > 1:
        notes.append(f"layers use {len(sets)} RoPE sets ({', '.join(sets)}); the position row is {main}'s")
    nope = [block for block in sorted(attention) if block <= len(layers) and layers[block - 1] is None]
    if attention and len(nope) == len(attention):
        notes.append("every attention layer skips its rotary embedding (NoPE)")
    elif nope:
        notes.append(f"blocks {', '.join(map(str, nope))} apply no rotary embedding (NoPE); the others use RoPE")
    return kinds.RopeMechanism(**common, notes=tuple(notes), rope=sets, rope_main=main, rope_layers=tuple(layers))


def _hidden_size(config: Any, depth: int = 0) -> int:
    """The width of the hidden states: the config's own, else its text config's (``get_text_config()``),
    else its encoder's (T5Gemma keeps its sizes in encoder and decoder sub-configs)."""
    width = _config_int(config, ("hidden_size", "d_model", "n_embd", "dim"))
    if width is not None:
        return width
    if depth > 2:
        return 0
    text = config.get_text_config() if callable(config_attr(config, "get_text_config", None)) else None
    for sub in (text, config_attr(config, "text_config", None), config_attr(config, "encoder", None)):
        if sub is not None and sub is not config:
            width = _hidden_size(sub, depth + 1)
            if width:
                return width
    return 0


def _input_width(model: Any) -> int:
    """The width of the model's token embeddings (``get_input_embeddings()``), where its text positions
    enter: the width of a config that states none of its own (BLT keeps its sizes in four sub-configs, and
    its tokens enter, with the rotary positions of its text, in the local encoder's width); 0 if none."""
    try:
        embeddings = model.get_input_embeddings()
    except Exception:  # no token embeddings, or a getter (remote code) that fails: no width from them
        return 0
    width = getattr(embeddings, "embedding_dim", None)
    return width if isinstance(width, int) and not isinstance(width, bool) else 0


def _relative_kind(name: str) -> str:
    if "relative_attention_bias" in name:
        return "bucketed relative attention bias"
    if "rel_embeddings" in name:
        return "disentangled relative position embeddings"
    if "distance_embedding" in name:
        return "relative distance embeddings"
    return "relative positions"


def _attention_layers(blocks: list[Any]) -> dict[int, list[Any]]:
    """Block number (1-based) -> the modules in it whose class is an attention (Jamba mixes in Mamba blocks);
    the block itself where it is one (XLM and FlauBERT keep their attentions in a list of their own); or
    that hold a query and a key projection side by side, whatever their class's name: xLSTM's mLSTM layer
    scores its values by q . k under exponential gates, a gated linear attention (the capture hooks the same
    projections, so the two agree on which blocks have queries and keys)."""
    out: dict[int, list[Any]] = {}
    for index, block in enumerate(blocks):
        found = [
            module
            for _, module in block.named_modules()
            if re.search(r"attention|attn|MLA$", type(module).__name__, re.IGNORECASE) or _holds_query_and_key(module)
        ]
        if found:
            out[index + 1] = found
    return out


def _attention_run(attention: dict[int, list[Any]], listed: int, n_blocks: int) -> tuple[int, ...]:
    """The blocks a forward runs that attend: the listed ones that hold an attention, and, where the forward
    runs more blocks than it lists (ALBERT's shared block, HRM's L and H stacks over their cycles), every
    block past them when each listed block attends (each run block runs one of the listed blocks' modules,
    as the capture counts them: the block of an attention call is its rank)."""
    run = range(listed + 1, n_blocks + 1) if listed and len(attention) == listed else ()
    return (*sorted(attention), *run)


def _holds_query_and_key(module: Any) -> bool:
    """Whether the module has a query and a key Linear among its own children (by QUERY_NAMES, KEY_NAMES)."""
    import torch

    linear = {name.lower() for name, child in module.named_children() if isinstance(child, torch.nn.Linear)}
    return bool(linear.intersection(QUERY_NAMES)) and bool(linear.intersection(KEY_NAMES))


def _qk_weights(model: Any, blocks: list[Any], prefix: str = "") -> tuple[tuple[str, str, str], ...]:
    """Tensor names of each block's query and key maps, found by module name and type."""
    if not blocks:
        return ()
    path_of = {id(module): prefix + name for name, module in model.named_modules()}
    out: list[tuple[str, str, str]] = []
    for block in blocks:
        query = key = fused = ""
        for name, module in block.named_modules():
            last = name.rsplit(".", 1)[-1].lower()
            kind = type(module).__name__
            if kind == "Linear" and last in QUERY_NAMES and not query:
                query = f"{path_of[id(module)]}.weight"
            elif kind == "Linear" and last in KEY_NAMES and not key:
                key = f"{path_of[id(module)]}.weight"
            elif kind == "Conv1D" and last == "c_attn" and not fused:
                fused = f"{path_of[id(module)]}.weight"
        if query and key:
            out.append((query, key, "linear"))
        elif fused:
            out.append((fused, fused, "fused-conv1d"))
        else:
            return ()  # fused in another layout: no P W_Q rows, the captured rows still come
    return tuple(out)


def _alibi_slopes(config: Any) -> list[float] | None:
    """The slopes of the model type's own ALiBi function (its quirks' ``alibi``), unless the config turns it off."""
    rule = quirks(str(config_attr(config, "model_type", ""))).alibi
    flag = config_attr(config, "alibi", None)
    attn_config = config_attr(config, "attn_config", None)
    if attn_config is not None:
        flag = attn_config.get("alibi") if isinstance(attn_config, dict) else getattr(attn_config, "alibi", flag)
    heads = config_attr(config, "num_attention_heads", None) or config_attr(config, "n_head", None)
    if rule is None or flag is False or not isinstance(heads, int):
        return None
    return rule(heads, attn_config)


def _owner(model: Any, blocks: list[Any]) -> tuple[Any, str] | None:
    """(module, attribute) of the module that holds the blocks' list as its attribute."""
    import torch

    if not blocks:
        return None
    for module in model.modules():
        for attribute, child in module.named_children():
            if isinstance(child, torch.nn.ModuleList) and len(child) == len(blocks) and child[0] is blocks[0]:
                return module, attribute
    return None


def _stack_first(model: Any, blocks: list[Any]) -> list[Any]:
    """The model's modules, those of the module that holds the blocks first: of two rotary embeddings of
    one name, the blocks' own (BLT's local_encoder.rotary_emb, which rotates the byte-level queries and
    keys of its layers, not the patcher's or the global transformer's, each of their own config)."""
    modules = list(model.modules())
    owner = _owner(model, blocks)
    if owner is None or owner[0] is model:
        return modules
    inside = list(owner[0].modules())
    seen = {id(module) for module in inside}
    return inside + [module for module in modules if id(module) not in seen]


def _rope_sets(model: Any, config: Any, blocks: list[Any] | None = None) -> dict[str, RopeSet]:
    import torch

    sets: dict[str, RopeSet] = {}
    for module in _stack_first(model, blocks or []):
        for buffer_name, buffer in module.named_buffers(recurse=False):
            if not buffer_name.endswith("inv_freq") or buffer_name.endswith("original_inv_freq"):
                continue
            if buffer.device.type == "meta":
                continue
            prefix = buffer_name[: -len("inv_freq")].rstrip("_")
            scaling = getattr(module, f"{prefix}_attention_scaling" if prefix else "attention_scaling", 1.0)
            rope_type = getattr(module, "rope_type", "default")
            if isinstance(rope_type, dict):
                rope_type = rope_type.get(prefix, "default")
            key = prefix or "rotary"
            if key not in sets:
                sets[key] = RopeSet(
                    tuple(float(x) for x in buffer.detach().to(torch.float32).cpu().reshape(-1)),
                    float(scaling),
                    str(rope_type),
                )
        # GPT-J and CodeGen keep a (positions, rotary_dim) buffer of [sin | cos]; RoFormer a sinusoidal
        # table of the same layout that it builds with create_weight() and uses to rotate.
        table = None
        if isinstance(getattr(module, "embed_positions", None), torch.Tensor) and hasattr(module, "pos_embd_dim"):
            table = module.embed_positions
        elif hasattr(module, "create_weight") and hasattr(config, "rotary_value"):
            table = module.create_weight()
        if table is not None and table.device.type != "meta" and not sets:
            half = table.shape[-1] // 2
            sin, cos = table[1, :half].double(), table[1, half:].double()
            sets["rotary"] = RopeSet(tuple(float(x) for x in torch.atan2(sin, cos)), 1.0, "default")
    return sets


def _main_set(sets: dict[str, RopeSet]) -> str:
    if "full_attention" in sets:
        return "full_attention"
    return next(iter(sets))


def _rope_layers(
    config: Any,
    sets: dict[str, RopeSet],
    main: str,
    n_blocks: int,
    attention: dict[int, list[Any]],
    seen: Observed,
) -> list[str | None]:
    """The RoPE set of each block; None for a block without attention or a NoPE one: the config gives it
    none, its attention module says so (``use_rope``), a two-token pass sees it handed no rotary tables or
    its attention receive a query that does not derive from them (:func:`~.observe.observe`)."""
    layer_types = config_attr(config, "layer_types", None)
    out: list[str | None] = []
    listed = max(attention, default=0)
    for block in range(1, n_blocks + 1):
        if block > listed and out and n_blocks > listed:
            # a block run by a reused module (ALBERT, HRM's stacks over cycles): it runs one of the listed
            # blocks' attention modules, so it rotates as they all do; blocks that differ leave it unknown
            run = {name for index, name in enumerate(out) if index + 1 in attention}
            out.append(run.pop() if len(run) == 1 else None)
            continue
        if block not in attention:
            out.append(None)
            continue
        name: str | None = main
        if isinstance(layer_types, list | tuple) and len(layer_types) >= block and layer_types[block - 1] in sets:
            name = str(layer_types[block - 1])
        if _config_nope(config, block - 1) or False in (seen.handed.get(block), seen.rotated.get(block)):
            name = None
        if any(getattr(module, "use_rope", None) in (False, 0) for module in attention[block]):
            name = None
        out.append(name)
    return out


def _config_nope(config: Any, layer: int) -> bool:
    """Whether the config gives layer ``layer`` no RoPE: a per-layer RoPE base of 0 (Granite SWA's
    ``layer_rope_theta``), or no RoPE parameters for its layer type (Beam's NoPE full attention)."""
    thetas = config_attr(config, "layer_rope_theta", None)
    if isinstance(thetas, list | tuple) and layer < len(thetas) and not thetas[layer]:
        return True
    layer_types = config_attr(config, "layer_types", None)
    parameters = config_attr(config, "rope_parameters", None)
    if isinstance(layer_types, list | tuple) and layer < len(layer_types) and isinstance(parameters, dict):
        kind = layer_types[layer]
        return kind in parameters and parameters[kind] is None
    return False


def _position_table(model: Any, config: Any) -> tuple[str, Any, Any, bool] | None:
    """(tensor name, module, table, fixed) of the module that embeds absolute positions: a learned
    parameter (read from the checkpoint), or a fixed table computed as the model computes it."""
    for name, module in model.named_modules():
        if not _POSITION_NAME.search(name) or "token_type" in name:
            continue
        found = _table_of(module, config)
        if found is not None:
            suffix, table, fixed = found
            return f"{name}.{suffix}" if suffix else name, module, table, fixed
    # A table kept as a buffer of a larger module (CTRL's pos_encoding).
    for name, buffer in model.named_buffers():
        if _POSITION_NAME.search(name) and buffer.ndim == 2 and buffer.device.type != "meta":
            return name, model, buffer, True
    return None


def _table_of(module: Any, config: Any) -> tuple[str, Any, bool] | None:
    """A position module's table: its weight, or the sinusoid it computes (values on the host)."""
    import torch

    weight = getattr(module, "weight", None)
    weights = getattr(module, "weights", None)  # fixed sinusoidal modules (XGLM, M2M-100)
    sinusoidal = "sinusoid" in type(module).__name__.lower()
    with torch.no_grad():
        if isinstance(weight, torch.Tensor) and weight.ndim == 2:
            if hasattr(module, "create_weight"):  # computed, never stored (Marian, Pegasus)
                return "weight", module.create_weight(), True
            if sinusoidal and callable(getattr(type(module), "get_embedding", None)):  # FSMT
                rows, width = weight.shape
                return "weight", type(module).get_embedding(rows, width, getattr(module, "padding_idx", None)), True
            learned = isinstance(weight, torch.nn.Parameter) or weight.device.type == "meta"
            return "weight", weight, not learned
        if isinstance(weights, torch.Tensor) and weights.ndim == 2 and weights.device.type != "meta":
            return "weights", weights, True
        factors = _axial_factors(module)
        if factors:  # learned factor tables (Reformer): the table they make, its size only (on meta)
            rows = math.prod(int(factor.shape[axis]) for axis, (_, factor) in enumerate(factors))
            width = sum(int(factor.shape[-1]) for _, factor in factors)
            return "", torch.empty(rows, width, device="meta"), False
        if sinusoidal and not any(True for _ in module.parameters()):  # computed in forward (PegasusX)
            rows = _config_int(config, ("max_position_embeddings", "n_positions")) or 512
            width = getattr(module, "embed_dim", None) or _hidden_size(config)
            table = module(torch.zeros(1, rows, width))
            if isinstance(table, torch.Tensor) and table.shape[-2:] == (rows, width):
                return "", table.reshape(rows, width), True
    return None


def _axial_factors(module: Any) -> list[tuple[str, Any]]:
    """The named parameters of an axial position module (Reformer's AxialPositionEmbeddings: k >= 2 factor
    tables, factor a of shape (1, .., n_a, .., 1, d_a)), in the order its forward concatenates them; [] for
    any other module. The table they make is :func:`axial_table`."""
    factors = list(module.named_parameters())
    return [] if axial_error([tuple(factor.shape) for _, factor in factors]) else factors


def _config_int(config: Any, keys: Sequence[str]) -> int | None:
    for key in keys:
        value = config_attr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _offset(model: Any, name: str, module: Any) -> int:
    """Row of position 0: an ``offset`` attribute (OPT, BART), the row after the padding index (RoBERTa),
    or the first of the position ids its embeddings module keeps (MRA, YOSO, Nystromformer: 2)."""
    import torch

    offset = getattr(module, "offset", None)
    if isinstance(offset, int) and not isinstance(offset, bool):
        return offset
    padding = getattr(module, "padding_idx", None)
    if isinstance(padding, int) and not isinstance(padding, bool):
        return padding + 1
    parent = model.get_submodule(name.rsplit(".", 2)[0]) if name.count(".") >= 2 else model
    ids = getattr(parent, "position_ids", None)
    if isinstance(ids, torch.Tensor) and ids.numel() and ids.device.type != "meta":
        return max(0, int(ids.reshape(-1)[0]))
    return 0
