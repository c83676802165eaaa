"""The forward pass: per-position centroids of every layer's hidden states, queries and keys.

c_l(i) = (1 / N'_i) sum_s h_l(s, i) over the N'_i sampled sequences s longer than i
(GEOMETRY.md, hidden-state stress). One batched no_grad forward pass with
``output_hidden_states``; sequences are sorted by length so batches carry little padding,
sums are taken on the device and accumulated on the host in float64.

Queries and keys are captured as the attention sees them, after the model's own position
transform (:mod:`~geoanalyze.checkpoints.capture`): a probe batch first finds whether the model's
attention goes through transformers' attention interface; if not, the query/key projections
are hooked instead where that is what attention sees (no rotation inside the module); otherwise
the rows are left out with a note.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from .capture import QueryKeySums, capture_attention, hook_projections
from .load import Checkpoint
from .mechanism import layer_list
from .placement import DEVICES, DTYPES, available_memory, resolve_device, resolve_dtype

__all__ = [
    "DEVICES",
    "DTYPES",
    "ForwardResult",
    "available_memory",
    "check_fits",
    "forward_pass",
    "hidden_centroids",
    "load_model",
    "memory_estimate",
    "resolve_device",
    "resolve_dtype",
    "sample_indices",
]


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


# --- memory ---------------------------------------------------------------------------------------


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

    where = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, where, checkpoint.config)
    shard = check_fits(checkpoint, where, torch_dtype, batch_size, max_length)
    tokenizer = _tokenizer(checkpoint, tokenizer_spec, trust_remote_code)
    model = load_model(checkpoint, where, torch_dtype, shard, trust_remote_code)
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    run = _Run(model, max((len(ids) for ids in encoded), default=0))
    with torch.no_grad(), capture_attention(model, run.recorder) if capture else contextlib.nullcontext():
        method, handles = run.probe(pad) if capture else ("none", [])
        try:
            for ids, mask in _batches(encoded, pad, batch_size):
                run.add(ids, mask)
                if progress is not None:
                    progress(len(ids))
        finally:
            for handle in handles:
                handle.remove()
    return _result(checkpoint, model, run, method, capture)


def _tokenizer(checkpoint: Checkpoint, tokenizer_spec: str | None, trust_remote_code: bool) -> Any:
    """The checkpoint's own tokenizer, or the one the counts were made with (resolved the same offline-first way)."""
    if tokenizer_spec is None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(checkpoint.path), trust_remote_code=trust_remote_code)
    from ..corpus.tokenize import load_hf_tokenizer

    tokenizer, _ = load_hf_tokenizer(tokenizer_spec)
    return tokenizer


def _batches(encoded: Sequence[Sequence[int]], pad: int, batch_size: int) -> Iterator[tuple[Any, Any]]:
    """(ids, mask), each (B, T) long, of the sequences sorted by length (stable), padded with ``pad``."""
    import torch

    order = np.argsort([len(ids) for ids in encoded], kind="stable")
    for start in range(0, len(order), batch_size):
        batch = [encoded[k] for k in order[start : start + batch_size]]
        width = max(len(ids) for ids in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, sequence in enumerate(batch):
            ids[row, : len(sequence)] = torch.tensor(sequence)
            mask[row, : len(sequence)] = 1
        yield ids, mask


class _Run:
    """The sums of one pass: hidden states per layer and position (host, float64), the reach of each
    position, and the query/key sums of the recorder."""

    def __init__(self, model: Any, n: int) -> None:
        import torch

        self.model = model
        self.n = n  # the longest sequence
        self.device = next(model.parameters()).device
        self.blocks = layer_list(model, model.config)
        block_of = {id(module): index + 1 for index, block in enumerate(self.blocks) for module in block.modules()}
        self.recorder = QueryKeySums(block_of, max(n, 4))
        self.sums: Any = None  # (L + 1, n, hidden)
        self.counts = torch.zeros(n, dtype=torch.float64)

    def forward(self, ids: Any, mask: Any) -> Any:
        self.recorder.start(mask.to(self.device))
        try:
            return self.model(input_ids=ids.to(self.device), attention_mask=self.recorder.mask, output_hidden_states=True)
        finally:
            self.recorder.stop()

    def probe(self, pad: int) -> tuple[str, list[Any]]:
        """Does attention go through the interface? If not, hook the projections instead: the capture
        method ("attention interface", "projections", "none") and the hooks' handles."""
        import torch

        probe = torch.full((1, min(4, max(self.n, 1))), pad, dtype=torch.long)
        self.forward(probe, torch.ones_like(probe))
        method, handles = "attention interface", []
        if not self.recorder.calls:
            handles = hook_projections(self.recorder, self.blocks)
            self.forward(probe, torch.ones_like(probe))
            method = "projections" if self.recorder.calls else "none"
        self.recorder.clear()
        return method, handles

    def add(self, ids: Any, mask: Any) -> None:
        """Run one batch; add its hidden states layer by layer (sharded models keep them on several GPUs)."""
        import torch

        states = self.forward(ids, mask).hidden_states
        if self.sums is None:
            self.sums = torch.zeros((len(states), self.n, states[0].shape[-1]), dtype=torch.float64)
        width = mask.shape[1]
        for layer, hidden in enumerate(states):
            weights = mask.to(device=hidden.device, dtype=torch.float32)
            self.sums[layer, :width] += torch.einsum("bth,bt->th", hidden.float(), weights).to("cpu", torch.float64)
        self.counts[:width] += mask.to(torch.float64).sum(0)


def _result(checkpoint: Checkpoint, model: Any, run: _Run, method: str, capture: bool) -> ForwardResult:
    """Sums over reach, and the notes on what was not captured."""
    if run.sums is None:
        raise InputError("no sequence to run through the model; check the corpus")
    reach = run.counts.numpy()
    n = run.n
    with np.errstate(invalid="ignore", divide="ignore"):
        centroids = run.sums.numpy() / reach[None, :, None]

        def mean(store: dict[int, Any]) -> dict[int, np.ndarray]:
            return {block: total[:n].cpu().numpy() / reach[:n, None] for block, total in store.items()}

        queries, keys = mean(run.recorder.queries), mean(run.recorder.keys)
    notes: list[str] = []
    if method == "projections" and checkpoint.mechanism.kind == "rope":
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
