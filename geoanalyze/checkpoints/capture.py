"""Queries and keys as attention sees them: per-position sums per block, during a forward pass.

For block l, position i and the padding mask w(b, i) of the batch (1 where sequence b reaches i):

    Q_l(i) = sum_b w(b, i) q_l(b, i),    K_l(i) = sum_b w(b, i) k_l(b, i)

in float64 on the device, all heads side by side (H * d wide); the forward pass divides by the
reach. q and k are taken after the model's own position transform, through transformers'
attention-function interface (:mod:`~geoanalyze.checkpoints.interface`); a model whose attention
bypasses it is captured at its query/key projections (:func:`hook_projections`), rotated as its
own code rotates them where it does (its :class:`~.quirks.Quirks` ``rotation``). What a layer
does to the (batch, length) is undone where it can be and noted (:meth:`QueryKeySums.notes`), or
the block is left out with the reason (:attr:`QueryKeySums.dropped`). docs/checkpoints.md, "How
queries and keys are captured", gives the rules model by model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .interface import CAPTURE_PREFIX, Attention, capture_attention  # noqa: F401  (capture's public names)
from .quirks import KEY_NAMES, QUERY_NAMES, Call, ParameterProjection, Quirks, Rotation, Split, quirks

#: the names of fused query/key/value projections (BLOOM, Falcon, GPT-NeoX-Japanese: query_key_value; MPT: Wqkv;
#: OpenAI-GPT: its Conv1D c_attn), and of shared query/key projections (Reformer's LSH attention: query_key)
FUSED_NAMES = ("query_key_value", "wqkv", "c_attn", "query_key")
#: the names in FUSED_NAMES of a shared query/key projection (the keys are made from the queries)
SHARED_NAMES = ("query_key",)
#: query/key projections by names the position mechanism does not need (its QUERY_NAMES, KEY_NAMES read
#: weights; these only the capture): CPM-Ant's project_q/project_k. Not Funnel's q_head/k_head: its first
#: layer of a pooled group has pooled queries (fewer rows than the input's positions), which the analysis
#: scores on the input's positions
PROJECTION_QUERY_NAMES = (*QUERY_NAMES, "project_q")
PROJECTION_KEY_NAMES = (*KEY_NAMES, "project_k")
T = TypeVar("T")


class QueryKeySums:
    """Per-position sums of queries and keys per block, for the padding mask of the current batch."""

    def __init__(self, block_of: dict[int, int], length: int, by_call: bool = False) -> None:
        self.block_of = block_of  # id of every module inside block l -> l (1-based)
        self.by_call = by_call  # blocks counted as they run: a call's block is its rank (modules reused)
        self.length = length  # the longest sequence: the sums' rows
        self.mask: Any = None  # (B, T) of the batch under way; None between batches
        self.weights: dict[Any, Any] = {}  # the mask as float32, per device
        self.queries: dict[int, Any] = {}  # block -> (length, H * d) float64
        self.keys: dict[int, Any] = {}
        self.calls = 0
        self.seen: dict[int, int] = {}  # per forward: calls of each module, and of all
        self.ordinal = 0
        self.stored: dict[tuple[int, int], list[int]] = {}  # per forward: (id of the store, block) -> sources added
        self.last: dict[int, tuple[Any, ...]] = {}  # per forward: module -> its last call's q and k
        self.sequence: dict[int, tuple[int, int]] = {}  # per forward: block -> (batch, length) of its input
        self.layout: dict[int, bool] = {}  # projection module -> whether it runs sequence-first
        self.dropped: dict[int, str] = {}  # block -> why its rows are left out
        self.padded = 0  # the most positions a model appended to a batch (trimmed)
        self.inside: dict[int, int] = {}  # block -> positions it pads its attention's input with at each end
        self.prefix: dict[int, int] = {}  # block -> positions its model puts before the input's (CPM-Ant's prompt)
        self.biased: dict[int, tuple[str, str]] = {}  # block -> its attention's class, the bias its scores add to q
        self.joined: dict[int, tuple[str, ...]] = {}  # block -> its attention modules, side by side in its rows
        self.appended: dict[int, int] = {}  # block -> most entries its attention appends after the positions' keys
        self.shared: dict[int, str] = {}  # block -> its attention's class, whose keys are its normalised queries
        self.pending: list[tuple[dict[int, Any], int, Any, str]] = []  # the sums of the forward under way
        self.rotations: dict[int, tuple[Rotation, Any]] = {}  # block -> how its attention rotates q and k, the module
        self.arguments: dict[int, Call] = {}  # per forward: block -> its attention's call, by argument name
        self.start_row = 0  # the position of the forward's first row: a chunk's start in a chunked prefill
        self.chunked = False  # a chunk under way: its keys are the last of the cached keys the attention sees
        self.host = False  # the sums on the host (a long pass: O(length x width) per block off the GPU)

    def start(self, mask: Any) -> None:
        """Take the padding mask of the next forward (on the model's input device)."""
        self.mask = mask
        self.weights = {mask.device: mask.float()}
        self.pending.clear()
        self.seen.clear()
        self.stored.clear()
        self.sequence.clear()
        self.last.clear()
        self.ordinal = 0

    def stop(self) -> None:
        """After a forward: its sums are added (unless discarded); between forwards nothing is recorded."""
        self.commit()
        self.mask = None
        self.last.clear()  # the held q and k of the forward
        self.arguments.clear()  # its rotary tables

    def discard(self) -> None:
        """Forget the sums of the forward under way (one the model itself failed)."""
        self.pending.clear()

    def clear(self) -> None:
        """Forget the sums (of a probe)."""
        self.queries.clear()
        self.keys.clear()
        self.dropped.clear()
        self.joined.clear()
        self.appended.clear()
        self.padded = 0

    def block(self, module: Any) -> int | None:
        """The block of an attention call: its module's, or the call's rank when a module is shared (ALBERT)
        or the model runs more blocks than it lists (``by_call``: HRM's stacks reused over cycles)."""
        self.ordinal += 1
        self.seen[id(module)] = self.seen.get(id(module), 0) + 1
        if self.seen[id(module)] > 1 or self.by_call:
            return self.ordinal
        return self.block_of.get(id(module))

    def repeated(self, module: Any, query: Any, key: Any) -> bool:
        """Whether a module calls attention again on the very q and k of its previous call (DiffLlama's
        two softmaxes): the same block, counted once. ALBERT's shared module gets new q and k each layer.
        The last q and k are held, so that their memory cannot be reused for the next call's: a freed
        tensor's address may come back for ALBERT's next layer, which is a new call."""
        signature = (query.data_ptr(), tuple(query.shape), key.data_ptr(), tuple(key.shape))
        previous = self.last.get(id(module))
        if previous is not None and previous[0] == signature:
            return True
        self.last[id(module)] = (signature, query, key)
        return False

    def drop(self, block: int, reason: str) -> None:
        """Leave block's rows out (the first reason found is kept)."""
        self.dropped.setdefault(block, reason)

    def offset(self, block: int) -> int:
        """Where the input's position 0 is in what block's projections give: after the positions the block
        pads its attention's input with (PegasusX) or its model puts before the input's (CPM-Ant's prompt)."""
        return self.inside.get(block, 0) + self.prefix.get(block, 0)

    def rotate(self, block: int, states: Any) -> Any:
        """A projection's q or k of ``block``, (B, T, w) or per head (B, T, ..., d), rotated as its attention
        rotates them (its quirks' ``rotation``), at the positions of the call under way; unchanged without a rule."""
        found = self.rotations.get(block)
        if found is None:
            return states
        rotation, attention = found
        batch, length = states.shape[:2]
        size = states.shape[-1] if states.dim() > 3 else _head_size(attention)
        per_head = states.reshape(batch, length, -1, size).transpose(1, 2)
        rotated = rotation(attention, self.arguments.get(block, {}), per_head)
        return rotated.transpose(1, 2).reshape(states.shape)

    def add(
        self, store: dict[int, Any], block: int, states: Any, heads_first: bool, source: Any, offset: int = 0
    ) -> None:
        """states: (B, H, T', d) if heads_first else (B, T', width), from module ``source``, the input's
        position 0 at ``offset``; summed over the batch where they are, into float64 running sums on the
        same device (few, large operations: this runs in every layer). T' > T + offset (the model padded
        the batch to its window): the padding at the end is trimmed; T' < T + offset (the model shortened
        the sequence) or another batch size: the block is dropped. A second source in the block (its second
        attention module) is joined side by side; the same source twice drops the block."""
        import torch

        batch, width = self.mask.shape
        axis = 2 if heads_first else 1
        length = states.shape[axis] - offset
        if states.shape[0] != batch or length < width:
            self.drop(block, f"its attention sees {tuple(states.shape[: axis + 1])} for a batch of {(batch, width)}")
            return
        sources = self.stored.setdefault((id(store), block), [])
        if id(source) in sources:
            self.drop(block, "its query/key projections run more than once in one pass")
            return
        sources.append(id(source))
        if length > width:
            self.padded = max(self.padded, length - width)
        if length > width or offset:
            states = states.narrow(axis, offset, width)
        weights = self.weights.get(states.device)
        if weights is None:  # a sharded model's layer on another device
            weights = self.weights[states.device] = self.mask.to(states.device, torch.float32)
        if states.dtype != torch.float32:
            states = states.float()
        if heads_first:
            sums = torch.einsum("bhtd,bt->thd", states, weights).flatten(1)
        else:
            sums = torch.einsum("btw,bt->tw", states, weights)
        self.pending.append((store, block, sums, type(source).__name__))

    def commit(self) -> None:
        """Add the sums of the forward under way to the totals (a block's attention modules side by side)."""
        import torch

        joined: dict[tuple[int, int], tuple[dict[int, Any], int, list[Any], list[str]]] = {}
        for store, block, sums, name in self.pending:
            entry = joined.setdefault((id(store), block), (store, block, [], []))
            entry[2].append(sums)
            entry[3].append(name)
        for store, block, parts, names in joined.values():
            if len(parts) > 1:
                self.joined[block] = tuple(names)
            sums = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
            total = store.get(block)
            if total is None:
                total = store[block] = torch.zeros(
                    (self.length, sums.shape[1]), dtype=torch.float64, device="cpu" if self.host else sums.device
                )
            if total.shape[1] != sums.shape[1]:
                self.drop(block, f"its projections change width ({total.shape[1]}, then {sums.shape[1]})")
                continue
            if self.host:
                sums = sums.to("cpu")
            total[self.start_row : self.start_row + sums.shape[0]] += sums
        self.pending.clear()

    def notes(self) -> list[str]:
        """What a reader of the query/key rows should know: blocks whose rows join two attention modules,
        blocks that pad their attention's input inside (the dropped blocks have their own notes)."""
        notes = []
        joined: dict[tuple[str, ...], list[int]] = {}
        for block, names in sorted(self.joined.items()):
            if block not in self.dropped:
                joined.setdefault(names, []).append(block)
        for names, blocks in joined.items():
            one = len(blocks) == 1
            whose = "its" if one else "a block's"
            notes.append(
                f"{_blocks(blocks)} {'runs' if one else 'each run'} {len(names)} attention modules "
                f"({', '.join(names)}); {whose} query and key rows hold the queries and keys "
                "of all of them side by side (every head of each), in the order they run"
            )
        for offset, blocks in _grouped(self.inside, self.dropped, self.queries).items():
            one = len(blocks) == 1
            notes.append(
                f"{_blocks(blocks)} {'pads its' if one else 'each pad their'} attention's input with {offset} "
                f"positions at each end (staggered local blocks); {'its' if one else 'their'} query and key rows "
                f"are read from position {offset} on, where the input's positions are"
            )
        for block, extra in sorted(self.appended.items()):
            if block not in self.dropped and block in self.keys:
                notes.append(
                    f"block {block}'s attention also attends to up to {extra} compressed entries it appends after the "
                    "positions' own keys (its compressor's); its key row is the positions' own keys"
                )
        for (kind, bias), blocks in _grouped(self.biased, self.dropped, self.queries).items():
            notes.append(
                f"{_blocks(blocks)} ({kind}) {'adds' if len(blocks) == 1 else 'add'} {bias} to the queries in the "
                f"content score (q + {bias}) . k: the query rows are the queries as projected, without it, as for "
                "every block (the relative terms scored beside it are the position mechanism)"
            )
        prefixed = [block for block in sorted(self.prefix) if block not in self.dropped and block in self.queries]
        if prefixed:
            notes.append(
                f"{_blocks(prefixed)} {'sees' if len(prefixed) == 1 else 'see'} {self.prefix[prefixed[0]]} prompt "
                "positions the model puts before the input's (dropped from its hidden states); the query and key "
                "rows are read from after them, at the input's positions"
            )
        shared = [block for block in sorted(self.shared) if block not in self.dropped and block in self.keys]
        if shared:
            one = len(shared) == 1
            classes = ", ".join(sorted({self.shared[block] for block in shared}))
            notes.append(
                f"{_blocks(shared)} ({classes}) {'projects its' if one else 'project their'} queries and keys with one "
                f"shared map (query_key): {'its' if one else 'their'} query rows are that projection, the key rows "
                "the same projection length-normalised per head (x / sqrt(mean(x^2) + 1e-6)), what the attention "
                "compares the queries against (its 1/sqrt(head size) is the score scaling, left out as for every block)"
            )
        return notes

    def attention(self, original: Callable[[Any], Attention]) -> Attention:
        """An attention function that adds a self-attention call's q and k, then calls ``original(module)``."""

        def captured(
            module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any, **kwargs: Any
        ) -> Any:
            if self.chunked and key.shape[2] > query.shape[2]:  # the cache's keys, then the chunk's own
                own = key.narrow(2, key.shape[2] - query.shape[2], query.shape[2])
            else:
                own = own_keys(module, query, key)
            if self.mask is not None and own is not None and not self.repeated(module, query, key):
                block = self.block(module)
                if block is not None:
                    self.calls += 1
                    if own.shape[2] < key.shape[2] and not self.chunked:
                        self.appended[block] = max(self.appended.get(block, 0), key.shape[2] - own.shape[2])
                    self.add(self.queries, block, query, heads_first=True, source=module)
                    self.add(self.keys, block, own, heads_first=True, source=module)
            return original(module)(module, query, key, value, attention_mask, *args, **kwargs)

        return captured

    def batch_first(self, module: Any, block: int, states: Any) -> Any:
        """A projection's (B, T', w) output batch-first, or None when the call is not on the block's
        sequence (PegasusX's global tokens). The block's input (B, T') tells the two apart; a square
        shape takes the layout the module had at an unambiguous call (the probe's batch of one)."""
        batch, length = self.sequence.get(block, tuple(self.mask.shape))
        if states.dim() != 3:
            return None
        first, second = states.shape[0], states.shape[1]
        if (first, second) == (batch, length) and (second, first) == (batch, length):
            flipped = self.layout.get(id(module), False)
        elif (first, second) == (batch, length):
            flipped = self.layout[id(module)] = False
        elif (second, first) == (batch, length):
            flipped = self.layout[id(module)] = True
        else:
            return None
        return states.transpose(0, 1) if flipped else states


def own_keys(module: Any, query: Any, key: Any) -> Any:
    """The keys of an attention call's own positions, (B, H, T, d) for its T queries: all its keys in a
    self-attention call; the first T where the module appends entries of its own after them (an attention
    with a ``compressor``: DeepseekV4Attention.forward runs ``kv = torch.cat([kv, compressed_kv], dim=2)``);
    None for any other call (keys of other tokens: PegasusX's global ones)."""
    if key.shape[2] == query.shape[2]:
        return key
    if key.shape[2] > query.shape[2] and getattr(module, "compressor", None) is not None:
        return key.narrow(2, 0, query.shape[2])
    return None


def _grouped(values: dict[int, T], dropped: dict[int, str], measured: dict[int, Any]) -> dict[T, list[int]]:
    """value -> the measured blocks that have it, in order."""
    grouped: dict[T, list[int]] = {}
    for block, value in sorted(values.items()):
        if block not in dropped and block in measured:
            grouped.setdefault(value, []).append(block)
    return grouped


def _blocks(numbers: list[int]) -> str:
    """'block 2', 'blocks 1, 2'."""
    return ("block " if len(numbers) == 1 else "blocks ") + ", ".join(str(number) for number in numbers)


def _is_projection(module: Any) -> bool:
    """A per-position linear map: torch's Linear; transformers' Conv1D (x W + b: OpenAI-GPT's fused c_attn);
    torch's Conv1d with kernel 1 (SqueezeBERT's 1x1 convolutions, channels first); a linear of its own
    kind, known by Linear's attributes (I-BERT's QuantLinear: in_features, out_features, a 2-D weight)."""
    import torch
    from transformers.pytorch_utils import Conv1D

    if isinstance(module, torch.nn.Linear | Conv1D):
        return True
    if isinstance(module, torch.nn.Conv1d):
        return tuple(module.kernel_size) == (1,)
    weight = getattr(module, "weight", None)
    sizes = (getattr(module, "in_features", None), getattr(module, "out_features", None))
    return all(isinstance(size, int) for size in sizes) and isinstance(weight, torch.Tensor) and weight.dim() == 2


def _projections(block: Any, fused_names: tuple[str, ...] = FUSED_NAMES) -> tuple[Any, Any, Any] | None:
    """(query, key, attention module) of the first module of a block holding a query and a key
    projection side by side, or (fused, None, attention module); None where there is neither (RWKV's
    key has no query beside it: it is no attention)."""
    for parent in block.modules():
        linear = {name.lower(): module for name, module in parent.named_children() if _is_projection(module)}
        query = next((linear[name] for name in PROJECTION_QUERY_NAMES if name in linear), None)
        key = next((linear[name] for name in PROJECTION_KEY_NAMES if name in linear), None)
        if query is not None and key is not None:
            return query, key, parent
        fused = next((linear[name] for name in fused_names if name in linear), None)
        if fused is not None:
            return fused, None, parent
    return None


def hook_projections(recorder: QueryKeySums, blocks: list[Any], model_type: str = "", config: Any = None) -> list[Any]:
    """Forward hooks on each block's query/key projections (separate, or fused in the layout of
    :class:`~.quirks.Quirks` ``split``; maps held as Parameters read by its ``parameters``) and on the
    block itself (the (batch, length) of its input); the handles, to remove after the pass. ``config``
    (the model's) tells the positions a model puts before the input's (its quirks' ``prefix``)."""
    handles = []
    rules = quirks(model_type)
    prefix = int(getattr(config, rules.prefix, 0) or 0) if rules.prefix else 0
    for index, block in enumerate(blocks):
        number = index + 1
        if prefix:
            recorder.prefix[number] = prefix
        _query_bias(recorder, block, number, rules)
        if rules.parameters is not None:
            handles.extend(_hook_parameters(recorder, block, number, rules.parameters))
            continue
        found = _projections(block, FUSED_NAMES + rules.fused_names)
        if found is None:
            continue
        query, key, attention = found
        query, key = _requantized(attention, query), _requantized(attention, key)
        shared = key is None and any(getattr(attention, name, None) is query for name in SHARED_NAMES)
        if key is None and rules.split is None:
            what = (
                "shared query/key projection has no known key rule"
                if shared
                else "fused query/key/value projection has no known layout"
            )
            recorder.drop(number, f"its {what} for model type {model_type!r}")
            continue
        if shared:
            recorder.shared[number] = type(attention).__name__
        inside = _padded_inside(block)
        if inside:
            recorder.inside[number] = inside
        channels = _channels_first(query)
        handles.append(
            block.register_forward_pre_hook(_block_input(recorder, number, inside, channels), with_kwargs=True)
        )
        if rules.rotation is not None:  # the attention rotates q and k in its own code: as it does, with its tables
            recorder.rotations[number] = (rules.rotation, attention)
            handles.append(attention.register_forward_pre_hook(_arguments(recorder, number), with_kwargs=True))
        if key is None and rules.split is not None:
            handles.append(query.register_forward_hook(_fused(recorder, number, attention, rules.split)))
        elif key is not None:
            handles.append(query.register_forward_hook(_store(recorder, recorder.queries, number)))
            handles.append(key.register_forward_hook(_store(recorder, recorder.keys, number)))
    return handles


def _query_bias(recorder: QueryKeySums, block: Any, number: int, rules: Quirks) -> None:
    """Record that block's attention adds a bias of its own to the queries it scores (its ``query_bias``)."""
    found = rules.query_bias
    if found is not None and any(type(module).__name__ == found[0] for module in block.modules()):
        recorder.biased[number] = found


def _requantized(attention: Any, projection: Any) -> Any:
    """The module whose output the attention multiplies: the projection, or the requantization of it beside
    (I-BERT: IBertSelfAttention.forward runs ``query_layer, _ = self.query_activation(mixed_query_layer, ...)``
    on its QuantLinear's output; a QuantAct returns its input unchanged in quant_mode False, the 8-bit
    requantized values, as floats, in quant_mode True). None stays None (a fused projection's key)."""
    import torch

    for name, child in attention.named_children():
        if child is projection:
            requantized = getattr(attention, f"{name}_activation", None)
            return requantized if isinstance(requantized, torch.nn.Module) else projection
    return projection


def _channels_first(projection: Any) -> bool:
    """Whether a projection runs channels first, (B, C, T) in and out: torch's Conv1d (SqueezeBERT's blocks
    take and give (B, C, T); SqueezeBertEncoder permutes the hidden states around them)."""
    import torch

    return isinstance(projection, torch.nn.Conv1d)


def _padded_inside(block: Any) -> int:
    """The positions a block pads its attention's input with at each end, inside: PegasusX's staggered
    encoder layers (``stagger_blocks_this_layer``: PegasusXEncoderLayer.pad_local_tokens pads
    ``block_size // 2`` before and after the sequence, so that their local blocks straddle the previous
    layer's); 0 for every other block."""
    size = getattr(block, "block_size", None)
    if getattr(block, "stagger_blocks_this_layer", False) is True and isinstance(size, int):
        return size // 2
    return 0


def _block_input(recorder: QueryKeySums, block: int, inside: int = 0, channels: bool = False) -> Callable[..., None]:
    """Record the (batch, length) its attention sees: the block's hidden states (its first tensor input,
    either way round, or (B, C, T) where its projections run ``channels`` first), with the ``inside``
    positions the block pads them with at each end."""
    import torch

    def hook(_: Any, args: Any, kwargs: Any) -> None:
        states = next((a for a in (*args, kwargs.get("hidden_states")) if isinstance(a, torch.Tensor)), None)
        if recorder.mask is None or states is None or states.dim() != 3:
            return
        if channels:
            states = states.transpose(1, 2)
        batch = int(recorder.mask.shape[0])
        first, second = int(states.shape[0]), int(states.shape[1])
        if first == batch or second == batch:  # batch-first, or sequence-first (FSMT's T x B x C)
            recorder.sequence[block] = (batch, (second if first == batch else first) + 2 * inside)

    return hook


def _store(recorder: QueryKeySums, store: dict[int, Any], block: int) -> Callable[..., None]:
    """Add a query or key projection's output: (B, T, w) either way round; the values of a (values, scaling
    factor) pair (I-BERT's QuantAct and QuantLinear); a channels-first (B, w, T) turned (B, T, w) (SqueezeBERT)."""

    def hook(module: Any, __: Any, output: Any) -> None:
        if recorder.mask is None:
            return
        if isinstance(output, tuple):
            output = output[0]
        if _channels_first(module):
            output = output.transpose(1, 2)
        states = recorder.batch_first(module, block, output)
        if states is not None:
            recorder.calls += 1
            states = recorder.rotate(block, states)
            recorder.add(store, block, states, heads_first=False, source=module, offset=recorder.offset(block))

    return hook


def _fused(recorder: QueryKeySums, block: int, attention: Any, split: Split) -> Callable[..., None]:
    """Split a fused QKV output the way the model's attention does (its quirks' ``split``)."""

    def hook(module: Any, __: Any, output: Any) -> None:
        if recorder.mask is None:
            return
        states = recorder.batch_first(module, block, output)
        if states is None:
            return
        recorder.calls += 1
        offset = recorder.offset(block)
        for store, part in zip((recorder.queries, recorder.keys), split(attention, states), strict=True):
            part = recorder.rotate(block, part)
            states = part.flatten(2) if part.dim() > 3 else part
            recorder.add(store, block, states, heads_first=False, source=module, offset=offset)

    return hook


def _hook_parameters(
    recorder: QueryKeySums, block: Any, number: int, rule: tuple[str, ParameterProjection]
) -> list[Any]:
    """A forward pre-hook on block's attention module (its quirks' ``parameters``): q and k from its call,
    batch-first, added; one on the block (its input's (batch, length)). [] where the block has no such module."""
    name, project = rule
    attention = getattr(block, name, None)
    if attention is None:
        return []
    arguments = _arguments(recorder, number)  # its call's arguments by name

    def hook(module: Any, args: Any, kwargs: Any) -> None:
        if recorder.mask is None:
            return
        arguments(module, args, kwargs)
        parts = project(module, recorder.arguments.pop(number, {}))
        placed = [recorder.batch_first(module, number, part) for part in parts]
        if any(part is None for part in placed):
            return
        recorder.calls += 1
        for store, part in zip((recorder.queries, recorder.keys), placed, strict=True):
            recorder.add(store, number, part, heads_first=False, source=module, offset=recorder.offset(number))

    return [
        block.register_forward_pre_hook(_block_input(recorder, number), with_kwargs=True),
        attention.register_forward_pre_hook(hook, with_kwargs=True),
    ]


def _head_size(attention: Any) -> int:
    """The width of one head of an attention module (RoFormer: attention_head_size)."""
    for name in ("attention_head_size", "head_size", "head_dim"):
        size = getattr(attention, name, None)
        if isinstance(size, int):
            return size
    raise RuntimeError(f"{type(attention).__name__}: no head size to rotate its queries and keys by")


def _arguments(recorder: QueryKeySums, block: int) -> Callable[..., None]:
    """Forward pre-hook on an attention module with a rotation rule: its call's arguments by name (the rotary
    tables it is handed), positional or keyword, as its forward's signature names them."""
    import inspect

    def hook(module: Any, args: Any, kwargs: Any) -> None:
        if recorder.mask is None:
            return
        signature = inspect.signature(module.forward)
        arguments = dict(signature.bind_partial(*args, **kwargs).arguments)
        for parameter in signature.parameters.values():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:  # **kwargs: its entries by their own names
                arguments.update(arguments.pop(parameter.name, {}))
        recorder.arguments[block] = arguments

    return hook
