"""The pipeline commands: marginals -> distances -> mds.

Each checks its outputs before any work, reads its corpus options into one CorpusOptions
(:func:`common.corpus_options`), computes with the library (counts, ``position_geometry``,
``geometry.mds.mds_encoding``), writes every output or none, and prints its result: one JSON
object with ``-f json``, tables otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from ..api import DEFAULT_MIN_COUNT
from ..errors import InputError
from ..report.render import fmt, grid_table, key_value_table, print_table, print_warnings
from ..results import CountsResult, DistancesResult, MdsResult
from . import options as opt
from .common import (
    Folder,
    Output,
    all_or_none,
    check_format,
    check_output_place,
    check_output_suffix,
    corpus_options,
    guard,
    handles_errors,
    load_counts,
    load_geometry,
)
from .inputs import given_options

CountsOutput = Annotated[Path | None, opt.path_option("--output", "-o", help="Write the counts here (.safetensors).")]
DistancesOutput = Annotated[
    Path | None, opt.path_option("--output", "-o", help="Write the distance matrices here (.safetensors).")
]
Heatmap = Annotated[
    Path | None, opt.path_option("--heatmap", hidden=True, help="Write the heatmap PNG here (old; use --plot-dir).")
]
PlotDir = Annotated[
    Path | None, opt.path_option("--plot-dir", help="Write the PNG figure into this folder (<metric>.png / mds.png).")
]
EncodingOutput = Annotated[
    Path | None, opt.path_option("--output", "-o", help="Write the PE file here (.safetensors).")
]
Dim = Annotated[
    int | None, typer.Option("--width", "--dim", "-d", min=1, help="Model width d of P = A W (default: the rank).")
]
Rank = Annotated[int | None, typer.Option("--rank", "-r", min=1, help="Rank r (default: effective rank, at most d).")]
Distance = Annotated[
    str, opt.text_option("--estimate", "--distance", help="Embed the naive or the bias-corrected distances.")
]
Basis = Annotated[str, opt.text_option("--basis", help="W: random (seeded orthonormal) or identity.")]
BasisSeed = Annotated[int, opt.seed_option("--seed", help="Seed of the random basis W.")]
Scale = Annotated[float, typer.Option("--scale", help="Multiply the encoding (and its distances) by this.")]
IntoCheckpoint = Annotated[
    Path | None, opt.path_option("--into-checkpoint", help="A HF BERT checkpoint (folder or hub name) to copy.")
]
CheckpointOutput = Annotated[
    Path | None, opt.path_option("--checkpoint-output", help="Where the copy with the MDS positions goes.")
]
Plot = Annotated[
    Path | None, opt.path_option("--plot", hidden=True, help="Write the spectrum / stress / map PNG here (old).")
]
Method = Annotated[str, opt.text_option("--method", help="Eigensolver: auto, full or partial (top r).")]


def _inputs(sources: list[str], given: Mapping[str, Any], *more: Path | None) -> list[Any]:
    """What a pipeline command reads: its sources, their folders in --data-dir, a local tokenizer, ..."""
    found: list[Any] = [*sources, given["tokenizer"], *more]
    data_dir = given["data_dir"]
    if data_dir is not None:
        found += [data_dir / source for source in sources]
    return found


def _sample_positions(n: int) -> list[int]:
    return sorted({0, 1, 2, n // 8, n // 4, n // 2, (3 * n) // 4, n - 1} & set(range(n)))


def _corpora(given: Mapping[str, Any]) -> list[str]:
    """The corpora of a pipeline command: --dataset's, after those given the old way, as arguments."""
    return [*(given["sources"] or []), *(given["dataset"] or [])]


def _figure(plot_dir: Path | None, name: str, old: Path | None) -> Path | None:
    """The PNG a pipeline command draws: ``name`` in --plot-dir, or the file its old option named."""
    return plot_dir / name if plot_dir is not None else old


def _sources_line(notes: Sequence[Mapping[str, str]]) -> str:
    """Each source and where it came from; how it was read (--read) when not as rows."""
    return ", ".join(f"{n['source']} ({n['from']}{', read as ' + n['read'] if 'read' in n else ''})" for n in notes)


# --- marginals ------------------------------------------------------------------------------


