"""Every figure's pyplot, look and atomic save: colours fixed per encoding, sizes, captions.

The bottom layer for figures: the report and the experiments draw with :func:`pyplot` and write
with :func:`save`, so every PNG has one look and is never left half-written.

An encoding keeps its colour in every figure (the Shepard diagram, layer plots, experiment
figures), so a reader can follow `sinusoidal` from one PNG to the next.
"""

from __future__ import annotations

import os
from typing import Any

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
