"""Scores against step: the figure of ``geoanalyze track`` and the geometry panel of training.png.

One panel per scale-free score; the position row in black, each layer row in its projection's
colour; the range of scaled stress over the first position row's shuffles shaded. The x axis
is logarithmic when the steps span two decades or more.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..plotting import colour, pyplot, save
from .track import LABELS, TRACKED, TrackResult

#: steps spanning this ratio or more are drawn on a log axis
LOG_SPAN = 100


def log_steps(steps: Sequence[int]) -> str | None:
    """'log' when positive steps span two decades, 'symlog' when they start at 0 and reach 100, else None."""
    if len(steps) < 2:
        return None
    low, high = min(steps), max(steps)
    if low > 0 and high / low >= LOG_SPAN:
        return "log"
    if low == 0 and high >= LOG_SPAN:
        return "symlog"
    return None


def _lines(result: TrackResult, score: str) -> dict[str, list[tuple[int, float]]]:
    """label -> (step, value) points of ``score``: the position row, then each layer row; with several
    series (``track --series``) each label starts with its series'."""
    lines: dict[str, list[tuple[int, float]]] = {}
    for record in result.records:
        prefix = f"{record.series}: " if record.series is not None else ""
        if record.position is not None:
            lines.setdefault(f"{prefix}position", []).append((record.x, float(record.position.observed[score])))
        for row in record.layers:
            label = f"{prefix}L{row.layer} {row.projection}"
            lines.setdefault(label, []).append((record.x, float(row.observed[score])))
    return lines


#: line styles of the series after the first (colours stay the rows': position black, a projection's own)
SERIES_STYLES = ("-", "--", ":", "-.")


def draw_track(result: TrackResult, path: str | os.PathLike[str], title: str = "") -> Any:
    """Every tracked score against step into ``path`` (PNG); returns the figure. Several series
    (``track --series``) are overlaid, one line each: the first series' position row in black, the
    others in their own colour, each series in its own line style."""
    from .track import series_of

    plt = pyplot()
    figure, axes = plt.subplots(1, len(TRACKED), figsize=(3.2 * len(TRACKED), 3.4), layout="constrained")
    scale = log_steps([record.x for record in result.records])
    several = series_of(result)
    for axis, score in zip(axes, TRACKED, strict=True):
        band = result.band(score)
        if band is not None:
            axis.axhspan(
                *band, color=colour("null"), alpha=0.2, label=f"first row's {result.null.draws} position shuffles"
            )
        for index, (label, points) in enumerate(_lines(result, score).items()):
            xs, ys = zip(*points, strict=True)
            name, _, row = label.rpartition(": ") if several else ("", "", label)
            number = several.index(name) if several else 0
            projection = row.split(" ", 1)[-1]
            if row == "position":
                tint = colour("target") if number == 0 else colour(f"series {number}", number)
            else:
                tint = colour(projection, index)
            axis.plot(
                xs,
                ys,
                marker="o",
                markersize=3,
                label=label,
                color=tint,
                linestyle=SERIES_STYLES[number % len(SERIES_STYLES)],
                alpha=1.0 if row == "position" else 0.6,
            )
        if scale is not None:
            axis.set_xscale(scale)
        axis.set_xlabel("step")
        axis.set_title(LABELS[score])
    axes[0].legend(loc="best", fontsize=7 if several else None)
    compared = f": {' vs '.join(several)}" if several else ""
    figure.suptitle(title or f"scores against step on {result.dataset.name}{compared}")
    save(figure, path)
    return figure


#: the geometry panel's scores: the lower-is-better ones (relative separation, higher-is-better, is left out)
PANEL_SCORES = tuple(score for score in TRACKED if score != "relative_separation")


def geometry_axis(axis: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """The geometry panel of training.png: the position row's lower-is-better scale-free scores against step,
    against the held-out batches' own D (not the corpus ``track`` counts, so its values differ from
    track's), with the range of scaled stress over the row's position shuffles shaded and chance (0.5)
    for the violations dashed."""
    logged = [row for row in rows if isinstance(row.get("geometry"), Mapping)]
    positions = [row["geometry"]["position"] for row in logged if isinstance(row["geometry"].get("position"), Mapping)]
    band = [
        p["null"]["scaled_stress"]
        for p in positions
        if isinstance(p.get("null"), Mapping) and "scaled_stress" in p["null"]
    ]
    if band:
        low, high = min(b["low"] for b in band), max(b["high"] for b in band)
        axis.axhspan(low, high, color=colour("null"), alpha=0.2, label="scaled, positions shuffled (range)")
    for score in PANEL_SCORES:
        points = [
            (row["step"], row["geometry"]["position"][score])
            for row in logged
            if isinstance(row["geometry"].get("position"), Mapping)
            and isinstance(row["geometry"]["position"].get(score), int | float)
        ]
        if points:
            axis.plot(*zip(*points, strict=True), marker="o", markersize=3, label=LABELS[score])
    if axis.lines:
        axis.axhline(0.5, color=colour("null"), linestyle="--", linewidth=1, label="chance (violations)")
    axis.set_xlabel("step")
    axis.set_ylabel("score (lower is better)")
    axis.set_title("position geometry against the held-out batches' D\n(not track's corpus: values differ)")
    if axis.lines:
        axis.legend(loc="best", fontsize="small")


def training_figure(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], subtitle: str = "") -> Any:
    """training.png of a run with ``--geometry-every``: loss and accuracy (train, eval) and the geometry panel."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    evaluated = [row for row in rows if "geometry" not in row]
    for axis, kind in ((axes[0], "loss"), (axes[1], "accuracy")):
        for split, tint in (("train", "tab:blue"), ("eval", "tab:orange")):
            points = [
                (row["step"], row[f"{split}_{kind}"])
                for row in evaluated
                if isinstance(row.get(f"{split}_{kind}"), int | float)
            ]
            if points:
                axis.plot(*zip(*points, strict=True), marker="o", label=split, color=tint)
        axis.set_xlabel("step")
        axis.set_title(f"{kind} during training")
        axis.legend(loc="best")
    geometry_axis(axes[2], rows)
    if subtitle:
        figure.suptitle(subtitle)
    save(figure, path)
    return figure
