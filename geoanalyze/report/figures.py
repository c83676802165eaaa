"""PNG figures (matplotlib, Agg backend), written atomically; the look comes from :mod:`.style`.

Each function saves its PNG and returns the matplotlib Figure (closed), so a caller or a test
can read its axes, labels and lines.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io import atomic_path
from . import style

if TYPE_CHECKING:
    from ..geometry.distances import PositionGeometry
    from ..geometry.mds import MDSResult


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style.apply(plt)
    return plt


def _save(figure: Any, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    _pyplot().close(figure)


def distance_heatmap(geometry: PositionGeometry, path: str | os.PathLike[str], subtitle: str = "") -> Any:
    """Naive and corrected distance heatmaps side by side, and the noise floor per position."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.6), layout="constrained")
    positions = geometry.positions
    extent = (positions[0] - 0.5, positions[-1] + 0.5, positions[-1] + 0.5, positions[0] - 0.5)
    label = "Hellinger" if geometry.metric == "hellinger" else "Fisher-Rao"
    vmax = float(np.nanmax(geometry.naive)) or 1.0
    for axis, matrix, title in (
        (axes[0], geometry.naive, f"naive {label}"),
        (axes[1], geometry.corrected, f"bias-corrected {label}"),
    ):
        image = axis.imshow(matrix, cmap="viridis", vmin=0.0, vmax=vmax, extent=extent, interpolation="nearest")
        axis.set_title(title)
        axis.set_xlabel("position j")
        axis.set_ylabel("position i")
        figure.colorbar(image, ax=axis)
    axes[2].plot(positions, geometry.noise_floor, label="noise floor (split-half)")
    anchor = len(positions) // 2
    axes[2].plot(positions, geometry.naive[anchor], label=f"naive d(i, {positions[anchor]})", alpha=0.8)
    axes[2].plot(positions, geometry.corrected[anchor], label=f"corrected d(i, {positions[anchor]})", alpha=0.8)
    axes[2].set_xlabel("position i")
    axes[2].set_ylabel(label)
    axes[2].set_title(f"signal vs noise (snr {geometry.summary.get('snr', float('nan')):.3g})")
    axes[2].legend(fontsize=8)
    if subtitle:
        figure.suptitle(subtitle)
    _save(figure, path)
    return figure


def mds_figure(
    result: MDSResult,
    curve: dict[int, float],
    positions: np.ndarray,
    path: str | os.PathLike[str],
    rank: int | None = None,
    subtitle: str = "",
) -> Any:
    """Eigen-spectrum, stress against rank (the chosen rank marked), and the 2-D MDS map coloured by position.

    Eigenvalues within round-off of 0 (below 1e-9 of the largest) are left out rather than drawn
    as "negative"; so are stress values at round-off level, which on a log scale would squash the
    useful range (the full-rank fit of a Euclidean matrix has stress ~1e-30).
    """
    plt = _pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.4), layout="constrained")
    values = result.eigenvalues_
    shown = values[: min(len(values), 128)]
    tolerance = 1e-9 * float(np.abs(values).max()) if values.size else 0.0
    significant = np.abs(shown) > tolerance
    index = np.arange(1, len(shown) + 1)
    axes[0].bar(index[significant & (shown > 0)], shown[significant & (shown > 0)], color="tab:blue", label="positive")
    negative = significant & (shown < 0)
    if negative.any():
        axes[0].bar(index[negative], -shown[negative], color="tab:red", label="negative (non-Euclidean part)")
    axes[0].set_yscale("log")
    axes[0].set_title(f"eigen-spectrum (effective rank {result.effective_rank_})")
    axes[0].set_xlabel("component")
    axes[0].set_ylabel("|eigenvalue|")
    axes[0].legend()
    ranks = sorted(curve)
    top = max((curve[r] for r in ranks), default=1.0) or 1.0
    kept = [r for r in ranks if curve[r] > 1e-12 * top]
    axes[1].plot(kept, [curve[r] for r in kept], marker="o", color=style.colour("mds"))
    exact = [r for r in ranks if r not in kept]
    if exact:
        axes[1].annotate(
            f"stress ~0 from rank {exact[0]}", xy=(0.98, 0.95), xycoords="axes fraction", ha="right", va="top"
        )
    if rank is not None:
        axes[1].axvline(rank, color="black", linestyle="--", linewidth=0.8, label=f"chosen rank {rank}")
        axes[1].legend()
    axes[1].set_yscale("log")
    axes[1].set_xscale("log")
    axes[1].set_title("stress against rank")
    axes[1].set_xlabel("rank r")
    axes[1].set_ylabel("stress")
    coords = result.embedding_
    y = coords[:, 1] if coords.shape[1] > 1 else np.zeros(len(coords))
    scatter = axes[2].scatter(coords[:, 0], y, c=positions, cmap="plasma", s=12)
    axes[2].plot(coords[:, 0], y, color="grey", linewidth=0.4, alpha=0.6)
    axes[2].set_title("MDS map (first two coordinates)")
    axes[2].set_xlabel("MDS coordinate 1")
    axes[2].set_ylabel("MDS coordinate 2")
    figure.colorbar(scatter, ax=axes[2], label="position")
    if subtitle:
        figure.suptitle(subtitle)
    _save(figure, path)
    return figure


