"""How a checkpoint encodes positions, read from the model transformers builds, not from a list of names.

The model is built as a *skeleton*: its parameters on the meta device (no memory, no weights
read) and its buffers real, so the rotary frequencies it computes at construction
(``inv_freq``, after any llama3 / yarn / linear scaling and partial-rotary cut) are the
model's own. From that skeleton:

- **learned / fixed table**: the module that embeds positions (an ``nn.Embedding``, or a
  sinusoidal module, whose name says "pos"), with its offset: an ``offset`` attribute (OPT,
  BART: 2) or a padding index p (RoBERTa, MPNet: positions start at p + 1);
- **rope**: every rotary module's frequencies and attention scaling (Gemma 3 and ModernBERT
  keep one set per layer type), which layers use which set (``config.layer_types``), and the
  NoPE layers whose attention module says ``use_rope = False`` (SmolLM3, Llama 4); GPT-J and
  CodeGen keep a sin/cos table instead of frequencies, read the same way;
- **alibi**: slopes computed by the model's own ``build_*alibi_tensor`` function (BLOOM, MPT,
  Falcon with ``alibi: true``);
- **relative**: a relative-bias module (T5 buckets, DeBERTa, MPNet), noted beside any table;
- **none**: no position module at all (Mamba, Jamba's attention).

The result is a small JSON-ready record, cached per checkpoint so that warm runs import
neither torch nor transformers.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError

KINDS = ("learned", "fixed", "rope", "alibi", "relative", "none")
_POSITION_NAME = re.compile(r"(^|[._])(position_embeddings?|wpe|embed_positions|pos_embed(dings)?)$")
_RELATIVE_NAME = re.compile(r"relative_attention_bias|rel_embeddings|relative_positional|distance_embedding")


@dataclass
class RopeSet:
    """One set of rotary frequencies: angle of frequency k at position i is i * inv_freq[k]."""

    inv_freq: list[float]
    scaling: float = 1.0
    rope_type: str = "default"

    def vectors(self, positions: np.ndarray) -> np.ndarray:
        """(n, 2K): interleaved scaling * (cos, sin) of i * inv_freq[k], as GEOMETRY.md orders RoPE."""
        frequencies = np.asarray(self.inv_freq, dtype=np.float32)
        # The model multiplies in float32; so do we, then widen.
        angles = (np.asarray(positions, dtype=np.float32)[:, None] * frequencies[None, :]).astype(np.float64)
        table = np.empty((angles.shape[0], 2 * frequencies.size))
        table[:, 0::2] = np.cos(angles) * self.scaling
        table[:, 1::2] = np.sin(angles) * self.scaling
        return table


@dataclass
class Mechanism:
    """What a checkpoint's positions are, with the parameters read from its model.

    kind : learned | fixed | rope | alibi | relative | none (the mechanism of the position row).
    table : name of the absolute table's tensor (learned) or buffer (fixed); ``table_values``
        holds a fixed table's rows, which no checkpoint file stores.
    offset : the table row of position 0.
    rope : named frequency sets; ``rope_main`` the set of the position row; ``rope_layers``
        the set each attention layer uses (None: a NoPE layer).
    alibi_slopes : one slope per head.
    relative : a description of a relative scheme, also when it sits beside a table.
    layers : number of blocks whose hidden states the forward pass returns.
    attention_layers : the blocks (1-based) that hold an attention module.
    qk_weights : per block, [query weight, key weight, layout] tensor names of the separate
        projections that read the table (layout "linear" is (out, in); "fused-conv1d" is GPT-2's
        (in, 3h) [Q | K | V]); empty where the projections are fused otherwise.
    parameters, buffers : sizes in numbers, for the memory estimate.
    """

    kind: str
    architecture: str
    model_type: str
    layers: int
    hidden_size: int
    table: str = ""
    table_shape: tuple[int, ...] = ()
    table_values: list[list[float]] | None = None
    offset: int = 0
    rope: dict[str, RopeSet] = field(default_factory=dict)
    rope_main: str = ""
    rope_layers: list[str | None] = field(default_factory=list)
    alibi_slopes: list[float] = field(default_factory=list)
    relative: str = ""
    attention_layers: list[int] = field(default_factory=list)
    qk_weights: list[list[str]] = field(default_factory=list)
    parameters: int = 0
    buffers: int = 0
    notes: list[str] = field(default_factory=list)

    # --- what the scores need -----------------------------------------------------------------

    @property
    def has_table(self) -> bool:
        return self.kind in ("learned", "fixed")

    @property
    def has_vectors(self) -> bool:
        """Whether there is a position row: a table, RoPE or ALiBi (relative and none have none)."""
        return self.kind in ("learned", "fixed", "rope", "alibi")

    @property
    def max_positions(self) -> int | None:
        if self.has_table and self.table_shape:
            return int(self.table_shape[0]) - self.offset
        return None

    def implied_vectors(self, positions: np.ndarray) -> np.ndarray:
        """Position vectors of a mechanism without a stored table (rope, alibi)."""
        index = np.asarray(positions, dtype=np.int64).reshape(-1)
        if self.kind == "rope":
            return self.rope[self.rope_main].vectors(index)
        if self.kind == "alibi":
            return index.astype(np.float64)[:, None] * np.asarray(self.alibi_slopes, dtype=np.float64)[None, :]
        if self.kind == "fixed" and self.table_values is not None:
            table = np.asarray(self.table_values, dtype=np.float64)
            rows = index + self.offset
            if rows.size and rows.max() >= table.shape[0]:
                raise InputError(
                    f"the fixed table has {table.shape[0] - self.offset} positions but position {int(index.max())} "
                    "was asked for; lower --max-positions"
                )
            return table[rows]
        raise InputError(f"{self.architecture} has no position vectors: its positions are {self.describe_kind()}")

    def describe_kind(self) -> str:
        if self.kind == "relative":
            return f"relative ({self.relative})"
        if self.kind == "none":
            return "not encoded by any module (no absolute table, rotary or ALiBi)"
        return self.kind

    def summary(self) -> dict[str, Any]:
        """The JSON record of ``position_mechanism`` (parameters, not arrays)."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.has_table:
            out.update(table=self.table, rows=self.table_shape[0] if self.table_shape else None, offset=self.offset)
            out["width"] = self.table_shape[1] if len(self.table_shape) > 1 else None
        if self.kind == "rope" or self.rope:
            out["rope"] = {
                name: {
                    "dims": 2 * len(rope.inv_freq),
                    "base": implied_base(rope.inv_freq),
                    "rope_type": rope.rope_type,
                    "attention_scaling": rope.scaling,
                }
                for name, rope in self.rope.items()
            }
            out["rope_main"] = self.rope_main
            out["rope_layers"] = self.rope_layers
            nope = [index + 1 for index, name in enumerate(self.rope_layers) if name is None]
            if nope:
                out["nope_layers"] = nope
        if self.kind == "alibi":
            out["alibi_slopes"] = self.alibi_slopes
            out["heads"] = len(self.alibi_slopes)
        if self.relative:
            out["relative"] = self.relative
        return out

    def to_json(self) -> dict[str, Any]:
        record = asdict(self)
        record["rope"] = {name: asdict(rope) for name, rope in self.rope.items()}
        record["table_shape"] = list(self.table_shape)
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Mechanism:
        record = dict(record)
        record["rope"] = {name: RopeSet(**rope) for name, rope in record.get("rope", {}).items()}
        record["table_shape"] = tuple(record.get("table_shape", ()))
        return cls(**record)


