"""What a model does with its rotary tables, observed on a two-token pass (no source code is read).

Which blocks rotate their queries and keys is decided by running the model once, on two tokens:

- **handed** (:func:`caller_rope`): forward pre-hooks (``with_kwargs``) on each block and its children see
  what each call is handed: a rotary keyword (``position_embeddings``, ``rotary_*``, ``freqs_cis``, ...)
  passed as None marks the block NoPE (LaRA-mini's full-attention layers, whose model loop hands them
  None; a block whose own forward hands its attention None);
- **rotated**: the rotary buffers (``inv_freq``, GPT-J's sin/cos table) are marked, and every tensor an
  operation derives from a marked one is marked too (a ``TorchFunctionMode``); the query the registered
  attention function receives (:func:`~geoanalyze.checkpoints.capture.capture_attention`) is then either
  derived from the rotary tables (RoPE in that block) or not (Cohere 2, EXAONE 4, AFMoE rotate only in
  their sliding-window layers; SmolLM3 and Llama 4 switch RoPE off per layer).

A skeleton (parameters on the meta device) runs on a copy with host parameters: random for small
models, one value broadcast over each parameter's shape for large ones (no memory; the marks need no
values). A block the pass
does not reach, or a model that cannot run this way, is left undecided (absent from the answers).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .interface import capture_attention
from .quirks import Call

#: keyword arguments by which a model hands a block, or a block its attention, the rotary tables
ROTARY_ARGUMENT = re.compile(r"position_embeddings?$|rotary|rope|freqs_cis|cos_sin")
#: buffers holding rotary frequencies or tables: what a rotated query derives from
_ROTARY_BUFFER = re.compile(r"(^|\.)(\w*inv_freq|embed_positions|\w*(cos|sin)_cached)$")
#: skeletons up to this many parameters run on random host parameters; larger ones on one broadcast value
HOST_PARAMETERS = 200_000_000


@dataclass
class Observed:
    """What one pass saw, per block (1-based); a block absent from a map is undecided.

    handed : whether every call of the block and its children with a rotary keyword got a table (not None).
    rotated : whether the query its attention function received derives from the rotary buffers.
    """

    handed: dict[int, bool] = field(default_factory=dict)
    rotated: dict[int, bool] = field(default_factory=dict)


def caller_rope(model: Any, blocks: list[Any]) -> dict[int, bool]:
    """Block (1-based) -> whether the calls of it (and of its children) that pass a rotary keyword pass the
    tables, not None, as a two-token pass sees them; a block called with no rotary keyword is left out."""
    return observe(model, blocks).handed


def observe(model: Any, blocks: Sequence[Any]) -> Observed:
    """Run ``model`` once on two tokens and record, per block, what it is handed and what its attention rotates."""
    import torch

    seen = Observed()
    if not blocks:
        return seen
    runner, device = _runnable(model)
    if runner is not model:
        names = {id(module): name for name, module in model.named_modules()}
        blocks = [runner.get_submodule(names[id(block)]) for block in blocks]
    block_of = {id(module): number for number, block in enumerate(blocks, 1) for module in block.modules()}
    marks = _Marks(runner)
    handles = [
        module.register_forward_pre_hook(_handed(seen, number), with_kwargs=True)
        for number, block in enumerate(blocks, 1)
        for module in (block, *block.children())
    ]
    handles += [block.register_forward_pre_hook(marks.reset) for block in blocks]
    handles += [module.register_forward_hook(marks.mark) for module in marks.rotary]
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        with contextlib.suppress(Exception):  # a model that cannot run so: what was seen before stands
            stack.enter_context(capture_attention(runner, _Rotated(seen, block_of, marks)))
            stack.enter_context(marks.mode())
            args, kwargs = _two_tokens(runner, device)
            runner(*args, **kwargs)
    for handle in handles:
        handle.remove()
    return seen


def _handed(seen: Observed, number: int) -> Callable[..., None]:
    def hook(_: Any, __: Any, kwargs: Call) -> None:
        for name, value in kwargs.items():
            if ROTARY_ARGUMENT.search(name):
                seen.handed[number] = seen.handed.get(number, True) and value is not None

    return hook


class _Rotated:
    """The recorder :func:`~geoanalyze.checkpoints.capture.capture_attention` calls: whether each block's first
    attention call receives a query derived from the rotary buffers."""

    def __init__(self, seen: Observed, block_of: dict[int, int], marks: _Marks) -> None:
        self.seen, self.block_of, self.marks = seen, block_of, marks

    def attention(self, original: Callable[[Any], Callable[..., Any]]) -> Callable[..., Any]:
        def captured(module: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            number = self.block_of.get(id(module))
            if number is not None and number not in self.seen.rotated:
                self.seen.rotated[number] = self.marks.marked(query)
            return original(module)(module, query, *args, **kwargs)

        return captured


class _Marks:
    """The tensors derived from the rotary tables of a model (its rotary buffers and what the modules that hold
    them give), followed through every torch operation; at each block's call, only those derived before the
    first block ran stay marked, so that a block's query is marked by its own use of the tables, not by a
    previous block's rotated output in the residual stream."""

    def __init__(self, model: Any) -> None:
        self.kept: dict[int, Any] = {}  # id -> tensor (kept alive, so that no id is reused)
        self.tables: dict[int, Any] | None = None  # what was marked when the first block ran
        self.rotary: list[Any] = []  # the modules that hold rotary buffers
        for module in model.modules():
            found = [b for n, b in module.named_buffers(recurse=False) if _ROTARY_BUFFER.search(f".{n}")]
            self.kept.update((id(buffer), buffer) for buffer in found)
            if found:
                self.rotary.append(module)

    def marked(self, value: Any) -> bool:
        return any(id(tensor) in self.kept for tensor in _tensors(value))

    def mark(self, _: Any, __: Any, output: Any) -> None:
        """Forward hook of a rotary module: its tables are marked."""
        self.kept.update((id(tensor), tensor) for tensor in _tensors(output))

    def reset(self, *_: Any) -> None:
        """Forward pre-hook of a block: only the tables stay marked."""
        if self.tables is None:
            self.tables = dict(self.kept)
        self.kept = dict(self.tables)

    def mode(self) -> Any:
        from torch.overrides import TorchFunctionMode

        marks = self

        class Follow(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                if marks.marked((args, kwargs)):
                    for tensor in _tensors(out):
                        marks.kept[id(tensor)] = tensor
                return out

        return Follow()


def _tensors(value: Any) -> Iterator[Any]:
    """The tensors in a value of nested tuples, lists and dicts."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _runnable(model: Any) -> tuple[Any, str]:
    """(the model to run, its device): the model itself where its parameters are real; else a copy of the
    skeleton with host parameters: random where it is small, one value broadcast over each parameter's shape
    (no memory) where it is large (the marks need no values)."""
    import torch

    meta = [parameter for parameter in model.parameters() if parameter.device.type == "meta"]
    if not meta:
        return model, next((p.device.type for p in model.parameters()), "cpu")
    runner = copy.deepcopy(model)
    small = sum(parameter.numel() for parameter in meta) <= HOST_PARAMETERS
    generator = torch.Generator().manual_seed(0)
    for module in runner.modules():
        for name, parameter in list(module.named_parameters(recurse=False)):
            if parameter.device.type == "meta":
                if small:
                    values = torch.randn(parameter.shape, generator=generator) * 0.02
                else:
                    values = torch.full((), 0.02).expand(parameter.shape)
                setattr(module, name, torch.nn.Parameter(values.to(parameter.dtype), requires_grad=False))
    return runner, "cpu"


def _two_tokens(model: Any, device: str) -> tuple[tuple[Any, ...], Call]:
    """The arguments of a two-token call: ``input_ids`` (no cache) for a transformers model, else a (2,) tensor
    of ones for each required argument of its forward."""
    import torch

    parameters = inspect.signature(model.forward).parameters
    if "input_ids" in parameters:
        cache: Call = {"use_cache": False} if "use_cache" in parameters else {}
        return (), {"input_ids": torch.tensor([[1, 2]], device=device), **cache}
    required = [p for p in parameters.values() if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    return tuple(torch.ones(2, device=device) for _ in required), {}
