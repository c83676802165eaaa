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

from .corpus.marginals import DEFAULT_MIN_COUNT, cache_entry, compute_counts
from .corpus.sources import default_tokenizer, resolve_source
from .encodings import EncodingContext, get_encoding, is_encoding_spec
from .errors import FormatError, InputError
from .geometry.distances import PositionGeometry, position_geometry
from .geometry.scores import all_scores, null_calibration
from .io import load_arrays, save_arrays
from .notes import note

DEFAULT_COMPARE = ("sinusoidal", "rope", "alibi", "mds", "random")
LAYER_SCORES = ("stress", "scaled_stress", "monotonicity_violation", "lag_violation")
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
    null_draws: int = 8
    seed: int = 0
    max_sequences: int | None = 1024
    batch_size: int = 32
    cache: bool = True
    trust_remote_code: bool = False
    bootstrap: int = 0
    device: str = "auto"
    dtype: str = "auto"
    #: width of the compared encodings (None: the target's own; 768 for a spec without d)
    width: int | None = None


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
    name, _, args = spec.partition(":")
    if name not in ("sinusoidal", "rope", "random"):
        return None
    for part in args.split(","):
        key, _, value = part.partition("=")
        if key.strip() == "d":
            try:
                return int(float(value))
            except ValueError:
                return None  # get_encoding reports the bad value
    return None


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
        width = options.width or spec_width(target) or DEFAULT_WIDTH
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
        fix = "lower --min-count" if options.min_count > 1 else "use a corpus of longer texts (--min-count is 1)"
        raise InputError(f"only {len(geometry.positions)} positions have N_i >= {options.min_count}; {fix}")
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
    scores: dict[str, dict[str, Any]] = {}
    for index, (name, table) in enumerate(vectors.items()):
        observed = all_scores(table, target_distances, index=positions)
        observed_null = null_calibration(
            table,
            target_distances,
            draws=options.null_draws,
            seed=options.seed + index,
            scores=observed,
            index=positions,
        )
        scores[name] = dict(observed, dim=int(table.shape[1]), null=observed_null, null_draws=options.null_draws)

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
    values: dict[str, list[float]] = {name: [] for name in LAYER_SCORES}
    skipped = 0
    for counts in bootstrap_counts(texts, tok, options.bootstrap, seed=options.seed):
        rows = counts[positions]
        if (np.asarray(rows.sum(axis=1)).ravel() == 0).any():
            skipped += 1  # a resample that misses a rare position entirely: no distance there
            continue
        distances = hellinger_distances(normalise_rows(rows))
        scores = all_scores(table, distances, anchored=False, index=positions)
        for name in LAYER_SCORES:
            values[name].append(scores[name])
    if len(values[LAYER_SCORES[0]]) < 2:
        raise InputError(
            f"{skipped} of {options.bootstrap} resamples missed a kept position; raise --min-count for --bootstrap"
        )
    intervals: dict[str, Any] = {}
    for name, draws in values.items():
        array = np.asarray(draws)
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
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every per-layer row of a checkpoint, and what was measured or skipped (and why) per row kind."""
    measured: dict[str, str] = {}
    layers, measured["projected"] = projected_layers(checkpoint, table, distances, chosen, kept_positions)
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
        scores = all_scores(vectors, sub, anchored=False, index=kept)
        return {
            "layer": layer,
            "projection": projection,
            "positions_used": int(index.size),
            **{k: scores[k] for k in LAYER_SCORES},
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


def projected_layers(
    checkpoint: Any, table: np.ndarray | None, distances: np.ndarray, chosen: list[int], index: Any = None
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
            scores = all_scores(table @ matrix, distances, anchored=False, index=index)
            rows.append({"layer": layer, "projection": projection, **{k: scores[k] for k in LAYER_SCORES}})
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
    if options.cache and path.is_file():
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
    with contextlib.suppress(OSError, InputError):
        save_arrays(
            path, arrays, kind="centroids", metadata={**key_parts, "capture": forward.capture, "notes": forward.notes}
        )
    return forward


def layer_peaks(layers: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per projection: the layer where stress peaks, and where scaled stress is lowest."""
    peaks: dict[str, dict[str, Any]] = {}
    for projection in sorted({row["projection"] for row in layers}):
        rows = [row for row in layers if row["projection"] == projection]
        highest = max(rows, key=lambda row: row["stress"])
        best = min(rows, key=lambda row: row["scaled_stress"])
        peaks[projection] = {
            "peak_stress_layer": highest["layer"],
            "peak_stress": highest["stress"],
            "best_scaled_stress_layer": best["layer"],
            "best_scaled_stress": best["scaled_stress"],
        }
    return peaks


def public(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready part of an analysis result (drops private keys such as ``_geometry``)."""
    return {key: value for key, value in result.items() if not key.startswith("_")}
