"""The forward pass: per-position centroids of every layer's hidden states, queries and keys.

c_l(i) = (1 / N'_i) sum_s h_l(s, i) over the N'_i sampled sequences s longer than i
(GEOMETRY.md, hidden-state stress). One batched no_grad forward pass with
``output_hidden_states`` (``use_cache=False`` wherever the forward takes it: it never generates);
sequences are sorted by length so batches carry little padding, sums are taken on the device and
accumulated on the host in float64. Queries and keys are captured as the attention sees them
(:mod:`~geoanalyze.checkpoints.capture`): a probe batch finds whether the attention goes through
transformers' attention interface, else the projections are hooked (:meth:`_Run.probe`).

No layer is assumed to keep the input's (batch, length) (:meth:`_Run.place`), several residual
streams per position are reduced to one row (:meth:`_Run.collapse_streams`), hidden states that
are not the blocks' are read from the blocks (:meth:`_Run.states`), and a row that ranks no pair
of positions is left out (:func:`flat_row`), each with a note; a batch transformers itself cannot
run is left out with a note, a checkpoint it cannot run on any batch refused (FormatError).
docs/checkpoints.md ("Several residual streams per position") gives the reasons model by model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypedDict, Unpack

import numpy as np

from ..errors import InputError
from .capture import QueryKeySums, hook_projections
from .interface import capture_attention
from .load import Checkpoint
from .long import LONG_SEQUENCE, automatic_chunk, cache_parameter, check_attention, chunk_width, long_memory, new_cache
from .mechanism import blocks_run, layer_list
from .placement import DEVICES, DTYPES, available_memory, resolve_device, resolve_dtype
from .quirks import quirks

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
    notes : what of the queries and keys could not be measured, and why.
    layer_reach : (L + 1, n) the sequences that reach each position at each layer, where a layer
        holds other positions than the input (pooled: its rows sit at the input position each pooled
        position ends at; not measurable: all 0); None when every layer has the input's reach.
    hidden_notes : how the hidden states were measured where a layer is not the input's sequence.
    """

    centroids: np.ndarray
    reach: np.ndarray
    queries: dict[int, np.ndarray] = field(default_factory=dict)
    keys: dict[int, np.ndarray] = field(default_factory=dict)
    capture: str = "none"
    notes: list[str] = field(default_factory=list)
    layer_reach: np.ndarray | None = None
    hidden_notes: list[str] = field(default_factory=list)

    def reach_of(self, layer: int) -> np.ndarray:
        """(n,) the sequences that reach each position at ``layer``."""
        return self.reach if self.layer_reach is None else self.layer_reach[layer]


def sample_indices(n_texts: int, max_sequences: int | None, seed: int = 0) -> np.ndarray:
    """Which texts the forward pass uses: all, or a seeded sample of ``max_sequences`` in corpus order."""
    if max_sequences is None or max_sequences >= n_texts:
        return np.arange(n_texts)
    if max_sequences < 1:
        raise InputError(f"--max-sequences must be at least 1, got {max_sequences}")
    return np.sort(np.random.default_rng(seed).choice(n_texts, size=max_sequences, replace=False))


# --- memory ---------------------------------------------------------------------------------------


def memory_estimate(
    checkpoint: Checkpoint, dtype: Any, batch_size: int, max_length: int, chunk: int | None = None
) -> int:
    """Bytes the pass needs: the weights in ``dtype``, plus every layer's hidden states for one batch
    (output_hidden_states keeps them all; of one chunk where the pass runs in chunks) and a working margin
    of 20%; past :data:`~.long.LONG_SEQUENCE` tokens or in chunks, also the sums, the key/value cache and
    one chunk's attention workspace (:func:`~.long.long_memory`)."""
    import torch

    mechanism = checkpoint.mechanism
    width = torch.tensor([], dtype=dtype).element_size()
    weights = (mechanism.parameters + mechanism.buffers) * width
    streams = residual_streams(checkpoint.config)
    hidden = max(mechanism.hidden_size, 1)
    activations = (mechanism.layers + 1) * batch_size * (chunk or max_length) * hidden * streams * 4 * 3
    if chunk is not None or max_length > LONG_SEQUENCE:
        text = checkpoint.config.get("text_config")
        config = SimpleNamespace(**(text if isinstance(text, dict) else checkpoint.config))
        activations += long_memory(config, mechanism.layers, hidden, width, (batch_size, max_length), chunk)
    return int(1.2 * weights + activations)


#: config keys that count the residual streams a layer passes on per position: hyper-connections
#: (DeepSeek-V4, HY-V4: hc_mult) and AltUp (Gemma 3n: altup_num_inputs)
STREAM_KEYS = ("hc_mult", "altup_num_inputs")


