"""The stress analysis: one target (checkpoint or encoding) against the geometry of a corpus.

corpus -> counts (the target's own tokenizer) -> Hellinger distances D between kept positions
-> scores of the target's position vectors, of the standard encodings and of a random null
-> layer by layer: position vectors through each layer's W_Q and W_K, and hidden-state
centroids from a forward pass. The result is one plain dict (what ``--format json`` prints).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cache import cache_entry, cache_holds, write_cache
from .corpus.marginals import DEFAULT_MIN_COUNT, compute_counts
from .corpus.sources import default_tokenizer, resolve_source
from .encodings import EncodingContext, get_encoding, is_encoding_spec
from .errors import FormatError, InputError
from .geometry.distances import PositionGeometry, position_geometry
from .geometry.null import (
    ASPECT_WORDS,
    ASPECTS,
    D_ASPECTS,
    DEFAULT_DRAWS,
    MIN_DRAWS,
    calibrate,
    categories,
    equidistant_scaled_stress,
    null_sample,
)
from .geometry.scores import all_scores
from .io import load_arrays, save_arrays
from .notes import note

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


@dataclass
class StressOptions:
    """Everything that shapes a stress analysis (the CLI's options)."""

    dataset: str
    split: str | None = None
    data_dir: str | None = None
    text_column: str | None = None
    limit: int | None = None
    tokenizer: str | None = None
    max_positions: int | None = None
    min_count: int = DEFAULT_MIN_COUNT
    distance: str = "naive"
    layers: str = "all"
    compare: Sequence[str] = DEFAULT_COMPARE
    null_draws: int = DEFAULT_DRAWS
    seed: int = 0
    max_sequences: int | None = 1024
    batch_size: int = 32
    cache: bool = True
    trust_remote_code: bool = False
    bootstrap: int = 0
    device: str = "auto"
    dtype: str = "auto"
    #: width of the compared encodings (None: the target's own; ``default_width`` for a spec without d)
    width: int | None = None
    #: the width of a spec that names none (sinusoidal, rope, random without d=): BERT-base's unless set
    default_width: int = DEFAULT_WIDTH


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


def analyze(target: str, options: StressOptions, progress: ProgressFactory | None = None) -> dict[str, Any]:
    """Run the stress analysis of ``target`` (a checkpoint name/path or an encoding spec)."""
    if options.distance not in ("naive", "corrected"):
        raise InputError(f"unknown --distance {options.distance!r}; choose naive or corrected")
    # Every option is checked before the corpus is read: bad input fails in a second, not after the counting.
    if options.bootstrap and options.bootstrap < 2:
        raise InputError(f"--bootstrap needs at least 2 resamples, got {options.bootstrap}")
    from .checkpoints.hidden import DEVICES, DTYPES

    if options.device.lower() not in DEVICES:
        raise InputError(f"unknown --device {options.device!r}; choose one of {', '.join(DEVICES)}")
    if options.dtype.lower() not in DTYPES:
        raise InputError(f"unknown --dtype {options.dtype!r}; choose one of {', '.join(DTYPES)}")
    if options.bootstrap and options.distance != "naive":
        raise InputError("--bootstrap resamples the naive Hellinger matrix; use --distance naive")
    compared = {spec: get_encoding(spec) for spec in options.compare if spec}
    check_not_a_typo(target)
    checkpoint = None
    chosen: list[int] = []
    if is_encoding_spec(target):
        encoding = get_encoding(target)
        if options.layers.strip().lower() not in ("all", "none"):
            raise InputError(f"--layers {options.layers!r} needs a checkpoint target; {target} is an encoding")
        tokenizer = options.tokenizer or default_tokenizer(options.dataset)
        width = options.width or spec_width(target) or options.default_width
        max_length = options.max_positions or DEFAULT_MAX_POSITIONS
    else:
        from .checkpoints import load_checkpoint

        checkpoint = load_checkpoint(target, options.trust_remote_code)
        if options.tokenizer is not None:
            _check_tokenizer_fits(options.tokenizer, checkpoint)
        tokenizer = options.tokenizer or checkpoint.tokenizer_spec()
        width = options.width or checkpoint.hidden_size
        model_max = checkpoint.max_positions or DEFAULT_MAX_POSITIONS
        if options.max_positions is not None and options.max_positions > model_max:
            raise InputError(
                f"--max-length {options.max_positions} exceeds the {model_max} positions of {target}; lower it"
            )
        max_length = options.max_positions or min(model_max, DEFAULT_MAX_POSITIONS)
        chosen = parse_layers(options.layers, checkpoint.n_layers)
    for candidate in [*compared.values(), *([encoding] if checkpoint is None else [])]:
        candidate.check(width)
    source = resolve_source(options.dataset, options.split, options.data_dir, options.text_column)
    counts, _ = compute_counts(
        source, tokenizer=tokenizer, max_length=max_length, limit=options.limit, cache=options.cache, progress=progress
    )
    if options.max_positions is not None and counts.n_positions < options.max_positions:
        raise InputError(
            f"the sequences of {source.name} reach {counts.n_positions} positions, fewer than --max-length "
            f"{options.max_positions}; lower --max-length"
        )
    geometry = position_geometry(counts, metric="hellinger", min_count=options.min_count)
    if len(geometry.positions) < 3:
        totals = np.sort(counts.totals)[::-1]
        if int((totals > 0).sum()) < 3:
            hint = "the corpus reaches fewer than 3 positions and the scores need 3; use longer texts"
        else:
            hint = f"lower --min-count to {int(totals[2])} or below"
        raise InputError(f"only {len(geometry.positions)} positions have N_i >= {options.min_count}; {hint}")
    target_distances = geometry.matrix(options.distance)
    if not np.all(np.isfinite(target_distances)):
        raise InputError("the corrected distance is undefined for some positions; raise --min-count or use naive")
    context = EncodingContext(width=width, distances=target_distances, counts=counts.metadata)
    positions = geometry.positions

    vectors = {}
    if checkpoint is not None:
        if checkpoint.mechanism.has_vectors:
            vectors[target] = checkpoint.position_vectors(positions)
    else:
        vectors[target] = encoding.vectors(positions, context)
        if options.width is None and vectors[target].ndim == 2 and target.split(":")[0] not in ("mds", "alibi"):
            # Compare at the target's own width (model:, file:, learned: tables say theirs only when read).
            width = int(vectors[target].shape[1])
            context = EncodingContext(width=width, distances=target_distances, counts=counts.metadata)
            for candidate in compared.values():
                candidate.check(width)
    for spec, compared_encoding in compared.items():
        if spec not in vectors:
            vectors[spec] = compared_encoding.vectors(positions, context)
    nulls = NullCache(target_distances, positions, options.null_draws, options.seed)
    scores: dict[str, dict[str, Any]] = {}
    for name, table in vectors.items():
        scores[name] = score_table(table, target_distances, positions, nulls)
        note_beyond_range(name, scores[name])
    discriminates = discriminability(
        scores, vectors, target_distances, positions, width, context, nulls, geometry.summary, options.distance
    )

    if options.bootstrap and target in scores:
        scores[target]["bootstrap"] = bootstrap_intervals(
            vectors[target], scores[target], source, tokenizer, max_length, positions, options
        )

    result: dict[str, Any] = {
        "target": target,
        "kind": "checkpoint" if checkpoint is not None else "encoding",
        "dataset": {**source.describe(), "tokenizer": tokenizer, "max_length": max_length, "limit": options.limit},
        "distance": options.distance,
        "width": width,
        "positions": positions,
        "left_out": geometry.left_out,
        "noise": geometry.summary,
        "scores": scores,
        "null": {"draws": options.null_draws, "min_draws": MIN_DRAWS, "alpha": 0.05, "seed": options.seed},
        "discriminability": discriminates,
        "layers": [],
        "peaks": {},
    }
    if checkpoint is not None:
        mechanism = checkpoint.mechanism
        rows: dict[str, str] = {}
        result["checkpoint"] = {
            "path": str(checkpoint.path) if checkpoint.origin == "local folder" else checkpoint.name,
            "origin": checkpoint.origin,
            "architecture": mechanism.architecture,
            "model_type": mechanism.model_type,
            "position_kind": mechanism.kind,
            "position_mechanism": mechanism.summary(),
            "hidden_size": width,
            "layers": checkpoint.n_layers,
            "parameters": mechanism.parameters,
            "rows": rows,
            "notes": list(mechanism.notes),
        }
        rows["position"] = (
            f"measured ({mechanism.kind})"
            if target in vectors
            else f"skipped: no absolute position vectors; positions are {mechanism.describe_kind()}"
        )
        if chosen:
            layers, measured = checkpoint_layers(
                checkpoint,
                vectors.get(target),
                positions,
                source,
                tokenizer,
                geometry,
                target_distances,
                chosen,
                max_length,
                options,
                progress,
                nulls,
            )
            rows.update(measured)
            result["layers"] = layers
            result["peaks"] = layer_peaks(layers)
        else:
            rows.update({name: "skipped: --layers none" for name in ("projected", "query_key", "hidden")})
        for line in result["checkpoint"]["notes"]:
            note(f"{target}: {line}")
    result["_geometry"] = geometry  # for figures; dropped from JSON
    result["_vectors"] = vectors
    return result


class NullCache:
    """The null draws of one analysis, drawn once per shape: every table of width k on the same
    positions is held against the same K random tables (so their categories compare)."""

    def __init__(self, distances: np.ndarray, positions: np.ndarray, draws: int, seed: int) -> None:
        self.distances, self.positions, self.draws, self.seed = distances, positions, draws, seed
        self._samples: dict[tuple[Any, ...], dict[str, np.ndarray]] = {}

    def sample(self, width: int, subset: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The null scores of tables of ``width`` columns on the kept positions (or the rows ``subset`` of them)."""
        key = (width, None if subset is None else tuple(int(i) for i in subset))
        if key not in self._samples:
            distances = self.distances if subset is None else self.distances[np.ix_(subset, subset)]
            index = self.positions if subset is None else self.positions[subset]
            self._samples[key] = null_sample(
                (index.size, width), distances, self.draws, seed=self.seed, anchored=True, index=index
            )
        return self._samples[key]


def score_table(
    table: np.ndarray,
    distances: np.ndarray,
    positions: np.ndarray,
    nulls: NullCache,
    scale: float = 1.0,
    subset: np.ndarray | None = None,
) -> dict[str, Any]:
    """Every score of one table, its rank test against the null of its shape (on the rows ``subset`` of
    the kept positions, or all of them), and its category per aspect."""
    observed = all_scores(table, distances, index=positions, scale=scale)
    calibrated = calibrate(observed, nulls.sample(int(table.shape[1]), subset))
    return dict(
        observed, dim=int(table.shape[1]), null=calibrated, null_draws=nulls.draws, categories=categories(calibrated)
    )


#: the encodings that carry position information without being fitted to D (the discriminability probes)
PROBE_KINDS = ("sinusoidal", "rope")


def discriminability(
    scores: dict[str, dict[str, Any]],
    vectors: dict[str, np.ndarray],
    distances: np.ndarray,
    positions: np.ndarray,
    width: int,
    context: EncodingContext,
    nulls: NullCache,
    noise: dict[str, Any],
    distance: str,
) -> dict[str, Any]:
    """Per aspect, whether its score can separate encodings on this corpus (docs/scores.md, "Discriminability").

    A D-based score (shape, order, local order) cannot when the naive distance is mostly sampling
    noise (noise fraction above 0.5), or when the sinusoidal table at the compared width (a table
    with position information that is not fitted to D) is indistinguishable from the random
    tables. Lag and separation depend on the vectors alone and always can.
    """
    probes = {
        name: scores[name]
        for name, table in vectors.items()
        if name.split(":")[0] in PROBE_KINDS and table.shape[1] == width
    }
    if not probes:
        even = max(2, 2 * (width // 2))
        spec = f"sinusoidal:d={even}"
        probes[spec] = score_table(get_encoding(spec).vectors(positions, context), distances, positions, nulls)
    probe_name, probe = next(iter(probes.items()))
    decidable = nulls.draws >= MIN_DRAWS
    equidistant = equidistant_scaled_stress(distances)
    noise_fraction = noise.get("noise_fraction")
    noisy = (
        distance == "naive"
        and noise_fraction is not None
        and noise_fraction == noise_fraction
        and noise_fraction > NOISE_DOMINATED
    )
    result: dict[str, Any] = {"probe": probe_name, "equidistant_scaled_stress": equidistant, "aspects": {}}
    for aspect, key in ASPECTS.items():
        entry: dict[str, Any] = {"discriminates": True, "reason": None}
        if aspect in D_ASPECTS:
            categories_seen = {p["categories"].get(aspect) for p in probes.values()}
            null = probe["null"].get(key)
            if not decidable:
                entry = {
                    "discriminates": None,
                    "reason": f"{nulls.draws} null draws cannot decide it (the rank test needs {MIN_DRAWS})",
                }
            elif noisy:
                entry = {
                    "discriminates": False,
                    "reason": f"the naive distance is mostly sampling noise (noise fraction {noise_fraction:.2f} > "
                    f"{NOISE_DOMINATED}), so {ASPECT_WORDS[aspect]} ranks encodings against noise",
                }
            elif null is not None and categories_seen <= {"indistinguishable"}:
                reason = (
                    f"{probe_name} ({probe[key]:.4g}) scores within the random tables' range "
                    f"({null['low']:.4g} to {null['high']:.4g})"
                )
                if aspect == "shape":
                    reason += (
                        f"; a table with no position information (every position equidistant) scores "
                        f"{equidistant:.4g}: D is nearly flat where it counts, so scaled stress rewards any "
                        "near-isotropic table"
                    )
                entry = {"discriminates": False, "reason": reason}
            entry["probe_category"] = probe["categories"].get(aspect)
        result["aspects"][aspect] = entry
    return result


def note_beyond_range(name: str, scores: dict[str, Any]) -> None:
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
    observed_scores: dict[str, float],
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

    texts = source.read(options.limit)
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
    kept_positions: np.ndarray,
    source: Any,
    tokenizer: str,
    geometry: PositionGeometry,
    distances: np.ndarray,
    chosen: list[int],
    max_length: int,
    options: StressOptions,
    progress: ProgressFactory | None,
    nulls: NullCache,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every per-layer row of a checkpoint, and what was measured or skipped (and why) per row kind.

    Each row is scored like a table (every scale-free score, its rank test against random tables
    of the row's width on the row's positions, and its categories)."""
    measured: dict[str, str] = {}
    layers, measured["projected"] = projected_layers(checkpoint, table, distances, chosen, kept_positions, nulls)
    forward = cached_forward(checkpoint, source, tokenizer, max_length, options, progress)
    positions = geometry.positions
    reach = forward.reach
    usable = (positions < reach.shape[0]) & (reach[np.minimum(positions, reach.shape[0] - 1)] >= MIN_CENTROID_SEQUENCES)
    index = np.flatnonzero(usable)
    if index.size < 3:
        reason = f"skipped: fewer than 3 kept positions are reached by {MIN_CENTROID_SEQUENCES} sampled sequences"
        measured["query_key"] = measured["hidden"] = reason
        return layers, measured
    sub = distances[np.ix_(index, index)]
    kept = positions[index]

    def row(layer: int, projection: str, vectors: np.ndarray) -> dict[str, Any]:
        if not np.all(np.isfinite(vectors)):
            raise InputError(
                f"the {projection} vectors of layer {layer} hold NaN or infinity: the forward pass overflowed "
                "(huge weights, or a low precision); try --dtype float32, or --layers none to score the table only"
            )
        return {
            "layer": layer,
            "projection": projection,
            "positions_used": int(index.size),
            **layer_scores(vectors, sub, kept, nulls, subset=index),
        }

    captured = 0
    for layer in chosen:
        for projection, store in (("query", forward.queries), ("key", forward.keys)):
            if layer in store and store[layer].shape[0] > int(kept.max()):
                layers.append(row(layer, projection, store[layer][kept]))
                captured += 1
    if captured:
        measured["query_key"] = f"measured ({forward.capture})"
    elif forward.notes:
        measured["query_key"] = "skipped: " + "; ".join(forward.notes)
    else:
        measured["query_key"] = "skipped: no chosen layer holds an attention module"
    for layer in chosen:
        if layer < forward.centroids.shape[0]:
            layers.append(row(layer, "hidden", forward.centroids[layer][kept]))
    measured["hidden"] = "measured"
    layers.sort(key=lambda item: (item["layer"], _PROJECTION_ORDER.get(item["projection"], 9)))
    return layers, measured


_PROJECTION_ORDER = {"P·W_Q": 0, "P·W_K": 1, "query": 2, "key": 3, "hidden": 4}


def layer_scores(
    vectors: np.ndarray,
    distances: np.ndarray,
    positions: np.ndarray,
    nulls: NullCache,
    subset: np.ndarray | None = None,
    scale: float = 1.0,
) -> dict[str, Any]:
    """A layer row's scores (:data:`LAYER_SCORES`), their rank tests (``null``) and ``categories``."""
    scored = score_table(vectors, distances, positions, nulls, scale=scale, subset=subset)
    return {
        **{k: scored[k] for k in LAYER_SCORES},
        "null": {k: scored["null"][k] for k in LAYER_SCORES if k in scored["null"]},
        "categories": scored["categories"],
    }


def projected_layers(
    checkpoint: Any,
    table: np.ndarray | None,
    distances: np.ndarray,
    chosen: list[int],
    index: Any,
    nulls: NullCache,
) -> tuple[list[dict[str, Any]], str]:
    """Scores of P W_Q^(l) and P W_K^(l) for the chosen layers (1-based: layer l's attention): the stored
    table pushed through each layer's query and key maps, bias left out."""
    rows: list[dict[str, Any]] = []
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
            scores = layer_scores(unit @ matrix, distances, index, nulls, scale=scale or 1.0)
            note_beyond_range(f"layer {layer} {projection}", scores)
            rows.append({"layer": layer, "projection": projection, **scores})
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
    from .checkpoints.hidden import ForwardResult
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
        "version": 3,
    }
    path = cache_entry("centroids", key_parts)
    if options.cache and cache_holds(path):
        try:
            arrays, metadata = load_arrays(path, kind="centroids")
            return ForwardResult(
                arrays["centroids"],
                arrays["reach"],
                {int(k[2:]): v for k, v in arrays.items() if k.startswith("q_")},
                {int(k[2:]): v for k, v in arrays.items() if k.startswith("k_")},
                str(metadata.get("capture", "none")),
                list(metadata.get("notes", [])),
            )
        except (FormatError, KeyError, ValueError):
            with contextlib.suppress(OSError):  # a read-only cache keeps it; it is never trusted
                path.unlink(missing_ok=True)
    from .checkpoints.hidden import forward_pass, sample_indices

    texts = source.read(options.limit)
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
    )
    arrays = {"centroids": forward.centroids, "reach": forward.reach}
    arrays.update({f"q_{k}": v for k, v in forward.queries.items()})
    arrays.update({f"k_{k}": v for k, v in forward.keys.items()})
    # --no-cache recomputes and refreshes the entry (as for counts); an unwritable cache never fails the job.
    write_cache(
        lambda: save_arrays(
            path, arrays, kind="centroids", metadata={**key_parts, "capture": forward.capture, "notes": forward.notes}
        )
    )
    return forward


