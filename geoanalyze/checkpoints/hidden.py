"""The forward pass: per-position centroids of every layer's hidden states, queries and keys.

c_l(i) = (1 / N'_i) sum_s h_l(s, i) over the N'_i sampled sequences s longer than i
(GEOMETRY.md, hidden-state stress). One batched no_grad forward pass with
``output_hidden_states``; sequences are sorted by length so batches carry little padding,
sums are taken on the device and accumulated on the host in float64.

Queries and keys are captured as the attention sees them, after the model's own position
transform (RoPE rotates them first), through transformers' attention-function interface:
for the duration of the pass, the ``sdpa`` (and, for models that run eagerly, ``eager``)
entries of ``AttentionInterface`` are wrapped by a function that adds the per-position sums
of q and k and then calls the original. Models whose attention does not go through that
interface (BLOOM, MPT, Falcon, DeBERTa, ...) are captured at their query/key projections
where that is what attention sees (no rotation inside the module); otherwise the rows are
left out with a note.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from .load import Checkpoint

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")


@dataclass
class ForwardResult:
    """What one forward pass over a corpus sample measured.

    centroids : (L + 1, n, hidden) float64; layer 0 is the embedding output; rows of positions
        no sequence reaches are NaN.
    reach : (n,) number of sequences that reach each position.
    queries, keys : block (1-based) -> (n, width) centroids of the captured queries / keys.
    capture : how queries and keys were captured ("attention interface", "projections", "none").
    notes : what could not be measured, and why.
    """

    centroids: np.ndarray
    reach: np.ndarray
    queries: dict[int, np.ndarray] = field(default_factory=dict)
    keys: dict[int, np.ndarray] = field(default_factory=dict)
    capture: str = "none"
    notes: list[str] = field(default_factory=list)


def sample_indices(n_texts: int, max_sequences: int | None, seed: int = 0) -> np.ndarray:
    """Which texts the forward pass uses: all, or a seeded sample of ``max_sequences`` in corpus order."""
    if max_sequences is None or max_sequences >= n_texts:
        return np.arange(n_texts)
    if max_sequences < 1:
        raise InputError(f"--max-sequences must be at least 1, got {max_sequences}")
    return np.sort(np.random.default_rng(seed).choice(n_texts, size=max_sequences, replace=False))


# --- placement: device, dtype, memory ------------------------------------------------------------


def resolve_device(device: str | None) -> str:
    import torch

    device = (device or "auto").lower()
    if device not in DEVICES:
        raise InputError(f"unknown --device {device!r}; choose one of {', '.join(DEVICES)}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is visible here; use --device cpu or auto")
    return device


def resolve_dtype(dtype: str | None, device: str, config: dict[str, Any]) -> Any:
    """auto: float32 on CPU (its bf16 matmuls are slow), the checkpoint's own dtype on CUDA (bf16 if unstated)."""
    import torch

    dtype = (dtype or "auto").lower()
    if dtype not in DTYPES:
        raise InputError(f"unknown --dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if dtype == "auto":
        if device == "cpu":
            return torch.float32
        stated = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        return {"float16": torch.float16, "float32": torch.float32}.get(stated, torch.bfloat16)
    return getattr(torch, dtype)


def available_memory(device: str) -> int:
    """Bytes free where the model goes: all visible GPUs together, or the host's available memory."""
    if device == "cuda":
        import torch

        return int(sum(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())))
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def memory_estimate(checkpoint: Checkpoint, dtype: Any, batch_size: int, max_length: int) -> int:
    """Bytes the pass needs: the weights in ``dtype``, plus every layer's hidden states for one batch
    (output_hidden_states keeps them all) and a working margin of 20%."""
    import torch

    mechanism = checkpoint.mechanism
    width = torch.tensor([], dtype=dtype).element_size()
    weights = (mechanism.parameters + mechanism.buffers) * width
    activations = (mechanism.layers + 1) * batch_size * max_length * max(mechanism.hidden_size, 1) * 4 * 3
    return int(1.2 * weights + activations)


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"


def check_fits(checkpoint: Checkpoint, device: str, dtype: Any, batch_size: int, max_length: int) -> bool:
    """Whether the model needs sharding (True) or fits one device (False); InputError when it fits nowhere asked."""
    import torch

    needed = memory_estimate(checkpoint, dtype, batch_size, max_length)
    free = available_memory(device)
    if needed <= free:
        if device == "cuda" and torch.cuda.device_count() > 1:
            return needed > torch.cuda.mem_get_info(0)[0]
        return False
    advice = "try --dtype bfloat16" if dtype == torch.float32 else "use a machine with more memory"
    if device == "cpu" and torch.cuda.is_available():
        advice = "try --device cuda"
    raise InputError(
        f"{checkpoint.name} needs about {_gib(needed)} on {device} ({checkpoint.mechanism.parameters:,} parameters "
        f"in {str(dtype).removeprefix('torch.')}, batch {batch_size} x {max_length}) but {_gib(free)} is free; "
        f"{advice}, or lower --batch-size"
    )


