"""Queries and keys as attention sees them: per-position sums per block, during a forward pass.

For block l, position i and the padding mask w(b, i) of the batch (1 where sequence b reaches i):

    Q_l(i) = sum_b w(b, i) q_l(b, i),    K_l(i) = sum_b w(b, i) k_l(b, i)

in float64 on the device, all heads side by side (H * d wide); the forward pass divides by the
reach. q and k are taken after the model's own position transform (RoPE rotates them first),
through transformers' documented attention-function interface: a function registered with
``AttentionInterface.register`` under ``geoanalyze_capture_<original>`` adds the sums, then calls
the attention the model would have called (``sdpa``, or its own ``eager_attention_forward``); the
original's mask function is registered beside it (``AttentionMaskInterface.register``), and the
model is switched to it with ``set_attn_implementation`` for the duration of the pass only, so the
numbers are the original's.

Models whose attention does not go through that interface (BLOOM, MPT, Falcon, DeBERTa, ...)
keep their implementation; :func:`hook_projections` captures them at their query/key projections
(forward hooks), separate or fused in a known layout.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from .mechanism import KEY_NAMES, QUERY_NAMES

#: the implementations a capture can wrap (the ones ``from_pretrained`` picks without being asked)
WRAPPED = ("sdpa", "eager")
#: prefix of the registered names: geoanalyze_capture_sdpa, geoanalyze_capture_eager
CAPTURE_PREFIX = "geoanalyze_capture_"

Attention = Callable[..., Any]  # (module, query, key, value, attention_mask, ...) -> (output, weights)

#: the attention of the pass under way: the capture, then the original
_ACTIVE: ContextVar[Attention | None] = ContextVar("geoanalyze_capture", default=None)


class QueryKeySums:
    """Per-position sums of queries and keys per block, for the padding mask of the current batch."""

    def __init__(self, block_of: dict[int, int], length: int) -> None:
        self.block_of = block_of  # id of every module inside block l -> l (1-based)
        self.length = length  # the longest sequence: the sums' rows
        self.mask: Any = None  # (B, T) of the batch under way; None between batches
        self.weights: dict[Any, Any] = {}  # the mask as float32, per device
        self.queries: dict[int, Any] = {}  # block -> (length, H * d) float64
        self.keys: dict[int, Any] = {}
        self.calls = 0
        self.seen: dict[int, int] = {}  # per forward: calls of each module, and of all
        self.ordinal = 0

    def start(self, mask: Any) -> None:
        """Take the padding mask of the next forward (on the model's input device)."""
        self.mask = mask
        self.weights = {mask.device: mask.float()}
        self.seen.clear()
        self.ordinal = 0

    def stop(self) -> None:
        """Between forwards: nothing is recorded."""
        self.mask = None

    def clear(self) -> None:
        """Forget the sums (of a probe)."""
        self.queries.clear()
        self.keys.clear()

    def block(self, module: Any) -> int | None:
        """The block of an attention call: its module's, or the call's rank when a module is shared (ALBERT)."""
        self.ordinal += 1
        self.seen[id(module)] = self.seen.get(id(module), 0) + 1
        if self.seen[id(module)] > 1:
            return self.ordinal
        return self.block_of.get(id(module))

    def add(self, store: dict[int, Any], block: int, states: Any, heads_first: bool) -> None:
        """states: (B, H, T, d) if heads_first else (B, T, width); summed over the batch where they are,
        into float64 running sums on the same device (few, large operations: this runs in every layer)."""
        import torch

        weights = self.weights.get(states.device)
        if weights is None:  # a sharded model's layer on another device
            weights = self.weights[states.device] = self.mask.to(states.device, torch.float32)
        if states.dtype != torch.float32:
            states = states.float()
        length = states.shape[2] if heads_first else states.shape[1]
        if heads_first:
            sums = torch.einsum("bhtd,bt->thd", states, weights[:, :length]).flatten(1)
        else:
            sums = torch.einsum("btw,bt->tw", states, weights[:, :length])
        total = store.get(block)
        if total is None:
            total = store[block] = torch.zeros((self.length, sums.shape[1]), dtype=torch.float64, device=sums.device)
        total[:length] += sums

    def attention(self, original: Callable[[Any], Attention]) -> Attention:
        """An attention function that adds a self-attention call's q and k, then calls ``original(module)``."""

        def captured(
            module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any, **kwargs: Any
        ) -> Any:
            if self.mask is not None and query.shape[2] == key.shape[2] and (block := self.block(module)) is not None:
                self.calls += 1
                self.add(self.queries, block, query, heads_first=True)
                self.add(self.keys, block, key, heads_first=True)
            return original(module)(module, query, key, value, attention_mask, *args, **kwargs)

        return captured


def captured_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any, **kwargs: Any
) -> Any:
    """The function registered with transformers' ``AttentionInterface``: the attention of the pass under way."""
    attention = _ACTIVE.get()
    if attention is None:
        raise RuntimeError(
            f"{type(module).__name__} called geoanalyze's capturing attention outside a forward pass; "
            "its attn_implementation was not restored"
        )
    return attention(module, query, key, value, attention_mask, *args, **kwargs)