def implied_base(inv_freq: list[float]) -> float | None:
    """The base b of inv_freq[k] = b^(-2k/d) when the frequencies follow it (unscaled RoPE), else None."""
    frequencies = np.asarray(inv_freq, dtype=np.float64)
    if frequencies.size < 2 or not frequencies[0] > 0 or not frequencies[1] > 0:
        return None
    d = 2 * frequencies.size
    base = float((frequencies[0] / frequencies[1]) ** (d / 2))
    expected = frequencies[0] * base ** (-2.0 * np.arange(frequencies.size) / d)
    if not np.allclose(frequencies, expected, rtol=1e-4):
        return None  # scaled (llama3, yarn): no single base
    return float(f"{base:.6g}")  # float32 frequencies carry ~7 significant digits


# --- detection on a skeleton ------------------------------------------------------------------------


def layer_list(model: Any, config: Any) -> list[Any]:
    """The model's blocks: the shallowest ModuleList as long as the config's layer count (else the longest)."""
    import torch

    wanted = getattr(config, "num_hidden_layers", None)
    lists = [
        (name.count("."), -len(module), name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) > 0
    ]
    if not lists:
        return []
    exact = [item for item in lists if len(item[3]) == wanted]
    chosen = min(exact or lists, key=lambda item: (item[0], item[1]) if exact else (item[1], item[0]))
    return list(chosen[3])


