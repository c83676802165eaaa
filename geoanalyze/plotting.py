"""Every figure's pyplot, look and atomic save: colours fixed per encoding, sizes, captions.

The bottom layer for figures: the report and the experiments draw with :func:`pyplot` and write
with :func:`save`, so every PNG has one look and is never left half-written.

An encoding keeps its colour in every figure (the Shepard diagram, layer plots, experiment
figures), so a reader can follow `sinusoidal` from one PNG to the next.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .io import atomic_path

#: colour of each encoding family (the part of a spec before ':'); others cycle through SPARE
FAMILY_COLOURS = {
    "target": "black",
    "sinusoidal": "tab:blue",
    "rope": "tab:orange",
    "alibi": "tab:green",
    "mds": "tab:purple",
    "random": "tab:grey",
    "learned": "tab:brown",
    "model": "tab:brown",
    "file": "tab:olive",
    "query": "tab:red",
    "key": "tab:cyan",
    "hidden": "tab:pink",
    "P·W_Q": "tab:red",
    "P·W_K": "tab:cyan",
    "null": "tab:grey",
}
SPARE = ("tab:brown", "tab:olive", "tab:cyan", "tab:pink", "tab:red")
RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 120,
}


def colour(name: str, index: int = 0) -> str:
    """The colour of an encoding or projection name; a name of no known family gets a spare one."""
    return FAMILY_COLOURS.get(name, FAMILY_COLOURS.get(name.split(":")[0], SPARE[index % len(SPARE)]))


def apply(plt: Any) -> None:
    """Set the shared look (called once per figure, before drawing)."""
    plt.rcParams.update(RC)


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


def save(figure: Any, path: str | os.PathLike[str]) -> None:
    """Write a figure as PNG atomically (a crash leaves no half-written file) and close it."""
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    pyplot().close(figure)


def shepard_diagram(
    target: np.ndarray,
    fitted: Mapping[str, np.ndarray],
    path: str | os.PathLike[str],
    subtitle: str = "",
    exact: np.ndarray | None = None,
    exact_label: str = "",
) -> Any:
    """Embedding distance against target distance (both condensed), one scatter per encoding.

    ``fitted``: each encoding's distances at the best global scale. Encodings with the same
    distances (sinusoidal and RoPE at one width) are drawn once, labelled with every name, so none
    hides behind another; each keeps its family's colour. ``exact``: known true distances (NaN or
    negative where unknown), drawn as the points (estimated, true) labelled ``exact_label``. The
    diagonal is where an exact encoding lies.
    """
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    groups: list[tuple[list[str], np.ndarray]] = []
    for name, distances in fitted.items():
        same = next((group for group in groups if np.allclose(group[1], distances, rtol=1e-9, atol=1e-12)), None)
        if same is not None:
            same[0].append(name)
        else:
            groups.append(([name], distances))
    for index, (names, distances) in enumerate(groups):
        axis.scatter(target, distances, s=2, alpha=0.35, color=colour(names[0], index), label=" = ".join(names))
    if exact is not None:
        known = exact >= 0
        axis.scatter(target[known], exact[known], s=4, marker="x", color="black", alpha=0.6, label=exact_label)
    top = float(target.max()) if target.size else 1.0
    axis.plot([0, top], [0, top], color="black", linewidth=0.8)
    axis.set_xlabel("Hellinger distance between positions")
    axis.set_ylabel("embedding distance (best global scale)")
    axis.set_title(f"Shepard diagram{': ' + subtitle if subtitle else ''}")
    axis.legend(markerscale=4)
    save(figure, path)
    return figure
