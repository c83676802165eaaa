"""The figures of the positional-encoding paper's experiments (positional.py lists them): training
curves per encoding, the separation trajectory, monotonicity's trajectory and a Shepard diagram.

Importing this module does not import torch or matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: the scores monotonicity's trajectory figure draws, with their panel titles
TRAJECTORY_PANELS = {"monotonicity_violation": "violation rate", "lag_violation": "lag violation"}


def monotonicity_trajectory_figure(points: Sequence[Any], path: Path, title: str = "") -> Any:
    """Each of :data:`TRAJECTORY_PANELS` against step: the learned table's value, its null's range shaded
    and its null's mean dashed. Returns the figure."""
    from ..plotting import Looks, colour, series
    from ..plotting import pyplot as _pyplot
    from ..plotting import save as _save

    plt = _pyplot()
    figure, axes = plt.subplots(1, len(TRAJECTORY_PANELS), figsize=(11, 4), layout="constrained")
    looks = Looks("learned")
    steps = [point.step for point in points]
    for axis, (score, label) in zip(axes, TRAJECTORY_PANELS.items(), strict=True):
        null = points[0].scores[score]
        axis.axhspan(null["null_low"], null["null_high"], color=colour("null"), alpha=0.2, label="random tables")
        axis.axhline(null["null_mean"], color=colour("null"), linestyle="--", linewidth=1, label="random mean")
        series(axis, steps, [point.value(score) for point in points], looks("learned"), label="learned table")
        axis.set_xlabel("training step")
        axis.set_ylabel(f"{label} (share of pairs)")
        axis.set_title(label)
        axis.legend(fontsize=8)
    if title:
        figure.suptitle(title)
    _save(figure, path)
    return figure


def curves_figure(
    path: Path,
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    key: str,
    label: str,
    chance: tuple[float, float] | None = None,
    title: str = "",
) -> None:
    """``key`` of each run against step (one dot per run when each has one evaluation); ``chance`` shaded."""
    from ..plotting import Looks, dot_plot, series, single_points
    from ..plotting import pyplot as _pyplot
    from ..plotting import save as _save

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 4.2), layout="constrained")
    looks = Looks(*runs)
    if single_points({name: [lines] for name, lines in runs.items()}):  # one evaluation per run (smoke)
        dot_plot(axis, {name: [lines[0][key]] for name, lines in runs.items()}, looks, "positional encoding")
        steps = sorted({lines[0]["step"] for lines in runs.values()})
        title = f"{title} (one evaluation, at step {', '.join(map(str, steps))})".strip()
    else:
        for name, lines in runs.items():
            series(axis, [x["step"] for x in lines], [x[key] for x in lines], looks(name), label=name)
        axis.set_xlabel("training step")
    if chance is not None:
        axis.axhspan(*chance, color="grey", alpha=0.2, label="chance (3 sd)")
    axis.set_ylabel(label)
    if title:
        axis.set_title(title)
    axis.legend(fontsize=8)
    _save(figure, path)


def separation_figure(
    path: Path, runs: dict[str, list[dict[str, Any]]], trajectories: dict[str, Any] | None = None
) -> Any:
    """Both separations of each run against step; the relative one over each run's null band (its shape's
    random tables: the range, shaded in the run's colour; none without ``trajectories``). Returns the figure."""
    from ..plotting import Looks, series
    from ..plotting import pyplot as _pyplot
    from ..plotting import save as _save

    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    looks = Looks(*runs)
    for name, lines in runs.items():
        steps = [x["step"] for x in lines]
        series(axes[0], steps, [x["separation"] for x in lines], looks(name), label=name)
        if trajectories is None:
            series(axes[1], steps, [x["relative_separation"] for x in lines], looks(name), label=name)
            continue
        points = trajectories[name]
        null = points[0].scores["relative_separation"]
        axes[1].axhspan(
            null["null_low"], null["null_high"], color=looks(name).colour, alpha=0.15, label=f"{name}: random tables"
        )
        series(
            axes[1], [p.step for p in points], [p.value("relative_separation") for p in points], looks(name), label=name
        )
    labels = ("min_{i != j} ||p_i - p_j|| (table units)", "min / median pairwise distance (ratio)")
    for axis, title, ylabel in zip(axes, ("separation", "relative separation"), labels, strict=True):
        axis.set_xlabel("training step")
        axis.set_ylabel(ylabel)
        axis.set_title(title)
        axis.set_ylim(bottom=0)
        axis.legend(fontsize=8)
    _save(figure, path)
    return figure


def shepard_figure(tables: dict[str, np.ndarray], distances: np.ndarray, path: Path, subtitle: str = "") -> None:
    """Each encoding's pairwise distances (at the best global scale) against the corpus's Hellinger distances.

    The look of the report's Shepard diagram: encodings with the same distances drawn once, labelled
    with every name; each in its family's colour; the diagonal where an exact encoding lies.
    """
    from scipy.spatial.distance import squareform

    from ..geometry.scores import fitted_distances
    from ..plotting import shepard_diagram

    target = squareform(distances, checks=False)
    shepard_diagram(target, {name: fitted_distances(table, target) for name, table in tables.items()}, path, subtitle)
