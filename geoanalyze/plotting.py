"""Every figure's pyplot, look and atomic save: one style module for every PNG the tool draws.

The bottom layer for figures: the report and the experiments draw with :func:`pyplot`, give each
series its :class:`Look` from a figure's :class:`Looks`, draw curves with :func:`series`,
matrices with :func:`heatmap` and write with :func:`save`, so every PNG has one look and is never
left half-written. The rules a reviewer reads a figure by are written down once, in
:func:`audit`, and a test applies it to every figure the commands draw:

- each series has its own colour, marker and line style (Okabe and Ito's colour-blind-safe
  palette, :data:`PALETTE`), and an encoding keeps its look in every figure (the Shepard
  diagram, layer plots, experiment figures), so a reader can follow `sinusoidal` from one PNG
  to the next;
- a series of one point is drawn as a point, never as a line of one point (which draws nothing);
- every panel and colour bar is labelled, every matrix on its own scale, with no grid over it;
- no title or label names a staging folder (``.partial``, ``.staged``): figures are drawn
  before their folder is moved into place.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .io import atomic_path

#: Okabe and Ito's colour-blind-safe palette (B. Wong, Nature Methods 8, 441, 2011): blue,
#: vermillion, bluish green, reddish purple, orange, sky blue, black; yellow last (faint on white)
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
GREY = "#999999"  # the null (position shuffles): the reference every score is read against
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":")


@dataclass(frozen=True)
class Look:
    """How one series is drawn: its colour, marker and line style."""

    colour: str
    marker: str
    linestyle: str

    def line(self) -> dict[str, str]:
        """Keyword arguments of ``axis.plot`` for a curve in this look."""
        return {"color": self.colour, "marker": self.marker, "linestyle": self.linestyle}

    def points(self) -> dict[str, str]:
        """Keyword arguments of ``axis.plot`` for points alone (no line) in this look."""
        return {"color": self.colour, "marker": self.marker, "linestyle": "none"}


def cycle_look(index: int) -> Look:
    """The index-th look of the cycle: colour, marker and line style cycle with coprime periods
    (8, 7, 4), so the first 56 looks differ in all three together and the first 7 in each."""
    return Look(PALETTE[index % len(PALETTE)], MARKERS[index % len(MARKERS)], LINESTYLES[index % len(LINESTYLES)])


#: the look of the exact distances of a synthetic corpus, beside the estimates
TRUE_LOOK = Look("#000000", "x", "--")
#: the look of each encoding family (the part of a spec before ':') and each layer projection
FAMILY_LOOKS = {
    "target": Look("#000000", "o", "-"),
    "sinusoidal": Look(PALETTE[0], "o", "-"),
    "rope": Look(PALETTE[1], "s", "--"),
    "alibi": Look(PALETTE[2], "^", "-."),
    "mds": Look(PALETTE[3], "D", ":"),
    "random": Look(GREY, "v", "--"),
    "null": Look(GREY, "v", "--"),
    "learned": Look(PALETTE[4], "P", "-"),
    "model": Look(PALETTE[4], "P", "-"),
    "file": Look(PALETTE[5], "X", "--"),
    "query": Look(PALETTE[1], "o", "-"),
    "key": Look(PALETTE[5], "s", "-"),
    "hidden": Look(PALETTE[2], "^", "-"),
    "P·W_Q": Look(PALETTE[3], "D", "--"),
    "P·W_K": Look(PALETTE[4], "v", "--"),
    "true": TRUE_LOOK,  # the exact distances of a synthetic corpus
}
RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 120,
    "lines.markersize": 4.5,
}
#: a tick label that is a number (matplotlib's mathtext and minus sign included), not a category name
NUMBER = re.compile(r"[\s$\\{}\d.,eE+\-\u2212^×]*")
#: what a staging folder's name holds (cli.training's ``.<name>.<pid>.partial``, train's ``.staged``)
STAGING_MARKS = (".partial", ".staged")


def family_look(name: str) -> Look | None:
    """The fixed look of an encoding or projection name (``rope:d=64`` -> rope's), or None."""
    return FAMILY_LOOKS.get(name, FAMILY_LOOKS.get(name.split(":")[0]))


def colour(name: str, index: int = 0) -> str:
    """The colour of an encoding or projection name; a name of no known family gets the palette's index-th."""
    own = family_look(name)
    return own.colour if own is not None else PALETTE[index % len(PALETTE)]


class Looks:
    """The looks of one figure's series: one per name, the same name the same look in every panel,
    no two names alike. A name gets its family's look unless another name holds it, else a look of
    the cycle that is no family's and whose colour and marker are both still free (failing that, one
    that is no family's and not taken), the earliest colour of the palette first."""

    def __init__(self, *names: str) -> None:
        """``names``: the series the figure will draw, when known: those of a family take their
        family's look first, so that a name drawn before them cannot take their colour."""
        self.assigned: dict[str, Look] = {}
        for name in sorted(names, key=lambda name: family_look(name) is None):
            self(name)

    def __call__(self, name: str) -> Look:
        if name in self.assigned:
            return self.assigned[name]
        taken = set(self.assigned.values())
        own = family_look(name)
        if own is None or own in taken:
            colours, markers = {look.colour for look in taken}, {look.marker for look in taken}
            families = set(FAMILY_LOOKS.values())  # never a family's look: sinusoidal stays sinusoidal's
            candidates = [cycle_look(i) for i in range(len(PALETTE) * len(MARKERS) * len(LINESTYLES))]
            candidates = [look for look in candidates if look not in families and look not in taken]
            free = [look for look in candidates if look.colour not in colours and look.marker not in markers]
            own = min(free or candidates, key=lambda look: PALETTE.index(look.colour))  # in palette order: yellow last
        self.assigned[name] = own
        return own


def apply(plt: Any) -> None:
    """Set the shared look (called once per figure, before drawing)."""
    plt.rcParams.update(RC)
    plt.rcParams["axes.prop_cycle"] = plt.cycler(color=PALETTE)  # a colour left to matplotlib is one of ours


def caption(target: str | None = None, corpus: str | None = None) -> str:
    """'<target> on <corpus>', the line every analysis figure names itself with."""
    return " on ".join(part for part in (target, corpus) if part)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, with the shared look applied."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    apply(plt)
    return plt


# Recorders of the figures saved while they are open (see recording()); a list, so nesting works.
_RECORDERS: list[list[tuple[str, Any]]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[str, Any]]]:
    """Collect ``(path, Figure)`` of every figure :func:`save` writes inside the block.

    How a test reads what a command drew through matplotlib's objects (axes, lines, colour bars)
    instead of the PNG's bytes; the Figure is closed but keeps every artist.
    """
    saved: list[tuple[str, Any]] = []
    _RECORDERS.append(saved)
    try:
        yield saved
    finally:
        _RECORDERS[:] = [other for other in _RECORDERS if other is not saved]  # by identity: [] == []


