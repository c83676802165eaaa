"""PNG figures (matplotlib, Agg backend), written atomically; the look comes from :mod:`.style`.

Each function saves its PNG and returns the matplotlib Figure (closed), so a caller or a test
can read its axes, labels and lines.

When the corpus is synthetic (a ``synthetic:...`` spec, or a file with its true marginals beside
it, ``<name>.marginals.npy`` as in sample_corpora/), the analysis knows the exact distances
between the counted positions (:func:`geoanalyze.analysis.known_distances`, a stress result's
``truth``), and the distance, MDS and Shepard figures draw them beside the estimates, labelled
:data:`TRUE_LABEL`. Every figure draws what it is given; only :func:`distance_heatmap`, called
without ``truth``, looks the truth up itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import plotting as style
from ..analysis import known_distances
from ..plotting import pyplot as _pyplot
from ..plotting import save as _save

if TYPE_CHECKING:
    from ..geometry.distances import PositionGeometry
    from ..geometry.mds import MDSResult
    from ..geometry.windows import WindowScores


#: the legend label of every curve or point set drawn from a synthetic corpus's true marginals
TRUE_LABEL = "true (synthetic)"


def corpus_caption(geometry: PositionGeometry) -> str:
    """'<corpus>, <tokenizer> tokens' from the counts' metadata: what a figure without a target names."""
    metadata = geometry.metadata or {}
    names = ", ".join(str(c.get("name") or c.get("location")) for c in metadata.get("corpus") or [])
    tokenizer = (metadata.get("tokenizer") or {}).get("name")
    return ", ".join(part for part in (names, f"{tokenizer} tokens" if tokenizer else "") if part)


def _by_lag(matrix: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lags, mean of the finite entries at each lag |p_i - p_j| > 0) of a distance matrix."""
    i, j = np.triu_indices(len(positions), k=1)
    lag = np.abs(np.asarray(positions)[i] - np.asarray(positions)[j])
    values = matrix[i, j]
    finite = np.isfinite(values)
    lags = np.unique(lag[finite])
    return lags, np.array([values[finite & (lag == k)].mean() for k in lags])


def distance_heatmap(
    geometry: PositionGeometry, path: str | os.PathLike[str], subtitle: str = "", truth: Any = "known"
) -> Any:
    """Naive and corrected distance heatmaps side by side, and the noise floor per position.

    ``truth``: the exact distances (n x n, NaN where unknown), "known" to look them up
    (:func:`known_distances`), or None. When there are some, the signal panel draws the true
    d(i, anchor) too, and a fourth panel the mean naive, corrected and true distance by lag.

    Each heatmap has its own scale (the corrected distances are far smaller than the naive ones)
    over the pairs of distinct positions, leaving out the positions that share no token with any
    other (:func:`geoanalyze.plotting.isolated_positions`: [CLS], a fixed [SEP]), which saturate;
    the diagonal is masked, and d(anchor, anchor) = 0 is left out of the signal panel's curves.
    """
    if isinstance(truth, str):
        truth = known_distances(geometry)
    subtitle = subtitle or corpus_caption(geometry)
    plt = _pyplot()
    panels = 3 if truth is None else 4
    figure, axes = plt.subplots(1, panels, figsize=(16 if truth is None else 21, 4.6), layout="constrained")
    positions = geometry.positions
    extent = (positions[0] - 0.5, positions[-1] + 0.5, positions[-1] + 0.5, positions[0] - 0.5)
    label = "Hellinger" if geometry.metric == "hellinger" else "Fisher-Rao"
    isolated = style.isolated_positions(geometry.naive)
    for axis, matrix, title in (
        (axes[0], geometry.naive, f"naive {label}"),
        (axes[1], geometry.corrected, f"bias-corrected {label}"),
    ):
        style.heatmap(figure, axis, matrix, f"{title} distance", extent=extent, skip=isolated)
        axis.set_title(
            title + ("" if not isolated.size else f"\n(own scale; position {_listed(positions[isolated])} saturates)")
        )
        axis.set_xlabel("position j")
        axis.set_ylabel("position i")
    looks = style.Looks("true", "noise", "naive", "corrected")  # one look per curve in both panels
    _signal_panel(axes[2], geometry, truth, label, looks)
    if truth is not None:
        _lag_panel(axes[3], geometry, truth, label, looks)
    if subtitle:
        figure.suptitle(subtitle)
    _save(figure, path)
    return figure


def _listed(positions: np.ndarray) -> str:
    return ", ".join(str(p) for p in positions)


def _signal_panel(
    axis: Any, geometry: PositionGeometry, truth: np.ndarray | None, label: str, looks: style.Looks
) -> None:
    """The noise floor per position, and d(i, anchor) naive, corrected (and true), the anchor's own 0 left out."""
    positions = geometry.positions
    anchor = len(positions) // 2

    def row(matrix: np.ndarray) -> np.ndarray:
        values = np.array(matrix[anchor], dtype=float)
        values[anchor] = np.nan  # d(anchor, anchor) = 0 by definition: not a spike of the curve
        return values

    at = positions[anchor]
    style.series(axis, positions, geometry.noise_floor, looks("noise"), label="noise floor (split-half)")
    style.series(axis, positions, row(geometry.naive), looks("naive"), label=f"naive d(i, {at})")
    style.series(axis, positions, row(geometry.corrected), looks("corrected"), label=f"corrected d(i, {at})")
    if truth is not None:
        style.series(axis, positions, row(truth), looks("true"), label=f"{TRUE_LABEL} d(i, {at})")
    axis.set_xlabel("position i")
    axis.set_ylabel(f"{label} distance")
    axis.set_title(f"signal vs noise (snr {geometry.summary.get('snr', float('nan')):.3g})")
    axis.legend(fontsize=8)