def detect(model: Any, config: Any, prefix: str = "") -> Mechanism:
    """The position mechanism of a skeleton model (parameters on meta, buffers real); ``prefix`` is
    the skeleton's place in the checkpoint's tensor names ('encoder.' for an encoder-decoder)."""
    import torch

    architecture = (list(getattr(config, "architectures", None) or []) or [type(model).__name__])[0]
    blocks = layer_list(model, config)
    n_blocks = getattr(config, "num_hidden_layers", None)
    if not isinstance(n_blocks, int) or isinstance(n_blocks, bool):
        n_blocks = len(blocks)  # ALBERT shares one block among num_hidden_layers: the config counts
    hidden = _hidden_size(config)
    mechanism = Mechanism(
        kind="none",
        architecture=str(architecture),
        model_type=str(getattr(config, "model_type", "")),
        layers=n_blocks,
        hidden_size=hidden,
        parameters=int(sum(p.numel() for p in model.parameters())),
        buffers=int(sum(b.numel() for b in model.buffers())),
    )
    module_of_layer = _attention_layers(blocks)
    mechanism.attention_layers = sorted(module_of_layer)
    mechanism.qk_weights = _qk_weights(model, blocks, prefix) if len(blocks) == n_blocks else []

    # Relative schemes (noted beside a table, or the mechanism itself).
    relative = sorted({_relative_kind(name) for name, _ in model.named_modules() if _RELATIVE_NAME.search(name)})
    relative = [r for r in relative if r]
    pet = getattr(config, "position_embedding_type", None)
    if isinstance(pet, str) and pet.startswith("relative"):
        relative.append(f"{pet} distance embeddings")
    mechanism.relative = ", ".join(relative)

    # ALiBi: the model's own slope function, unless the config switches it off (Falcon, MPT).
    slopes = _alibi_slopes(model, config)
    if slopes is not None:
        mechanism.kind = "alibi"
        mechanism.alibi_slopes = slopes
        return mechanism

    # Rotary: frequency buffers, or a sin/cos table (GPT-J, CodeGen).
    rope_sets = _rope_sets(model, config)
    if rope_sets:
        mechanism.kind = "rope"
        mechanism.rope = rope_sets
        mechanism.rope_main = _main_set(rope_sets)
        mechanism.rope_layers = _rope_layers(config, rope_sets, mechanism.rope_main, n_blocks, module_of_layer)
        if len(rope_sets) > 1:
            mechanism.notes.append(
                f"layers use {len(rope_sets)} RoPE sets ({', '.join(rope_sets)}); the position row is {mechanism.rope_main}'s"
            )
        if all(name is None for name in mechanism.rope_layers) and mechanism.rope_layers:
            mechanism.notes.append("every attention layer skips its rotary embedding (NoPE)")
        return mechanism

    # An absolute table: learned (a parameter, read from the checkpoint) or fixed (a buffer).
    table = _position_table(model)
    if table is not None:
        name, module, tensor, is_buffer = table
        mechanism.kind = "fixed" if is_buffer else "learned"
        mechanism.table = prefix + name
        mechanism.table_shape = tuple(int(s) for s in tensor.shape)
        mechanism.offset = _offset(module)
        if is_buffer:
            mechanism.table_values = tensor.detach().to(torch.float64).cpu().numpy().tolist()
        return mechanism

    if mechanism.relative:
        mechanism.kind = "relative"
    return mechanism


def _hidden_size(config: Any) -> int:
    for key in ("hidden_size", "d_model", "n_embd", "dim"):
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    text = getattr(config, "text_config", None)
    return _hidden_size(text) if text is not None else 0


def _relative_kind(name: str) -> str:
    if "relative_attention_bias" in name:
        return "bucketed relative attention bias"
    if "rel_embeddings" in name:
        return "disentangled relative position embeddings"
    if "distance_embedding" in name:
        return "relative distance embeddings"
    return "relative positions"


def _attention_layers(blocks: list[Any]) -> dict[int, list[Any]]:
    """Block number (1-based) -> the modules in it whose class is an attention (Jamba mixes in Mamba blocks)."""
    out: dict[int, list[Any]] = {}
    for index, block in enumerate(blocks):
        found = [
            module
            for name, module in block.named_modules()
            if name and re.search(r"attention|attn", type(module).__name__, re.IGNORECASE)
        ]
        if found:
            out[index + 1] = found
    return out


_QUERY_NAMES = ("query", "q_proj", "q_lin", "q", "query_proj", "wq")
_KEY_NAMES = ("key", "k_proj", "k_lin", "k", "key_proj", "wk")