# --- capture -----------------------------------------------------------------------------------------


class _Capture:
    """Per-position sums of queries and keys per block, for the padding mask of the current batch."""

    def __init__(self, block_of: dict[int, int], length: int) -> None:
        self.block_of = block_of
        self.length = length  # the longest sequence: the sums' rows
        self.mask: Any = None
        self.weights: dict[Any, Any] = {}  # the mask as float32, per device
        self.queries: dict[int, Any] = {}
        self.keys: dict[int, Any] = {}
        self.calls = 0
        self.seen: dict[int, int] = {}  # per forward: calls of each module, and of all
        self.ordinal = 0

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

    def attention(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def captured(
            module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any, **kwargs: Any
        ) -> Any:
            if self.mask is not None and query.shape[2] == key.shape[2] and (block := self.block(module)) is not None:
                self.calls += 1
                self.add(self.queries, block, query, heads_first=True)
                self.add(self.keys, block, key, heads_first=True)
            return original(module, query, key, value, attention_mask, *args, **kwargs)

        return captured


@contextlib.contextmanager
def capture_attention(model: Any, capture: _Capture) -> Iterator[None]:
    """Wrap transformers' sdpa (and the model's eager) attention functions for the duration of a pass."""
    from transformers.modeling_utils import AttentionInterface

    mapping = AttentionInterface._global_mapping
    saved = dict(mapping)
    try:
        original: Any = saved["sdpa"]
        mapping["sdpa"] = capture.attention(original)
        eager = getattr(sys.modules[type(model).__module__], "eager_attention_forward", None)
        if eager is None:  # the block modules may live in another file than the model class
            for module in model.modules():
                eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
                if eager is not None:
                    break
        if eager is not None:
            mapping["eager"] = capture.attention(eager)
        yield
    finally:
        mapping.clear()
        mapping.update(saved)


def _projection_hooks(model: Any, capture: _Capture, blocks: list[Any]) -> list[Any]:
    """Forward hooks on each block's query/key projections (separate, or fused in a known layout)."""
    import torch

    from .mechanism import KEY_NAMES, QUERY_NAMES

    handles = []
    for index, block in enumerate(blocks):
        number = index + 1
        for name, module in block.named_modules():
            if not isinstance(module, torch.nn.Linear):
                continue
            last = name.rsplit(".", 1)[-1].lower()
            parent = block.get_submodule(name.rsplit(".", 1)[0]) if "." in name else block
            if last in QUERY_NAMES:
                handles.append(module.register_forward_hook(_store(capture, capture.queries, number)))
            elif last in KEY_NAMES:
                handles.append(module.register_forward_hook(_store(capture, capture.keys, number)))
            elif last in ("query_key_value", "wqkv"):
                handles.append(module.register_forward_hook(_fused(capture, number, parent)))
    return handles


def _store(capture: _Capture, store: dict[int, Any], block: int) -> Callable[..., None]:
    def hook(_: Any, __: Any, output: Any) -> None:
        if capture.mask is not None:
            capture.calls += 1
            capture.add(store, block, output, heads_first=False)

    return hook


def _fused(capture: _Capture, block: int, attention: Any) -> Callable[..., None]:
    """Split a fused QKV output the way the attention module itself does (BLOOM, Falcon), or in thirds (MPT)."""

    def hook(_: Any, __: Any, output: Any) -> None:
        if capture.mask is None:
            return
        heads_second = False
        if hasattr(attention, "_split_heads"):  # Falcon: (B, T, H, d)
            query, key, _value = attention._split_heads(output)
        elif hasattr(attention, "_reshape"):  # BLOOM: (B, H, T, d)
            query, key, _value = attention._reshape(output)
            heads_second = True
        else:  # MPT: [Q | K | V] along the width
            query, key, _value = output.chunk(3, dim=-1)
        capture.calls += 1
        for store, states in ((capture.queries, query), (capture.keys, key)):
            if states.dim() == 4:
                states = (states.transpose(1, 2) if heads_second else states).flatten(2)
            capture.add(store, block, states, heads_first=False)

    return hook


# --- the pass ------------------------------------------------------------------------------------


def load_model(checkpoint: Checkpoint, device: str, dtype: Any, shard: bool, trust_remote_code: bool = False) -> Any:
    """The checkpoint's base model (the encoder of an encoder-decoder), in eval mode where asked."""
    import warnings

    from transformers import AutoModel

    from ..errors import FormatError, first_line
    from ..hub import import_transformers

    import_transformers()
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "dtype": dtype}
    if any(checkpoint.path.glob("*.safetensors")):
        kwargs["use_safetensors"] = True  # never unpickle a .bin lying beside the safetensors
    if shard:
        kwargs["device_map"] = "auto"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model: Any = AutoModel.from_pretrained(str(checkpoint.path), **kwargs)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise FormatError(f"transformers cannot load the weights of {checkpoint.path} ({first_line(exc)})") from exc
    if getattr(model.config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()
    model.eval()
    if not shard:
        model.to(device)
    return model


def forward_pass(
    checkpoint: Checkpoint,
    texts: Sequence[str],
    max_length: int,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
    trust_remote_code: bool = False,
    device: str | None = None,
    dtype: str | None = None,
    tokenizer_spec: str | None = None,
    capture: bool = True,
) -> ForwardResult:
    """Hidden-state centroids of every layer and, with ``capture``, the query/key centroids of every block."""
    if not texts:
        # Checked first: a tokenizer given an empty batch fails with an IndexError of its own.
        raise InputError("no sequence to run through the model; check the corpus")
    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    import torch
    from transformers import AutoTokenizer

    from .mechanism import layer_list

    where = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, where, checkpoint.config)
    shard = check_fits(checkpoint, where, torch_dtype, batch_size, max_length)
    if tokenizer_spec is None:
        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint.path), trust_remote_code=trust_remote_code)
    else:  # the tokenizer the counts were made with, resolved the same offline-first way
        from ..corpus.tokenize import load_hf_tokenizer

        tokenizer, _ = load_hf_tokenizer(tokenizer_spec)
    model = load_model(checkpoint, where, torch_dtype, shard, trust_remote_code)
    input_device = next(model.parameters()).device
    blocks = layer_list(model, model.config)
    block_of = {id(module): index + 1 for index, block in enumerate(blocks) for module in block.modules()}
    notes: list[str] = []

    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    order = np.argsort([len(ids) for ids in encoded], kind="stable")
    n = max((len(ids) for ids in encoded), default=0)
    recorder = _Capture(block_of, max(n, 4))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    sums: torch.Tensor | None = None
    counts = torch.zeros(n, dtype=torch.float64)
    method = "none"
    handles: list[Any] = []

    def run(ids: torch.Tensor, mask: torch.Tensor) -> Any:
        recorder.mask = mask.to(input_device)
        recorder.weights = {recorder.mask.device: recorder.mask.float()}
        recorder.seen.clear()
        recorder.ordinal = 0
        try:
            return model(input_ids=ids.to(input_device), attention_mask=recorder.mask, output_hidden_states=True)
        finally:
            recorder.mask = None

    with torch.no_grad(), capture_attention(model, recorder) if capture else contextlib.nullcontext():
        if capture:
            # A probe: does attention go through the interface? If not, hook the projections instead.
            probe = torch.full((1, min(4, max(n, 1))), pad, dtype=torch.long)
            run(probe, torch.ones_like(probe))
            if recorder.calls:
                method = "attention interface"
            else:
                handles = _projection_hooks(model, recorder, blocks)
                run(probe, torch.ones_like(probe))
                method = "projections" if recorder.calls else "none"
            recorder.queries.clear()
            recorder.keys.clear()
        try:
            for start in range(0, len(order), batch_size):
                batch = [encoded[k] for k in order[start : start + batch_size]]
                width = max(len(ids) for ids in batch)
                ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, sequence in enumerate(batch):
                    ids[row, : len(sequence)] = torch.tensor(sequence)
                    mask[row, : len(sequence)] = 1
                output = run(ids, mask)
                states = output.hidden_states
                if sums is None:
                    sums = torch.zeros((len(states), n, states[0].shape[-1]), dtype=torch.float64)
                for layer, hidden in enumerate(states):  # layer by layer: sharded models keep them on several GPUs
                    weights = mask.to(device=hidden.device, dtype=torch.float32)
                    sums[layer, :width] += torch.einsum("bth,bt->th", hidden.float(), weights).to("cpu", torch.float64)
                counts[:width] += mask.to(torch.float64).sum(0)
                if progress is not None:
                    progress(len(batch))
        finally:
            for handle in handles:
                handle.remove()
    if sums is None:
        raise InputError("no sequence to run through the model; check the corpus")
    reach = counts.numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        centroids = sums.numpy() / reach[None, :, None]

        def mean(store: dict[int, Any]) -> dict[int, np.ndarray]:
            return {block: total[:n].cpu().numpy() / reach[:n, None] for block, total in store.items()}

        queries, keys = mean(recorder.queries), mean(recorder.keys)
    rope_inside = checkpoint.mechanism.kind == "rope"
    if method == "projections" and rope_inside:
        notes.append(
            f"{type(model).__name__} rotates its queries and keys inside its own attention code, which transformers' "
            "attention interface does not reach; query/key rows are left out rather than measured before the rotation"
        )
        queries, keys, method = {}, {}, "none"
    elif capture and method == "none":
        notes.append(
            f"{type(model).__name__} has no attention module whose queries and keys can be captured; "
            "query/key rows are left out"
            + (" (it has no attention layers)" if not checkpoint.mechanism.attention_layers else "")
        )
    return ForwardResult(centroids, reach.astype(np.int64), queries, keys, method, notes)


def hidden_centroids(
    checkpoint: Checkpoint, texts: Sequence[str], max_length: int, **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer position centroids of ``texts``: (L + 1, n, hidden) and the (n,) reach; the options are
    :func:`forward_pass`'s, without the query/key capture."""
    result = forward_pass(checkpoint, texts, max_length, capture=False, **options)
    return result.centroids, result.reach