def save(figure: Any, path: str | os.PathLike[str]) -> None:
    """Write a figure as PNG atomically (a crash leaves no half-written file) and close it."""
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    pyplot().close(figure)
    for saved in _RECORDERS:
        saved.append((str(path), figure))


def series(axis: Any, x: ArrayLike, y: ArrayLike, look: Look, label: str | None = None, **extra: Any) -> Any:
    """One series as a line with markers in its look; a series with a single finite point is drawn
    as that point alone, a hollow marker (a line of one point draws nothing). Returns the Line2D."""
    ys = np.asarray(y, dtype=float)
    style: dict[str, Any] = look.line()
    if np.isfinite(ys).sum() == 1:  # hollow and larger, so that points at one place stay apart
        style = {**look.points(), "markerfacecolor": "none", "markersize": 7, "markeredgewidth": 1.3}
    if len(ys) > 24:  # a marker on every tenth point: enough to tell the series apart, not a smear
        style["markevery"] = max(1, len(ys) // 10)
    return axis.plot(np.asarray(x), ys, label=label, **{**style, **extra})[0]


def single_points(runs: Mapping[str, Sequence[Sequence[Any]]]) -> bool:
    """Whether every run of every series holds one point (a smoke run's single evaluation)."""
    lengths = [len(run) for per_name in runs.values() for run in per_name]
    return bool(lengths) and max(lengths) == 1


def dot_plot(axis: Any, values: Mapping[str, Sequence[float]], looks: Looks, xlabel: str) -> None:
    """One column per name with its values (one per seed) as points of its look: the figure of
    series that each hold one point, read by name rather than along an axis of one step."""
    for index, (name, ys) in enumerate(values.items()):
        axis.plot([index] * len(ys), ys, label=name, **looks(name).points())
    axis.set_xticks(range(len(values)), list(values), rotation=20, ha="right")
    axis.set_xlabel(xlabel)


def isolated_positions(matrix: np.ndarray, atol: float = 1e-9) -> np.ndarray:
    """Indices of the positions at the matrix's largest distance from every other position: a
    position that shares no token with any other ([CLS] at 0, a fixed [SEP]). Their pairs sit at
    the maximum whatever the rest does, so a scale or a scatter that includes them hides the rest."""
    values = np.asarray(matrix, dtype=float)
    n = len(values)
    if n < 3:
        return np.zeros(0, dtype=int)
    off = values[~np.eye(n, dtype=bool)].reshape(n, n - 1)
    top = np.nanmax(off) if np.isfinite(off).any() else np.nan
    if not np.isfinite(top) or top <= 0:
        return np.zeros(0, dtype=int)
    at_top = np.all(np.isclose(off, top, rtol=0.0, atol=atol) | ~np.isfinite(off), axis=1)
    return np.flatnonzero(at_top) if at_top.sum() < n - 1 else np.zeros(0, dtype=int)


def heatmap(
    figure: Any,
    axis: Any,
    matrix: np.ndarray,
    label: str,
    extent: Any = None,
    skip: ArrayLike = (),
    cmap: str = "viridis",
) -> Any:
    """A distance matrix as an image on its own scale, with a labelled colour bar and no grid over it.

    The scale runs from the 1st to the 99th percentile of the off-diagonal entries, so that a few
    extreme rows (the last position, reached by few sequences) do not squash the rest; entries
    beyond it saturate, and the colour bar's arrows say so. The diagonal (each position's distance
    to itself, 0 by definition) is masked, drawn in the colour of missing values (light grey);
    the rows and columns ``skip`` (:func:`isolated_positions`) are drawn but left out of the scale.
    """
    values = np.array(matrix, dtype=float)
    np.fill_diagonal(values, np.nan)
    keep = np.ones(len(values), dtype=bool)
    keep[np.asarray(skip, dtype=int)] = False
    scaled = values[np.ix_(keep, keep)]
    finite = scaled[np.isfinite(scaled)]
    low, high = (float(np.percentile(finite, 1)), float(np.percentile(finite, 99))) if finite.size else (0.0, 1.0)
    if high <= low:
        high = low + 1.0
    import matplotlib

    palette = matplotlib.colormaps[cmap].with_extremes(bad="0.85")
    image = axis.imshow(values, cmap=palette, vmin=low, vmax=high, extent=extent, interpolation="nearest")
    axis.grid(False)
    over, under = np.nanmax(values) > high, np.nanmin(values) < low
    extend = {(True, True): "both", (True, False): "max", (False, True): "min"}.get((over, under), "neither")
    figure.colorbar(image, ax=axis, label=label, extend=extend)
    return image


#: points a Shepard diagram draws per encoding at most (a random subset beyond: 512 positions are 130816 pairs)
SHEPARD_POINTS = 20000


def shepard_diagram(
    target: np.ndarray,
    fitted: Mapping[str, np.ndarray],
    path: str | os.PathLike[str],
    subtitle: str = "",
    exact: np.ndarray | None = None,
    exact_label: str = "",
) -> Any:
    """Embedding distance against target distance (both condensed), one point cloud per encoding
    and its median in each of 20 bins of target distance as a line of its look.

    ``fitted``: each encoding's distances at the best global scale. Encodings with the same
    distances (sinusoidal and RoPE at one width) are drawn once, labelled with every name, so none
    hides behind another. The pairs with an isolated position (:func:`isolated_positions`, e.g.
    [CLS] at 0: target distance at its maximum whatever the encoding does) are drawn hollow, apart
    from the cloud and its medians; beyond :data:`SHEPARD_POINTS` pairs a random subset is drawn,
    lighter the more points there are. ``exact``: known true distances (NaN or negative where
    unknown), drawn as the points (estimated, true) labelled ``exact_label``. The diagonal is where
    an exact encoding lies.
    """
    from scipy.spatial.distance import squareform

    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    target = np.asarray(target, dtype=float)
    square = squareform(target, checks=False)
    isolated = isolated_positions(square)
    i, j = np.triu_indices(len(square), k=1)  # squareform's order of the condensed pairs
    apart = np.isin(i, isolated) | np.isin(j, isolated)
    drawn = _shepard_sample(len(target))
    crowd = np.sqrt(2000 / max(drawn.size, 1))  # > 1: few points, drawn larger and darker
    alpha, size = float(np.clip(0.35 * crowd, 0.08, 0.6)), float(np.clip(6 * crowd, 2, 12))
    groups = _same_distances(fitted)
    looks = Looks(*(names[0] for names, _ in groups))
    for index, (names, distances) in enumerate(groups):
        look = looks(names[0])
        cloud = drawn[~apart[drawn]]
        axis.scatter(
            target[cloud], distances[cloud], s=size, alpha=alpha, color=look.colour, marker=look.marker, linewidths=0
        )
        _binned_median(axis, target[~apart], distances[~apart], look, " = ".join(names))
        if apart.any():
            hollow = drawn[apart[drawn]]
            shown = f"pairs with position {', '.join(str(p) for p in isolated)} (no token shared)"
            axis.scatter(target[hollow], distances[hollow], s=10, facecolors="none", edgecolors=look.colour,
                         marker=look.marker, linewidths=0.6, label=shown if index == 0 else None)  # fmt: skip
    if exact is not None:
        known = drawn[exact[drawn] >= 0]
        axis.scatter(target[known], exact[known], s=4, marker="x", color="black", alpha=0.6, label=exact_label)
    top = float(target.max()) if target.size else 1.0
    axis.plot([0, top], [0, top], color="black", linewidth=0.8)
    axis.set_xlabel("corpus distance between positions (the target D)")
    axis.set_ylabel("embedding distance (best global scale)")
    axis.set_title(f"Shepard diagram{': ' + subtitle if subtitle else ''}")
    sampled = f"; {drawn.size} of {len(target)} pairs drawn" if drawn.size < len(target) else ""
    axis.legend(title=f"lines: median per distance bin{sampled}", title_fontsize=7)
    save(figure, path)
    return figure


def _same_distances(fitted: Mapping[str, np.ndarray]) -> list[tuple[list[str], np.ndarray]]:
    """The encodings grouped by equal distances (to round-off), in order, each group once."""
    groups: list[tuple[list[str], np.ndarray]] = []
    for name, distances in fitted.items():
        same = next((group for group in groups if np.allclose(group[1], distances, rtol=1e-9, atol=1e-12)), None)
        if same is not None:
            same[0].append(name)
        else:
            groups.append(([name], np.asarray(distances, dtype=float)))
    return groups


def _shepard_sample(pairs: int) -> np.ndarray:
    """The pairs a Shepard diagram draws: all, or a fixed random subset of SHEPARD_POINTS, sorted."""
    if pairs <= SHEPARD_POINTS:
        return np.arange(pairs)
    return np.sort(np.random.default_rng(0).choice(pairs, SHEPARD_POINTS, replace=False))


def _binned_median(axis: Any, x: np.ndarray, y: np.ndarray, look: Look, label: str, bins: int = 20) -> None:
    """The median of y in each of ``bins`` equal bins of x (bins of under 3 points left out), as a series."""
    if not x.size:
        return
    edges = np.linspace(float(x.min()), float(x.max()), bins + 1)
    which = np.clip(np.digitize(x, edges[1:-1]), 0, bins - 1)
    centres, medians = [], []
    for b in range(bins):
        inside = y[which == b]
        if inside.size >= 3:
            centres.append(0.5 * (edges[b] + edges[b + 1]))
            medians.append(float(np.median(inside)))
    series(axis, centres, medians, look, label=label, linewidth=1.4, markersize=3.5)


# --- the reviewer's rules, as a function ------------------------------------------------------------


def audit(figure: Any) -> list[str]:
    """What a reviewer would send back about a figure, one line each (empty: it passes).

    Per panel: no two named series alike in colour, marker and line style together; no series of
    one point drawn as a line only; axes labelled (a y axis of category names, or shared with a
    labelled one, needs none); no empty panel; several series named in a legend. Per image: a
    labelled colour bar, no grid drawn over it, and a scale its values fill (their middle 90% span
    at least a quarter of it). Anywhere: no text naming a staging folder (:data:`STAGING_MARKS`).
    """
    import matplotlib.text

    bars = _colour_bars(figure)
    problems: list[str] = []
    for number, axis in enumerate(figure.axes, 1):
        name = f"panel {number} ({axis.get_title() or axis.get_ylabel() or 'untitled'})"
        if axis in bars:
            if not (axis.get_ylabel() or axis.get_xlabel()):
                problems.append(f"{name}: a colour bar without a label")
            continue
        if axis.get_visible() and axis.axison:
            problems += [f"{name}: {problem}" for problem in _panel_problems(axis, figure)]
    for text in figure.findobj(matplotlib.text.Text):
        if any(mark in text.get_text() for mark in STAGING_MARKS):
            problems.append(f"a text names a staging folder: {text.get_text()!r}")
    return problems


def _colour_bars(figure: Any) -> set[Any]:
    """The axes of the figure's colour bars (each mappable that has one knows it)."""
    return {
        artist.colorbar.ax
        for axis in figure.axes
        for artist in [*axis.images, *axis.collections]
        if getattr(artist, "colorbar", None) is not None
    }


def _panel_problems(axis: Any, figure: Any) -> list[str]:
    """The rules of :func:`audit` for one data panel."""
    problems: list[str] = []
    if not (axis.lines or axis.collections or axis.images or axis.patches):
        return ["an empty panel"]
    if not axis.get_xlabel():
        problems.append("no x label")
    if not _y_named(axis):
        problems.append("no y label")
    seen: dict[tuple[Any, ...], str] = {}
    for label, key in _named_series(axis):
        if key in seen:
            problems.append(f"series {seen[key]!r} and {label!r} share colour, marker and line style")
        seen.setdefault(key, label)
    for line in axis.lines:
        ys = np.asarray(line.get_ydata(), dtype=float)
        if np.isfinite(ys).sum() == 1 and _marker(line.get_marker()) == "none":
            problems.append(f"series {line.get_label()!r} is one point drawn as a line (nothing shows)")
    if len(seen) >= 2 and axis.get_legend() is None and not figure.legends:
        problems.append("several series and no legend")
    for image in axis.images:
        problems += _image_problems(axis, image)
    return problems


def _y_named(axis: Any) -> bool:
    """Whether the panel's y axis says what it shows: a label, category names, or a labelled sibling."""
    for each in axis.get_shared_y_axes().get_siblings(axis):
        names = [tick.get_text() for tick in each.get_yticklabels()]
        numbers = [NUMBER.fullmatch(re.sub("mathdefault|times", "", name)) for name in names]
        if each.get_ylabel() or any(name and not number for name, number in zip(names, numbers, strict=True)):
            return True
    return False


def _named_series(axis: Any) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(label, (colour, marker, line style)) of each series the legend would name."""
    from matplotlib.colors import to_rgba

    for line in axis.lines:
        if _named(line.get_label()):
            style = line.get_linestyle() if line.get_linestyle() not in ("None", "none", "") else "none"
            yield line.get_label(), (_rgba(to_rgba(line.get_color())), _marker(line.get_marker()), style)
    for collection in axis.collections:
        if _named(collection.get_label()) and len(collection.get_facecolors()):
            paths = collection.get_paths()
            shape = tuple(np.round(paths[0].vertices, 3).ravel()) if paths else ()
            yield collection.get_label(), (_rgba(collection.get_facecolors()[0]), shape, "none")
    for container in axis.containers:
        if _named(container.get_label()) and len(container.patches):
            patch = container.patches[0]
            yield container.get_label(), (_rgba(patch.get_facecolor()), "bar", patch.get_hatch() or "")


def _named(label: Any) -> bool:
    return bool(label) and not str(label).startswith("_")


def _rgba(value: Any) -> tuple[float, ...]:
    return tuple(round(float(c), 3) for c in value)


def _marker(marker: Any) -> str:
    return "none" if marker in (None, "", " ", "None", "none") else str(marker)


def _image_problems(axis: Any, image: Any) -> list[str]:
    """An image's colour bar, grid and scale."""
    problems: list[str] = []
    if getattr(image, "colorbar", None) is None:
        problems.append("an image without a colour bar")
    if any(line.get_visible() for line in [*axis.get_xgridlines(), *axis.get_ygridlines()]):
        problems.append("grid lines drawn over an image")
    values: np.ndarray = np.ma.filled(np.ma.masked_invalid(np.ma.asarray(image.get_array(), dtype=float)), np.nan)
    finite = values[np.isfinite(values)]
    low, high = image.get_clim()
    if finite.size and high > low:
        middle = np.percentile(finite, 95) - np.percentile(finite, 5)
        if middle < 0.25 * (high - low):
            problems.append(
                f"the middle 90% of the image's values span {middle:.3g} of a colour scale of {high - low:.3g}"
            )
    return problems