def _lag_panel(axis: Any, geometry: PositionGeometry, truth: np.ndarray, label: str, looks: style.Looks) -> None:
    """The mean naive, corrected and true distance at each lag."""
    for matrix, name in (
        (geometry.naive, "naive (estimated)"),
        (geometry.corrected, "corrected (estimated)"),
        (truth, TRUE_LABEL),
    ):
        lags, means = _by_lag(matrix, geometry.positions)
        style.series(axis, lags, means, looks(name.split(" ")[0]), label=name)
    axis.set_xlabel("lag |i - j|")
    axis.set_ylabel(f"mean {label} distance")
    axis.set_title("estimated vs true distance by lag")
    axis.legend(fontsize=8)


def mds_figure(
    result: MDSResult,
    curve: dict[int, float],
    positions: np.ndarray,
    path: str | os.PathLike[str],
    rank: int | None = None,
    subtitle: str = "",
    truth: np.ndarray | None = None,
) -> Any:
    """Eigen-spectrum, stress against rank (the chosen rank marked), and the 2-D MDS map coloured by position.

    ``truth``: the exact distances of a synthetic corpus (:func:`known_distances`); the eigenvalues
    of their classical MDS are drawn over the spectrum, labelled :data:`TRUE_LABEL`.

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
    positive = significant & (shown > 0)
    axes[0].bar(index[positive], shown[positive], color=style.PALETTE[0], label="positive")
    negative = significant & (shown < 0)
    if negative.any():
        axes[0].bar(
            index[negative], -shown[negative], color=style.PALETTE[1], hatch="//", label="negative (non-Euclidean part)"
        )
    if truth is not None:
        true_values = true_eigenvalues(truth)[: len(shown)]
        keep = true_values > tolerance
        where = np.arange(1, len(true_values) + 1)[keep]
        style.series(axes[0], where, true_values[keep], style.TRUE_LOOK, label=TRUE_LABEL, linewidth=0.8)
    axes[0].set_yscale("log")
    axes[0].set_title(f"eigen-spectrum (effective rank {result.effective_rank_})")
    axes[0].set_xlabel("component")
    axes[0].set_ylabel("|eigenvalue|")
    axes[0].legend()
    ranks = sorted(curve)
    top = max((curve[r] for r in ranks), default=1.0) or 1.0
    kept = [r for r in ranks if curve[r] > 1e-12 * top]
    style.series(axes[1], kept, [curve[r] for r in kept], style.Looks()("mds"))
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
    axes[2].plot(coords[:, 0], y, color=style.GREY, linewidth=0.4, alpha=0.6)
    axes[2].set_title("MDS map (first two coordinates)")
    axes[2].set_xlabel("MDS coordinate 1")
    axes[2].set_ylabel("MDS coordinate 2")
    figure.colorbar(scatter, ax=axes[2], label="position (token index)")
    if subtitle:
        figure.suptitle(subtitle)
    _save(figure, path)
    return figure


def true_eigenvalues(truth: np.ndarray) -> np.ndarray:
    """The eigenvalues (descending) of the classical MDS of the exact distances, over their known positions."""
    from ..geometry.mds import classical_mds

    known = np.isfinite(np.diag(truth)) & np.isfinite(truth).any(axis=1)
    return np.asarray(classical_mds(truth[np.ix_(known, known)]).eigenvalues_)


def shepard_diagram(
    tables: dict[str, np.ndarray],
    distances: np.ndarray,
    path: str | os.PathLike[str],
    subtitle: str = "",
    truth: np.ndarray | None = None,
) -> Any:
    """Embedding distance against target distance for each encoding (scaled to the best fit).

    Encodings with the same distances (sinusoidal and RoPE at one width) are drawn once, labelled
    with every name, so none hides behind another; each keeps its colour from :mod:`.style`.
    ``truth``: the exact distances of a synthetic corpus (:func:`known_distances`), drawn as the
    points (estimated, true) labelled :data:`TRUE_LABEL`: where an encoding of the true geometry lies.
    """
    from scipy.spatial.distance import squareform

    from ..geometry.scores import fitted_distances

    target = squareform(distances, checks=False)
    fitted = {name: fitted_distances(table, target) for name, table in tables.items()}
    exact = None if truth is None else squareform(np.nan_to_num(truth, nan=-1.0), checks=False)
    return style.shepard_diagram(target, fitted, path, subtitle, exact, TRUE_LABEL)


def layer_figure(
    layers: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    title: str = "",
    references: dict[str, dict[str, float]] | None = None,
    shape_not_ranked: str | None = None,
) -> Any:
    """Stress and scaled stress per layer, one line per projection, with reference lines.

    ``references``: name -> {"stress": ..., "scaled_stress": ...} drawn as dashed horizontal lines
    (the target's mean over its position shuffles, the sinusoidal table's scores). ``shape_not_ranked``:
    why this corpus cannot rank shapes, when it cannot: the scaled-stress panel says so in its title.
    """
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    looks = style.Looks(*dict.fromkeys(row["projection"] for row in layers), *(references or {}))
    for projection in dict.fromkeys(row["projection"] for row in layers):  # in the table's order
        rows = sorted((row for row in layers if row["projection"] == projection), key=lambda row: row["layer"])
        x = [row["layer"] for row in rows]
        look = looks(projection)
        style.series(axes[0], x, [row["stress"] for row in rows], look, label=projection)
        style.series(axes[1], x, [row["scaled_stress"] for row in rows], look, label=projection)
    for name, values in (references or {}).items():
        look = looks(name)
        for axis, key in ((axes[0], "stress"), (axes[1], "scaled_stress")):
            value = values.get(key)
            if value is not None and np.isfinite(value) and (key != "stress" or value > 0):
                axis.axhline(value, color=look.colour, linestyle="--", linewidth=0.9, label=name)
    axes[0].set_yscale("log")
    axes[0].set_title(f"stress per layer {title}".strip())
    axes[0].set_ylabel("stress (log scale)")
    axes[1].set_title(
        "scaled stress per layer" + ("\n(this corpus cannot rank shapes: see the verdict)" if shape_not_ranked else "")
    )
    axes[1].set_ylabel("scaled stress")
    for axis in axes:
        axis.set_xlabel("layer (0 = embeddings)")
        axis.legend(fontsize=8)
    _save(figure, path)
    return figure


#: marker and colour of each category in the null figure
CATEGORY_STYLE = {
    "better": ("o", style.PALETTE[2]),
    "indistinguishable": ("s", style.PALETTE[0]),
    "worse": ("X", style.PALETTE[1]),
    "undecided": ("d", style.PALETTE[4]),
}


def null_figure(
    scores: Mapping[str, Mapping[str, Any]],
    aspects: dict[str, str],
    path: str | os.PathLike[str],
    subtitle: str = "",
    not_ranked: dict[str, str] | None = None,
) -> Any:
    """Every tested score of every encoding: one panel per aspect, one row per encoding; for scaled stress
    the range over its own position shuffles as a grey bar; its own score as a marker whose
    shape and colour say the category. A panel the corpus cannot rank on says so in its title.
    """
    plt = _pyplot()
    names = list(scores)
    figure, axes = plt.subplots(
        1, len(aspects), figsize=(2.6 * len(aspects) + 1.5, 0.45 * len(names) + 1.6), layout="constrained", sharey=True
    )
    seen: set[str] = set()
    for axis, (aspect, key) in zip(np.atleast_1d(axes), aspects.items(), strict=True):
        for row, name in enumerate(names):
            entry = scores[name]
            null = entry.get("null", {}).get(key)
            value = entry.get(key)
            if null is None or value is None or not np.isfinite(value):
                continue
            if key == "scaled_stress":  # the one test whose statistic is the score itself
                axis.plot([null["low"], null["high"]], [row, row], color=style.GREY, linewidth=6,
                          solid_capstyle="butt", label="its position shuffles (range)" if "null" not in seen else None)  # fmt: skip
                seen.add("null")
            category = null.get("category", "undecided")
            marker, colour = CATEGORY_STYLE.get(category, CATEGORY_STYLE["undecided"])
            axis.plot([value], [row], linestyle="none", marker=marker, color=colour, markersize=7,
                      label=category if category not in seen else None)  # fmt: skip
            seen.add(category)
        title = aspect.replace("_", " ")
        if not_ranked and aspect in not_ranked:
            title += "\n(this corpus cannot rank it)"
        axis.set_title(title)
        axis.set_xlabel(key.replace("_", " "))
    first = np.atleast_1d(axes)[0]
    first.set_yticks(range(len(names)), [name if len(name) <= 24 else name[:11] + "…" + name[-12:] for name in names])
    first.invert_yaxis()
    figure.suptitle(f"scores; marker: category against each row's own position shuffles {subtitle}".strip())
    handles = {
        label: handle
        for axis in np.atleast_1d(axes)
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True)
    }
    figure.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=5, fontsize=8)
    _save(figure, path)
    return figure


def window_lines(windows: Mapping[str, WindowScores]) -> dict[str, dict[str, Any]]:
    """What :func:`window_figure` draws per table: x (each window's geometric centre), y (its scaled stress),
    filled (better than its shuffles), and the training length (None: not known)."""
    lines = {}
    for name, found in windows.items():
        starts, ends = np.asarray(found.starts, dtype=float), np.asarray(found.ends, dtype=float)
        lines[name] = {
            "x": np.sqrt((starts + 1) * ends) - 0.5,
            "y": np.asarray(found.scores, dtype=float),
            "filled": np.asarray([c == "better" for c in found.categories]),
            "training_length": found.training_length,
        }
    return lines


def window_figure(windows: Mapping[str, WindowScores], path: str | os.PathLike[str], subtitle: str = "") -> Any:
    """Scaled stress against position (log x): one line per table, a marker per window, filled where the
    window is better than its own position shuffles (Holm) and hollow where not, the shuffles' mean (the null)
    dotted in the table's colour; the training length of a scaled encoding (``original=``) as a dashed
    vertical line."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(8, 4.5), layout="constrained")
    lines = window_lines(windows)
    looks = style.Looks(*lines)
    marked: set[int] = set()
    for name, line in lines.items():
        look = looks(name)
        axis.plot(line["x"], line["y"], color=look.colour, linestyle=look.linestyle, linewidth=1.2, marker=look.marker,
                  markerfacecolor="none", label=name)  # fmt: skip
        keep = line["filled"]  # better than its shuffles: the marker filled in
        axis.plot(line["x"][keep], line["y"][keep], linestyle="none", marker=look.marker, color=look.colour)
        # the null it is tested against: the mean scaled stress of its own shuffles in each window
        axis.plot(line["x"], np.asarray(windows[name].null_means, dtype=float), color=look.colour, linestyle=":",
                  linewidth=0.8, alpha=0.6)  # fmt: skip
        length = line["training_length"]
        if length is not None and length not in marked:
            axis.axvline(length, color=look.colour, linestyle="--", linewidth=1, label=f"training length {length}")
            marked.add(length)
    axis.plot([], [], linestyle="none", marker="o", color=style.GREY, label="better than its shuffles")
    axis.plot([], [], linestyle="none", marker="o", color=style.GREY, markerfacecolor="white",
              label="not better (or undecided)")  # fmt: skip
    axis.plot([], [], color=style.GREY, linestyle=":", linewidth=0.8, label="its shuffles' mean (the null)")
    axis.set_xscale("log")
    axis.set_xlabel("position (window centre, log scale)")
    axis.set_ylabel("scaled stress in the window (lower is better)")
    axis.set_title(f"scores against position {subtitle}".strip())
    axis.legend(fontsize=8)
    _save(figure, path)
    return figure


def training_curves(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], subtitle: str = "") -> Any:
    """Loss and accuracy against step (train and eval) from a run's metrics.jsonl rows."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    steps = [row["step"] for row in rows]
    looks = style.Looks()
    for axis, kind in ((axes[0], "loss"), (axes[1], "accuracy")):
        for split in ("train", "eval"):
            values = [row.get(f"{split}_{kind}") for row in rows]
            points = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None and np.isfinite(v)]
            if points:
                xs, ys = zip(*points, strict=True)
                style.series(axis, xs, ys, looks(split), label=split)
        axis.set_xlabel("step")
        axis.set_ylabel(kind)
        axis.set_title(f"{kind} during training")
        axis.legend()
    if subtitle:
        figure.suptitle(subtitle)
    _save(figure, path)
    return figure
