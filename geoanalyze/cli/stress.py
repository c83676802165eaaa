"""`geoanalyze stress`, `geoanalyze report` and `geoanalyze encodings list`."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..api import DEFAULT_MIN_COUNT
from ..errors import DataNotFoundError, GeoanalyzeError, InputError, ThresholdError, first_line
from ..report.render import grid_table, print_table
from . import options as opt
from .common import (
    Folder,
    Output,
    all_or_none,
    cache_option,
    check_dataset_options,
    check_output_place,
    check_output_suffix,
    guard,
    handles_errors,
    split_compare,
)

if TYPE_CHECKING:
    from ..api import StressOptions
    from ..report.page import NotAnalysed, ReportPage
    from ..results import Gate, Judgement, Provenance, StressResult

encodings_app = typer.Typer(help="The encodings the scores know by name.", no_args_is_help=True)

STRESS_FORMATS = ("table", "json", "markdown")


def _same(value: Any) -> Any:
    return value


FIGURE_NAMES = ("hellinger.png", "mds.png", "shepard.png", "null.png", "layers.png")  # what --plot-dir receives


def threshold_metrics() -> dict[str, str]:
    """Every name --fail-above accepts -> the score it gates: the score keys and the column labels."""
    from ..results import SCORE_COLUMNS

    names = {column.key: column.key for column in SCORE_COLUMNS}
    names.update({column.label.replace(" ", ""): column.key for column in SCORE_COLUMNS})
    names["noise_fraction"] = "noise_fraction"
    names.pop("rel.sep.", None)  # higher is better: a "fail above" gate makes no sense for it
    names.pop("relative_separation", None)
    return names


Dataset = Annotated[
    str,
    opt.text_option(
        "--dataset", help="Corpus: sst2, imdb, wikitext2, a file or folder, synthetic[:KIND,...], or a hub id."
    ),
]
MaxPositions = Annotated[
    int | None,
    typer.Option(
        "--max-length",
        "--max-positions",
        min=3,
        help="Analyse positions 0..N-1 (default: the model's, at most 512).",
    ),
]
Device = Annotated[
    str, opt.text_option("--device", help="Forward pass on auto, cpu or cuda (auto: cuda when present).")
]
DType = Annotated[
    str,
    opt.text_option(
        "--dtype", help="Weights in auto, float32, bfloat16 or float16 (auto: float32 on CPU, the model's on CUDA)."
    ),
]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Sequences per forward batch.")]
ChunkSize = Annotated[
    int | None,
    typer.Option(
        "--chunk-size",
        min=1,
        help="Tokens per forward of a causal decoder's chunked prefill through its cache (default: one pass, or "
        "2048-token chunks past 8192 tokens where one pass does not fit in memory).",
        show_default=False,
    ),
]
Layers = Annotated[str, opt.text_option("--layers", help="all, none, or a list such as 0,3,6 (0 = embedding output).")]
Compare = Annotated[
    str,
    typer.Option(
        "--compare",
        help="Encodings to score beside the target, comma-separated ('' for none).",
        show_default="sinusoidal, rope, alibi, mds, random",
    ),
]
MaxSequences = Annotated[
    int, typer.Option("--max-sequences", min=1, help="Sequences in the hidden-state forward pass (seeded sample).")
]
NullDraws = Annotated[
    int | None,
    typer.Option(
        "--null-draws",
        min=2,
        max=1_000_000,
        help="Position shuffles each test is drawn against (default: as many as the run's tests need after Holm's "
        "correction, at least 999).",
        show_default=False,
    ),
]
Distance = Annotated[
    str,
    opt.text_option(
        "--estimate",
        "--distance",
        help="Target geometry: the naive or the bias-corrected Hellinger distance (corrected removes the "
        "sampling noise).",
    ),
]
Width = Annotated[
    int | None,
    typer.Option(
        "--width",
        min=1,
        help="Width of the compared encodings (default: the target's; 768 for a spec such as sinusoidal).",
    ),
]
NoLegend = Annotated[bool, typer.Option("--no-legend", help="Leave out the lines that explain the columns.")]
FormatOpt = Annotated[str, opt.text_option("--format", "-f", help="table, json or markdown (all say the same).")]
FailAbove = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-above",
        help="METRIC=VALUE: exit 1 when a target's score exceeds it (repeatable). METRIC: scaled, violation, "
        "anchored, lag_violation, stress, noise_fraction, or a score's full name (docs/scores.md).",
    ),
]
FailIf = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-if",
        help="ASPECT=CATEGORY: exit 1 when the target's category against its position shuffles is CATEGORY "
        "(repeatable). ASPECT: shape, order, local_order, lag; CATEGORY: better, indistinguishable, worse, "
        "not-better, not-worse.",
    ),
]
#: report --baseline A B (track has its own: a series' baseline)
Baseline = Annotated[
    str | None,
    opt.text_option(
        "--baseline", help="A checkpoint A to compare the one checkpoint given (B) with, on the page (for CI)."
    ),
]
FailIfWorse = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-if-worse",
        help="With --baseline, SCORE[=TOL]: exit 1 when B is worse than A by more than TOL (default: the "
        "null's spread). SCORE: shape, order, local_order, lag, separation (or scaled, violation, ...). "
        "Repeatable.",
    ),
]
Tokenizer = Annotated[
    str | None,
    opt.text_option(
        "--tokenizer", "-t", help="Tokenizer (default: the checkpoint's own; bert-base-uncased for specs)."
    ),
]
TrustRemoteCode = Annotated[
    bool, typer.Option("--trust-remote-code", help="Allow a checkpoint's own Python code to run (off by default).")
]
Seed = Annotated[int, opt.seed_option("--seed", help="Seed of the null draws and the forward-pass sample.")]

#: the corpus and the distances of stress, report and track
ANALYSIS: opt.Options = (
    ("dataset", Dataset, "sst2"),
    ("split", opt.Split, None),
    ("data_dir", opt.DataDir, None),
    ("text_column", opt.TextColumn, None),
    ("read", opt.ReadMode, "rows"),
    ("limit", opt.Limit, None),
    ("tokenizer", Tokenizer, None),
    ("max_positions", MaxPositions, None),
    ("min_count", opt.MinCount, DEFAULT_MIN_COUNT),
    ("positions", opt.Positions, "all"),
    ("distance", Distance, "naive"),
)
#: what stress and report score beside the target
COMPARED: opt.Options = (("layers", Layers, "all"), ("compare", Compare, "sinusoidal,rope,alibi,mds,random"))
#: the null draws and the forward-pass sample of stress, report and track
SAMPLING: opt.Options = (
    ("null_draws", NullDraws, None),
    ("max_sequences", MaxSequences, 1024),
    ("seed", Seed, 0),
    ("no_cache", opt.NoCache, False),
    ("trust_remote_code", TrustRemoteCode, False),
)
#: scores against position (stress only: report and track show no windows)
WINDOWS: opt.Options = (("windows", opt.Windows, "auto"),)
#: where the forward pass runs
FORWARD: opt.Options = (
    ("device", Device, "auto"),
    ("dtype", DType, "auto"),
    ("batch_size", BatchSize, 32),
    ("chunk_size", ChunkSize, None),
)
#: the gate of stress and report
GATE: opt.Options = (("fail_above", FailAbove, None), ("fail_if", FailIf, None))

_SAME_NAMES = (
    "dataset split text_column limit tokenizer max_positions min_count distance layers width null_draws "
    "max_sequences seed trust_remote_code bootstrap device dtype batch_size chunk_size read windows"
)
#: the one mapping from the parameters of stress, report and track to the StressOptions fields they fill:
#: parameter -> (field, how its value is read); tests/cli/test_option_mapping.py holds every parameter to it
TO_OPTIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    **{name: (name, _same) for name in _SAME_NAMES.split()},
    "data_dir": ("data_dir", lambda folder: str(folder) if folder is not None else None),
    "compare": ("compare", split_compare),  # a comma inside quotes or after a backslash is a file name's
    "no_cache": ("cache", cache_option),
    "positions": ("positions", opt.position_spec),
}
#: the parameters of stress, report and track that are the command's own, not analysis options
COMMAND_ONLY = frozenset(
    [
        "target",
        "checkpoints",
        "format",
        "no_legend",
        "output",
        "plot_dir",
        "plot",
        "fail_above",
        "fail_if",
        "baseline",
        "fail_if_worse",
        "revisions",
        "order",
        "series",
    ]
)


def _number(text: str) -> float | None:
    """``text`` as a float (``nan`` and ``inf`` too), or None."""
    try:
        return float(text)
    except ValueError:
        return None


def parse_thresholds(items: list[str]) -> dict[str, float]:
    """'scaled=0.5' or 'scaled_stress=0.5' -> {'scaled_stress': 0.5}; unknown metrics fail listing the choices."""
    names = threshold_metrics()
    thresholds: dict[str, float] = {}
    for item in items:
        metric, sep, value = (part.strip() for part in item.partition("="))
        if not sep:
            raise InputError(f"--fail-above {item!r}: write METRIC=VALUE, e.g. scaled=0.5")
        metric = names.get(metric.replace(" ", ""), metric)
        if metric == "relative_separation" or metric.replace(" ", "") == "rel.sep.":
            raise InputError(
                "--fail-above relative_separation: higher is better, so no upper limit gates it (and no shuffle "
                "changes it, so it has no --fail-if category); gate on scaled, violation or lag instead"
            )
        if metric not in names:
            shown = [name for name in names if "." not in name]
            raise InputError(f"--fail-above: unknown metric {metric!r}; choose one of {', '.join(shown)}")
        limit = _number(value)
        if limit is None:
            raise InputError(f"--fail-above {item!r}: {value!r} is not a number")
        if not math.isfinite(limit):
            # a NaN limit would fail every run and an infinite one pass every run: neither is a gate
            raise InputError(f"--fail-above {item!r}: the limit must be a finite number, e.g. {metric}=0.5")
        if names[metric] in thresholds:
            # the later limit would silently replace the earlier one and a run could pass a gate it fails
            raise InputError(
                f"--fail-above {names[metric]} is given twice ({thresholds[names[metric]]:g} and {limit:g}); "
                "give each metric once"
            )
        thresholds[names[metric]] = limit
    return thresholds


def parse_conditions(items: list[str], null_draws: int | None) -> dict[str, str]:
    """'shape=worse' -> {'shape': 'worse'}; unknown aspects or categories, repeats and too few draws fail."""
    from ..api import MIN_SHUFFLES
    from ..api import TESTED_ASPECTS as ASPECTS
    from ..results import FAIL_IF_CATEGORIES

    conditions: dict[str, str] = {}
    for item in items:
        aspect, sep, category = (part.strip().lower() for part in item.partition("="))
        aspect = aspect.replace("-", "_").replace(" ", "_")
        if not sep:
            raise InputError(f"--fail-if {item!r}: write ASPECT=CATEGORY, e.g. shape=worse")
        if aspect not in ASPECTS:
            raise InputError(f"--fail-if: unknown aspect {aspect!r}; choose one of {', '.join(ASPECTS)}")
        if category not in FAIL_IF_CATEGORIES:
            raise InputError(
                f"--fail-if {item!r}: unknown category {category!r}; choose one of {', '.join(FAIL_IF_CATEGORIES)}"
            )
        if aspect in conditions:
            raise InputError(
                f"--fail-if {aspect} is given twice ({conditions[aspect]} and {category}); give each aspect once"
            )
        conditions[aspect] = category
    if conditions and null_draws is not None and null_draws < MIN_SHUFFLES:
        raise InputError(
            f"--fail-if needs the shuffles that can decide a category (at least {MIN_SHUFFLES}, more for many "
            f"rows), got --null-draws {null_draws}; omit --null-draws"
        )
    return conditions


def stress_inputs(targets: list[str], given: Mapping[str, Any]) -> list[Any]:
    """What stress, report and track read: the targets (folders, or files in specs), the corpus (a file, a
    folder or a glob; its folder in --data-dir), a local tokenizer and the files of --compare specs."""
    dataset, data_dir = given["dataset"], given["data_dir"]
    found: list[Any] = [*targets, dataset, given["tokenizer"], given.get("compare")]
    if data_dir is not None:
        found.append(data_dir / dataset)
    return found


def _progress_bars() -> Any:
    from ..progress import ProgressBars

    return ProgressBars()


def check_stress_format(format: str) -> None:
    """--format of `stress` and `report`: table, json or markdown."""
    if format not in STRESS_FORMATS:
        raise InputError(f"unknown --format {format!r}; choose one of {', '.join(STRESS_FORMATS)}")


def stress_options(params: Mapping[str, Any], **overrides: Any) -> StressOptions:
    """The analysis options of `stress`, `report` or `track` from the command's parsed parameters
    (``ctx.params``), through :data:`TO_OPTIONS`; ``overrides``: fields the command sets itself."""
    from ..api import StressOptions

    values = {TO_OPTIONS[name][0]: TO_OPTIONS[name][1](value) for name, value in params.items() if name in TO_OPTIONS}
    return StressOptions(**{**values, **overrides})


def stress_gate(params: Mapping[str, Any]) -> Gate:
    """The gate of `stress` or `report`: --fail-above's thresholds and --fail-if's conditions, checked."""
    from ..results import Gate

    thresholds = parse_thresholds(params.get("fail_above") or [])
    return Gate(thresholds, parse_conditions(params.get("fail_if") or [], params["null_draws"]))


def stdout_folder() -> Path | None:
    """The folder of the file stdout is redirected to (``> geometry/stress.md``), or None (a terminal,
    a pipe, or a system that does not say)."""
    import stat

    try:
        if not stat.S_ISREG(os.fstat(sys.stdout.fileno()).st_mode):
            return None
        return Path(os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}")).parent
    except (OSError, ValueError, AttributeError):  # no /proc (macOS), or stdout replaced (captured)
        return None


def page_link(path: str) -> str:
    """A figure's link from where the Markdown page is: the folder stdout is redirected to, else the
    working directory (the page is read from where it was written, as report's pages are)."""
    folder = stdout_folder()
    if folder is None:
        return path
    return Path(os.path.relpath(Path(path).resolve(), folder.resolve())).as_posix()


def emit_stress(
    result: StressResult,
    judged: Judgement | None,
    format: str,
    output: Path | None,
    plot_dir: Path | None,
    show_legend: bool,
    seed: int,
    base: Path,
) -> None:
    """Write --output's JSON and --plot-dir's figures (both or neither), print the result in --format
    (paths shown from ``base``), and exit 1 when the gate is crossed."""
    from ..io import write_text
    from ..report.render import emit, provenance
    from ..report.stress import terminal_report, write_figures

    run = provenance(seed)
    figures: dict[str, str] = {}
    extra: dict[str, Any] = {"gate": judged.to_dict() if judged else None, "run": run}
    with all_or_none() as stage:
        if plot_dir is not None:
            # Drawn into a staged folder; its files join --plot-dir with the JSON, or none does.
            drawn = write_figures(result, stage(plot_dir, folder=True, replaces=False), base=base)
            figures = {figure.title: stage.final(figure.path) for figure in drawn}
            extra["figures"] = figures
        if output is not None:
            write_text(stage(output), result.to_json(base, **extra) + "\n")
    if format == "json":
        print(result.to_json(base, **extra))
    elif format == "markdown":
        links = {title: page_link(path) for title, path in figures.items()}
        print(result.to_markdown(links, show_legend=show_legend, gate=judged, base=base) + "\n" + run.markdown)
    else:
        emit(*terminal_report(result, show_legend, judged, base=base))
    if judged and judged.crossed:
        raise ThresholdError("threshold crossed: " + "; ".join(judged.crossed))


def analyzed(target: str, options: StressOptions, progress: Any) -> StressResult | NotAnalysed:
    """One target of a report: its analysis, or why it failed (the page says so and goes on)."""
    from ..api import analyze
    from ..report.page import NotAnalysed

    try:
        return analyze(target, options, progress=progress)
    except GeoanalyzeError as exc:
        if isinstance(exc, ThresholdError):
            raise
        return NotAnalysed(target, first_line(exc, 1000))


def write_page(
    targets: list[str],
    options: StressOptions,
    output: Path,
    title: str,
    baseline: Mapping[str, float | None] | None = None,
    **page: Any,
) -> tuple[ReportPage, Any]:
    """Analyse each target and write the page of them all with its figures in ``<page>_files/``
    (:func:`~geoanalyze.report.page.build_report`; ``page``: its run, gate and show_legend).

    ``baseline``: the --fail-if-worse rules of ``report --baseline A B`` (targets: A, B): the page
    holds B against A (:func:`~geoanalyze.report.baseline.with_baseline`). Returns the page and
    that comparison (None without ``baseline``).

    The page and its figure folder are staged: a new report replaces the page and the whole
    folder (no figure of a previous report is left), or, on any failure, neither.
    """
    from ..io import write_text
    from ..report.page import build_report, check_figure_folder

    figure_dir = output.parent / f"{output.stem}_files"
    check_figure_folder(figure_dir)  # replaced whole: only an earlier report's figures may be there
    with all_or_none() as stage, _progress_bars() as bars:
        staging = stage(figure_dir, folder=True, replaces=True)
        outcomes = (analyzed(target, options, bars.track) for target in targets)
        written = build_report(outcomes, staging, title, link_dir=figure_dir.name, **page)
        comparison = None
        if baseline is not None:
            from ..report.baseline import with_baseline

            written, comparison = with_baseline(written, written.outcomes, baseline, page.get("base"))
        write_text(stage(output), written.text)
    return written, comparison


def emit_report(
    page: ReportPage,
    format: str,
    output: Path,
    figure_dir: Path,
    run: Provenance,
    dataset: str,
    comparison: Any = None,
) -> None:
    """Print the report in --format (a summary table, every result's JSON, or the page) and exit 1 when
    a target could not be analysed, crossed the gate, or (--baseline) is worse than the baseline beyond a
    --fail-if-worse tolerance."""
    from ..report.render import emit
    from ..report.stress import report_summary

    targets = len(page.rows)
    if format == "json":
        print(page.to_json(run, str(output), comparison))
    elif format == "markdown":
        print(page.text)
    else:
        emit(*report_summary(page, f"report on {dataset}"))
        if comparison is not None:
            print_table(grid_table("against the baseline", *comparison.rows()))
        print(f"wrote {output} and {targets - len(page.failed)} sets of figures in {figure_dir}")
    if page.failed:
        raise ThresholdError(f"{len(page.failed)} of {targets} targets could not be analysed: {', '.join(page.failed)}")
    if page.crossings:
        raise ThresholdError("threshold crossed: " + "; ".join(page.crossings))
    refuse_worse(comparison)


def refuse_worse(comparison: Any) -> None:
    """Exit 1 when B is worse than the baseline A beyond a --fail-if-worse tolerance (report and track)."""
    if comparison is not None and comparison.crossed:
        worse = "; ".join(comparison.lines()[1:])
        raise ThresholdError(f"worse than the baseline {comparison.baseline}: {worse}")


@handles_errors
@opt.takes((ANALYSIS + COMPARED, "width"), (SAMPLING + WINDOWS, "bootstrap"), (FORWARD, "format"), (GATE, None))
def stress(
    ctx: typer.Context,
    target: Annotated[
        str, typer.Argument(help="A checkpoint (hub name or local folder) or an encoding spec such as rope:d=64.")
    ],
    width: Width = None,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap", min=0, max=10_000, help="Resample sequences this many times for 95% intervals (0: off)."
        ),
    ] = 0,
    format: FormatOpt = "table",
    no_legend: NoLegend = False,
    output: Annotated[Path | None, opt.path_option("--output", "-o", help="Also write the JSON result here.")] = None,
    plot_dir: Annotated[Path | None, opt.path_option("--plot-dir", help="Write PNG figures into this folder.")] = None,
    **given: Any,
) -> None:
    """How faithfully a checkpoint or encoding reproduces the Hellinger geometry of a corpus, layer by layer.

    Scores the target's position vectors beside sinusoidal, RoPE, ALiBi, the optimal MDS
    encoding and a random table (at the target's width), each tested against shuffles of its own
    positions (does it carry position?), then (for checkpoints) every layer's
    query/key projections and hidden-state centroids. Scores: scaled (scaled stress), violation,
    anchored, rel. sep., stress; a verdict line and a legend follow the table. Exit code 1 when
    a --fail-above threshold is crossed.
    """
    from ..api import analyze

    base = Path.cwd()  # every path the output shows is shown from here
    check_stress_format(format)
    check_output_suffix(output, ".json", "results")
    check_output_place(plot_dir, folder=True, option="--plot-dir")
    figures = [Output("--plot-dir", plot_dir / name) for name in FIGURE_NAMES] if plot_dir is not None else []
    guard(
        stress_inputs([target], given),
        [Output("--output", output), Folder("--plot-dir", plot_dir), *figures],
    )
    check_dataset_options(ctx, given["dataset"])
    check_not_a_table_file(target)
    rules = stress_gate(ctx.params)
    options = stress_options(ctx.params)
    with _progress_bars() as bars:
        result = analyze(target, options, progress=bars.track)
    judged = rules.judge(result)
    emit_stress(result, judged, format, output, plot_dir, show_legend=not no_legend, seed=given["seed"], base=base)


