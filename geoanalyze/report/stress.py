"""A stress analysis for people: the terminal tables, a report page's row, and the figures.

What a result says (its rows, verdict, legend) and its JSON and Markdown are the result's own
(:class:`geoanalyze.results.StressResult`); this module prints it with rich and draws it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.text import Text

from ..geometry.null import ASPECTS, TESTED_ASPECTS
from ..results import (
    LAYER_LEGEND,
    SCORE_COLUMNS,
    Judgement,
    StressResult,
    category_code,
    display_path,
    header_rows,
    interval_rows,
    layer_rows,
    peak_lines,
    projection_legend,
    score_rows,
    shown_score,
    summarize,
)
from .render import fmt

#: longest encoding name the terminal table shows in full (80 columns hold 8 score columns and this)
TABLE_NAME_WIDTH = 20


def short_name(name: str, width: int = TABLE_NAME_WIDTH) -> str:
    """A name as a narrow table shows it: a hub id without its owner, a path's last two parts, then
    elided in the middle when still longer than ``width``."""
    text = name
    if "/" in name and len(name) > width:
        prefix, sep, rest = name.partition(":") if not name.startswith(("/", "<", "~", ".")) else ("", "", name)
        body = rest if sep else name
        if body.startswith(("/", "<", "~", ".")):
            tail = "…/" + "/".join(Path(body).parts[-2:])
        else:
            tail = body.rsplit("/", 1)[-1]  # a hub id: owner/name -> name
        text = f"{prefix}:{tail}" if sep else tail
    if len(text) > width:
        keep = width - 1
        text = text[: keep // 2] + "…" + text[-(keep - keep // 2) :]
    return text


def terminal_report(result: StressResult, show_legend: bool, gate: Judgement | None, **layout: Any) -> list[Any]:
    """The terminal report: header, warnings, scores, verdict, intervals, legend, layers, gate, as renderables
    laid out in ``layout["width"]`` (default: the output's), paths shown from ``layout["base"]`` (default:
    the working directory)."""
    from .render import key_value_table, output_width

    width, base = layout.get("width") or output_width(), layout.get("base")
    summary = summarize(result, base)
    title = f"stress of {display_path(result.target, base)} on {result.dataset.name}"
    parts: list[Any] = [key_value_table(title, header_rows(result, base))]
    for line in summary.warnings:
        parts += labelled("warning:", line, "bold yellow", width)
    header, rows = score_rows(result)
    # A long target name (a hub id, a path) is in the title; its row says "target" so the table fits.
    shown = display_path(result.target, base)
    alias = "target" if len(shown) > TABLE_NAME_WIDTH else shown
    rows = [
        [alias if row[0] == result.target else short_name(display_path(str(row[0]), base)), *row[1:]] for row in rows
    ]
    parts += fitted_tables("scores against D (lower is better except rel. sep.)", header, rows, width)
    parts += labelled("verdict:", summary.verdict, "bold", width)
    for line in window_lines(result):
        parts += labelled("by position:", line, "bold", width)
    for line in summary.caveats:
        parts += labelled("about:", line, "bold", width)
    for line in summary.limits:
        parts += labelled("cannot decide:", line, "bold", width)
    intervals = interval_rows(result, base)
    if intervals:
        parts += fitted_tables(intervals[0], intervals[1], intervals[2], width)
    if show_legend:
        mine = f"{shown}: the target, "
        lines = [
            f"target: {shown}, " + line[len(mine) :] if alias != shown and line.startswith(mine) else line
            for line in summary.legend
        ]
        parts += legend_lines(lines, width)
    if result.layers:
        parts += layer_report(result, show_legend, width)
    if gate:
        parts += gate_lines(gate, width)
    return parts


def window_lines(result: StressResult) -> list[str]:
    """The verdict of scores against position (--windows): the target's, else every table's."""
    found = result.windows
    if result.target in found:
        return [found[result.target].verdict()]
    return [scores.verdict() for scores in found.values()]


def layer_report(result: StressResult, show_legend: bool, width: int) -> list[Any]:
    """The layer table, one summary line per projection (table order), and what each row is."""
    from .render import grid_table, wrapped

    parts: list[Any] = [grid_table("layer by layer", *layer_rows(result), text_columns=("projection", "null"))]
    parts += [escape(line) for summary in peak_lines(result) for line in wrapped(summary, width=width)]
    if show_legend:
        projections = {row.projection for row in result.layers}
        parts += legend_lines([LAYER_LEGEND, *projection_legend(projections)], width)
    return parts


def gate_lines(gate: Judgement, width: int) -> list[str]:
    """The --fail-above / --fail-if gate as the table format prints it: passed, or what it crossed."""
    if gate.crossed:
        return labelled("gate failed:", "; ".join(gate.crossed), "bold red", width)
    return labelled("gate passed:", gate.rules, "bold green", width)


def labelled(label: str, text: str, style: str, width: int) -> list[str]:
    """``label text`` folded to ``width`` (next lines indented by two), the label in ``style``: Rich markup lines."""
    from .render import wrapped

    lines = [escape(line) for line in wrapped(f"{label} {text}", width=width)]
    lines[0] = f"[{style}]{escape(label)}[/]{lines[0][len(escape(label)) :]}"
    return lines


def legend_lines(lines: Any, width: int) -> list[str]:
    """Legend lines indented by two columns, each folded to ``width`` (next lines by four): markup-safe."""
    from .render import wrapped

    return [escape(part) for line in lines for part in wrapped(line, indent=2, width=width)]


def layout_width(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> int:
    """The width a table takes in the one style with every cell on one line (two spaces between columns)."""
    widths = [max(len(str(h)), *(len(fmt(row[i])) for row in rows)) for i, h in enumerate(header)]
    return sum(widths) + 2 * (len(widths) - 1)


def fitted_tables(title: str, header: list[str], rows: list[list[Any]], width: int) -> list[Any]:
    """A score table that fits ``width`` with every score of a row on one line.

    One row per encoding when that fits; else transposed (one row per score, the encodings side by
    side as columns), split into as many tables as it takes, each repeating the score names.
    """
    from .render import grid_table

    rows = [[escape(str(row[0])), *row[1:]] for row in rows]  # a name is text, never Rich markup
    if not rows or layout_width(header, rows) <= width:
        return [grid_table(title, header, rows, text_columns=("null",))]
    names = [Text.from_markup(str(row[0]), emoji=False).plain for row in rows]  # a header is text already
    scores = [[label, *[row[i] for row in rows]] for i, label in enumerate(header) if i > 0]
    label_width = max(len(str(row[0])) for row in scores)
    groups: list[list[int]] = [[]]
    used = label_width
    for index in range(len(names)):
        column = max(len(names[index]), *(len(fmt(row[index + 1])) for row in scores))
        if groups[-1] and used + 2 + column > width:
            groups.append([])
            used = label_width
        groups[-1].append(index)
        used += 2 + column
    tables = []
    for number, group in enumerate(groups):
        part = title if number == 0 else f"{title}, continued"
        cells = [[row[0], *[row[i + 1] for i in group]] for row in scores]
        chosen = [names[i] for i in group]
        tables.append(grid_table(part, ["score", *chosen], cells, numbers=chosen))
    return tables


def report_summary(page: Any, title: str, width: int | None = None) -> list[Any]:
    """The table format of a report page (:class:`~geoanalyze.report.page.ReportPage`): its summary
    table laid out to fit, one verdict per target and the gate, in ``width`` (default: the output's)."""
    from .render import output_width

    width = width or output_width()
    rows = [[short_name(str(row[0])), *row[1:]] for row in page.rows]
    parts = fitted_tables(title, page.header, rows, width)
    for line in page.verdicts:
        parts += labelled("verdict:", line, "bold", width)
    for line in getattr(page, "comparisons", ()):
        parts += labelled("compared:", line, "bold", width)
    if page.gate:
        parts += gate_lines(page.gate, width)
    return parts


def report_header() -> list[str]:
    """The columns of a report's summary table: one row per target."""
    return ["target", "d", "positions", *[c.label for c in SCORE_COLUMNS], "null"]


def report_row(result: StressResult, base: Path | None = None) -> list[Any]:
    """One target's row of a report's summary table (its own scores; '-' where it has no position vectors)."""
    mine = summarize(result, base).row(result.target)
    return [
        display_path(result.target, base),
        "-" if mine is None else mine.dim,
        len(result.positions),
        *[("-" if mine is None else shown_score(mine.values[c.key])) for c in SCORE_COLUMNS],
        "-" if mine is None else category_code(mine.categories),
    ]


@dataclass(frozen=True)
class Figure:
    """One PNG :func:`write_figures` drew: what it shows and where it is."""

    title: str
    path: Path


def write_figures(
    result: StressResult, directory: str | os.PathLike[str], prefix: str = "", base: Path | None = None
) -> tuple[Figure, ...]:
    """Heatmap, MDS map, Shepard diagram, scores against the null and per-layer stress as PNGs, in that order.

    Everything drawn is the result's: its geometry, the tables it scored, and (a synthetic corpus,
    or a sample file with its marginals) the exact distances it knows (``result.truth``).
    """
    from ..geometry.mds import classical_mds, stress_curve
    from ..plotting import caption
    from .figures import distance_heatmap, layer_figure, mds_figure, null_figure, shepard_diagram

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    geometry, distances, truth = result.geometry, result.distances, result.truth
    named = caption(display_path(result.target, base), result.dataset.name)
    heatmap = folder / f"{prefix}hellinger.png"
    distance_heatmap(geometry, heatmap, subtitle=named, truth=truth)
    written = [Figure("Hellinger distances (naive, corrected) and noise floor", heatmap)]
    mds = classical_mds(distances)
    mds_path = folder / f"{prefix}mds.png"
    mds_figure(mds, stress_curve(mds.embedding_, distances), result.positions, mds_path, subtitle=named, truth=truth)
    written.append(Figure("MDS: eigen-spectrum, stress against rank, 2-D map", mds_path))
    # The vectors the analysis scored (the optimal MDS is left out: it lies on the diagonal).
    tables = {name: table for name, table in result.vectors.items() if name != "mds"}
    shepard = folder / f"{prefix}shepard.png"
    shepard_diagram(tables, distances, shepard, subtitle=f"{named} ({result.distance})", truth=truth)
    written.append(Figure("Shepard diagram", shepard))
    null_path = folder / f"{prefix}null.png"
    reasons = {a: e.reason or "" for a, e in result.discriminability.aspects.items() if e.discriminates is False}
    shown = {short_name(display_path(name, base), 24): scores.to_dict() for name, scores in result.scores.items()}
    tested = {aspect: ASPECTS[aspect] for aspect in TESTED_ASPECTS}
    null_figure(shown, tested, null_path, subtitle=f"({named})", not_ranked=reasons)
    written.append(Figure("every tested score and its category against position shuffles", null_path))
    if result.layers:
        layers = folder / f"{prefix}layers.png"
        shape = result.discriminability.aspects.get("shape")
        layer_figure(
            [row.to_dict() for row in result.layers],
            layers,
            title=f"({named})",
            references=references(result),
            shape_not_ranked=shape.reason if shape is not None and shape.discriminates is False else None,
        )
        written.append(Figure("stress per layer", layers))
    if result.windows:
        from .figures import window_figure

        windows = folder / f"{prefix}windows.png"
        window_figure(result.windows, windows, subtitle=f"({named})")
        written.append(Figure("scaled stress against position, per window, against its shuffles", windows))
    return tuple(written)


def references(result: StressResult) -> dict[str, dict[str, float]]:
    """The layer figure's reference lines: the mean scaled stress of the target's table over its position
    shuffles, the sinusoidal table's scores."""
    lines: dict[str, dict[str, float]] = {}
    mine = result.target_scores
    if mine is not None and "scaled_stress" in mine.null:
        lines["target, positions shuffled"] = {"scaled_stress": mine.null["scaled_stress"]["mean"]}
    sinusoidal = result.scores.get("sinusoidal")
    if sinusoidal is not None:
        lines["sinusoidal"] = {key: sinusoidal.observed[key] for key in ("stress", "scaled_stress")}
    return lines