def residual_streams(config: dict[str, Any]) -> int:
    """How many residual streams each layer's hidden state holds per position (1 for most models), read
    from the config or its text config."""
    text = config.get("text_config")
    for source in (config, text if isinstance(text, dict) else {}):
        for key in STREAM_KEYS:
            value = source.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                return value
    return 1


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"


def check_fits(
    checkpoint: Checkpoint, device: str, dtype: Any, batch_size: int, max_length: int, chunk: int | None = None
) -> bool:
    """Whether the model needs sharding (True) or fits one device (False); InputError when it fits nowhere asked."""
    import torch

    needed = memory_estimate(checkpoint, dtype, batch_size, max_length, chunk)
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
        + (f", --max-length or --chunk-size (now {chunk or max_length})" if max_length > LONG_SEQUENCE or chunk else "")
    )


# --- the pass ------------------------------------------------------------------------------------


def load_model(
    checkpoint: Checkpoint, device: str, dtype: Any, shard: bool, trust_remote_code: bool = False
) -> tuple[Any, Any]:
    """The module the pass runs (the checkpoint's base model; the encoder of an encoder-decoder; the
    encoder class itself for an encoder-only checkpoint such as T5EncoderModel; the decoder of a
    decoder-only one such as BartForCausalLM), in eval mode, and the model's config (an encoder
    module such as FSMT's has none of its own)."""
    import warnings

    from transformers import AutoModel

    from ..errors import FormatError, first_line
    from ..hub import import_transformers
    from .placement import part_class, part_module

    import_transformers()
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "dtype": dtype}
    if any(checkpoint.path.glob("*.safetensors")):
        kwargs["use_safetensors"] = True  # never unpickle a .bin lying beside the safetensors
    if shard:
        kwargs["device_map"] = "auto"
    found, part = part_class(checkpoint.config, lambda: checkpoint.tensor_names)
    loader: Any = found or AutoModel
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model: Any = loader.from_pretrained(str(checkpoint.path), **kwargs)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise FormatError(f"transformers cannot load the weights of {checkpoint.path} ({first_line(exc)})") from exc
    config = model.config
    if part == "decoder":
        # The pass never generates: no key/value cache, which a decoder alone would size by its seq2seq
        # config's num_hidden_layers, the encoder's layer count (BlenderbotDecoder's DynamicCache(config))
        config.use_cache = False
    model = part_module(model, part, bool(getattr(config, "is_encoder_decoder", False)))
    model.eval()
    if not shard:
        model.to(device)
    return model, config


class PassOptions(TypedDict, total=False):
    """How :func:`forward_pass` runs the model: where, in what precision, with which tokenizer.

    device : cpu | cuda | mps; None picks the best available. dtype : float32 | bfloat16 | float16; None
    the checkpoint's own where the device runs it. tokenizer_spec : the tokenizer the counts were made with
    (None: the checkpoint's own). trust_remote_code : run the checkpoint's own modeling code. chunk_size :
    tokens per forward of a causal decoder's chunked prefill (:mod:`~.long`); None: one pass, or 2048-token
    chunks past 8192 tokens where one pass does not fit in memory.
    """

    device: str | None
    dtype: str | None
    tokenizer_spec: str | None
    trust_remote_code: bool
    chunk_size: int | None


def forward_pass(
    checkpoint: Checkpoint,
    texts: Sequence[str],
    max_length: int,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
    capture: bool = True,
    **options: Unpack[PassOptions],
) -> ForwardResult:
    """Hidden-state centroids of every layer and, with ``capture``, the query/key centroids of every block."""
    if not texts:
        # Checked first: a tokenizer given an empty batch fails with an IndexError of its own.
        raise InputError("no sequence to run through the model; check the corpus")
    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    import torch

    where = resolve_device(options.get("device"))
    torch_dtype = resolve_dtype(options.get("dtype"), where, checkpoint.config)
    trust_remote_code = options.get("trust_remote_code", False)
    chunk, automatic = automatic_chunk(
        max_length,
        chunk_width(max_length, options.get("chunk_size")),
        lambda width: (
            memory_estimate(checkpoint, torch_dtype, batch_size, max_length, width) <= available_memory(where)
        ),
    )
    shard = check_fits(checkpoint, where, torch_dtype, batch_size, max_length, chunk)
    tokenizer = _tokenizer(checkpoint, options.get("tokenizer_spec"), trust_remote_code)
    model, config = load_model(checkpoint, where, torch_dtype, shard, trust_remote_code)
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    run = _Run(model, config, max((len(ids) for ids in encoded), default=0))
    if chunk is not None:
        run.plan_chunks(chunk, padded_alone(config) > 1 or unpadded(config))
        if automatic and run.chunk is None:  # one pass after all: it must fit
            check_fits(checkpoint, where, torch_dtype, batch_size, max_length)
    free = available_memory(where) - memory_estimate(checkpoint, torch_dtype, batch_size, max_length, chunk)
    shape = (batch_size, max_length)
    run.long_notes += check_attention(model, config, checkpoint.mechanism.hidden_size, shape, run.chunk, free)
    implementation = getattr(config, "_attn_implementation", None)
    with (
        torch.no_grad(),
        capture_attention(model, run.recorder, implementation) if capture else contextlib.nullcontext(),
    ):
        method, handles = run.probe(pad) if capture else ("none", [])
        try:
            for ids, mask in _batches(encoded, pad, batch_size, padded_alone(config), unpadded(config)):
                run.run(ids, mask)
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


