"""`geoanalyze track`: the geometry of a series of checkpoints, step by step, and a checkpoint against a baseline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError, ThresholdError
from ..report.render import grid_table
from . import options as opt
from .common import Output, all_or_none, check_output_place, check_output_suffix, guard, handles_errors
from .stress import (
    ANALYSIS,
    FORWARD,
    SAMPLING,
    baseline_targets,
    check_stress_format,
    refuse_worse,
    stress_inputs,
    stress_options,
)

if TYPE_CHECKING:
    from ..api import Member, StressOptions, TrackResult

#: the figure --plot-dir receives
FIGURE_NAME = "track.png"
PlotDir = Annotated[
    Path | None, opt.path_option("--plot-dir", help=f"Draw every score against step into {FIGURE_NAME} here.")
]
Plot = Annotated[
    Path | None, opt.path_option("--plot", hidden=True, help="Draw the scores into this PNG (old; use --plot-dir).")
]


#: --series: each source its own series, side by side
SeriesFlag = Annotated[
    bool,
    typer.Option(
        "--series",
        help="Each source given is its own series (two runs, two PEs): one table and one figure, a line each.",
    ),
]


def figure_path(plot_dir: Path | None, plot: Path | None) -> Path | None:
    """The PNG track draws: FIGURE_NAME in --plot-dir, or the file the old --plot named (checked now)."""
    check_output_suffix(plot, ".png", "figures", option="--plot")
    check_output_place(plot_dir, folder=True, option="--plot-dir")
    return plot_dir / FIGURE_NAME if plot_dir is not None else plot


def split_revisions(text: str | None) -> list[str] | None:
    """'step1000,step2000' -> ['step1000', 'step2000']; an empty item is refused."""
    if text is None:
        return None
    revisions = [part.strip() for part in text.split(",")]
    if not all(revisions):
        raise InputError(f"--revisions {text!r} has an empty item; write revisions separated by commas")
    return revisions


def print_result(result: TrackResult, base: Path | None = None) -> None:
    """The terminal tables (the position rows, the layer rows, the comparison) at the output's width. A name
    is text, never Rich markup (a folder named ``[/b]`` was an internal error), as in stress's tables."""
    from ..report.render import emit, output_width

    emit(*track_report(result, output_width(), base))


def track_report(result: TrackResult, width: int, base: Path | None = None) -> list[Any]:
    """What :func:`print_result` prints, laid out in ``width``: every number on one line.

    The position table has one row per step when that fits; else it is transposed as stress's score
    table is (one row per score, the steps side by side, named ``step N`` and listed with their
    checkpoint below). A checkpoint that was not scored is a line of its own. Sentences fold.
    """
    from rich.markup import escape

    from ..api import (
        TRACK_CONSEQUENCE,
        position_rows,
        series_of,
    )
    from ..api import (
        track_layer_rows as layer_rows,
    )
    from ..api import (
        track_legend as legend,
    )
    from ..report.stress import fitted_tables, labelled, layout_width, legend_lines, short_name
    from ..results import display_path, limit_lines

    several = series_of(result)
    title = f"geometry over training on {escape(result.dataset.name)}"
    if several:
        title += f": {len(several)} series"
    header, rows = position_rows(result)
    lead = 1 if several else 0  # the series column
    scored = [(record, row) for record, row in zip(result.records, rows, strict=True) if record.error is None]
    parts: list[Any] = []
    shown = [display_path(record.checkpoint, base) for record, _ in scored]
    names = [step_name(record, index) for index, (record, _) in enumerate(scored)]
    wide = [
        [*(escape(str(cell)) for cell in row[:lead]), row[lead], escape(short_name(path, 40)), *row[lead + 2 :]]
        for path, (_, row) in zip(shown, scored, strict=True)
    ]
    if layout_width(header, wide) <= width:
        columns = ("series", "checkpoint", "null")
        parts.append(grid_table(title, header, wide, text_columns=columns, whole=("checkpoint",)))
    elif scored:
        steps = [[name, *row[lead + 2 :]] for name, (_, row) in zip(names, scored, strict=True)]
        parts += fitted_tables(title, ["step", *header[lead + 2 :]], steps, width)
        wide = []
    if not wide or any(row[lead + 1] != path for row, path in zip(wide, shown, strict=True)):
        # the checkpoints in full, where the table shortened them or left them out
        parts += legend_lines([f"{name}: {path}" for name, path in zip(names, shown, strict=True)], width)
    for line in limit_lines(result.discriminability, TRACK_CONSEQUENCE):
        parts += labelled("cannot decide:", line, "bold", width)
    for record in result.failed:
        where = "" if record.step is None else f"step {record.step}, "
        parts += labelled("not scored:", f"{where}{record.checkpoint}: {record.error}", "bold red", width)
    header, rows = layer_rows(result)
    if rows and several:
        # one table per series (its name in the title, not in a column): the rows fit 80 columns
        for name in several:
            mine = [row[1:] for row in rows if row[0] == name]
            if mine:
                parts.append(grid_table(f"layers of {name}", header[1:], mine, text_columns=("row", "null")))
    elif rows:
        parts.append(grid_table("layers", header, rows, text_columns=("row", "null")))
    if result.comparison is not None:
        header, rows = result.comparison.rows()
        parts.append(grid_table("against the baseline", header, rows, text_columns=("gate",)))
        parts += legend_lines(result.comparison.lines(), width)
    parts += legend_lines([legend(result.null)], width)
    return parts


