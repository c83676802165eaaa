"""One look for every figure: colours fixed per encoding, sizes, captions.

An encoding keeps its colour in every figure (the Shepard diagram, layer plots, experiment
figures), so a reader can follow `sinusoidal` from one PNG to the next.
"""

from __future__ import annotations

from typing import Any

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