@handles_errors
@opt.takes((opt.INPUTS, "output"), (opt.READING + opt.STREAMING, "min_count"))
def marginals(
    ctx: typer.Context,
    output: CountsOutput = None,
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    format: opt.Format = "table",
    **given: Any,
) -> None:
    """Count tokens per position (the marginals mu_i) of one or more corpora or counts files.

    Several sources are merged by adding their counts (same tokenizer only). Results are
    cached by corpus, tokenizer and options, so a re-run is instant. Corpora are streamed shard
    by shard (a folder or glob of .txt / .jsonl[.gz] / .parquet shards): memory does not grow
    with the corpus; shards are counted by --workers processes or a Dask --cluster, and a killed
    job re-run with the same --work-dir counts only the missing shards.
    """
    sources = _corpora(given)
    check_format(format)
    check_output_suffix(output, ".safetensors", "counts")
    guard(_inputs(sources, given), [Output("--output", output), Folder("--work-dir", given["work_dir"])])
    reports: list[Mapping[str, Any]] = []
    counts, notes = load_counts(sources, corpus_options(ctx.params, given_options(ctx)), reports=reports)
    if output is not None:
        with all_or_none() as stage:
            counts.save(stage(output))
    result = CountsResult.of(counts, notes, reports, min_count, output)
    if format == "json":
        print(result.to_json())
        return
    _print_counts(result, min_count, format)


def _print_counts(result: CountsResult, min_count: int, format: str) -> None:
    counted = [
        (
            f"counted {r['source']}",
            f"{r['counted']} shard{'s' if r['counted'] != 1 else ''} counted, {r['reused']} resumed, {r['tokens']:,} tokens "
            f"in {r['seconds']:.1f} s on {r['engine']}",
        )
        for r in result.counting
    ]
    rows = [
        ("sources", _sources_line(result.sources)),
        ("tokenizer", (result.tokenizer or {}).get("name")),
        ("sequences", result.n_sequences),
        ("positions n", result.n_positions),
        ("vocabulary V", result.vocab_size),
        ("non-zero counts", result.nonzero),
        (f"kept (N_i >= {min_count})", result.kept_positions),
        ("left out", result.left_out["positions"]),
        *counted,
        ("written to", result.output),
    ]
    print_table(key_value_table("per-position token counts", rows), format)
    sample = _sample_positions(result.n_positions)
    print_table(
        grid_table("N_i at some positions", ["position", "N_i"], [(i, int(result.totals[i])) for i in sample]),
        format,
    )


# --- distances ------------------------------------------------------------------------------


@handles_errors
@opt.takes((opt.INPUTS, "output"), (opt.READING + opt.STREAMING, "format"))
def distances(
    ctx: typer.Context,
    output: DistancesOutput = None,
    plot_dir: PlotDir = None,
    heatmap: Heatmap = None,
    metric: opt.Metric = "hellinger",
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    positions: opt.Positions = "all",
    format: opt.Format = "table",
    **given: Any,
) -> None:
    """Hellinger (or Fisher-Rao) distances between positions, with noise floors and a bias correction.

    Prints the signal-to-noise summary: how much of the naive distance is sampling noise.
    """
    from ..api import PositionSet, check_dense, pool_positions, position_geometry

    sources = _corpora(given)
    spec = opt.position_spec(positions)
    heatmap = _figure(plot_dir, f"{metric}.png", heatmap)
    check_format(format)
    check_output_suffix(output, ".safetensors", "distances")
    check_output_suffix(heatmap, ".png", "figures", option="--heatmap")
    check_output_place(plot_dir, folder=True, option="--plot-dir")
    guard(
        _inputs(sources, given),
        [Output("--output", output), Output("--heatmap", heatmap), Folder("--work-dir", given["work_dir"])],
    )
    counts, notes = load_counts(sources, corpus_options(ctx.params, given_options(ctx)))
    counts = pool_positions(counts, spec)  # all: the counts themselves
    if min_count >= 1:  # past the dense limit the n x n file is refused (geometry/sampled.py)
        check_dense(counts.kept_positions(min_count).size)
    geometry = position_geometry(counts, metric=metric, min_count=min_count)
    with all_or_none() as stage:
        if output is not None:
            geometry.save(stage(output))
        if heatmap is not None:
            from ..report.figures import distance_heatmap

            distance_heatmap(geometry, stage(heatmap))
    result = DistancesResult.of(geometry, notes, output, heatmap)
    result = replace(result, position_set=PositionSet.of(counts, geometry.positions))
    if format == "json":
        print(result.to_json())
        return
    _print_distances(result, format)