def _model_eager(model: Any) -> Attention | None:
    """The ``eager_attention_forward`` of the model's file, or of the first of its modules' files that has one."""
    eager = getattr(sys.modules[type(model).__module__], "eager_attention_forward", None)
    if eager is None:  # the block modules may live in another file than the model class
        for module in model.modules():
            eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
            if eager is not None:
                break
    return eager


def _original(implementation: str, fallback_eager: Attention | None) -> Callable[[Any], Attention]:
    """module -> the attention function it calls under ``implementation``, looked up as its own file does
    (a file may keep its own AttentionInterface; eager is the file's ``eager_attention_forward``)."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def original(module: Any) -> Attention:
        namespace = sys.modules.get(type(module).__module__)
        if implementation == "eager":
            found: Attention | None = getattr(namespace, "eager_attention_forward", None) or fallback_eager
            if found is None:  # capture_attention switches an eager model only when it has one
                raise RuntimeError(f"{type(module).__name__}: no eager attention function to call")
            return found
        interface = getattr(namespace, "ALL_ATTENTION_FUNCTIONS", None)
        return (interface if isinstance(interface, AttentionInterface) else ALL_ATTENTION_FUNCTIONS)[implementation]

    return original


@contextlib.contextmanager
def capture_attention(model: Any, recorder: QueryKeySums) -> Iterator[None]:
    """Switch the model to the capturing attention for the duration of a pass, then back.

    Nothing changes for a model that cannot switch (its attention bypasses the interface), or whose
    implementation is not one of :data:`WRAPPED`; the caller's probe finds no calls then.
    """
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    before = getattr(getattr(model, "config", None), "_attn_implementation", None)
    eager = _model_eager(model)
    if before not in WRAPPED or (before == "eager" and eager is None) or not hasattr(model, "set_attn_implementation"):
        yield
        return
    name = CAPTURE_PREFIX + before
    AttentionInterface.register(name, captured_attention)
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[before])  # the original's mask, unchanged
    token = _ACTIVE.set(recorder.attention(_original(before, eager)))
    try:
        model.set_attn_implementation(name)
        yield
    finally:
        model.set_attn_implementation(before)
        _ACTIVE.reset(token)


def hook_projections(recorder: QueryKeySums, blocks: list[Any]) -> list[Any]:
    """Forward hooks on each block's query/key projections (separate, or fused in a known layout);
    the handles, to remove after the pass."""
    import torch

    handles = []
    for index, block in enumerate(blocks):
        number = index + 1
        for name, module in block.named_modules():
            if not isinstance(module, torch.nn.Linear):
                continue
            last = name.rsplit(".", 1)[-1].lower()
            parent = block.get_submodule(name.rsplit(".", 1)[0]) if "." in name else block
            if last in QUERY_NAMES:
                handles.append(module.register_forward_hook(_store(recorder, recorder.queries, number)))
            elif last in KEY_NAMES:
                handles.append(module.register_forward_hook(_store(recorder, recorder.keys, number)))
            elif last in ("query_key_value", "wqkv"):
                handles.append(module.register_forward_hook(_fused(recorder, number, parent)))
    return handles


def _store(recorder: QueryKeySums, store: dict[int, Any], block: int) -> Callable[..., None]:
    def hook(_: Any, __: Any, output: Any) -> None:
        if recorder.mask is not None:
            recorder.calls += 1
            recorder.add(store, block, output, heads_first=False)

    return hook


def _fused(recorder: QueryKeySums, block: int, attention: Any) -> Callable[..., None]:
    """Split a fused QKV output the way the attention module itself does (BLOOM, Falcon), or in thirds (MPT)."""

    def hook(_: Any, __: Any, output: Any) -> None:
        if recorder.mask is None:
            return
        heads_second = False
        if hasattr(attention, "_split_heads"):  # Falcon: (B, T, H, d)
            query, key, _value = attention._split_heads(output)
        elif hasattr(attention, "_reshape"):  # BLOOM: (B, H, T, d)
            query, key, _value = attention._reshape(output)
            heads_second = True
        else:  # MPT: [Q | K | V] along the width
            query, key, _value = output.chunk(3, dim=-1)
        recorder.calls += 1
        for store, states in ((recorder.queries, query), (recorder.keys, key)):
            if states.dim() == 4:
                states = (states.transpose(1, 2) if heads_second else states).flatten(2)
            recorder.add(store, block, states, heads_first=False)

    return hook
