"""The capturing attention function, registered through transformers' documented attention interface.

A function registered with ``AttentionInterface.register`` under ``geoanalyze_capture_<original>`` is
handed every attention call's query, key and value after the model's own position transform; it gives
them to the recorder of the pass under way, then calls the attention the model would have called
(``sdpa``, or its own ``eager_attention_forward``). The original's mask function is registered beside it
(``AttentionMaskInterface.register``), and the model is switched to it with ``set_attn_implementation``
for the duration of the pass only, so the numbers are the original's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

#: the implementations a capture can wrap (the ones ``from_pretrained`` picks without being asked)
WRAPPED = ("sdpa", "eager")
#: prefix of the registered names: geoanalyze_capture_sdpa, geoanalyze_capture_eager
CAPTURE_PREFIX = "geoanalyze_capture_"
Attention = Callable[..., Any]  # (module, query, key, value, attention_mask, ...) -> (output, weights)


class Recorder(Protocol):
    """What :func:`capture_attention` calls: an attention function that records, then calls the original."""

    def attention(self, original: Callable[[Any], Attention]) -> Attention: ...


#: the attention of the pass under way: the capture, then the original
_ACTIVE: ContextVar[Attention | None] = ContextVar("geoanalyze_capture", default=None)


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


def _resolved(module: Any, name: str) -> Any:
    """``name`` as the module's forward resolves it when it runs: a global of the file that defines it
    (under any decorators, which keep it as ``__wrapped__``)."""
    import inspect

    return getattr(inspect.unwrap(type(module).forward), "__globals__", {}).get(name)


def _model_eager(model: Any) -> Attention | None:
    """The ``eager_attention_forward`` the model's forward sees, or the first of its modules' forwards sees."""
    return next((found for module in model.modules() if (found := _resolved(module, "eager_attention_forward"))), None)


def _original(implementation: str, fallback_eager: Attention | None) -> Callable[[Any], Attention]:
    """module -> the attention function it calls under ``implementation``, looked up as its forward does
    (a file may keep its own AttentionInterface; eager is the file's ``eager_attention_forward``)."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def original(module: Any) -> Attention:
        if implementation == "eager":
            found: Attention | None = _resolved(module, "eager_attention_forward") or fallback_eager
            if found is None:  # capture_attention switches an eager model only when it has one
                raise RuntimeError(f"{type(module).__name__}: no eager attention function to call")
            return found
        interface = _resolved(module, "ALL_ATTENTION_FUNCTIONS")
        return (interface if isinstance(interface, AttentionInterface) else ALL_ATTENTION_FUNCTIONS)[implementation]

    return original


@contextlib.contextmanager
def capture_attention(model: Any, recorder: Recorder, implementation: str | None = None) -> Iterator[None]:
    """Switch the model to the capturing attention for the duration of a pass, then back.

    ``implementation``: the attention the model was loaded with (``load_model`` states it); None
    asks the model's config. Nothing changes for a model that cannot switch (its attention
    bypasses the interface), or whose implementation is not one of :data:`WRAPPED`; the caller's
    probe finds no calls then.
    """
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    # transformers 5.24 has no public getter of the current implementation (set_attn_implementation
    # only sets it; the config's attn_implementation is an init argument): the private property it reads itself
    before = implementation or getattr(getattr(model, "config", None), "_attn_implementation", None)
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