def _qk_weights(model: Any, blocks: list[Any], prefix: str = "") -> list[list[str]]:
    """Tensor names of each block's query and key maps, found by module name and type."""
    if not blocks:
        return []
    path_of = {id(module): prefix + name for name, module in model.named_modules()}
    out = []
    for block in blocks:
        query = key = fused = ""
        for name, module in block.named_modules():
            last = name.rsplit(".", 1)[-1].lower()
            kind = type(module).__name__
            if kind == "Linear" and last in _QUERY_NAMES and not query:
                query = f"{path_of[id(module)]}.weight"
            elif kind == "Linear" and last in _KEY_NAMES and not key:
                key = f"{path_of[id(module)]}.weight"
            elif kind == "Conv1D" and last == "c_attn" and not fused:
                fused = f"{path_of[id(module)]}.weight"
        if query and key:
            out.append([query, key, "linear"])
        elif fused:
            out.append([fused, fused, "fused-conv1d"])
        else:
            return []  # fused in another layout: no P W_Q rows, the captured rows still come
    return out


def _alibi_slopes(model: Any, config: Any) -> list[float] | None:
    import sys

    import torch

    flag = getattr(config, "alibi", None)
    attn_config = getattr(config, "attn_config", None)
    if attn_config is not None:
        flag = attn_config.get("alibi") if isinstance(attn_config, dict) else getattr(attn_config, "alibi", flag)
    if flag is False:
        return None
    namespace = vars(sys.modules[type(model).__module__])
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    if not isinstance(heads, int):
        return None
    for name, function in namespace.items():
        if not callable(function) or "alibi" not in name.lower() or not name.startswith("build"):
            continue
        with torch.no_grad():
            if "mpt" in name:
                bias_max = getattr(attn_config, "alibi_bias_max", 8) if attn_config is not None else 8
                values = function(heads, 2, alibi_bias_max=bias_max)  # (1?, H, 1, 2): slope * (j - (n - 1))
            else:
                values = function(torch.ones(1, 2, dtype=torch.long), heads, torch.float32)  # (H, 1, 2)
        values = values.reshape(heads, -1).to(torch.float64)
        return (values[:, -1] - values[:, 0]).tolist()
    return None


def _rope_sets(model: Any, config: Any) -> dict[str, RopeSet]:
    import torch

    sets: dict[str, RopeSet] = {}
    for _, module in model.named_modules():
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
                    [float(x) for x in buffer.detach().to(torch.float32).cpu().reshape(-1)],
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
            sets["rotary"] = RopeSet([float(x) for x in torch.atan2(sin, cos)], 1.0, "default")
    return sets


def _main_set(sets: dict[str, RopeSet]) -> str:
    if "full_attention" in sets:
        return "full_attention"
    return next(iter(sets))


def _rope_layers(
    config: Any, sets: dict[str, RopeSet], main: str, n_blocks: int, attention: dict[int, list[Any]]
) -> list[str | None]:
    layer_types = getattr(config, "layer_types", None)
    out: list[str | None] = []
    for block in range(1, n_blocks + 1):
        if block not in attention:
            out.append(None)
            continue
        name: str | None = main
        if isinstance(layer_types, list | tuple) and len(layer_types) >= block and layer_types[block - 1] in sets:
            name = str(layer_types[block - 1])
        if any(getattr(module, "use_rope", None) in (False, 0) for module in attention[block]):
            name = None
        out.append(name)
    return out


def _position_table(model: Any) -> tuple[str, Any, Any, bool] | None:
    import torch

    candidates = []
    for name, module in model.named_modules():
        if not _POSITION_NAME.search(name) or "token_type" in name:
            continue
        weight = getattr(module, "weight", None)
        weights = getattr(module, "weights", None)  # fixed sinusoidal modules (XGLM, M2M-100)
        if isinstance(weight, torch.Tensor) and weight.ndim == 2:
            is_buffer = not isinstance(weight, torch.nn.Parameter) and weight.device.type != "meta"
            candidates.append((f"{name}.weight", module, weight, is_buffer))
        elif isinstance(weights, torch.Tensor) and weights.ndim == 2 and weights.device.type != "meta":
            candidates.append((f"{name}.weights", module, weights, True))
    return candidates[0] if candidates else None


def _offset(module: Any) -> int:
    offset = getattr(module, "offset", None)
    if isinstance(offset, int) and not isinstance(offset, bool):
        return offset
    padding = getattr(module, "padding_idx", None)
    if isinstance(padding, int) and not isinstance(padding, bool):
        return padding + 1
    return 0


def check_rope_matches(rope: RopeSet, cos: np.ndarray, sin: np.ndarray) -> float:
    """Largest gap between our vectors and a model's (cos, sin) tables of the first K columns (tests)."""
    ours = rope.vectors(np.arange(cos.shape[0]))
    k = len(rope.inv_freq)
    return float(max(np.abs(ours[:, 0::2] - cos[:, :k]).max(), np.abs(ours[:, 1::2] - sin[:, :k]).max()))
