"""`geoanalyze stress`, `geoanalyze report` and `geoanalyze encodings list`."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from ..corpus.marginals import DEFAULT_MIN_COUNT
from ..errors import DataNotFoundError, GeoanalyzeError, InputError, ThresholdError, first_line
from ..report.render import grid_table, print_json, stdout_console
from . import options as opt
from .common import check_output_place, check_output_suffix, handles_errors

encodings_app = typer.Typer(help="The encodings the scores know by name.", no_args_is_help=True)

THRESHOLD_METRICS = (
    "stress",
    "scaled_stress",
    "monotonicity_violation",
    "anchored_monotonicity_violation",
    "lag_violation",
    "noise_fraction",
)
STRESS_FORMATS = ("table", "json", "markdown")

Dataset = Annotated[
    str,
    typer.Option(
        "--dataset", help="Corpus: sst2, imdb, wikitext2, a file or folder, synthetic[:KIND,...], or a hub id."
    ),
]
MaxPositions = Annotated[
    int | None,
    typer.Option(
        "--max-length",
        "--max-positions",
        min=3,
        help="Analyse positions 0..N-1 (default: the model's, at most 512); --max-positions is an alias.",
    ),
]
Device = Annotated[str, typer.Option("--device", help="Forward pass on auto, cpu or cuda (auto: cuda when present).")]
DType = Annotated[
    str,
    typer.Option(
        "--dtype", help="Weights in auto, float32, bfloat16 or float16 (auto: float32 on CPU, the model's on CUDA)."
    ),
]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Sequences per forward batch.")]
Layers = Annotated[str, typer.Option("--layers", help="all, none, or a list such as 0,3,6 (0 = embedding output).")]
Compare = Annotated[
    str,
    typer.Option("--compare", help="Encodings to score beside the target, comma-separated ('' for none)."),
]
MaxSequences = Annotated[
    int, typer.Option("--max-sequences", min=1, help="Sequences in the hidden-state forward pass (seeded sample).")
]
NullDraws = Annotated[int, typer.Option("--null-draws", min=2, help="Random encodings in the null calibration.")]
Distance = Annotated[str, typer.Option("--distance", help="Target geometry: naive or corrected Hellinger.")]
Tokenizer = Annotated[
    str | None,
    typer.Option("--tokenizer", "-t", help="Tokenizer (default: the checkpoint's own; bert-base-uncased for specs)."),
]
TrustRemoteCode = Annotated[
    bool, typer.Option("--trust-remote-code", help="Allow a checkpoint's own Python code to run (off by default).")
]


def _options(**values: Any) -> Any:
    from ..analysis import StressOptions

    values["compare"] = split_specs(values.pop("compare"))
    values["data_dir"] = str(values["data_dir"]) if values["data_dir"] is not None else None
    values["cache"] = not values.pop("no_cache")
    return StressOptions(**values)


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


def parse_thresholds(items: list[str]) -> dict[str, float]:
    """'stress=1.5' -> {'stress': 1.5}; unknown metrics fail listing the choices."""
    thresholds = {}
    for item in items:
        metric, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--fail-above {item!r}: write METRIC=VALUE, e.g. scaled_stress=0.5")
        if metric not in THRESHOLD_METRICS:
            raise InputError(f"--fail-above: unknown metric {metric!r}; choose one of {', '.join(THRESHOLD_METRICS)}")
        try:
            thresholds[metric] = float(value)
        except ValueError as exc:
            raise InputError(f"--fail-above {item!r}: {value!r} is not a number") from exc
    return thresholds


def crossed(result: dict[str, Any], thresholds: dict[str, float]) -> list[str]:
    """The thresholds the target crosses, as readable lines."""
    scores = result["scores"].get(result["target"], {})
    lines = []
    for metric, limit in thresholds.items():
        value = result["noise"][metric] if metric == "noise_fraction" else scores.get(metric, float("nan"))
        if not value <= limit:  # NaN fails closed: a gate that cannot be evaluated does not pass
            lines.append(f"{metric} {value:.6g} > {limit:g}")
    return lines


def _progress_bars() -> Any:
    from ..report.progress import ProgressBars

    return ProgressBars(enabled=sys.stderr.isatty())


@handles_errors
def stress(
    target: Annotated[
        str, typer.Argument(help="A checkpoint (hub name or local folder) or an encoding spec such as rope:d=64.")
    ],
    dataset: Dataset = "sst2",
    split: opt.Split = None,
    data_dir: opt.DataDir = None,
    text_column: opt.TextColumn = None,
    limit: opt.Limit = None,
    tokenizer: Tokenizer = None,
    max_positions: MaxPositions = None,
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    distance: Distance = "naive",
    layers: Layers = "all",
    compare: Compare = "sinusoidal,rope,alibi,mds,random",
    null_draws: NullDraws = 8,
    max_sequences: MaxSequences = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the null draws and the forward-pass sample.")] = 0,
    no_cache: opt.NoCache = False,
    trust_remote_code: TrustRemoteCode = False,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", min=0, help="Resample sequences this many times for 95% intervals (0: off).")
    ] = 0,
    device: Device = "auto",
    dtype: DType = "auto",
    batch_size: BatchSize = 32,
    format: Annotated[str, typer.Option("--format", "-f", help="table, json or markdown.")] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the JSON result here.")] = None,
    plot_dir: Annotated[Path | None, typer.Option("--plot-dir", help="Write PNG figures into this folder.")] = None,
    fail_above: Annotated[
        list[str] | None,
        typer.Option("--fail-above", help="METRIC=VALUE; exit 1 when the target's score exceeds it. Repeatable."),
    ] = None,
) -> None:
    """How faithfully a checkpoint or encoding reproduces the Hellinger geometry of a corpus, layer by layer.

    Scores the target's position vectors beside sinusoidal, RoPE, ALiBi, the optimal MDS
    encoding and a random null, then (for checkpoints) every layer's query/key projections
    and hidden-state centroids. Exit code 1 when a --fail-above threshold is crossed.
    """
    from ..analysis import analyze, public
    from ..io import write_text
    from ..report.render import dumps
    from ..report.stress import markdown, print_tables, write_figures

    if format not in STRESS_FORMATS:
        raise InputError(f"unknown --format {format!r}; choose one of {', '.join(STRESS_FORMATS)}")
    check_output_suffix(output, ".json", "results")
    check_output_place(plot_dir, folder=True)
    thresholds = parse_thresholds(fail_above or [])
    options = _options(
        dataset=dataset,
        split=split,
        data_dir=data_dir,
        text_column=text_column,
        limit=limit,
        tokenizer=tokenizer,
        max_positions=max_positions,
        min_count=min_count,
        distance=distance,
        layers=layers,
        compare=compare,
        null_draws=null_draws,
        max_sequences=max_sequences,
        seed=seed,
        no_cache=no_cache,
        trust_remote_code=trust_remote_code,
        bootstrap=bootstrap,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
    )
    with _progress_bars() as bars:
        result = analyze(target, options, progress=bars.track)
    figures = write_figures(result, plot_dir) if plot_dir is not None else {}
    document = public(result)
    if figures:
        document["figures"] = figures
    if output is not None:
        write_text(output, dumps(document) + "\n")
    if format == "json":
        print_json(document)
    elif format == "markdown":
        print(markdown(result, figures))
    else:
        print_tables(result)
    failures = crossed(result, thresholds)
    if failures:
        raise ThresholdError("threshold crossed: " + "; ".join(failures))


@handles_errors
def report(
    checkpoints: Annotated[list[str], typer.Argument(help="Checkpoints (names or folders) or encoding specs.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The Markdown page to write (.md).")],
    dataset: Dataset = "sst2",
    split: opt.Split = None,
    data_dir: opt.DataDir = None,
    text_column: opt.TextColumn = None,
    limit: opt.Limit = None,
    tokenizer: Tokenizer = None,
    max_positions: MaxPositions = None,
    min_count: opt.MinCount = DEFAULT_MIN_COUNT,
    layers: Layers = "all",
    compare: Compare = "sinusoidal,rope,alibi,mds,random",
    max_sequences: MaxSequences = 1024,
    no_cache: opt.NoCache = False,
    device: Device = "auto",
    dtype: DType = "auto",
    batch_size: BatchSize = 32,
    trust_remote_code: TrustRemoteCode = False,
) -> None:
    """A Markdown report (tables and figures) of several checkpoints side by side, for a CI job summary.

    Figures go to a folder beside the page (<name>_files/). A target that cannot be analysed
    gets a section saying why, the page is still written, and the exit code is 1.
    """
    from ..analysis import analyze
    from ..io import write_text
    from ..report.stress import markdown, markdown_table, write_figures

    check_output_suffix(output, ".md", "reports")
    figure_dir = output.parent / f"{output.stem}_files"
    check_output_place(figure_dir, folder=True)
    _check_targets(checkpoints, trust_remote_code)
    # Figures are drawn into a staging folder that replaces <name>_files only once the page is written.
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.stem}_files.", dir=output.parent))
    sections: list[str] = []
    summary_rows: list[list[Any]] = []
    failed: list[str] = []
    with _progress_bars() as bars, _cleaned_up(staging):
        for index, target in enumerate(checkpoints):
            options = _options(
                dataset=dataset,
                split=split,
                data_dir=data_dir,
                text_column=text_column,
                limit=limit,
                tokenizer=tokenizer,
                max_positions=max_positions,
                min_count=min_count,
                distance="naive",
                layers=layers,
                compare=compare,
                null_draws=8,
                max_sequences=max_sequences,
                seed=0,
                no_cache=no_cache,
                trust_remote_code=trust_remote_code,
                device=device,
                dtype=dtype,
                batch_size=batch_size,
            )
            try:
                result = analyze(target, options, progress=bars.track)
            except GeoanalyzeError as exc:
                if isinstance(exc, ThresholdError):
                    raise
                failed.append(target)
                sections.append(f"## {target}\n\nnot analysed: {first_line(exc, 1000)}\n")
                summary_rows.append([target, "-", "-", "-", "-", "-", "not analysed"])
                continue
            figures = write_figures(result, staging, prefix=f"{index}-")
            links = {title: f"{figure_dir.name}/{Path(path).name}" for title, path in figures.items()}
            sections.append(markdown(result, links, level=2))
            scores = result["scores"].get(target, {})
            peak = result["peaks"].get("query", {}).get("peak_stress_layer")
            summary_rows.append(
                [
                    target,
                    len(result["positions"]),
                    scores.get("stress", "-"),
                    scores.get("scaled_stress", "-"),
                    scores.get("monotonicity_violation", "-"),
                    scores.get("separation", "-"),
                    peak,
                ]
            )
        header = ["target", "positions", "stress", "scaled", "violation", "separation", "query peak layer"]
        page = "\n".join(
            [f"# Positional geometry report: {dataset}", "", markdown_table(header, summary_rows), "", *sections]
        )
        write_text(output, page)
        if figure_dir.exists():
            shutil.rmtree(figure_dir)
        os.replace(staging, figure_dir)
    print(f"wrote {output} and {len(checkpoints) - len(failed)} sets of figures in {figure_dir}")
    if failed:
        raise ThresholdError(f"{len(failed)} of {len(checkpoints)} targets could not be analysed: {', '.join(failed)}")


def _check_targets(targets: list[str], trust_remote_code: bool = False) -> None:
    """Resolve every target before the first analysis, so a typo in the last one fails at once."""
    from ..checkpoints import load_checkpoint
    from ..encodings import get_encoding, is_encoding_spec

    for target in targets:
        if is_encoding_spec(target):
            get_encoding(target).check()
        else:
            try:
                load_checkpoint(target, trust_remote_code)
            except DataNotFoundError:
                raise  # a typo: fail at once
            except GeoanalyzeError:
                pass  # an unreadable checkpoint gets its own section of the page


@contextlib.contextmanager
def _cleaned_up(folder: Path) -> Iterator[None]:
    try:
        yield
    finally:
        if folder.exists():
            shutil.rmtree(folder)


@encodings_app.command("list")
@handles_errors
def list_encodings(format: opt.Format = "table") -> None:
    """List the encoding names, what they are and their parameters."""
    from ..encodings import list_encodings as records
    from .common import check_format

    check_format(format)
    rows = records()
    if format == "json":
        print_json(rows)
        return
    table = [(r["name"], r["summary"], ", ".join(f"{k}={v}" for k, v in r["parameters"].items()) or "-") for r in rows]
    stdout_console.print(
        grid_table("encodings (spec: NAME[:key=value,...] or NAME:<path>)", ["name", "what", "parameters"], table)
    )