@handles_errors
@opt.takes((ANALYSIS + COMPARED, "width"), (SAMPLING + FORWARD, "format"), (GATE, "baseline"))
def report(
    ctx: typer.Context,
    checkpoints: Annotated[list[str], typer.Argument(help="Checkpoints (names or folders) or encoding specs.")],
    output: Annotated[Path, opt.path_option("--output", "-o", help="The Markdown page to write (.md).")],
    width: Annotated[
        int | None,
        typer.Option(
            "--width",
            min=1,
            help="Width of encoding specs and compared encodings (default: each checkpoint's; for specs, "
            "the first checkpoint's, else 768).",
        ),
    ] = None,
    format: Annotated[
        str,
        opt.text_option(
            "--format", "-f", help="What goes to stdout: table (a summary), json (every result) or markdown (the page)."
        ),
    ] = "table",
    no_legend: NoLegend = False,
    baseline: Baseline = None,
    fail_if_worse: FailIfWorse = None,
    **given: Any,
) -> None:
    """A Markdown report (tables and figures) of several checkpoints side by side, for a CI job summary.

    Figures go to a folder beside the page (<name>_files/). The page states the version, the
    command line and the seed; a crossed --fail-above gate is on the page and in the JSON. A
    target that cannot be analysed gets a section saying why, the page is still written, and
    the exit code is 1 (also when a gate is crossed).

    With --baseline A and one checkpoint B, the page holds B's position scores beside A's, the change
    and whether it exceeds the null's spread (as track --baseline); --fail-if-worse gates it.
    """
    from ..api import DEFAULT_WIDTH, parse_fail_if_worse
    from ..report.render import provenance

    base = Path.cwd()  # every path the output shows is shown from here
    check_stress_format(format)
    check_output_suffix(output, ".md", "reports")
    dataset, seed = given["dataset"], given["seed"]
    check_dataset_options(ctx, dataset)
    rules = stress_gate(ctx.params)
    worse_rules = parse_fail_if_worse(fail_if_worse or [])
    checkpoints = baseline_targets(checkpoints, baseline, worse_rules)
    figure_dir = output.parent / f"{output.stem}_files"
    check_output_place(figure_dir, folder=True, option="--output")
    guard(
        stress_inputs(checkpoints, given),
        [Output("--output", output), Folder("--output (its figure folder)", figure_dir, replaces=True)],
    )
    first_width = _check_targets(checkpoints, given["trust_remote_code"])
    # A spec that names no width (sinusoidal) is drawn at the checkpoints' width, so a page compares like
    # with like; a table spec (file:, learned:, model:) keeps its own, as `stress` does.
    options = stress_options(ctx.params, default_width=width or first_width or DEFAULT_WIDTH)
    run, title = provenance(seed), f"Positional geometry report: {dataset}"
    against = worse_rules if baseline is not None else None
    page, comparison = write_page(
        checkpoints, options, output, title, against, run=run, gate=rules, show_legend=not no_legend, base=base
    )
    emit_report(page, format, output, figure_dir, run, dataset, comparison)


