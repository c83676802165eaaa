"""The stress analysis: one target (checkpoint or encoding) against the geometry of a corpus.

::

    resolve_target     the target (an encoding spec or a checkpoint): its tokenizer, width, positions, layers
 -> target_geometry    the corpus counted with the target's tokenizer -> Hellinger distances D between
                       the kept positions (N_i >= min-count)
 -> score_encodings    the target's position vectors, the standard encodings' and a random null, each
                       scored against D, tested against shuffles of its own positions, and per aspect whether
                       this corpus can rank on it at all
 -> score_layers       checkpoints, layer by layer: the position table through each layer's W_Q and W_K,
                       and the centroids of the queries, keys and hidden states of a forward pass

Every option is checked before the corpus is read (bad input fails in a second, not after the
counting). The result is a frozen :class:`~geoanalyze.results.StressResult`: its ``to_json()``
is what ``--format json`` prints, and it holds the arrays the figures draw.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from .cache import KEY_FIELD, cache_entry, cache_holds, cache_key, caching, key_matches, write_cache
from .corpus.marginals import DEFAULT_MIN_COUNT
from .corpus.positions import ALL as ALL_POSITIONS
from .corpus.positions import PositionSet, PositionSpec, pool_positions
from .corpus.sources import default_tokenizer, resolve_source
from .corpus.streaming import CountJob, compute_counts
from .encodings import Encoding, EncodingContext, get_encoding, is_encoding_spec, takes_model_width
from .encodings.rope_scaling import training_length
from .errors import FormatError, InputError
from .geometry.distances import PositionGeometry, position_geometry
from .geometry.null import ASPECT_WORDS, ASPECTS, D_ASPECTS, categories
from .geometry.sampled import PositionSample, dense_limit, draw_sample, jackknife_errors, sample_size, sampled_geometry
from .geometry.scores import all_scores
from .geometry.shuffle import ShuffleNull, can_decide, decide
from .geometry.windows import WindowScores, score_windows, window_count, window_distances
from .io import load_arrays, save_arrays
from .notes import note
from .results import (
    AspectDecision,
    CheckpointInfo,
    CorpusInfo,
    Discriminability,
    EncodingScores,
    LayerPeak,
    LayerRow,
    NullSettings,
    StressResult,
)

__all__ = [
    "CheckpointInfo",
    "CorpusInfo",
    "EncodingScores",
    "LayerRow",
    "StressOptions",
    "StressResult",
    "analyze",
    "known_distances",
    "split_specs",
]

DEFAULT_COMPARE = ("sinusoidal", "rope", "alibi", "mds", "random")
LAYER_SCORES = (
    "stress",
    "scaled_stress",
    "monotonicity_violation",
    "anchored_monotonicity_violation",
    "lag_violation",
    "relative_separation",
)
#: the scores --bootstrap gives intervals for
BOOTSTRAP_SCORES = ("stress", "scaled_stress", "monotonicity_violation", "lag_violation")
#: above this share of sampling noise in the naive distance, the D-based scores rank encodings against noise
NOISE_DOMINATED = 0.5
DEFAULT_MAX_POSITIONS = 512
#: width of the compared encodings when the target is a spec without d (BERT-base's)
DEFAULT_WIDTH = 768
#: a centroid is used only when this many sampled sequences reach its position
MIN_CENTROID_SEQUENCES = 20

ProgressFactory = Callable[[str, int], Callable[[int], None]]


@dataclass(frozen=True)
class StressOptions:
    """Everything that shapes a stress analysis (the CLI's options, through ``cli.stress.TO_OPTIONS``)."""

    dataset: str
    split: str | None = None
    data_dir: str | None = None
    text_column: str | None = None
    limit: int | None = None
    tokenizer: str | None = None
    max_positions: int | None = None
    min_count: int = DEFAULT_MIN_COUNT
    #: which positions are scored (``all``, ``stride:K``, ``log:N``, ``range:A-B``; corpus/positions.py)
    positions: PositionSpec | str = ALL_POSITIONS
    distance: str = "naive"
    layers: str = "all"
    #: specs, or callables ``f(positions) -> (n, k)`` (from Python), named by their ``__name__``
    compare: Sequence[str | Callable[..., Any]] = DEFAULT_COMPARE
    #: shuffles per test (None: as many as the run's tests need, at least 999; see geometry/shuffle.py)
    null_draws: int | None = None
    seed: int = 0
    max_sequences: int | None = 1024
    batch_size: int = 32
    #: tokens per forward of a chunked prefill (None: one pass, or 2048-token chunks where one does not fit)
    chunk_size: int | None = None
    cache: bool = True
    trust_remote_code: bool = False
    bootstrap: int = 0
    device: str = "auto"
    dtype: str = "auto"
    #: width of the compared encodings (None: the target's own; ``default_width`` for a spec without d)
    width: int | None = None
    #: the width of a spec that names none (sinusoidal, rope, random without d=): BERT-base's unless set
    default_width: int = DEFAULT_WIDTH
    #: how the corpus is read: rows, document or packed (--read, corpus.sources.READ_MODES)
    read: str = "rows"
    #: scores against position: N log-spaced windows, auto (geometry/windows.py) or none
    windows: str = "auto"


def split_specs(text: str) -> tuple[str, ...]:
    """Split a comma-separated list of encoding specs, keeping each spec's own key=value pairs:
    'alibi:heads=8,head=2,rope' -> ('alibi:heads=8,head=2', 'rope')."""
    specs: list[str] = []
    for piece in (part.strip() for part in text.split(",")):
        if not piece:
            continue
        if specs and "=" in piece and ":" not in piece:
            specs[-1] += "," + piece
        else:
            specs.append(piece)
    return tuple(specs)


def check_not_a_typo(target: str) -> None:
    """A target that is no encoding, no local path and close to an encoding name is a typo, not a hub model."""
    from pathlib import Path

    from .encodings.registry import suggest_spec

    if is_encoding_spec(target) or Path(target).expanduser().exists():
        return
    hint = suggest_spec(target)
    if hint is not None and (":" in target or "/" not in target):
        raise InputError(
            f"{target!r} is neither an encoding nor a local checkpoint; did you mean {hint}? "
            "(`geoanalyze encodings list` shows the encodings)"
        )


def spec_width(spec: str) -> int | None:
    """The width a standard encoding spec names (``rope:d=64`` -> 64), or None."""
    from .encodings import registry

    return registry.spec_width(spec)  # each family's width rule (its `width` parameter)


def parse_layers(spec: str, n_layers: int) -> list[int]:
    """'all' -> every layer, 'none' -> [], '0,2,5' -> those (0 = the embedding output)."""
    text = spec.strip().lower()
    if text == "all":
        return list(range(n_layers + 1))
    if text == "none":
        return []
    try:
        chosen = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise InputError(f"--layers {spec!r}: write all, none, or a comma-separated list such as 0,3,6") from exc
    bad = [layer for layer in chosen if not 0 <= layer <= n_layers]
    if bad:
        raise InputError(f"--layers: layer {bad[0]} does not exist; this model has layers 0..{n_layers}")
    return chosen


def check_options(options: StressOptions) -> None:
    """The option checks that need no corpus and no checkpoint (each fails naming its option)."""
    if options.distance not in ("naive", "corrected"):
        raise InputError(f"unknown --estimate {options.distance!r}; choose naive or corrected")
    if options.bootstrap and options.bootstrap < 2:
        raise InputError(f"--bootstrap needs at least 2 resamples, got {options.bootstrap}")
    from .checkpoints.hidden import DEVICES, DTYPES

    if options.device.lower() not in DEVICES:
        raise InputError(f"unknown --device {options.device!r}; choose one of {', '.join(DEVICES)}")
    if options.dtype.lower() not in DTYPES:
        raise InputError(f"unknown --dtype {options.dtype!r}; choose one of {', '.join(DTYPES)}")
    if options.bootstrap and options.distance != "naive":
        raise InputError("--bootstrap resamples the naive Hellinger matrix; use --estimate naive")
    window_count(options.windows, 0)
    if options.bootstrap and not PositionSpec.of(options.positions).is_all:
        raise InputError("--bootstrap resamples each position's own counts; use it with --positions all")


@dataclass(frozen=True)
class Target:
    """A target resolved before the corpus is read: an encoding spec's ``encoding`` or a loaded
    ``checkpoint``, the tokenizer its positions are counted with, the width the compared encodings are
    drawn at, the positions read (``max_length``) and the checkpoint layers to score."""

    name: str
    tokenizer: str
    width: int
    max_length: int
    encoding: Encoding | None = None
    checkpoint: Any = None
    layers: tuple[int, ...] = ()


def resolve_target(
    target: str | Callable[..., Any], options: StressOptions, compared: Mapping[str, Encoding]
) -> Target:
    """``target`` as an encoding spec, a callable ``f(positions) -> (n, k)`` or a checkpoint, and every
    compared encoding checked at its width."""
    if callable(target):
        resolved = encoding_target(target, options)
    else:
        check_not_a_typo(target)
        resolved = encoding_target(target, options) if is_encoding_spec(target) else checkpoint_target(target, options)
    for candidate in [*compared.values(), *([resolved.encoding] if resolved.encoding is not None else [])]:
        candidate.check(resolved.width)
    return resolved


def encoding_target(spec: str | Callable[..., Any], options: StressOptions) -> Target:
    """A spec is drawn at --width, else the width it names, else ``default_width`` (a callable's table
    sets its own); the corpus is read with --tokenizer or the dataset's default, up to --max-length (512
    positions by default)."""
    encoding = get_encoding(spec)
    name = spec if isinstance(spec, str) else encoding.name
    if options.layers.strip().lower() not in ("all", "none"):
        raise InputError(f"--layers {options.layers!r} needs a checkpoint target; {name} is an encoding")
    return Target(
        name,
        tokenizer=options.tokenizer or default_tokenizer(options.dataset),
        width=options.width or (spec_width(spec) if isinstance(spec, str) else None) or options.default_width,
        max_length=options.max_positions or DEFAULT_MAX_POSITIONS,
        encoding=encoding,
    )


def checkpoint_target(name: str, options: StressOptions) -> Target:
    """A checkpoint is read with its own tokenizer, compared at its hidden size (or --width), up to its
    positions (at most 512 unless --max-length asks for more), at the layers --layers chooses."""
    from .checkpoints import load_checkpoint

    checkpoint = load_checkpoint(name, options.trust_remote_code)
    if options.tokenizer is not None:
        _check_tokenizer_fits(options.tokenizer, checkpoint)
    tokenizer = options.tokenizer or checkpoint.tokenizer_spec()
    width = options.width or checkpoint.hidden_size
    model_max = checkpoint.max_positions or DEFAULT_MAX_POSITIONS
    if options.max_positions is not None and options.max_positions > model_max:
        raise InputError(f"--max-length {options.max_positions} exceeds the {model_max} positions of {name}; lower it")
    return Target(
        name,
        tokenizer=tokenizer,
        width=width,
        max_length=options.max_positions or min(model_max, DEFAULT_MAX_POSITIONS),
        checkpoint=checkpoint,
        layers=tuple(parse_layers(options.layers, checkpoint.n_layers)),
    )


@dataclass(frozen=True)
class Corpus:
    """The corpus as the target reads it: its source, counts and geometry, and the target distance D."""

    source: Any
    counts: Any
    geometry: PositionGeometry
    distances: np.ndarray
    #: the positions scored past the dense limit (None: every kept position, the dense path)
    sample: PositionSample | None = None

    @property
    def positions(self) -> np.ndarray:
        return self.geometry.positions


def target_geometry(resolved: Target, options: StressOptions, progress: ProgressFactory | None = None) -> Corpus:
    """Count the corpus with the target's tokenizer and measure the Hellinger geometry of its kept positions."""
    source = resolve_source(options.dataset, options.split, options.data_dir, options.text_column)
    job = CountJob(tokenizer=resolved.tokenizer, max_length=resolved.max_length, limit=options.limit, read=options.read)
    counts, _ = compute_counts(source, job, cache=options.cache, progress=progress)
    if options.max_positions is not None and counts.n_positions < options.max_positions:
        raise InputError(
            f"the sequences of {source.name} reach {counts.n_positions} positions, fewer than --max-length "
            f"{options.max_positions}; lower --max-length"
        )
    counts = pool_positions(counts, options.positions)  # all: the counts themselves
    geometry, sample = scaled_geometry(counts, options)
    if geometry is None:  # within the dense limit: every kept position, exactly
        geometry = position_geometry(counts, metric="hellinger", min_count=options.min_count)
    if len(geometry.positions) < 3:
        totals = np.sort(counts.totals)[::-1]
        if int((totals > 0).sum()) < 3:
            hint = "the corpus reaches fewer than 3 positions and the scores need 3; use longer texts"
        else:
            hint = f"lower --min-count to {int(totals[2])} or below"
        raise InputError(f"only {len(geometry.positions)} positions have N_i >= {options.min_count}; {hint}")
    distances = geometry.matrix(options.distance)
    if not np.all(np.isfinite(distances)):
        raise InputError("the corrected distance is undefined for some positions; raise --min-count or use naive")
    return Corpus(source, counts, geometry, distances, sample)


# --- the scaling path (geometry/sampled.py): past the dense limit, scores on a seeded sample of positions ---


def scaled_geometry(counts: Any, options: StressOptions) -> tuple[PositionGeometry | None, PositionSample | None]:
    """(the geometry of a seeded sample of the kept positions, the sample) when they are more than the dense
    limit; (None, None) otherwise (the dense path)."""
    kept = counts.kept_positions(options.min_count) if options.min_count >= 1 else np.arange(0)
    limit = dense_limit()
    if kept.size <= limit:
        return None, None
    sample = draw_sample(kept.size, sample_size(limit), options.seed, limit=limit)
    return sampled_geometry(counts, kept, sample, options.min_count), sample


def sampled_errors(
    scores: Mapping[str, EncodingScores], vectors: Mapping[str, np.ndarray], corpus: Corpus
) -> dict[str, EncodingScores]:
    """Each table's scores with their jackknife standard errors over the sampled positions."""
    if corpus.sample is None:
        return dict(scores)
    groups = corpus.sample.groups
    return {
        name: replace(score, standard_errors=jackknife_errors(vectors[name], corpus.distances, corpus.positions, groups))
        for name, score in scores.items()
    }


# --- end of the scaling path ---


@dataclass(frozen=True)
class Scored:
    """The tables scored against D (the target's first), the width they are drawn at, the shuffle tests
    they share with the layer rows (run together by :func:`settle`), and the discriminability probes."""

    vectors: dict[str, np.ndarray]
    scores: dict[str, EncodingScores]
    width: int
    nulls: ShuffleNull
    probes: dict[str, EncodingScores]


def position_tables(
    resolved: Target, compared: Mapping[str, Encoding], corpus: Corpus, options: StressOptions
) -> tuple[dict[str, np.ndarray], EncodingContext]:
    """The position vectors of the target (when it has them) and of each compared encoding, and the
    context they are drawn in: a spec's table without a width of its own (model:, file:, learned:
    say theirs only when read) sets the compared width."""
    context = EncodingContext(width=resolved.width, distances=corpus.distances, counts=corpus.counts.metadata)
    vectors: dict[str, np.ndarray] = {}
    name, positions = resolved.name, corpus.positions
    if resolved.checkpoint is not None:
        if resolved.checkpoint.mechanism.has_vectors:
            vectors[name] = resolved.checkpoint.position_vectors(positions)
    elif resolved.encoding is not None:
        vectors[name] = resolved.encoding.vectors(positions, context)
        if options.width is None and vectors[name].ndim == 2 and takes_model_width(name):
            width = int(vectors[name].shape[1])
            context = EncodingContext(width=width, distances=corpus.distances, counts=corpus.counts.metadata)
            for candidate in compared.values():
                candidate.check(width)
    for spec, encoding in compared.items():
        if spec not in vectors:
            table = encoding.vectors(positions, context)
            if name in vectors and np.array_equal(table, vectors[name]):
                # the target itself under another name (rope beside rope:d=64): not a comparison
                note(f"{spec} is the target's own table at this width; left out of the comparison")
                continue
            vectors[spec] = table
    return vectors, context


def score_encodings(
    resolved: Target, compared: Mapping[str, Encoding], corpus: Corpus, options: StressOptions
) -> Scored:
    """Every table's scores against D (their shuffle tests queued), the discriminability probes, and the
    target's bootstrap intervals under --bootstrap."""
    vectors, context = position_tables(resolved, compared, corpus, options)
    distances, positions = corpus.distances, corpus.positions
    nulls = ShuffleNull(distances, positions, options.null_draws, options.seed)
    scores: dict[str, EncodingScores] = {}
    for name, table in vectors.items():
        scores[name] = score_table(table, distances, positions, nulls)
        note_beyond_range(name, scores[name].observed)
    if corpus.sample is not None:  # the scaling path: each score's standard error over the sampled positions
        scores = sampled_errors(scores, vectors, corpus)
    probes = probe_scores(scores, vectors, distances, positions, context, nulls)
    target = resolved.name
    if options.bootstrap and target in scores:
        sampled = (corpus.source, resolved.tokenizer, resolved.max_length, positions, options)
        intervals = bootstrap_intervals(vectors[target], scores[target].observed, *sampled)
        scores[target] = replace(scores[target], bootstrap=intervals)
    return Scored(vectors, scores, context.width, nulls, probes)


def score_layers(
    resolved: Target, scored: Scored, corpus: Corpus, options: StressOptions, progress: ProgressFactory | None
) -> tuple[CheckpointInfo, tuple[LayerRow, ...]]:
    """A checkpoint's description, its rows layer by layer (the layers --layers chose, their shuffle tests
    queued), and per row kind whether it was measured or why not; the checkpoint's notes go to stderr."""
    checkpoint, target = resolved.checkpoint, resolved.name
    mechanism = checkpoint.mechanism
    rows = {
        "position": f"measured ({mechanism.kind})"
        if target in scored.vectors
        else f"skipped: no absolute position vectors; positions are {mechanism.describe_kind()}"
    }
    layers: list[LayerRow] = []
    if resolved.layers:
        layers, measured = checkpoint_layers(
            checkpoint, scored.vectors.get(target), corpus, resolved, options, progress, scored.nulls
        )
        rows.update(measured)
    else:
        rows.update({name: "skipped: --layers none" for name in ("projected", "query_key", "hidden")})
    info = CheckpointInfo(
        path=str(checkpoint.path) if checkpoint.origin == "local folder" else checkpoint.name,
        origin=checkpoint.origin,
        architecture=mechanism.architecture,
        model_type=mechanism.model_type,
        position_kind=mechanism.kind,
        position_mechanism=mechanism.summary(),
        hidden_size=scored.width,
        layers=checkpoint.n_layers,
        parameters=mechanism.parameters,
        rows=rows,
        notes=tuple(mechanism.notes),
    )
    for line in info.notes:
        note(f"{target}: {line}")
    return info, tuple(layers)


def analyze(
    target: str | Callable[..., Any], options: StressOptions, progress: ProgressFactory | None = None
) -> StressResult:
    """Run the stress analysis of ``target`` (a checkpoint name/path, an encoding spec, or a callable
    ``f(positions) -> (n, k)``, named by its ``__name__``).

    ``progress(label, total)`` returns the callback a long step (counting, the forward pass) reports to.
    """
    check_options(options)
    compared = compared_encodings(options.compare)
    resolved = resolve_target(target, options, compared)
    corpus = target_geometry(resolved, options, progress)
    scored = score_encodings(resolved, compared, corpus, options)
    checkpoint, layers = (
        score_layers(resolved, scored, corpus, options, progress) if resolved.checkpoint is not None else (None, ())
    )
    # every table's shuffle tests at once, one family for Holm; categories come from them
    settled = settle(scored.nulls, [*scored.scores.values(), *layers, *scored.probes.values()])
    scores = dict(zip(scored.scores, settled[: len(scored.scores)], strict=True))
    layers = tuple(settled[len(scored.scores) : len(scored.scores) + len(layers)])  # type: ignore[arg-type]
    probes = dict(zip(scored.probes, settled[len(scored.scores) + len(layers) :], strict=True))
    probes = {name: scores.get(name, probe) for name, probe in probes.items()}  # type: ignore[misc]
    decided = discriminability(probes, scored.nulls, corpus.geometry.summary, options.distance)
    peaks = layer_peaks(layers) if layers else {}
    geometry = corpus.geometry
    windows = position_windows(scored, corpus, options, resolved, compared)
    return StressResult(
        target=resolved.name,
        kind="encoding" if checkpoint is None else "checkpoint",
        dataset=CorpusInfo(
            {**corpus.source.describe(), **({"read": options.read} if options.read != "rows" else {})},
            resolved.tokenizer,
            resolved.max_length,
            options.limit,
        ),
        distance=options.distance,
        width=scored.width,
        positions=geometry.positions,
        left_out=geometry.left_out,
        noise=geometry.summary,
        scores=scores,  # type: ignore[arg-type]
        null=null_settings(scored.nulls),
        discriminability=decided,
        layers=layers,
        peaks=peaks,
        checkpoint=checkpoint,
        geometry=geometry,
        vectors=scored.vectors,
        exact_distances=partial(known_distances, geometry),
        position_set=PositionSet.of(corpus.counts, geometry.positions),
        sample=corpus.sample,
        windows=windows,
    )


def position_windows(
    scored: Scored, corpus: Corpus, options: StressOptions, resolved: Target, compared: Mapping[str, Encoding]
) -> dict[str, WindowScores]:
    """Each scored table's scores against position (--windows; geometry/windows.py), the optimal MDS left
    out (fitted to D, it says nothing of position); D of a window from the dense D when it exists, else
    from the window's own counts. Past the dense limit the windows cover every kept position, not only the
    scored sample (whose few early positions would leave the first windows undecided): each window reads
    its own positions' vectors and counts. The training length: a spec's ``original=``, a checkpoint's
    ``original_max_position_embeddings`` (its RoPE parameters, else its config)."""
    names = [name for name in scored.vectors if name.partition(":")[0] != "mds"]
    positions = corpus.positions
    dense: np.ndarray | None = corpus.distances
    tables: dict[str, Any] = {name: scored.vectors[name] for name in names}
    if corpus.sample is not None:
        positions, dense = corpus.counts.kept_positions(options.min_count), None
        context = EncodingContext(width=scored.width, counts=corpus.counts.metadata)
        tables = {name: RowsAt(table_reader(name, resolved, compared, context), positions) for name in names}
    count = window_count(options.windows, len(positions))
    if not count or not tables:
        return {}
    distances = window_distances(dense, corpus.counts, positions, options.distance)
    found = score_windows(tables, positions, distances, count, options.seed, options.null_draws)
    lengths = {name: training_length(name) for name in found}
    if resolved.checkpoint is not None and resolved.name in lengths:
        lengths[resolved.name] = checkpoint_training_length(resolved.checkpoint.config)
    return {name: replace(window, training_length=lengths[name]) for name, window in found.items()}


@dataclass(frozen=True)
class RowsAt:
    """A table of position vectors read only at the rows asked for (``table[rows]``): past the dense limit a
    window reads its own positions' vectors, and no table over every kept position is built."""

    read: Callable[[np.ndarray], np.ndarray]
    positions: np.ndarray

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        return self.read(self.positions[rows])


def table_reader(
    name: str, resolved: Target, compared: Mapping[str, Encoding], context: EncodingContext
) -> Callable[[np.ndarray], np.ndarray]:
    """The function that draws the table ``name`` (the target's, or a compared encoding's) at positions."""
    if name == resolved.name and resolved.checkpoint is not None:
        return resolved.checkpoint.position_vectors
    encoding = resolved.encoding if name == resolved.name else compared[name]
    assert encoding is not None  # a target without vectors has no table to window
    return partial(encoding.vectors, context=context)


def checkpoint_training_length(config: Mapping[str, Any]) -> int | None:
    """``original_max_position_embeddings`` of a config's rope_parameters / rope_scaling, else its own."""
    for key in ("rope_parameters", "rope_scaling"):
        nested = config.get(key)
        if isinstance(nested, Mapping) and isinstance(nested.get("original_max_position_embeddings"), int | float):
            return int(nested["original_max_position_embeddings"])
    value = config.get("original_max_position_embeddings")
    return int(value) if isinstance(value, int | float) else None


def compared_encodings(specs: Sequence[str | Callable[..., Any]]) -> dict[str, Encoding]:
    """The compared encodings by name: a spec's name is the spec, a callable's its ``__name__``; two
    callables of one name are refused (their rows would be one)."""
    compared: dict[str, Encoding] = {}
    for spec in specs:
        if isinstance(spec, str) and not spec:
            continue
        encoding = get_encoding(spec)
        name = encoding.name if callable(spec) else spec
        if callable(spec) and name in compared:
            raise InputError(f"two compared encodings are named {name!r}; give each function its own name")
        compared[name] = encoding
    return compared


def score_table(
    table: np.ndarray,
    distances: np.ndarray,
    positions: np.ndarray,
    nulls: ShuffleNull,
    scale: float = 1.0,
    subset: np.ndarray | None = None,
) -> EncodingScores:
    """Every score of one table (on the rows ``subset`` of the kept positions, or all of them), its shuffle
    tests queued in ``nulls``: its null and categories are filled in by :func:`settle`."""
    observed = all_scores(table, distances, index=positions, scale=scale)
    return EncodingScores(observed, int(table.shape[1]), {}, 0, {}, handle=nulls.register(table, subset))


def settle(nulls: ShuffleNull, items: Sequence[Any]) -> list[Any]:
    """Run every queued shuffle test of ``nulls`` at once, Holm over all of them, and return ``items``
    (EncodingScores and LayerRows) with their tests and categories filled in (in the same order)."""
    if not items:
        return []
    tests = decide(nulls.run())
    draws = nulls.draws()
    settled = []
    for item in items:
        if item.handle is None:
            settled.append(item)
            continue
        null = tests[item.handle]
        extra = {"null_draws": draws} if isinstance(item, EncodingScores) else {}
        settled.append(replace(item, null=null, categories=categories(null), handle=None, **extra))
    return settled


def null_settings(nulls: ShuffleNull) -> NullSettings:
    """What the JSON says of the null: position shuffles, how many, Holm over how many tests."""
    return NullSettings(draws=nulls.draws(), seed=nulls.seed, tests=nulls.tests)


#: the encodings that carry position information without being fitted to D (the discriminability probes)
PROBE_KINDS = ("sinusoidal", "rope")


def probe_scores(
    scores: Mapping[str, EncodingScores],
    vectors: Mapping[str, np.ndarray],
    distances: np.ndarray,
    positions: np.ndarray,
    context: EncodingContext,
    nulls: ShuffleNull,
) -> dict[str, EncodingScores]:
    """The tables that decide discriminability: the sinusoidal or RoPE tables at the compared width among
    those scored, else a sinusoidal table of that width scored (and tested) for the purpose."""
    width = context.width
    probes = {
        name: scores[name]
        for name, table in vectors.items()
        if name.split(":")[0] in PROBE_KINDS and table.shape[1] == width
    }
    if not probes:
        spec = f"sinusoidal:d={max(2, 2 * (width // 2))}"
        probes[spec] = score_table(get_encoding(spec).vectors(positions, context), distances, positions, nulls)
    return probes


def discriminability(
    probes: Mapping[str, EncodingScores], nulls: ShuffleNull, noise: Mapping[str, Any], distance: str
) -> Discriminability:
    """Per aspect, whether its score can separate encodings on this corpus (docs/scores.md, "Discriminability").

    A D-based score (shape, order, local order) cannot when the naive distance is mostly sampling
    noise (noise fraction above 0.5), or when the sinusoidal table at the compared width (a table
    with position information that is not fitted to D) is indistinguishable from its own shuffles:
    then D holds no position order such a table can match. Lag depends on the vectors alone and
    always can; separation has no shuffle test.
    """
    probe_name = next(iter(probes))
    noise_fraction = noise.get("noise_fraction")
    noisy = (
        distance == "naive"
        and noise_fraction is not None
        and noise_fraction == noise_fraction
        and noise_fraction > NOISE_DOMINATED
    )
    decidable = can_decide(nulls.draws(), nulls.tests)
    aspects = {
        aspect: probed_aspect(aspect, probe_name, probes, decidable, noise_fraction if noisy else None)
        if aspect in D_ASPECTS
        else AspectDecision(True)
        for aspect in ASPECTS
    }
    return Discriminability(probe_name, aspects)


def probed_aspect(
    aspect: str,
    probe_name: str,
    probes: Mapping[str, EncodingScores],
    decidable: bool,
    noise_fraction: float | None,
) -> AspectDecision:
    """Whether a D-based aspect can rank encodings: undecided when the shuffles cannot decide; not when the
    naive distance is mostly noise (``noise_fraction`` given) or every probe is indistinguishable from its
    own shuffles."""
    key, probe = ASPECTS[aspect], probes[probe_name]
    category = probe.categories.get(aspect)
    null = probe.null.get(key)
    if not decidable:
        return AspectDecision(None, "too few shuffles to decide it (omit --null-draws)", category)
    if noise_fraction is not None:
        reason = (
            f"the naive distance is mostly sampling noise (noise fraction {noise_fraction:.2f} > "
            f"{NOISE_DOMINATED}), so {ASPECT_WORDS[aspect]} ranks encodings against noise"
        )
        return AspectDecision(False, reason, category)
    if null is None or not {p.categories.get(aspect) for p in probes.values()} <= {"indistinguishable"}:
        return AspectDecision(True, None, category)
    reason = (
        f"{probe_name} ({null.statistic} {null.observed:.4g}) is indistinguishable from its own "
        f"position shuffles ({null['low']:.4g} to {null['high']:.4g}): D holds no position order that a "
        "table carrying position can match"
    )
    return AspectDecision(False, reason, category)


def note_beyond_range(name: str, scores: Mapping[str, float]) -> None:
    """A raw score whose true value is beyond float64's range is inf (null in JSON): say so, once."""
    for key in ("stress", "separation"):
        value = scores.get(key)
        if isinstance(value, float) and not np.isfinite(value):
            note(
                f"{name}: raw {key} is beyond float64's range (the vectors are enormous); it is reported as "
                "inf (null in JSON). The scale-free scores are exact; compare those"
            )


def _check_tokenizer_fits(tokenizer: str, checkpoint: Any) -> None:
    """A checkpoint's positions are its own tokenizer's: another vocabulary would misalign them."""
    if tokenizer in ("whitespace", "char"):
        raise InputError(
            f"a checkpoint is scored on its own tokens; --tokenizer {tokenizer} would shift every position. "
            "Drop --tokenizer, or pass a tokenizer with the checkpoint's vocabulary"
        )
    from .corpus.tokenize import HFTokenizer

    if (
        HFTokenizer(tokenizer).identity()["vocab_sha256"]
        != HFTokenizer(checkpoint.tokenizer_spec()).identity()["vocab_sha256"]
    ):
        raise InputError(
            f"--tokenizer {tokenizer} has another vocabulary than {checkpoint.name}; drop --tokenizer to use the model's"
        )


def bootstrap_intervals(
    table: np.ndarray,
    observed_scores: Mapping[str, float],
    source: Any,
    tokenizer: str,
    max_length: int,
    positions: np.ndarray,
    options: StressOptions,
) -> dict[str, Any]:
    """95% basic-bootstrap intervals of the target's scores, resampling the sequences.

    Each resample recomputes the naive Hellinger matrix of the kept positions from resampled
    counts (:func:`~geoanalyze.corpus.marginals.bootstrap_counts`) and rescores the same vectors.
    A resample with replacement holds fewer distinct sequences, so the naive distances (and
    every score) shift under resampling; the *basic* interval [2s - q_97.5, 2s - q_2.5]
    corrects that shift to first order, and ``bias`` (mean of the resamples - s) reports it.
    """
    from .corpus.marginals import bootstrap_counts, normalise_rows
    from .corpus.tokenize import get_tokenizer
    from .geometry.distances import hellinger_distances

    texts = source.read(options.limit, options.read)
    tok = get_tokenizer(tokenizer, max_length=max_length)
    values: dict[str, list[float]] = {name: [] for name in BOOTSTRAP_SCORES}
    skipped = 0
    for counts in bootstrap_counts(texts, tok, options.bootstrap, seed=options.seed):
        rows = counts[positions]
        if (np.asarray(rows.sum(axis=1)).ravel() == 0).any():
            skipped += 1  # a resample that misses a rare position entirely: no distance there
            continue
        distances = hellinger_distances(normalise_rows(rows))
        scores = all_scores(table, distances, anchored=False, index=positions)
        for name in BOOTSTRAP_SCORES:
            values[name].append(scores[name])
    if len(values[BOOTSTRAP_SCORES[0]]) < 2:
        raise InputError(
            f"{skipped} of {options.bootstrap} resamples missed a kept position; raise --min-count for --bootstrap"
        )
    intervals: dict[str, Any] = {}
    for name, draws in values.items():
        array = np.asarray(draws)
        # A raw stress beyond float64 (inf) has no interval: NaN (JSON null), without a warning line.
        with np.errstate(invalid="ignore", over="ignore"):
            intervals[name] = {
                "low": float(2 * observed_scores[name] - np.quantile(array, 0.975)),
                "high": float(2 * observed_scores[name] - np.quantile(array, 0.025)),
                "sd": float(array.std(ddof=1)),
                "bias": float(array.mean() - observed_scores[name]),
            }
    intervals["samples"] = {"count": options.bootstrap - skipped, "skipped": skipped, "level": 0.95}
    return intervals


def checkpoint_layers(
    checkpoint: Any,
    table: np.ndarray | None,
    corpus: Corpus,
    resolved: Target,
    options: StressOptions,
    progress: ProgressFactory | None,
    nulls: ShuffleNull,
) -> tuple[list[LayerRow], dict[str, str]]:
    """Every per-layer row of a checkpoint, and what was measured or skipped (and why) per row kind.

    Each row is scored like a table (every scale-free score, its shuffle tests queued on the row's own
    positions; :func:`settle` fills in its categories)."""
    measured: dict[str, str] = {}
    chosen, distances, positions = resolved.layers, corpus.distances, corpus.positions
    layers, measured["projected"] = projected_layers(checkpoint, table, distances, chosen, positions, nulls)
    forward = cached_forward(checkpoint, corpus.source, resolved.tokenizer, resolved.max_length, options, progress)
    reach = forward.reach
    usable = (positions < reach.shape[0]) & (reach[np.minimum(positions, reach.shape[0] - 1)] >= MIN_CENTROID_SEQUENCES)
    index = np.flatnonzero(usable)
    if index.size < 3:
        reason = f"skipped: fewer than 3 kept positions are reached by {MIN_CENTROID_SEQUENCES} sampled sequences"
        measured["query_key"] = measured["hidden"] = reason
        return layers, measured
    sub, kept = distances[np.ix_(index, index)], positions[index]

    def row(layer: int, projection: str, vectors: np.ndarray) -> LayerRow:
        if not np.all(np.isfinite(vectors)):
            raise InputError(
                f"the {projection} vectors of layer {layer} hold NaN or infinity: the forward pass overflowed "
                "(huge weights, or a low precision); try --dtype float32, or --layers none to score the table only"
            )
        return layer_row(layer, projection, vectors, sub, kept, nulls, subset=index)

    captured, notes, hidden_notes = 0, list(forward.notes), list(forward.hidden_notes)
    for layer in chosen:
        for projection, store in (("query", forward.queries), ("key", forward.keys)):
            if layer in store and store[layer].shape[0] > int(kept.max()):
                if scored_flat(store[layer][kept], f"layer {layer}'s {projection} vectors", notes):
                    continue
                layers.append(row(layer, projection, store[layer][kept]))
                captured += 1
    if captured:
        measured["query_key"] = f"measured ({forward.capture})" + "".join(f"; {line}" for line in notes)
    elif notes:
        measured["query_key"] = "skipped: " + "; ".join(notes)
    else:
        measured["query_key"] = "skipped: no chosen layer holds an attention module"
    for layer in chosen:
        if layer < forward.centroids.shape[0]:
            layers.extend(hidden_rows(forward, layer, distances, positions, nulls, hidden_notes))
    measured["hidden"] = "measured" + "".join(f"; {line}" for line in hidden_notes)
    layers.sort(key=lambda item: (item.layer, PROJECTION_ORDER.get(item.projection, 9)))
    return layers, measured


def scored_flat(vectors: np.ndarray, what: str, notes: list[str]) -> bool:
    """Whether the row ``vectors`` is flat on the positions it is scored on (every pairwise distance tied,
    :func:`~geoanalyze.checkpoints.hidden.flat_row`: its monotonicity would be 0 / 0); then a note is added.
    The forward pass drops rows flat on every position it reached; a row flat only on the scored subset
    is caught here."""
    from .checkpoints.hidden import flat_row

    why = flat_row(vectors)
    if why is None:
        return False
    notes.append(f"{what} {why} (of the {len(vectors)} scored), so no pair of positions is ordered: no row")
    return True


def hidden_rows(
    forward: Any,
    layer: int,
    distances: np.ndarray,
    positions: np.ndarray,
    nulls: ShuffleNull,
    notes: list[str] | None = None,
) -> list[LayerRow]:
    """The hidden row of ``layer`` on the kept positions it reaches (a pooled layer reaches fewer: its
    rows sit at the input position each pooled position ends at); none where it reaches fewer than 3
    (the forward pass's hidden notes say why), or where it is flat there (a line added to ``notes``)."""
    reach = forward.reach_of(layer)
    at = np.minimum(positions, reach.shape[0] - 1)
    index = np.flatnonzero((positions < reach.shape[0]) & (reach[at] >= MIN_CENTROID_SEQUENCES))
    if index.size < 3:
        return []
    vectors = forward.centroids[layer][positions[index]]
    if not np.all(np.isfinite(vectors)):
        raise InputError(
            f"the hidden vectors of layer {layer} hold NaN or infinity: the forward pass overflowed "
            "(huge weights, or a low precision); try --dtype float32, or --layers none to score the table only"
        )
    if scored_flat(vectors, f"layer {layer}'s hidden vectors", notes if notes is not None else []):
        return []
    return [layer_row(layer, "hidden", vectors, distances[np.ix_(index, index)], positions[index], nulls, subset=index)]


#: the order of a layer's rows in the layer table
PROJECTION_ORDER = {"P·W_Q": 0, "P·W_K": 1, "query": 2, "key": 3, "hidden": 4}


def layer_row(
    layer: int,
    projection: str,
    vectors: np.ndarray,
    distances: np.ndarray,
    positions: np.ndarray,
    nulls: ShuffleNull,
    subset: np.ndarray | None = None,
    scale: float = 1.0,
) -> LayerRow:
    """A layer row's scores (:data:`LAYER_SCORES`), its shuffle tests queued (``null`` and ``categories``
    are filled in by :func:`settle`). A forward-pass row on the rows ``subset`` of the kept positions
    records how many it uses."""
    scored = score_table(vectors, distances, positions, nulls, scale=scale, subset=subset)
    observed = {k: scored.observed[k] for k in LAYER_SCORES}
    used = None if subset is None else int(subset.size)
    return LayerRow(layer, projection, observed, {}, {}, positions_used=used, handle=scored.handle)


def projected_layers(
    checkpoint: Any,
    table: np.ndarray | None,
    distances: np.ndarray,
    chosen: Sequence[int],
    positions: np.ndarray,
    nulls: ShuffleNull,
) -> tuple[list[LayerRow], str]:
    """Scores of P W_Q^(l) and P W_K^(l) for the chosen layers (1-based: layer l's attention): the stored
    table pushed through each layer's query and key maps, bias left out."""
    rows: list[LayerRow] = []
    if table is None or not checkpoint.mechanism.has_table:
        return rows, "skipped: only an absolute table enters the query/key maps as a vector"
    maps = checkpoint.query_key_maps()
    if not maps:
        return rows, "skipped: the query/key maps are fused in a layout not split here"
    if maps[0][0].shape[0] != table.shape[1]:
        # ALBERT/ELECTRA-style checkpoints project narrower embeddings up before the first layer.
        return rows, (
            f"skipped: position vectors of width {table.shape[1]} do not enter W_Q (width {maps[0][0].shape[0]}) directly"
        )
    for layer in chosen:
        if layer == 0 or layer > len(maps):
            continue
        w_q, w_k = maps[layer - 1]
        for projection, matrix in (("P·W_Q", w_q), ("P·W_K", w_k)):
            # At unit scale, so a huge table's product neither overflows nor changes a scale-free score.
            scale = float(np.max(np.abs(table))) if table.size else 0.0
            unit = table / scale if scale > 0 else table
            scored = layer_row(layer, projection, unit @ matrix, distances, positions, nulls, scale=scale or 1.0)
            note_beyond_range(f"layer {layer} {projection}", scored.observed)
            rows.append(scored)
    return rows, "measured"


def cached_forward(
    checkpoint: Any,
    source: Any,
    tokenizer: str,
    max_length: int,
    options: StressOptions,
    progress: ProgressFactory | None,
) -> Any:
    """The forward pass's centroids (hidden, query, key), cached by checkpoint fingerprint, tokenizer,
    corpus and options.

    The forward pass tokenizes with the same tokenizer as the counts, so centroid i and
    marginal i are the same position.
    """
    from .corpus.marginals import tokenizer_fingerprint

    key_parts = {
        "checkpoint": checkpoint.fingerprint(),
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "source": source.fingerprint,
        "text_column": source.text_column,
        "max_length": max_length,
        "max_sequences": options.max_sequences,
        "limit": options.limit,
        "seed": options.seed,
        "dtype": options.dtype,
        "version": 7,  # 7: blocks counted as they run (HRM); 6: unpadded batches (CPM-Ant, Funnel), own-code q/k
    }
    if options.chunk_size is not None:  # rows of a chunked pass equal one pass's to rounding: the key says so
        key_parts["chunk_size"] = options.chunk_size
    if options.read != "rows":  # documents are other sequences than rows (rows' keys stay as they were)
        key_parts["read"] = options.read
    path = cache_entry("centroids", key_parts)
    if options.cache and cache_holds(path):
        cached = cached_centroids(path, key_parts)
        if cached is not None:
            return cached
    from .checkpoints.hidden import forward_pass, sample_indices

    texts = source.read(options.limit, options.read)
    chosen = sample_indices(len(texts), options.max_sequences, options.seed)
    sample = [texts[i] for i in chosen]
    callback = progress("forward pass", len(sample)) if progress else None
    forward = forward_pass(
        checkpoint,
        sample,
        max_length,
        tokenizer_spec=tokenizer,
        batch_size=options.batch_size,
        progress=callback,
        trust_remote_code=options.trust_remote_code,
        device=options.device,
        dtype=options.dtype,
        chunk_size=options.chunk_size,
    )
    arrays = {"centroids": forward.centroids, "reach": forward.reach}
    if forward.layer_reach is not None:
        arrays["layer_reach"] = forward.layer_reach
    arrays.update({f"q_{k}": v for k, v in forward.queries.items()})
    arrays.update({f"k_{k}": v for k, v in forward.keys.items()})
    # The entry records its key (served only under it); an unwritable cache never fails the job;
    # --no-cache writes nothing.
    written = {
        **key_parts,
        KEY_FIELD: cache_key(key_parts),
        "capture": forward.capture,
        "notes": forward.notes,
        "hidden_notes": forward.hidden_notes,
    }
    with caching(options.cache):
        write_cache(lambda: save_arrays(path, arrays, kind="centroids", metadata=written))
    return forward


def cached_centroids(path: Any, key_parts: Mapping[str, Any]) -> Any:
    """The forward pass stored at ``path`` when it records ``key_parts``; None (and the entry removed) when
    it is unreadable or records another key (an entry of another input, copied over this one's)."""
    from .checkpoints.hidden import ForwardResult

    try:
        arrays, metadata = load_arrays(path, kind="centroids")
        if not key_matches(metadata, key_parts):
            raise FormatError(f"{path} records another key")
        return ForwardResult(
            arrays["centroids"],
            arrays["reach"],
            {int(k[2:]): v for k, v in arrays.items() if k.startswith("q_")},
            {int(k[2:]): v for k, v in arrays.items() if k.startswith("k_")},
            str(metadata.get("capture", "none")),
            list(metadata.get("notes", [])),
            arrays.get("layer_reach"),
            list(metadata.get("hidden_notes", [])),
        )
    except (FormatError, KeyError, ValueError):
        with contextlib.suppress(OSError):  # a read-only cache keeps it; it is never trusted
            path.unlink(missing_ok=True)
        return None


def layer_peaks(layers: Sequence[LayerRow]) -> dict[str, LayerPeak]:
    """Per projection, in table order: the layers of lowest scaled stress and lowest violation, the
    layers whose categories are better than their shuffles per aspect, and (JSON only, not a summary: it
    follows the vectors' size) the layer where raw stress peaks."""

    def lowest(rows: list[LayerRow], key: str) -> LayerRow:
        # an undefined score (NaN) is never the best
        return min(
            rows,
            key=lambda row: (
                not np.isfinite(row.observed[key]),
                row.observed[key] if np.isfinite(row.observed[key]) else 0.0,
            ),
        )

    peaks: dict[str, LayerPeak] = {}
    order = sorted({row.projection for row in layers}, key=lambda name: (PROJECTION_ORDER.get(name, 9), name))
    for projection in order:
        rows = [row for row in layers if row.projection == projection]
        highest = max(rows, key=lambda row: row.observed["stress"] if np.isfinite(row.observed["stress"]) else -np.inf)
        best, ordered = lowest(rows, "scaled_stress"), lowest(rows, "monotonicity_violation")
        peaks[projection] = LayerPeak(
            peak_stress_layer=highest.layer,
            peak_stress=highest.observed["stress"],
            best_scaled_stress_layer=best.layer,
            best_scaled_stress=best.observed["scaled_stress"],
            best_violation_layer=ordered.layer,
            best_violation=ordered.observed["monotonicity_violation"],
            better_layers={
                aspect: [row.layer for row in rows if row.categories.get(aspect) == "better"] for aspect in ASPECTS
            },
            layers=[row.layer for row in rows],
        )
    return peaks


def true_marginals(corpus: Mapping[str, Any]) -> np.ndarray | None:
    """The true per-position marginals (n, V) of one counted corpus, or None when they are not known.

    ``corpus``: an entry of the counts' ``metadata["corpus"]`` (kind, location). A synthetic spec
    is regenerated (same seed, same marginals); a file ``<name>.<ext>`` has them when
    ``<name>.marginals.npy`` lies beside it (``geoanalyze datasets synthesize`` writes both).
    """
    from pathlib import Path

    location = str(corpus.get("location") or "")
    if corpus.get("kind") == "synthetic":
        from .corpus.sources import parse_synthetic_spec
        from .corpus.synthetic import synthetic_corpus

        kind, options = parse_synthetic_spec(location)
        return synthetic_corpus(kind, **options).marginals  # type: ignore[arg-type]
    if corpus.get("kind") != "file" or not location:
        return None
    path = Path(location)
    sibling = path.with_name(path.name.split(".", 1)[0] + ".marginals.npy")
    if not sibling.is_file():
        return None
    marginals = np.load(sibling, allow_pickle=False)
    return marginals if marginals.ndim == 2 else None


def known_distances(geometry: PositionGeometry) -> np.ndarray | None:
    """The exact distances between ``geometry.positions`` from the corpus's true marginals, or None.

    None unless the counts come from one corpus whose marginals are known (:func:`true_marginals`).
    Counted position p is marginal row p, or p - 1 when the tokenizer put a [CLS] first (special
    tokens added, and position 0 one constant token, or left out with --exclude-special); pairs
    with a position outside the marginals (the [CLS], a [SEP]) are NaN.
    """
    from .geometry.distances import fisher_rao_distances, hellinger_distances

    metadata = geometry.metadata or {}
    corpora = metadata.get("corpus") or []
    if len(corpora) != 1 or metadata.get("pooled"):  # a bucket's marginal is a mixture of the true ones
        return None
    marginals = true_marginals(corpora[0])
    if marginals is None:
        return None
    metric = fisher_rao_distances if geometry.metric == "fisher-rao" else hellinger_distances
    positions = np.asarray(geometry.positions)
    constant_first = positions.size > 0 and positions[0] == 0 and float(geometry.noise_floor[0]) <= 1e-6
    shift = int(bool(metadata.get("add_special_tokens")) and (bool(metadata.get("exclude_special")) or constant_first))
    rows = positions - shift
    valid = (rows >= 0) & (rows < len(marginals))
    truth = np.full((len(rows), len(rows)), np.nan)
    if len(marginals) > dense_limit():  # the scaling path: the scored positions' rows only, never n x n
        truth[np.ix_(valid, valid)] = metric(marginals[rows[valid]]) if valid.any() else 0.0
        return truth
    exact = metric(marginals)
    truth[np.ix_(valid, valid)] = exact[np.ix_(rows[valid], rows[valid])]
    return truth