def _print_distances(result: DistancesResult, format: str) -> None:
    summary = result.noise
    rows = [
        ("sources", _sources_line(result.sources)),
        *_scored_line(result.position_set),
        ("positions kept", f"{len(result.positions)} ({fmt(result.positions[[0, -1]].tolist())})"),
        ("left out", result.left_out.get("positions")),
        ("median naive distance", summary["median_naive"]),
        ("median corrected distance", summary["median_corrected"]),
        ("median noise floor", summary["median_noise_floor"]),
        ("noise fraction of naive d^2", summary["noise_fraction"]),
        ("signal-to-noise (power)", summary["snr"]),
        ("pairs above both floors", summary["pairs_above_floor"]),
        ("written to", result.output),
        ("heatmap", result.heatmap),
    ]
    print_table(key_value_table(f"{result.metric} distances between positions", rows), format)
    print_warnings(result.warnings, format)  # as stress warns: the scores of a noisy D rank noise
    sample = _sample_positions(len(result.positions))
    floors = [(int(result.positions[k]), int(result.totals[k]), float(result.noise_floor[k])) for k in sample]
    print_table(grid_table("noise floor at some positions", ["position", "N_i", "floor"], floors), format)


# --- mds ------------------------------------------------------------------------------------


@handles_errors
@opt.takes((opt.INPUTS, "output"), (opt.READING, "format"))
def mds(
    ctx: typer.Context,
    output: EncodingOutput = None,
    dim: Dim = None,
    rank: Rank = None,
    distance: Distance = "naive",
    basis: Basis = "random",
    seed: BasisSeed = 0,
    scale: Scale = 1.0,
    into_checkpoint: IntoCheckpoint = None,
    checkpoint_output: CheckpointOutput = None,
    plot_dir: PlotDir = None,
    plot: Plot = None,
    method: Method = "auto",
    metric: opt.Metric = "hellinger",
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    positions: opt.Positions = "all",
    format: opt.Format = "table",
    **given: Any,
) -> None:
    """Classical MDS of the position distances, and the low-rank positional encoding P = A W.

    --dataset may also be a distances file. Prints the eigen-spectrum, effective rank,
    negative-eigenvalue mass, stress against rank and the parameter saving r(n+d) vs n d.
    """
    from ..api import mds_encoding, write_into_checkpoint

    sources = _corpora(given)
    spec = opt.position_spec(positions)
    if not spec.is_all and into_checkpoint is not None:
        raise InputError("--into-checkpoint writes a vector for every position; leave --positions out with it")
    into_checkpoint = _local_checkpoint(into_checkpoint)
    plot = _figure(plot_dir, "mds.png", plot)
    check_format(format)
    check_output_suffix(output, ".safetensors", "PE files")
    check_output_suffix(plot, ".png", "figures", option="--plot")
    check_output_place(plot_dir, folder=True, option="--plot-dir")
    check_output_place(checkpoint_output, folder=True, option="--checkpoint-output")
    guard(
        _inputs(sources, given, into_checkpoint),
        [
            Output("--output", output),
            Output("--plot", plot),
            Folder("--checkpoint-output", checkpoint_output, replaces=True),
        ],
    )
    _check_mds_options(distance, into_checkpoint, checkpoint_output)
    if into_checkpoint is not None and dim is None:
        dim = _hidden_size(into_checkpoint)
    geometry, notes, position_set = _chosen_geometry(
        sources, corpus_options(ctx.params, given_options(ctx)), (metric, min_count), spec
    )
    matrix = _embeddable(geometry, distance)
    about = {"metric": metric, "distance": distance, "counts": geometry.metadata}
    fitted, curve, encoding = mds_encoding(
        matrix,
        geometry.positions,
        dim=dim,
        rank=rank,
        basis=basis,
        seed=seed,
        scale=scale,
        method=method,
        metadata=about,
    )
    written = None
    with all_or_none() as stage:
        if output is not None:
            encoding.save(stage(output))
        if plot is not None:
            _plot_mds(fitted, curve, geometry, stage(plot), encoding.rank, sources)
        if into_checkpoint is not None and checkpoint_output is not None:
            staged = stage(checkpoint_output, folder=True, create=False)
            written = {**write_into_checkpoint(encoding, into_checkpoint, staged), "checkpoint": str(checkpoint_output)}
    result = MdsResult.of(fitted, curve, encoding, geometry.positions, notes, output, written)
    result = replace(result, position_set=position_set)
    if format == "json":
        print(result.to_json())
        return
    _print_mds(result, dim, format)


def _chosen_geometry(
    sources: list[str], options: Any, measure: tuple[str, int], spec: Any
) -> tuple[Any, list[dict[str, str]], Any]:
    """The geometry mds embeds, its sources' notes and the position set (None for ``all``): a distances
    file or the counts as today, or the counts pooled into ``spec`` (which needs counts, not distances)."""
    from ..api import PositionSet, pool_positions, position_geometry
    from ..io import file_kind

    metric, min_count = measure
    if spec.is_all:
        return (*load_geometry(sources, options, metric, min_count), None)
    if len(sources) == 1 and Path(sources[0]).is_file() and file_kind(sources[0]) == "distances":
        raise InputError(
            f"--positions {spec} pools counts, and {sources[0]} holds distances; give its counts or corpus instead"
        )
    counts, notes = load_counts(sources, options)
    pooled = pool_positions(counts, spec)
    geometry = position_geometry(pooled, metric=metric, min_count=min_count)
    return geometry, notes, PositionSet.of(pooled, geometry.positions)