def shepard_diagram(
    tables: dict[str, np.ndarray], distances: np.ndarray, path: str | os.PathLike[str], subtitle: str = ""
) -> Any:
    """Embedding distance against target distance for each encoding (scaled to the best fit).

    Encodings with the same distances (sinusoidal and RoPE at one width) are drawn once, labelled
    with every name, so none hides behind another; each keeps its colour from :mod:`.style`.
    """
    from scipy.spatial.distance import squareform

    from ..geometry.scores import unit_distances

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    target = squareform(distances, checks=False)
    groups: list[tuple[list[str], np.ndarray]] = []
    for name, table in tables.items():
        # At unit scale (the best global scale below makes the drawing scale-free): a table of
        # entries near 1e300 would otherwise overflow to inf and draw NaN.
        e = unit_distances(table)[0]
        scale = float(e @ target / (e @ e)) if float(e @ e) > 0 else 1.0
        fitted = scale * e
        same = next((group for group in groups if np.allclose(group[1], fitted, rtol=1e-9, atol=1e-12)), None)
        if same is not None:
            same[0].append(name)
        else:
            groups.append(([name], fitted))
    for index, (names, fitted) in enumerate(groups):
        axis.scatter(target, fitted, s=2, alpha=0.35, color=style.colour(names[0], index), label=" = ".join(names))
    top = float(target.max()) if target.size else 1.0
    axis.plot([0, top], [0, top], color="black", linewidth=0.8)
    axis.set_xlabel("Hellinger distance between positions")
    axis.set_ylabel("embedding distance (best global scale)")
    axis.set_title(f"Shepard diagram{': ' + subtitle if subtitle else ''}")
    axis.legend(markerscale=4)
    _save(figure, path)
    return figure


def layer_figure(
    layers: list[dict[str, Any]],
    path: str | os.PathLike[str],
    title: str = "",
    references: dict[str, dict[str, float]] | None = None,
) -> Any:
    """Stress and scaled stress per layer, one line per projection, with reference lines.

    ``references``: name -> {"stress": ..., "scaled_stress": ...} drawn as dashed horizontal lines
    (the random null's mean, the sinusoidal table's scores).
    """
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for projection in sorted({row["projection"] for row in layers}):
        rows = sorted((row for row in layers if row["projection"] == projection), key=lambda row: row["layer"])
        x = [row["layer"] for row in rows]
        colour = style.colour(projection)
        axes[0].plot(x, [row["stress"] for row in rows], marker="o", label=projection, color=colour)
        axes[1].plot(x, [row["scaled_stress"] for row in rows], marker="o", label=projection, color=colour)
    for name, values in (references or {}).items():
        for axis, key in ((axes[0], "stress"), (axes[1], "scaled_stress")):
            value = values.get(key)
            if value is not None and np.isfinite(value) and (key != "stress" or value > 0):
                axis.axhline(value, color=style.colour(name), linestyle="--", linewidth=0.9, label=name)
    axes[0].set_yscale("log")
    axes[0].set_title(f"stress per layer {title}".strip())
    axes[0].set_ylabel("stress (log scale)")
    axes[1].set_title("scaled stress per layer")
    axes[1].set_ylabel("scaled stress")
    for axis in axes:
        axis.set_xlabel("layer (0 = embeddings)")
        axis.legend(fontsize=8)
    _save(figure, path)
    return figure


def training_curves(rows: list[dict[str, Any]], path: str | os.PathLike[str], subtitle: str = "") -> Any:
    """Loss and accuracy against step (train and eval) from a run's metrics.jsonl rows."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    steps = [row["step"] for row in rows]
    for axis, kind in ((axes[0], "loss"), (axes[1], "accuracy")):
        for split, colour in (("train", "tab:blue"), ("eval", "tab:orange")):
            values = [row.get(f"{split}_{kind}") for row in rows]
            points = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None and np.isfinite(v)]
            if points:
                axis.plot(*zip(*points, strict=True), marker="o", label=split, color=colour)
        axis.set_xlabel("step")
        axis.set_ylabel(kind)
        axis.set_title(f"{kind} during training")
        axis.legend()
    if subtitle:
        figure.suptitle(subtitle)
    _save(figure, path)
    return figure