def baseline_targets(
    checkpoints: list[str],
    baseline: str | None,
    rules: Mapping[str, Any],
    usage: str = "report --baseline A B -o page.md",
) -> list[str]:
    """The targets of report or track: with --baseline A, A then the one checkpoint B it is compared with
    (``usage``: the command line the refusals show)."""
    if rules and baseline is None:
        raise InputError(f"--fail-if-worse compares with a baseline; pass --baseline A ({usage})")
    if baseline is None:
        return checkpoints
    if len(checkpoints) != 1:
        raise InputError(f"--baseline A compares one checkpoint B with A, got {len(checkpoints)}; {usage}")
    return [baseline, *checkpoints]


#: the files a target names that are arrays of position vectors, not checkpoints
TABLE_SUFFIXES = (".npy", ".npz", ".safetensors")


def check_not_a_table_file(target: str) -> None:
    """A target that is an array file (``rand.npy``) is refused with the spec that scores its rows
    (``file:rand.npy``): a checkpoint is a folder, an array is an encoding."""
    path = Path(target).expanduser() if target.startswith("~") else opt.literal_path(target)
    if ":" not in target and path.suffix.lower() in TABLE_SUFFIXES and path.is_file():
        raise InputError(
            f"{target} is an array file, not a checkpoint folder; to score its rows as position vectors "
            f"pass file:{target}"
        )


