"""A stress analysis for people: the terminal tables, a report page's row, and the figures.

What a result says (its rows, verdict, legend) and its JSON and Markdown are the result's own
(:class:`geoanalyze.results.StressResult`); this module prints it with rich and draws it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.padding import Padding

from ..geometry.null import ASPECTS
from ..results import (
    PROJECTION_LEGEND,
    SCORE_COLUMNS,
    StressResult,
    category_code,
    display_path,
    gate_rules,
    header_rows,
    interval_rows,
    layer_rows,
    peak_lines,
    score_rows,
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


def print_tables(result: StressResult, show_legend: bool = True, gate: Mapping[str, Any] | None = None) -> None:
    """The terminal report (rich tables on stdout): header, warnings, scores, verdict, intervals, legend, layers."""
    from .render import grid_table, key_value_table, stdout_console

    console = stdout_console
    title = f"stress of {display_path(result.target)} on {result.dataset.name}"
    console.print(key_value_table(title, header_rows(result)))
    summary = result.summary
    for line in summary.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(line)}", soft_wrap=False)
    header, rows = score_rows(result)
    # A long target name (a hub id, a path) is in the title; its row says "target" so the table fits.
    shown = display_path(result.target)
    alias = "target" if len(shown) > TABLE_NAME_WIDTH else shown
    rows = [[alias if row[0] == result.target else short_name(display_path(str(row[0]))), *row[1:]] for row in rows]
    print_wide_table(console, "scores against D (lower is better except rel. sep.)", header, rows)
    console.print(f"[bold]verdict:[/] {escape(summary.verdict)}", soft_wrap=False)
    for line in summary.limits:
        console.print(f"[bold]cannot decide:[/] {escape(line)}", soft_wrap=False)
    intervals = interval_rows(result)
    if intervals:
        console.print(grid_table(*intervals))
    if show_legend:
        print_legend(console, summary.legend)
    if result.layers:
        console.print(
            grid_table("layer by layer", *layer_rows(result), text_columns=("projection", "null")), soft_wrap=False
        )
        for line in peak_lines(result):
            console.print(line, highlight=False, soft_wrap=False)
        if show_legend:
            projections = {row.projection for row in result.layers}
            print_legend(console, [line for key, line in PROJECTION_LEGEND.items() if key in projections])
    if gate and gate["crossed"]:
        console.print(f"[bold red]gate failed:[/] {escape('; '.join(gate['crossed']))}", soft_wrap=False)
    elif gate:
        console.print(f"[bold green]gate passed:[/] {escape(gate_rules(gate))}", soft_wrap=False)


def print_legend(console: Any, lines: Any) -> None:
    """Legend lines, indented by two columns, never wrapped."""
    for line in lines:
        console.print(Padding(escape(line), (0, 0, 0, 2)), highlight=False, soft_wrap=False)


def print_wide_table(console: Any, title: str, header: list[str], rows: list[list[Any]]) -> None:
    """A compact table when every cell fits on one line, else one block per row (narrow terminals)."""
    from .render import grid_table

    if _fits(console, header, rows):
        console.print(grid_table(title, header, rows, text_columns=("null",), compact=True))
    else:
        _print_vertical(console, title, header, rows)


def _fits(console: Any, header: list[str], rows: list[list[Any]]) -> bool:
    """Whether the compact table fits the console with every cell on one line (2 characters of padding a column)."""
    widths = [max(len(str(h)), *(len(fmt(row[i])) for row in rows)) for i, h in enumerate(header)]
    return sum(widths) + 2 * len(widths) <= console.width


def _print_vertical(console: Any, title: str, header: list[str], rows: list[list[Any]]) -> None:
    """The narrow layout: one block per encoding, one score per line."""
    console.print(f"[italic]{escape(title)}[/]")
    width = max(len(h) for h in header[1:])
    for row in rows:
        console.print(f"[bold]{escape(str(row[0]))}[/]", highlight=False)
        for label, value in zip(header[1:], row[1:], strict=True):
            console.print(f"  {label:<{width}}  {fmt(value)}", highlight=False, soft_wrap=True)


def report_header() -> list[str]:
    """The columns of a report's summary table: one row per target."""
    return ["target", "d", "positions", *[c.label for c in SCORE_COLUMNS], "null"]


def report_row(result: StressResult) -> list[Any]:
    """One target's row of a report's summary table (its own scores; '-' where it has no position vectors)."""
    mine = result.summary.row(result.target)
    return [
        display_path(result.target),
        "-" if mine is None else mine.dim,
        len(result.positions),
        *[("-" if mine is None else mine.values[c.key]) for c in SCORE_COLUMNS],
        "-" if mine is None else category_code(mine.categories),
    ]


def write_figures(result: StressResult, directory: str | os.PathLike[str], prefix: str = "") -> dict[str, str]:
    """Heatmap, MDS map, Shepard diagram, scores against the null and per-layer stress as PNGs; {title: path}.

    Everything drawn is the result's: its geometry, the tables it scored, and (a synthetic corpus,
    or a sample file with its marginals) the exact distances it knows (``result.truth``).
    """
    from ..geometry.mds import classical_mds, stress_curve
    from ..plotting import caption
    from .figures import distance_heatmap, layer_figure, mds_figure, null_figure, shepard_diagram

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    geometry, distances, truth = result.geometry, result.distances, result.truth
    named = caption(display_path(result.target), result.dataset.name)
    written: dict[str, str] = {}
    heatmap = folder / f"{prefix}hellinger.png"
    distance_heatmap(geometry, heatmap, subtitle=named, truth=truth)
    written["Hellinger distances (naive, corrected) and noise floor"] = str(heatmap)
    mds = classical_mds(distances)
    mds_path = folder / f"{prefix}mds.png"
    mds_figure(mds, stress_curve(mds.embedding_, distances), result.positions, mds_path, subtitle=named, truth=truth)
    written["MDS: eigen-spectrum, stress against rank, 2-D map"] = str(mds_path)
    # The vectors the analysis scored (the optimal MDS is left out: it lies on the diagonal).
    tables = {name: table for name, table in result.vectors.items() if name != "mds"}
    shepard = folder / f"{prefix}shepard.png"
    shepard_diagram(tables, distances, shepard, subtitle=f"{named} ({result.distance})", truth=truth)
    written["Shepard diagram"] = str(shepard)
    null_path = folder / f"{prefix}null.png"
    reasons = {a: e.reason or "" for a, e in result.discriminability.aspects.items() if e.discriminates is False}
    shown = {short_name(display_path(name), 24): scores.to_dict() for name, scores in result.scores.items()}
    null_figure(shown, ASPECTS, null_path, subtitle=f"({named})", not_ranked=reasons)
    written["every score against random tables (the verdict's categories)"] = str(null_path)
    if result.layers:
        layers = folder / f"{prefix}layers.png"
        layer_figure([row.to_dict() for row in result.layers], layers, title=f"({named})", references=references(result))
        written["stress per layer"] = str(layers)
    return written


def references(result: StressResult) -> dict[str, dict[str, float]]:
    """The layer figure's reference lines: the target's null mean, the sinusoidal table's scores."""
    lines: dict[str, dict[str, float]] = {}
    mine = result.target_scores
    if mine is not None:
        lines["null"] = {key: mine.null[key]["mean"] for key in ("stress", "scaled_stress") if key in mine.null}
    sinusoidal = result.scores.get("sinusoidal")
    if sinusoidal is not None:
        lines["sinusoidal"] = {key: sinusoidal.observed[key] for key in ("stress", "scaled_stress")}
    return lines
