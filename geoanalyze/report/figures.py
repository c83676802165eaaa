"""PNG figures (matplotlib, Agg backend), written atomically."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io import atomic_path

if TYPE_CHECKING:
    from ..geometry.distances import PositionGeometry
    from ..geometry.mds import MDSResult


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure: Any, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    _pyplot().close(figure)


def distance_heatmap(geometry: PositionGeometry, path: str | os.PathLike[str]) -> None:
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
    _save(figure, path)


def mds_figure(result: MDSResult, curve: dict[int, float], positions: np.ndarray, path: str | os.PathLike[str]) -> None:
    """Eigen-spectrum, stress against rank, and the 2-D MDS map coloured by position."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.4), layout="constrained")
    values = result.eigenvalues_
    shown = values[: min(len(values), 128)]
    colours = np.where(shown > 0, "tab:blue", "tab:red")
    axes[0].bar(np.arange(1, len(shown) + 1), np.abs(shown), color=colours)
    axes[0].set_yscale("log")
    axes[0].set_title(f"eigen-spectrum (effective rank {result.effective_rank_}; red: negative)")
    axes[0].set_xlabel("component")
    axes[0].set_ylabel("|eigenvalue|")
    ranks = sorted(curve)
    axes[1].plot(ranks, [max(curve[r], 1e-18) for r in ranks], marker="o")
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
    figure.colorbar(scatter, ax=axes[2], label="position")
    _save(figure, path)


def shepard_diagram(tables: dict[str, np.ndarray], distances: np.ndarray, path: str | os.PathLike[str]) -> None:
    """Embedding distance against target distance for each encoding (scaled to the best fit)."""
    from scipy.spatial.distance import pdist, squareform

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    target = squareform(distances, checks=False)
    for name, table in tables.items():
        e = pdist(table)
        scale = float(e @ target / (e @ e)) if float(e @ e) > 0 else 1.0
        axis.scatter(target, scale * e, s=2, alpha=0.35, label=f"{name} (x{scale:.3g})")
    top = float(target.max()) if target.size else 1.0
    axis.plot([0, top], [0, top], color="black", linewidth=0.8)
    axis.set_xlabel("Hellinger distance between positions")
    axis.set_ylabel("embedding distance (best global scale)")
    axis.set_title("Shepard diagram")
    axis.legend(fontsize=7, markerscale=4)
    _save(figure, path)


def layer_figure(layers: list[dict[str, Any]], path: str | os.PathLike[str], title: str = "") -> None:
    """Stress and scaled stress per layer, one line per projection (query, key, hidden)."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for projection in sorted({row["projection"] for row in layers}):
        rows = sorted((row for row in layers if row["projection"] == projection), key=lambda row: row["layer"])
        x = [row["layer"] for row in rows]
        axes[0].plot(x, [row["stress"] for row in rows], marker="o", label=projection)
        axes[1].plot(x, [row["scaled_stress"] for row in rows], marker="o", label=projection)
    axes[0].set_yscale("log")
    axes[0].set_title(f"stress per layer {title}".strip())
    axes[1].set_title("scaled stress per layer")
    for axis in axes:
        axis.set_xlabel("layer (0 = embeddings)")
        axis.legend(fontsize=8)
    _save(figure, path)