def _check_targets(targets: list[str], trust_remote_code: bool = False) -> int | None:
    """Resolve every target before the first analysis, so a typo in the last one fails at once.

    Returns the hidden size of the first readable checkpoint (None when there is none).
    """
    from ..api import check_not_a_typo, get_encoding, is_encoding_spec, load_checkpoint

    width = None
    for target in targets:
        check_not_a_typo(target)
        check_not_a_table_file(target)
        if is_encoding_spec(target):
            get_encoding(target).check()
        else:
            try:
                checkpoint = load_checkpoint(target, trust_remote_code)
            except DataNotFoundError:
                raise  # a typo: fail at once
            except GeoanalyzeError:
                continue  # an unreadable checkpoint gets its own section of the page
            width = width or checkpoint.hidden_size
    return width


@encodings_app.command("list", cls=opt.Command)
@handles_errors
def list_encodings(format: opt.Format = "table") -> None:
    """List the encoding names, what they are and their parameters."""
    from ..api import list_encodings as records
    from ..results import EncodingsResult
    from .common import check_format

    check_format(format)
    result = EncodingsResult(tuple(records()))
    if format == "json":
        print(result.to_json())
        return
    rows = result.encodings
    table = [(r["name"], r["summary"], ", ".join(f"{k}={v}" for k, v in r["parameters"].items()) or "-") for r in rows]
    print_table(
        grid_table("encodings (spec: NAME[:key=value,...] or NAME:<path>)", ["name", "what", "parameters"], table),
        format,
    )