def padded_alone(config: Any) -> int:
    """The multiple a model pads a sequence's length to inside its forward, where how far it pads changes
    the sequence's own output (its quirks' ``pad_multiple``: Reformer); 1 for every other model."""
    rule = quirks(getattr(config, "model_type", "")).pad_multiple
    return rule(config) if rule is not None else 1


def unpadded(config: Any) -> bool:
    """Whether a model must get batches without padding (its quirks' ``unpadded``: CPM-Ant, Funnel where it pools)."""
    rule = quirks(getattr(config, "model_type", "")).unpadded
    return rule is not None and rule(config)


def batch_groups(lengths: Sequence[int], batch_size: int, multiple: int = 1, exact: bool = False) -> list[np.ndarray]:
    """Indices of each batch: the sequences sorted by length (stable), ``batch_size`` at most, and a new
    batch wherever the length rounded up to ``multiple`` changes, when ``multiple`` > 1 (so every sequence
    of a batch is padded to the length the model pads it to alone: :func:`padded_alone`), or wherever the
    length changes, when ``exact`` (no padding: :func:`unpadded`)."""
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    multiple = max(multiple, 1)
    if multiple == 1 and not exact:
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    rounded = -(-np.asarray(lengths, dtype=np.int64)[order] // multiple)
    groups: list[np.ndarray] = []
    for run in np.split(order, np.flatnonzero(np.diff(rounded)) + 1):
        groups.extend(run[start : start + batch_size] for start in range(0, len(run), batch_size))
    return groups


def _batches(
    encoded: Sequence[Sequence[int]], pad: int, batch_size: int, multiple: int = 1, exact: bool = False
) -> Iterator[tuple[Any, Any]]:
    """(ids, mask), each (B, T) long, of the batches of :func:`batch_groups`, padded with ``pad``."""
    import torch

    for group in batch_groups([len(ids) for ids in encoded], batch_size, multiple, exact):
        batch = [encoded[k] for k in group]
        width = max(len(ids) for ids in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, sequence in enumerate(batch):
            ids[row, : len(sequence)] = torch.tensor(sequence)
            mask[row, : len(sequence)] = 1
        yield ids, mask


class _Run:
    """The sums of one pass: hidden states per layer and position (host, float64), the reach of each
    position (per layer: a pooled layer reaches other positions), and the query/key sums of the recorder."""

    def __init__(self, model: Any, config: Any, n: int) -> None:
        import torch

        self.model = model
        self.config = config
        self.n = n  # the longest sequence
        self.device = next(model.parameters()).device
        self.blocks = layer_list(model, config)
        block_of = {id(module): index + 1 for index, block in enumerate(self.blocks) for module in block.modules()}
        # blocks counted as they run where the forward runs more than it lists (modules reused over cycles)
        by_call = bool(self.blocks) and blocks_run(config, self.blocks) > len(self.blocks)
        self.recorder = QueryKeySums(block_of, max(n, 4), by_call=by_call)
        self.sums: list[Any] = []  # per layer (n, hidden)
        self.layer_counts: list[Any] = []  # per layer (n,)
        self.counts = torch.zeros(n, dtype=torch.float64)
        self.padded = 0  # the most positions the model appended to a batch's hidden states
        self.pooled: dict[int, int] = {}  # layer -> stride of its pooling
        self.unmeasured: dict[int, str] = {}  # layer -> why it has no row
        self.skipped: list[tuple[int, int, str]] = []  # batches the model cannot run: (sequences, length, why)
        self.streams: tuple[int, int] | None = None  # AltUp: (streams per layer, the active one)
        self.stream_means: dict[int, int] = {}  # layer -> how many residual streams its row is the mean of
        # The pass never generates: no key/value cache (BLT's forward sizes its DynamicCache by the top config's
        # num_hidden_layers, which it has none of: exit 3 before)
        self.call_options = {"use_cache": False} if _accepts(model.forward, "use_cache") else {}
        self.own_states: bool | None = None  # the rows are the blocks' own (hooked), not hidden_states: first batch
        self.reported = 0  # how many hidden states the model itself reports
        self.chunk: int | None = None  # tokens per forward of a chunked prefill (:meth:`plan_chunks`); None: one pass
        self.cache_name = ""  # the forward's cache argument
        self.window: tuple[Any, dict[str, Any]] | None = None  # the chunk under way: (mask up to its end, arguments)
        self.long_notes: list[str] = []  # how a long sequence was run

    def plan_chunks(self, chunk: int, special: bool) -> None:
        """Run sequences longer than ``chunk`` in chunks through the model's cache where it has one (a note either way)."""
        name, why = cache_parameter(self.model, self.config, len(self.blocks), special)
        if name is None:
            self.long_notes.append(f"{why}: each sequence runs in one pass")
            return
        self.chunk, self.cache_name = chunk, name
        self.long_notes.append(
            f"sequences longer than {chunk} tokens run in chunks of {chunk} (chunked prefill through the model's "
            "DynamicCache, at their true position ids): each position sees the positions it sees in one pass"
        )

    def call(self, ids: Any, mask: Any) -> Any:
        """The model's own forward on one batch (or one chunk of it), with every hidden state."""
        options = self.call_options
        if self.window is not None:
            mask, options = self.window[0], {**options, **self.window[1]}
        return self.model(input_ids=ids.to(self.device), attention_mask=mask, output_hidden_states=True, **options)

    def add_chunks(self, ids: Any, mask: Any) -> None:
        """Add one batch chunk by chunk: chunk [s, e) with the cache of positions 0 .. s - 1, the mask of
        0 .. e - 1 and position ids s .. e - 1; its rows added at positions s .. e - 1."""
        import torch

        cache, width, chunk = new_cache(self.config), int(mask.shape[1]), self.chunk or 1
        try:
            for start in range(0, width, chunk):
                end = min(start + chunk, width)
                positions = torch.arange(start, end, device=self.device).expand(len(ids), -1)
                arguments = {self.cache_name: cache, "use_cache": True, "position_ids": positions}
                self.window = (mask[:, :end].to(self.device), arguments)
                self.recorder.start_row, self.recorder.chunked = start, True
                self.add(ids[:, start:end], mask[:, start:end], start)
        finally:
            self.window = None
            self.recorder.start_row, self.recorder.chunked = 0, False

    def forward(self, ids: Any, mask: Any) -> Any:
        self.recorder.start(mask.to(self.device))
        try:
            return self.call(ids, self.recorder.mask)
        except BaseException:
            self.recorder.discard()  # a forward that failed half-way adds nothing
            raise
        finally:
            self.recorder.stop()

    def run(self, ids: Any, mask: Any) -> None:
        """Add one batch; a batch the model itself cannot run (run again without any capture: it fails
        too) is skipped and counted, with transformers' reason; any other failure is raised."""
        try:
            if self.chunk is not None and mask.shape[1] > self.chunk:
                self.add_chunks(ids, mask)
            else:
                self.add(ids, mask)
        except (RuntimeError, ValueError, IndexError) as exc:
            text = str(exc).lower()
            if "out of memory" in text or "can't allocate memory" in text:
                raise  # memory, not the batch (CUDA's OutOfMemoryError, the CPU allocator's): never skipped
            try:  # the recorder is stopped: the hooks and the capturing attention only pass through
                self.call(ids, mask.to(self.device))
            except (RuntimeError, ValueError, IndexError):
                from ..errors import first_line

                self.skipped.append((len(ids), int(mask.sum(1).max()), f"{type(exc).__name__}: {first_line(exc)}"))
                return
            raise

    def probe(self, pad: int) -> tuple[str, list[Any]]:
        """Does attention go through the interface? If not, hook the projections instead: the capture
        method ("attention interface", "projections", "none") and the hooks' handles."""
        import torch

        # a batch of one (so that a sequence-first projection shows as such), of up to 16 positions
        # (Funnel's pooling fails on 4)
        probe = torch.full((1, min(16, max(self.n, 1))), pad, dtype=torch.long)
        longest, self.n = self.n, probe.shape[1]  # the probe's sums as long as the probe, not the corpus
        self.recorder.length = max(self.n, 4)
        self.run(probe, torch.ones_like(probe))
        method, handles = "attention interface", []
        if not self.recorder.calls:
            model_type = str(getattr(self.config, "model_type", ""))
            handles = hook_projections(self.recorder, self.blocks, model_type, self.config)
            self.run(probe, torch.ones_like(probe))
            method = "projections" if self.recorder.calls else "none"
        self.n, self.recorder.length = longest, max(longest, 4)
        self.recorder.host = longest > LONG_SEQUENCE
        for kept in (self.skipped, self.sums, self.layer_counts, self.pooled, self.unmeasured, self.stream_means):
            kept.clear()  # the probe's hidden states are not the corpus's
        self.counts.zero_()
        self.padded = 0
        self.recorder.clear()
        return method, handles

    def add(self, ids: Any, mask: Any, start: int = 0) -> None:
        """Run one batch (or the chunk of it from position ``start``); add its hidden states layer by layer
        (sharded models keep them on several GPUs)."""
        import torch

        states = self.states(ids, mask)
        width = mask.shape[1]
        for layer, hidden in enumerate(states):
            if isinstance(hidden, tuple | list):  # PegasusX's last entry: (the sequence, its global tokens)
                hidden = hidden[0]
            hidden = self.collapse_streams(layer, hidden, ids.shape[0])
            if len(self.sums) <= layer:  # every layer as wide as the first (another width has no row)
                self.sums.append(torch.zeros((self.n, (self.sums or [hidden])[0].shape[-1]), dtype=torch.float64))
                self.layer_counts.append(torch.zeros(self.n, dtype=torch.float64))
            placed = self.place(layer, hidden, mask)
            if placed is None:
                continue
            hidden, positions = placed
            weights = mask[:, positions].to(torch.float32)
            positions = positions + start
            sums = torch.einsum("bth,bt->th", hidden.float(), weights.to(hidden.device)).to("cpu", torch.float64)
            self.sums[layer][positions] += sums
            self.layer_counts[layer][positions] += weights.to(torch.float64).sum(0)
        self.counts[start : start + width] += mask.to(torch.float64).sum(0)

    def states(self, ids: Any, mask: Any) -> Any:
        """The batch's hidden states per layer: the model's own ``hidden_states``, or, where those are not its
        blocks' (decided on the first batch, :func:`reports_blocks`), the blocks' own, hooked: layer 0 the
        first block's input, layer i block i's output. BLT records every BltTransformerLayer of its four
        stacks (the entropy patcher's, the local encoder's, the global transformer's over patches, the local
        decoder's) in one tuple, and of its blocks, the local encoder's layers, only the patcher's come."""
        if self.own_states is False or not self.blocks:
            return self.forward(ids, mask).hidden_states
        collected: list[Any] = []
        handles = hook_block_states(self.blocks, collected)
        try:
            reported = self.forward(ids, mask).hidden_states
        finally:
            for handle in handles:
                handle.remove()
        if self.own_states is None:
            self.own_states = len(collected) == len(self.blocks) + 1 and not reports_blocks(reported, collected)
            self.reported = len(reported or ())
        return tuple(collected) if self.own_states else reported

    def collapse_streams(self, layer: int, hidden: Any, batch: int) -> Any:
        """One (B, T, h) state per position: Gemma3n's (streams, B, T, h) AltUp states give the active stream
        (``altup_active_idx``), the one its attention and MLP read; (B, T, *streams, h) states
        (hyper-connections) the mean over the stream axes (the residual state the blocks update:
        docs/checkpoints.md, "Several residual streams per position"); any other shape as it is."""
        active = getattr(self.config, "altup_active_idx", None)
        if hidden.dim() == 4 and hidden.shape[1] == batch and isinstance(active, int):
            self.streams = (int(hidden.shape[0]), active)
            return hidden[active]
        if hidden.dim() <= 3 or hidden.shape[0] != batch:
            return hidden
        axes = tuple(range(2, hidden.dim() - 1))
        self.stream_means[layer] = int(np.prod([hidden.shape[axis] for axis in axes]))
        return hidden.float().mean(dim=axes)

    def place(self, layer: int, hidden: Any, mask: Any) -> tuple[Any, Any] | None:
        """A layer's (B, T', h) states on the batch's positions: T' = T as they are; T' > T (padded to a
        window or chunk) trimmed; T' < T (pooled) at the input position each pooled position ends at;
        None (with the reason) where the layer cannot be placed."""
        import torch

        batch, width = mask.shape
        length = hidden.shape[1] if hidden.dim() == 3 else -1
        if hidden.dim() != 3 or hidden.shape[0] != batch or hidden.shape[-1] != self.sums[layer].shape[1]:
            self.unmeasured.setdefault(
                layer, f"its hidden states have shape {tuple(hidden.shape)} for a batch of {batch} x {width}"
            )
            return None
        if length >= width:
            self.padded = max(self.padded, length - width)
            return hidden[:, :width], torch.arange(width)
        pooled = pooled_positions(self.config, layer, length, width)
        if pooled is None:
            self.unmeasured.setdefault(
                layer,
                f"it holds {length} positions for an input of {width} (the model shortens the sequence) and how they map back to the input is not known",
            )
            return None
        self.pooled[layer] = pooled[1]
        return hidden, torch.as_tensor(pooled[0])

    def layer_reach(self) -> np.ndarray | None:
        """(L + 1, n) per-layer reach where any layer differs from the input's, else None."""
        reach = np.stack([counts.numpy() for counts in self.layer_counts]).astype(np.int64)
        return None if np.array_equal(reach, np.broadcast_to(self.counts.numpy(), reach.shape)) else reach

    def hidden_notes(self) -> list[str]:
        name = type(self.model).__name__
        notes = list(self.long_notes)
        padded = max(self.padded, self.recorder.padded)
        if padded:
            notes.append(
                f"{name}'s layers hold up to {padded} positions more than the input, appended after the sequence "
                "(padding to a multiple of an attention window or chunk, as Longformer's and Reformer's, or further "
                "streams, as ProphetNet's n-gram predictions); they are trimmed from the hidden states and the "
                "queries and keys"
            )
        if self.own_states:
            notes.append(
                f"{name}'s own hidden_states ({self.reported} states) are not its {len(self.blocks)} blocks' "
                f"({block_stack(self.model, self.blocks)}): the hidden rows are the blocks' own, at the input's "
                "positions (layer 0 the first block's input, layer i block i's output)"
                + other_stacks(self.model, self.blocks)
            )
        if self.streams is not None:
            notes.append(
                f"{name} keeps {self.streams[0]} AltUp streams at every layer; the hidden rows are the active "
                f"stream's (altup_active_idx {self.streams[1]}), the one its attention and MLP read"
            )
        if self.stream_means:
            layers = ", ".join(str(layer) for layer in sorted(self.stream_means))
            count = max(self.stream_means.values())
            notes.append(
                f"{name} keeps {count} residual streams per position (hyper-connections) at layers {layers}; their "
                "hidden rows are the mean over the streams, the residual state the blocks update (at layer 0 the "
                "embedding)"
            )
        if self.pooled:
            strides = ", ".join(f"layer {layer}: stride {stride}" for layer, stride in sorted(self.pooled.items()))
            notes.append(f"{name} pools the sequence ({strides}): {pooling_rule(self.config)}")
        notes.extend(f"layer {layer} has no hidden row: {why}" for layer, why in sorted(self.unmeasured.items()))
        if self.skipped:
            sequences = sum(count for count, _, _ in self.skipped)
            longest = max(length for _, length, _ in self.skipped)
            notes.append(
                f"{sequences} sequences (in batches of up to {longest} tokens) are left out: transformers' {name} "
                f"cannot run them ({self.skipped[0][2]})"
            )
        return notes


def _accepts(function: Any, name: str) -> bool:
    """Whether ``function`` takes a parameter ``name`` (by its signature; False where it has none to read)."""
    import inspect

    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def hook_block_states(blocks: Sequence[Any], collected: list[Any]) -> list[Any]:
    """Forward hooks that append to ``collected`` the first block's input (its first tensor argument, or
    ``hidden_states``) once, then each block's output (the first entry of a tuple); their handles."""
    import torch

    def first(module: Any, args: Any, kwargs: Any) -> None:
        if not collected:
            given = [value for value in (*args, kwargs.get("hidden_states")) if isinstance(value, torch.Tensor)]
            if given:
                collected.append(given[0])

    def after(module: Any, args: Any, output: Any) -> None:
        if collected:
            collected.append(output[0] if isinstance(output, tuple | list) else output)

    handles = [blocks[0].register_forward_pre_hook(first, with_kwargs=True)]
    return handles + [block.register_forward_hook(after) for block in blocks]


def reports_blocks(reported: Any, collected: Sequence[Any]) -> bool:
    """Whether a model's ``hidden_states`` are its blocks' (one per block and the input, or the first block's
    output first: a model that counts otherwise, ALBERT's shared block or Funnel's decoder, keeps its own)."""
    import torch

    if reported is None:
        return False
    if len(reported) == len(collected):
        return True
    first, mine = (reported[1], collected[1]) if len(reported) > 1 and len(collected) > 1 else (None, None)
    return (
        isinstance(first, torch.Tensor)
        and isinstance(mine, torch.Tensor)
        and first.shape == mine.shape
        and bool(torch.equal(first, mine))
    )


def block_stack(model: Any, blocks: Sequence[Any]) -> str:
    """The name of the blocks' list in the model (``local_encoder.layers``)."""
    return next((name for name, module in model.named_modules() if module is blocks[0]), "").rsplit(".", 1)[0]


def other_stacks(model: Any, blocks: Sequence[Any]) -> str:
    """'; ... have no rows' naming the model's other lists of the blocks' class (BLT's patcher, global
    transformer and local decoder), or ''."""
    import torch

    mine = block_stack(model, blocks)
    others = [
        f"{name} ({len(module)})"
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList)
        and name != mine
        and len(module) > 0
        and type(module[0]) is type(blocks[0])
    ]
    if not others:
        return ""
    return (
        f"; its other stacks of {type(blocks[0]).__name__} ({', '.join(others)}) have no rows: they are not the "
        "stack the input's tokens enter (BLT's global transformer runs over patches, not the input's positions)"
    )


def pooled_positions(config: Any, layer: int, length: int, width: int) -> tuple[np.ndarray, int] | None:
    """The input position each of a pooled layer's ``length`` positions is placed at, and the stride,
    for an input of ``width``; None for a model whose pooling is not known (only Funnel's is).

    Funnel pools by 2 at the first layer of every block after the first (``block_sizes``). With
    ``separate_cls`` (the default) its position 0 is the first token alone and position j >= 1 covers
    input positions (j - 1) s + 1 .. j s; without, position j covers j s .. (j + 1) s - 1. Either
    way a pooled position is placed at the last input position it covers (clipped to the input),
    and it is real (min-pooled mask) exactly where that input position is."""
    sizes = getattr(config, "block_sizes", None) if getattr(config, "model_type", "") == "funnel" else None
    if not sizes or layer < 1:
        return None
    block = int(np.searchsorted(np.cumsum(sizes), layer - 1, side="right"))
    stride = 2**block
    if block >= len(sizes) or stride == 1 or length != -(-width // stride):
        return None
    j = np.arange(length)
    last = j * stride if getattr(config, "separate_cls", True) else (j + 1) * stride - 1
    return np.minimum(last, width - 1), stride


def pooling_rule(config: Any) -> str:
    """How a pooled position maps back to the input (the note of :func:`pooled_positions`)."""
    if getattr(config, "separate_cls", True):
        return (
            "pooled position j covers input positions (j - 1) s + 1 .. j s (position 0: the first token alone) "
            "and its hidden row is placed at input position j s"
        )
    return (
        "pooled position j covers input positions j s .. (j + 1) s - 1 and its hidden row is placed at the last of them"
    )


def _result(checkpoint: Checkpoint, model: Any, run: _Run, method: str, capture: bool) -> ForwardResult:
    """Sums over reach, and the notes on what was not captured."""
    if not run.sums and run.skipped:  # transformers' own model fails on every batch: the checkpoint's config
        from ..errors import FormatError

        raise FormatError(
            f"transformers' {type(model).__name__} cannot run {checkpoint.name} on any of its sequences "
            f"({run.skipped[0][2]}); check the checkpoint's config"
        )
    if not run.sums:
        raise InputError("no sequence to run through the model; check the corpus")
    reach = run.counts.numpy()
    n = run.n
    with np.errstate(invalid="ignore", divide="ignore"):
        # in place, layer by layer: at long lengths the sums are the pass's largest arrays
        centroids = np.empty((len(run.sums), *run.sums[0].shape), dtype=np.float64)
        for layer, counts in enumerate(run.layer_counts):
            np.divide(run.sums[layer].numpy(), counts.numpy()[:, None], out=centroids[layer])
            run.sums[layer] = None

        def mean(store: dict[int, Any]) -> dict[int, np.ndarray]:
            means = {}
            for block, total in store.items():
                means[block] = total[:n].cpu().numpy()  # the host's sums themselves (a GPU's are copied)
                means[block] /= reach[:n, None]
            return means

        queries, keys = mean(run.recorder.queries), mean(run.recorder.keys)
    notes = _query_key_notes(checkpoint, model, run, method, capture, queries, keys)
    if method == "projections" and checkpoint.mechanism.kind == "rope" and not run.recorder.rotations:
        queries, keys = {}, {}
    notes.extend(_drop_flat_rows(queries, keys))
    if not (queries or keys):
        method = "none" if capture else method
    _drop_flat_layers(run, centroids)
    return ForwardResult(
        centroids, reach.astype(np.int64), queries, keys, method, notes, run.layer_reach(), run.hidden_notes()
    )


def flat_row(vectors: np.ndarray) -> str | None:
    """Why the centroids ``vectors`` (n, width) rank no pair of positions, or None when they do.

    Only finite rows count (the positions some sequence reaches). Flat means every pairwise distance
    is tied, as the monotonicity scores tie them (:func:`~geoanalyze.geometry.scores.tie_ranks`): then
    no pair of pairs is ordered and the monotonicity violation is 0 / 0 (NaN). Fewer than 3 rows are
    never flat here (no score is taken on them)."""
    from ..geometry.scores import tie_ranks, unit_distances

    rows = np.asarray(vectors, dtype=np.float64)
    rows = rows[np.all(np.isfinite(rows), axis=1)]
    if rows.shape[0] < 3:
        return None
    if rows.shape[0] > FLAT_DENSE_LIMIT:
        return _flat_long(rows)
    distances, scale = unit_distances(rows)
    if float(tie_ranks(distances).max()) > 0:
        return None
    if scale == 0:
        return "are 0 at every position"
    if float(distances.max()) == 0:
        return "are one and the same vector at every position"
    return "are equally far apart at every pair of positions"


#: rows past which :func:`flat_row` never forms the n (n - 1) / 2 distances (O(n x width) instead)
FLAT_DENSE_LIMIT = 2048


def _flat_long(rows: np.ndarray) -> str | None:
    """:func:`flat_row` of more rows than :data:`FLAT_DENSE_LIMIT`, in O(n x width): at most width + 1 points
    are equally far apart, so n > width + 1 rows are flat only when they are one vector (or all 0); n <=
    width + 1 are checked on the distances from the first row and between neighbours, which are all
    equal in a flat row (the full check needs the n x n distances)."""
    from ..geometry.scores import TIE_RTOL

    if float(np.abs(rows).max()) == 0:
        return "are 0 at every position"
    if not np.any(rows != rows[0]):
        return "are one and the same vector at every position"
    if rows.shape[0] > rows.shape[1] + 1:
        return None
    sampled = np.concatenate(
        [np.linalg.norm(rows[1:] - rows[0], axis=1), np.linalg.norm(np.diff(rows, axis=0), axis=1)]
    )
    if float(np.ptp(sampled)) > TIE_RTOL * float(sampled.max()):
        return None
    return "are equally far apart at every pair of positions"


def _drop_flat_rows(queries: dict[int, np.ndarray], keys: dict[int, np.ndarray]) -> list[str]:
    """Drop the query or key rows that are flat (:func:`flat_row`) from ``queries``/``keys``; the notes."""
    notes = []
    for kind, store in (("query", queries), ("key", keys)):
        plural = "queries" if kind == "query" else "keys"
        for block in sorted(store):
            why = flat_row(store[block])
            if why is None:
                continue
            del store[block]
            line = f"block {block} has no {kind} row: its {plural} {why}, so no score can order the positions by them"
            if why.startswith("are 0"):  # ZAYA's keys in an untrained checkpoint: its key scale starts at 0
                line += f" (the model scales its {plural} to 0, as a zero-initialised scale does before training)"
            notes.append(line)
    return notes


def _drop_flat_layers(run: _Run, centroids: np.ndarray) -> None:
    """A layer whose hidden centroids are flat (:func:`flat_row`) has no row (reach 0) and a note."""
    for layer, counts in enumerate(run.layer_counts):
        why = flat_row(centroids[layer]) if float(counts.sum()) > 0 else None
        if why is not None:
            counts.zero_()
            centroids[layer] = np.nan
            run.unmeasured.setdefault(layer, f"its hidden states {why}, so no score can order the positions by them")


def _query_key_notes(
    checkpoint: Checkpoint,
    model: Any,
    run: _Run,
    method: str,
    capture: bool,
    queries: dict[int, np.ndarray],
    keys: dict[int, np.ndarray],
) -> list[str]:
    """Why query/key rows are left out (all, or some blocks'); drops those blocks from ``queries``/``keys``."""
    name = type(model).__name__
    if not capture:
        return []
    if method == "projections" and checkpoint.mechanism.kind == "rope" and not run.recorder.rotations:
        return [
            f"{name} rotates its queries and keys inside its own attention code, which transformers' "
            "attention interface does not reach; query/key rows are left out rather than measured before the rotation"
        ]
    notes = run.recorder.notes()  # two attention modules side by side, padding inside a block
    one_sided = sorted(set(queries).difference(run.recorder.dropped) ^ set(keys).difference(run.recorder.dropped))
    for block, why in [
        *sorted(run.recorder.dropped.items()),
        *((block, "only one of its query and key projections was seen") for block in one_sided),
    ]:
        queries.pop(block, None)
        keys.pop(block, None)
        notes.append(f"block {block} has no query/key rows: {why}")
    if method != "none":
        for block in checkpoint.mechanism.attention_layers:
            if block not in queries and block not in run.recorder.dropped:
                notes.append(
                    f"block {block} has no query/key rows: its attention's queries and keys were not reached (no "
                    "query and key projections on the block's own sequence: shared, shifted or reshaped inside)"
                )
    if method == "none":
        notes.append(
            f"{name} has no attention module whose queries and keys can be captured; query/key rows are left out"
            + (" (it has no attention layers)" if not checkpoint.mechanism.attention_layers else "")
        )
    return notes


def hidden_centroids(
    checkpoint: Checkpoint, texts: Sequence[str], max_length: int, batch_size: int = 32, **options: Unpack[PassOptions]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer position centroids of ``texts``: (L + 1, n, hidden) and the (n,) reach (:func:`forward_pass`
    without the query/key capture)."""
    result = forward_pass(checkpoint, texts, max_length, batch_size, capture=False, **options)
    return result.centroids, result.reach