def _scored_line(position_set: Any) -> list[tuple[str, Any]]:
    """The table's row naming the position set scored (none for every position)."""
    return [] if position_set is None else [("positions scored", position_set.line())]


def _local_checkpoint(checkpoint: Path | None) -> Path | None:
    """--into-checkpoint's folder: a local one as given, a hub name resolved as stress resolves it (the
    HF cache, the shipped MiniLM offline, the hub)."""
    if checkpoint is None or checkpoint.exists():
        return checkpoint
    from ..api import resolve_checkpoint

    return resolve_checkpoint(str(checkpoint))[0]


def _check_mds_options(distance: str, into_checkpoint: Path | None, checkpoint_output: Path | None) -> None:
    if distance not in ("naive", "corrected"):
        raise InputError(f"unknown --estimate {distance!r}; choose naive or corrected")
    if (into_checkpoint is None) != (checkpoint_output is None):
        raise InputError("--into-checkpoint and --checkpoint-output go together; pass both")
    if checkpoint_output is not None and checkpoint_output.exists():
        raise InputError(f"{checkpoint_output} already exists; pass a new folder for the modified checkpoint")


def _embeddable(geometry: Any, distance: str) -> np.ndarray:
    """The matrix to embed, refused when the correction left some of it undefined."""
    matrix: np.ndarray = geometry.matrix(distance)
    undefined = ~np.isfinite(matrix)
    if undefined.any():
        # The correction fails at a position (no token shared by its two halves), which leaves
        # that position's whole row undefined; name those positions, not their partners.
        culprits = geometry.positions[undefined.sum(axis=1) == len(matrix) - 1]
        where = ", ".join(str(int(p)) for p in culprits[:5]) or "some pairs"
        raise InputError(
            f"the corrected distance is undefined at position {where}; raise --min-count or embed --estimate naive"
        )
    return matrix


def _plot_mds(fitted: Any, curve: dict[int, float], geometry: Any, path: Path, rank: int, sources: list[str]) -> None:
    from ..api import known_distances
    from ..report.figures import corpus_caption, mds_figure

    truth = known_distances(geometry)  # a synthetic corpus's exact distances, drawn beside the estimate
    named = corpus_caption(geometry) or ", ".join(sources)  # the corpus the counts are of, not their file
    mds_figure(fitted, curve, geometry.positions, path, rank=rank, subtitle=named, truth=truth)


def _print_mds(result: MdsResult, dim: int | None, format: str) -> None:
    rows = [
        ("sources", _sources_line(result.sources)),
        *_scored_line(result.position_set),
        ("positions n", result.n_positions),
        ("matrix", f"{result.distance} {result.metric}"),
        ("effective rank", _rank_line(result)),
        ("negative eigenvalue mass", result.negative_mass),
        ("rank r / width d", f"{result.rank} / {result.dim}"),
        ("stress at rank r", result.stress),
        ("parameters r(n+d) vs n d", _parameter_line(result.parameters) if dim else "pass --width (the model width)"),
        ("written to", result.output),
        ("checkpoint", result.checkpoint["checkpoint"] if result.checkpoint else None),
    ]
    print_table(key_value_table("classical MDS positional encoding", rows), format)
    top = result.eigenvalues[:10]
    print_table(
        grid_table("top eigenvalues", ["component", "eigenvalue"], [(k + 1, float(v)) for k, v in enumerate(top)]),
        format,
    )
    curve = list(result.stress_curve.items())
    print_table(grid_table("stress against rank", ["rank", "stress"], curve), format)


def _rank_line(result: MdsResult) -> str:
    if result.partial:
        return f">= {result.effective_rank} (only the top {len(result.eigenvalues)} eigenpairs computed)"
    return str(result.effective_rank)


def _parameter_line(params: Mapping[str, Any]) -> str:
    saving = params["saving"]
    change = f"{saving:.1%} fewer" if saving >= 0 else f"{-saving:.1%} more: choose --rank below n d / (n + d)"
    return f"{params['factored']} vs {params['dense']} ({change})"


def _hidden_size(checkpoint: Path) -> int:
    from ..api import load_checkpoint

    return load_checkpoint(str(checkpoint)).hidden_size