def layer_peaks(layers: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per projection, in table order: the layers of lowest scaled stress and lowest violation, the
    layers whose categories are better than random per aspect, and (JSON only, not a summary: it
    follows the vectors' size) the layer where raw stress peaks."""

    def lowest(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
        # an undefined score (NaN) is never the best
        return min(rows, key=lambda row: (not np.isfinite(row[key]), row[key] if np.isfinite(row[key]) else 0.0))

    peaks: dict[str, dict[str, Any]] = {}
    order = sorted({row["projection"] for row in layers}, key=lambda name: (_PROJECTION_ORDER.get(name, 9), name))
    for projection in order:
        rows = [row for row in layers if row["projection"] == projection]
        highest = max(rows, key=lambda row: row["stress"] if np.isfinite(row["stress"]) else -np.inf)
        best = lowest(rows, "scaled_stress")
        ordered = lowest(rows, "monotonicity_violation")
        peaks[projection] = {
            "peak_stress_layer": highest["layer"],
            "peak_stress": highest["stress"],
            "best_scaled_stress_layer": best["layer"],
            "best_scaled_stress": best["scaled_stress"],
            "best_violation_layer": ordered["layer"],
            "best_violation": ordered["monotonicity_violation"],
            "better_layers": {
                aspect: [row["layer"] for row in rows if row.get("categories", {}).get(aspect) == "better"]
                for aspect in ASPECTS
            },
            "layers": [row["layer"] for row in rows],
        }
    return peaks


def public(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready part of an analysis result (drops private keys such as ``_geometry``)."""
    return {key: value for key, value in result.items() if not key.startswith("_")}
