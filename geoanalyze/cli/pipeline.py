"""The pipeline commands: marginals -> distances -> mds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from ..corpus.marginals import DEFAULT_MIN_COUNT
from ..errors import InputError
from ..report.render import fmt, grid_table, key_value_table, print_json, print_table
from . import options as opt
from .common import (
    CorpusOptions,
    Folder,
    Output,
    all_or_none,
    check_format,
    check_output_place,
    check_output_suffix,
    guard,
    handles_errors,
    load_counts,
    load_geometry,
)


def _corpus_options(
    split: str | None,
    data_dir: Path | None,
    text_column: str | None,
    limit: int | None,
    tokenizer: str | None,
    max_length: int | None,
    exclude_special: bool,
    no_special_tokens: bool,
    split_seed: int,
    no_cache: bool,
    sample: float | None = None,
    sample_seed: int = 0,
    workers: int | None = None,
    cluster: str | None = None,
    work_dir: Path | None = None,
) -> CorpusOptions:
    return CorpusOptions(
        split=split,
        data_dir=data_dir,
        text_column=text_column,
        limit=limit,
        tokenizer=tokenizer,
        max_length=max_length,
        exclude_special=exclude_special,
        add_special_tokens=not no_special_tokens,
        split_seed=split_seed,
        cache=not no_cache,
        sample=sample,
        sample_seed=sample_seed,
        workers=workers,
        cluster=cluster,
        work_dir=work_dir,
    )


def _inputs(sources: list[str], data_dir: Path | None, tokenizer: str | None, *more: Path | None) -> list[Any]:
    """What a pipeline command reads: its sources, their folders in --data-dir, a local tokenizer, ..."""
    found: list[Any] = [*sources, tokenizer, *more]
    if data_dir is not None:
        found += [data_dir / source for source in sources]
    return found


def _sample_positions(n: int) -> list[int]:
    return sorted({0, 1, 2, n // 8, n // 4, n // 2, (3 * n) // 4, n - 1} & set(range(n)))


@handles_errors
def marginals(
    sources: opt.Sources,
    output: Annotated[Path | None, opt.path_option("--output", "-o", help="Write the counts here (.safetensors).")] = None,
    split: opt.Split = None,
    data_dir: opt.DataDir = None,
    text_column: opt.TextColumn = None,
    limit: opt.Limit = None,
    tokenizer: opt.TokenizerOpt = None,
    max_length: opt.MaxLength = None,
    exclude_special: opt.ExcludeSpecial = False,
    no_special_tokens: opt.NoSpecialTokens = False,
    split_seed: opt.SplitSeed = 0,
    no_cache: opt.NoCache = False,
    sample_fraction: opt.Sample = None,
    sample_seed: opt.SampleSeed = 0,
    workers: opt.Workers = None,
    cluster: opt.Cluster = None,
    work_dir: opt.WorkDir = None,
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    format: opt.Format = "table",
) -> None:
    """Count tokens per position (the marginals mu_i) of one or more corpora or counts files.

    Several sources are merged by adding their counts (same tokenizer only). Results are
    cached by corpus, tokenizer and options, so a re-run is instant. Corpora are streamed shard
    by shard (a folder or glob of .txt / .jsonl[.gz] / .parquet shards): memory does not grow
    with the corpus; shards are counted by --workers processes or a Dask --cluster, and a killed
    job re-run with the same --work-dir counts only the missing shards.
    """
    check_format(format)
    check_output_suffix(output, ".safetensors", "counts")
    guard(_inputs(sources, data_dir, tokenizer), [Output("--output", output), Folder("--work-dir", work_dir)])
    options = _corpus_options(
        split,
        data_dir,
        text_column,
        limit,
        tokenizer,
        max_length,
        exclude_special,
        no_special_tokens,
        split_seed,
        no_cache,
        sample_fraction,
        sample_seed,
        workers,
        cluster,
        work_dir,
    )
    reports: list[dict[str, Any]] = []
    counts, notes = load_counts(sources, options, reports=reports)
    if output is not None:
        with all_or_none() as stage:
            counts.save(stage(output))
    totals = counts.totals
    kept = counts.kept_positions(min_count)
    result: dict[str, Any] = {
        "sources": notes,
        "tokenizer": counts.metadata.get("tokenizer"),
        "n_sequences": counts.n_sequences,
        "n_positions": counts.n_positions,
        "vocab_size": counts.vocab_size,
        "nonzero": int(counts.counts.nnz),
        "kept_positions": int(kept.size),
        "left_out": counts.left_out(min_count),
        "totals": totals,
        "counting": reports,
        "output": str(output) if output else None,
    }
    if format == "json":
        print_json(result)
        return
    print_table(
        key_value_table(
            "per-position token counts",
            [
                ("sources", ", ".join(f"{n['source']} ({n['from']})" for n in notes)),
                ("tokenizer", (result["tokenizer"] or {}).get("name")),
                ("sequences", result["n_sequences"]),
                ("positions n", result["n_positions"]),
                ("vocabulary V", result["vocab_size"]),
                ("non-zero counts", result["nonzero"]),
                (f"kept (N_i >= {min_count})", result["kept_positions"]),
                ("left out", result["left_out"]["positions"]),
                *[
                    (
                        f"counted {r['source']}",
                        f"{r['counted']} shards counted, {r['reused']} resumed, {r['tokens']:,} tokens "
                        f"in {r['seconds']:.1f} s on {r['engine']}",
                    )
                    for r in reports
                ],
                ("written to", result["output"]),
            ],
        ),
        format,
    )
    sample = _sample_positions(counts.n_positions)
    print_table(
        grid_table("N_i at some positions", ["position", "N_i"], [(i, int(totals[i])) for i in sample]),
        format,
    )


@handles_errors
def distances(
    sources: opt.Sources,
    output: Annotated[
        Path | None, opt.path_option("--output", "-o", help="Write the distance matrices here (.safetensors).")
    ] = None,
    heatmap: Annotated[Path | None, opt.path_option("--heatmap", help="Write a heatmap PNG here.")] = None,
    metric: opt.Metric = "hellinger",
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    split: opt.Split = None,
    data_dir: opt.DataDir = None,
    text_column: opt.TextColumn = None,
    limit: opt.Limit = None,
    tokenizer: opt.TokenizerOpt = None,
    max_length: opt.MaxLength = None,
    exclude_special: opt.ExcludeSpecial = False,
    no_special_tokens: opt.NoSpecialTokens = False,
    split_seed: opt.SplitSeed = 0,
    no_cache: opt.NoCache = False,
    sample_fraction: opt.Sample = None,
    sample_seed: opt.SampleSeed = 0,
    workers: opt.Workers = None,
    cluster: opt.Cluster = None,
    work_dir: opt.WorkDir = None,
    format: opt.Format = "table",
) -> None:
    """Hellinger (or Fisher-Rao) distances between positions, with noise floors and a bias correction.

    Prints the signal-to-noise summary: how much of the naive distance is sampling noise.
    """
    check_format(format)
    check_output_suffix(output, ".safetensors", "distances")
    check_output_suffix(heatmap, ".png", "figures", option="--heatmap")
    guard(
        _inputs(sources, data_dir, tokenizer),
        [Output("--output", output), Output("--heatmap", heatmap), Folder("--work-dir", work_dir)],
    )
    options = _corpus_options(
        split,
        data_dir,
        text_column,
        limit,
        tokenizer,
        max_length,
        exclude_special,
        no_special_tokens,
        split_seed,
        no_cache,
        sample_fraction,
        sample_seed,
        workers,
        cluster,
        work_dir,
    )
    counts, notes = load_counts(sources, options)
    from ..geometry.distances import position_geometry

    geometry = position_geometry(counts, metric=metric, min_count=min_count)
    with all_or_none() as stage:
        if output is not None:
            geometry.save(stage(output))
        if heatmap is not None:
            from ..report.figures import distance_heatmap

            distance_heatmap(geometry, stage(heatmap))
    sample = _sample_positions(len(geometry.positions))
    result = {
        "sources": notes,
        "metric": metric,
        "positions": geometry.positions,
        "left_out": geometry.left_out,
        "noise": geometry.summary,
        "noise_floor": geometry.noise_floor,
        "totals": geometry.totals,
        "output": str(output) if output else None,
        "heatmap": str(heatmap) if heatmap else None,
    }
    if format == "json":
        print_json(result)
        return
    summary = geometry.summary
    print_table(
        key_value_table(
            f"{metric} distances between positions",
            [
                ("sources", ", ".join(f"{n['source']} ({n['from']})" for n in notes)),
                ("positions kept", f"{len(geometry.positions)} ({fmt(geometry.positions[[0, -1]].tolist())})"),
                ("left out", geometry.left_out.get("positions")),
                ("median naive distance", summary["median_naive"]),
                ("median corrected distance", summary["median_corrected"]),
                ("median noise floor", summary["median_noise_floor"]),
                ("noise fraction of naive d^2", summary["noise_fraction"]),
                ("signal-to-noise (power)", summary["snr"]),
                ("pairs above both floors", summary["pairs_above_floor"]),
                ("written to", result["output"]),
                ("heatmap", result["heatmap"]),
            ],
        ),
        format,
    )
    rows = [(int(geometry.positions[k]), int(geometry.totals[k]), float(geometry.noise_floor[k])) for k in sample]
    print_table(grid_table("noise floor at some positions", ["position", "N_i", "floor"], rows), format)


@handles_errors
def mds(
    sources: opt.Sources,
    output: Annotated[
        Path | None, opt.path_option("--output", "-o", help="Write the PE file here (.safetensors).")
    ] = None,
    dim: Annotated[
        int | None, typer.Option("--dim", "-d", min=1, help="Model width d of P = A W (default: the rank).")
    ] = None,
    rank: Annotated[
        int | None, typer.Option("--rank", "-r", min=1, help="Rank r (default: effective rank, at most d).")
    ] = None,
    distance: Annotated[str, opt.text_option("--distance", help="Embed the naive or the corrected matrix.")] = "naive",
    basis: Annotated[str, opt.text_option("--basis", help="W: random (seeded orthonormal) or identity.")] = "random",
    seed: Annotated[int, opt.seed_option("--seed", help="Seed of the random basis W.")] = 0,
    scale: Annotated[float, typer.Option("--scale", help="Multiply the encoding (and its distances) by this.")] = 1.0,
    into_checkpoint: Annotated[
        Path | None, opt.path_option("--into-checkpoint", help="A local HF BERT checkpoint folder to copy.")
    ] = None,
    checkpoint_output: Annotated[
        Path | None, opt.path_option("--checkpoint-output", help="Where the copy with the MDS positions goes.")
    ] = None,
    plot: Annotated[Path | None, opt.path_option("--plot", help="Write spectrum / stress / map PNG here.")] = None,
    method: Annotated[str, opt.text_option("--method", help="Eigensolver: auto, full or partial (top r).")] = "auto",
    metric: opt.Metric = "hellinger",
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    split: opt.Split = None,
    data_dir: opt.DataDir = None,
    text_column: opt.TextColumn = None,
    limit: opt.Limit = None,
    tokenizer: opt.TokenizerOpt = None,
    max_length: opt.MaxLength = None,
    exclude_special: opt.ExcludeSpecial = False,
    no_special_tokens: opt.NoSpecialTokens = False,
    split_seed: opt.SplitSeed = 0,
    no_cache: opt.NoCache = False,
    format: opt.Format = "table",
) -> None:
    """Classical MDS of the position distances, and the low-rank positional encoding P = A W.

    SOURCES may also be a distances file. Prints the eigen-spectrum, effective rank,
    negative-eigenvalue mass, stress against rank and the parameter saving r(n+d) vs n d.
    """
    from ..checkpoints.write import write_into_checkpoint
    from ..geometry.mds import PARTIAL_FROM, classical_mds, low_rank_encoding, stress_curve

    check_format(format)
    check_output_suffix(output, ".safetensors", "PE files")
    check_output_suffix(plot, ".png", "figures", option="--plot")
    check_output_place(checkpoint_output, folder=True, option="--checkpoint-output")
    guard(
        _inputs(sources, data_dir, tokenizer, into_checkpoint),
        [
            Output("--output", output),
            Output("--plot", plot),
            Folder("--checkpoint-output", checkpoint_output, replaces=True),
        ],
    )
    if distance not in ("naive", "corrected"):
        raise InputError(f"unknown --distance {distance!r}; choose naive or corrected")
    if (into_checkpoint is None) != (checkpoint_output is None):
        raise InputError("--into-checkpoint and --checkpoint-output go together; pass both")
    if checkpoint_output is not None and checkpoint_output.exists():
        raise InputError(f"{checkpoint_output} already exists; pass a new folder for the modified checkpoint")
    if into_checkpoint is not None and dim is None:
        dim = _hidden_size(into_checkpoint)
    options = _corpus_options(
        split,
        data_dir,
        text_column,
        limit,
        tokenizer,
        max_length,
        exclude_special,
        no_special_tokens,
        split_seed,
        no_cache,
    )
    geometry, notes = load_geometry(sources, options, metric, min_count)
    matrix = geometry.matrix(distance)
    undefined = ~np.isfinite(matrix)
    if undefined.any():
        # The correction fails at a position (no token shared by its two halves), which leaves
        # that position's whole row undefined; name those positions, not their partners.
        culprits = geometry.positions[undefined.sum(axis=1) == len(matrix) - 1]
        where = ", ".join(str(int(p)) for p in culprits[:5]) or "some pairs"
        raise InputError(
            f"the corrected distance is undefined at position {where}; raise --min-count or embed --distance naive"
        )
    wanted = rank if rank is not None else dim
    # The full spectrum (for the stress curve) unless only the top eigenpairs are affordable.
    partial = method == "partial" or (method == "auto" and len(matrix) >= PARTIAL_FROM and wanted is not None)
    result = classical_mds(matrix, n_components=wanted if partial else None, method=method)
    curve = stress_curve(result.embedding_, matrix)
    encoding = low_rank_encoding(
        result,
        geometry.positions,
        dim=dim or rank or result.embedding_.shape[1],
        rank=rank,
        basis=basis,
        seed=seed,
        scale=scale,
        metadata={
            "metric": metric,
            "distance": distance,
            "counts": geometry.metadata,
            "effective_rank": result.effective_rank_,
        },
    )
    # The stress of the encoding as written (A carries --scale), against the unscaled matrix.
    chosen_stress = stress_curve(encoding.A, matrix, ranks=[encoding.rank])[encoding.rank]
    encoding.metadata["stress"] = chosen_stress
    written = None
    with all_or_none() as stage:
        if output is not None:
            encoding.save(stage(output))
        if plot is not None:
            from ..report.figures import known_distances, mds_figure

            truth = known_distances(geometry)  # a synthetic corpus's exact distances, drawn beside the estimate
            mds_figure(
                result,
                curve,
                geometry.positions,
                stage(plot),
                rank=encoding.rank,
                subtitle=", ".join(sources),
                truth=truth,
            )
        if into_checkpoint is not None and checkpoint_output is not None:
            staged = stage(checkpoint_output, folder=True, create=False)
            written = write_into_checkpoint(encoding, into_checkpoint, staged)
            written["checkpoint"] = str(checkpoint_output)
    params = encoding.parameter_counts()
    payload = {
        "sources": notes,
        "metric": metric,
        "distance": distance,
        "n_positions": len(geometry.positions),
        "positions": geometry.positions,
        "effective_rank": result.effective_rank_,
        "tolerance": result.tolerance_,
        "negative_mass": result.negative_mass_,
        "eigenvalues": result.eigenvalues_,
        "stress_curve": {str(k): v for k, v in curve.items()},
        "rank": encoding.rank,
        "dim": encoding.dim,
        "stress": chosen_stress,
        "parameters": params,
        "output": str(output) if output else None,
        "checkpoint": written,
    }
    if format == "json":
        print_json(payload)
        return
    print_table(
        key_value_table(
            "classical MDS positional encoding",
            [
                ("sources", ", ".join(f"{n['source']} ({n['from']})" for n in notes)),
                ("positions n", len(geometry.positions)),
                ("matrix", f"{distance} {metric}"),
                ("effective rank", _rank_line(result)),
                ("negative eigenvalue mass", result.negative_mass_),
                ("rank r / width d", f"{encoding.rank} / {encoding.dim}"),
                ("stress at rank r", chosen_stress),
                ("parameters r(n+d) vs n d", _parameter_line(params) if dim else "pass --dim (the model width)"),
                ("written to", payload["output"]),
                ("checkpoint", written["checkpoint"] if written else None),
            ],
        ),
        format,
    )
    top = result.eigenvalues_[:10]
    print_table(
        grid_table("top eigenvalues", ["component", "eigenvalue"], [(k + 1, float(v)) for k, v in enumerate(top)]),
        format,
    )
    print_table(grid_table("stress against rank", ["rank", "stress"], [(r, s) for r, s in curve.items()]), format)


def _rank_line(result: Any) -> str:
    if result.partial_:
        return f">= {result.effective_rank_} (only the top {len(result.eigenvalues_)} eigenpairs computed)"
    return str(result.effective_rank_)


def _parameter_line(params: dict[str, Any]) -> str:
    saving = params["saving"]
    change = f"{saving:.1%} fewer" if saving >= 0 else f"{-saving:.1%} more: choose --rank below n d / (n + d)"
    return f"{params['factored']} vs {params['dense']} ({change})"


def _hidden_size(checkpoint: Path) -> int:
    from ..checkpoints import load_checkpoint

    return load_checkpoint(str(checkpoint)).hidden_size