def step_name(record: Any, index: int) -> str:
    """A column of the transposed table: ``step N`` (``SERIES step N`` with several series), or the
    checkpoint's place in the series."""
    from ..report.stress import short_name

    step = f"step {record.step}" if record.step is not None else f"#{index + 1}"
    return f"{short_name(record.series, 20)} {step}" if record.series is not None else step


def emit_track(result: TrackResult, format: str, output: Path | None, plot: Path | None, seed: int, base: Path) -> None:
    """Write -o's JSON and --plot-dir's figure (both or neither), print in --format, and exit 1 when a
    checkpoint could not be scored or the baseline gate is crossed."""
    from ..api import draw_track
    from ..io import write_text
    from ..report.render import provenance

    extra: dict[str, Any] = {"run": provenance(seed)}
    if plot is not None:
        extra["figure"] = str(plot)
    with all_or_none() as stage:
        if plot is not None:
            draw_track(result, stage(plot))
        if output is not None:
            write_text(stage(output), result.to_json(**extra) + "\n")
    if format == "json":
        print(result.to_json(**extra))
    elif format == "markdown":
        print(result.to_markdown(str(plot) if plot else None) + "\n" + extra["run"].markdown)
    else:
        print_result(result, base)
    failed = result.failed
    if failed:
        names = ", ".join(f"{r.checkpoint} ({r.error})" for r in failed)
        raise ThresholdError(f"{len(failed)} of {len(result.records)} checkpoints could not be scored: {names}")
    refuse_worse(result.comparison)


@handles_errors
@opt.takes((ANALYSIS, "layers"), (SAMPLING + FORWARD, "revisions"))
def track(
    ctx: typer.Context,
    checkpoints: Annotated[
        list[str],
        typer.Argument(
            help="Checkpoints in a series: a run folder of `geoanalyze train`, a folder of Trainer checkpoint-* "
            "folders, checkpoint folders, a glob, or one hub model with --revisions.",
            show_default=False,
        ),
    ],
    layers: Annotated[
        str, opt.text_option("--layers", help="none (default), all, or a list such as 0,3,6 (Hugging Face models).")
    ] = "none",
    revisions: Annotated[
        str | None,
        opt.text_option("--revisions", help="Hub revisions of the one model given, e.g. step1000,step2000."),
    ] = None,
    order: Annotated[
        str,
        opt.text_option("--order", help="steps (sort by the step of each name or trainer state) or given."),
    ] = "steps",
    baseline: Annotated[
        str | None,
        opt.text_option("--baseline", help="A checkpoint A to compare the one checkpoint given (B) with."),
    ] = None,
    series: SeriesFlag = False,
    fail_if_worse: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-if-worse",
            help="SCORE[=TOL]: exit 1 when B is worse than the baseline by more than TOL (default: the null's "
            "spread). SCORE: shape, order, local_order, lag, separation (or scaled, violation, ...). Repeatable.",
        ),
    ] = None,
    format: Annotated[str, opt.text_option("--format", "-f", help="table, json or markdown.")] = "table",
    output: Annotated[Path | None, opt.path_option("--output", "-o", help="Also write the JSON here.")] = None,
    plot_dir: PlotDir = None,
    plot: Plot = None,
    **given: Any,
) -> None:
    """Score a series of checkpoints step by step, or a checkpoint against a baseline (for CI).

    The corpus is counted once and every row is tested against shuffles of its own positions; each
    checkpoint's forward pass (--layers) is cached. A checkpoint that cannot be read is a row saying
    why (exit 1); checkpoints of different models in one series are refused (exit 2).
    """
    from ..api import parse_fail_if_worse

    base = Path.cwd()  # the checkpoints the table names are shown from here
    check_stress_format(format)
    check_output_suffix(output, ".json", "results")
    plot = figure_path(plot_dir, plot)
    rules = parse_fail_if_worse(fail_if_worse or [])
    sources = baseline_targets(checkpoints, baseline, rules, "track --baseline A B")
    guard(
        stress_inputs(sources, given),
        [Output("--output", output), Output("--plot-dir" if plot_dir else "--plot", plot)],
    )
    members = chosen_members(sources, revisions, order, baseline, series)
    options = stress_options(ctx.params, compare=())  # nothing compared beside the checkpoints
    result = scored_series(members, options, baseline is not None, rules)
    emit_track(result, format, output, plot, given["seed"], base)


def chosen_members(
    sources: list[str], revisions: str | None, order: str, baseline: str | None, series: bool
) -> tuple[Member, ...]:
    """The checkpoints to score: one series in step order (or as given), a baseline and its candidate,
    or with --series each source its own series."""
    from ..api import find_series, find_several

    if series and (baseline is not None or revisions):
        raise InputError("--series compares folders side by side; leave --baseline and --revisions out")
    if series:
        return find_several(sources, order)
    members = find_series(sources, split_revisions(revisions), "given" if baseline else order)
    if baseline is not None and len(members) != 2:
        raise InputError(f"--baseline compares two checkpoints, but {' and '.join(sources)} hold {len(members)}")
    return members


def scored_series(
    members: tuple[Member, ...], options: StressOptions, against_baseline: bool, rules: Mapping[str, float | None]
) -> TrackResult:
    """The series scored with a progress line per checkpoint; with --baseline, B compared with A."""
    from ..api import compare
    from ..api import track as score_series
    from ..progress import ProgressBars

    with ProgressBars() as bars:
        scored = bars.track("checkpoints scored", len(members))
        result = score_series(members, options, progress=bars.track, on_record=lambda _: scored(1))
    if against_baseline:
        comparison = compare(result.records[0], result.records[1], rules, result.discriminability)
        result = replace(result, comparison=comparison)
    return result
