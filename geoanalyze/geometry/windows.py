r"""Scores against position: the scaled stress of a table within log-spaced windows of the scored positions.

The scored positions are cut into ``count`` windows [a, b) whose edges are log-spaced between the first
position and one past the last (:func:`window_edges`); every position falls in exactly one window. Within
a window, a table's rows and D's entries between that window's positions give its scaled stress (the
window's pairs only), held against the position-shuffle null of that window (geometry/shuffle.py: the
window's rows shuffled among themselves). The tests of every window of every table are one family,
adjusted by Holm's step-down method. A window of fewer than :data:`MIN_POSITIONS` positions is
undecided; one of more than ``limit`` positions is scored on a seeded sample of ``limit`` of them.

Past the dense limit (no n x n D), a window's D comes from its own counts:
``position_geometry(counts.select(window))`` on the window's (sampled) positions only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from .distances import Counts, position_geometry
from .null import ALPHA, UNDECIDED, RankTest
from .scores import scaled_stress
from .shuffle import ShuffleNull, decide, draws_for

#: a window of fewer positions is undecided (its shuffles cannot reach Holm's level, its score is noise)
MIN_POSITIONS = 8
#: a window of more positions is scored on a seeded sample of this many (m)
LIMIT = 256
#: --windows auto: this many windows, when more than :data:`AUTO_FROM` positions are scored
AUTO_WINDOWS = 12
AUTO_FROM = 1024
#: the most windows --windows takes
MAX_WINDOWS = 64
#: the default shuffles reach Holm's first level at this share of alpha (draws_for), so that a clear window's
#: adjusted p shows its margin instead of sitting at the Monte Carlo floor, alpha itself
MARGIN = 0.25
#: a stream of its own for the window samples
_WINDOW_STREAM = 0x77696E64


def window_count(setting: str | int | None, scored: int) -> int:
    """How many windows ``--windows`` asks for: N (2..:data:`MAX_WINDOWS`), ``auto`` (:data:`AUTO_WINDOWS`
    past :data:`AUTO_FROM` positions, else none), ``none`` or None (0); anything else is an InputError."""
    text = str(setting).strip().lower() if setting is not None else "none"
    if text == "none":
        return 0
    if text == "auto":
        return AUTO_WINDOWS if scored > AUTO_FROM else 0
    try:
        count = int(text)
    except ValueError:
        count = -1
    if not 2 <= count <= MAX_WINDOWS:
        raise InputError(f"--windows takes a number of windows in 2..{MAX_WINDOWS}, auto or none; got {setting!r}")
    return count


def window_edges(positions: np.ndarray, count: int) -> np.ndarray:
    """Integer edges e_0 < ... < e_w (w <= count) log-spaced from the first position to one past the last:
    window j is [e_j, e_{j+1}); rounding may merge the narrowest windows, never leaves a position out."""
    low, high = int(np.min(positions)), int(np.max(positions)) + 1
    edges = np.rint(np.geomspace(low + 1, high + 1, count + 1)).astype(np.int64) - 1
    edges[0], edges[-1] = low, high
    return np.unique(edges)


def window_members(positions: np.ndarray, edges: np.ndarray) -> list[np.ndarray]:
    """Per window, the indices (into ``positions``) of the positions it holds."""
    which = np.searchsorted(edges, positions, side="right") - 1
    order = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[order], np.arange(1, edges.size - 1))
    return np.split(order, cuts)


def sampled(members: np.ndarray, limit: int, seed: int, window: int) -> np.ndarray:
    """``members`` itself, or a seeded sample of ``limit`` of them (sorted) when it holds more."""
    if members.size <= limit:
        return members
    rng = np.random.default_rng(np.random.SeedSequence([seed, _WINDOW_STREAM, window]))
    return np.sort(rng.choice(members, size=limit, replace=False))


@dataclass(frozen=True)
class WindowScores:
    """One table's scaled stress per window of positions, each against its window's position shuffles.

    ``starts``/``ends``: the windows [a, b); ``positions``: the scored positions each holds; ``scored``: how
    many were scored (a sample past ``limit``); ``scores``: scaled stress (NaN: too few positions);
    ``null_means``: the shuffles' mean; ``quantiles``: the share of shuffles the score beats; ``p``, ``p_adjusted``
    (Holm over every window of every table, ``tests`` in all), ``categories`` (better, indistinguishable,
    worse, undecided). ``training_length``: where the encoding was trained (``original=``), or None.
    """

    encoding: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    positions: tuple[int, ...]
    scored: tuple[int, ...]
    scores: tuple[float, ...]
    null_means: tuple[float, ...]
    quantiles: tuple[float, ...]
    p: tuple[float, ...]
    p_adjusted: tuple[float, ...]
    categories: tuple[str, ...]
    draws: int
    tests: int
    seed: int
    limit: int = LIMIT
    min_positions: int = MIN_POSITIONS
    alpha: float = ALPHA
    training_length: int | None = None

    def verdict(self) -> str:
        """Where the geometry stops being better than random (:func:`window_verdict`)."""
        return window_verdict(self)

    def to_dict(self) -> dict[str, Any]:
        rows = zip(
            self.starts, self.ends, self.positions, self.scored, self.scores, self.null_means, self.quantiles,
            self.p, self.p_adjusted, self.categories, strict=True,
        )  # fmt: skip
        keys = ("start", "end", "positions", "scored", "scaled_stress", "null_mean", "quantile", "p", "p_adjusted")
        return {
            "encoding": self.encoding,
            "score": "scaled_stress",
            "null": {
                "kind": "permutation within each window",
                "draws": self.draws,
                "correction": "holm",
                "tests": self.tests,
                "alpha": self.alpha,
                "seed": self.seed,
            },
            "limit": self.limit,
            "min_positions": self.min_positions,
            "training_length": self.training_length,
            "windows": [{**dict(zip(keys, row[:-1], strict=True)), "category": row[-1]} for row in rows],
            "verdict": self.verdict(),
        }


def window_verdict(result: WindowScores) -> str:
    """The sentence: better than random up to position P (window [a, b)), in every window, in no window, or
    the data cannot decide past P; against the window's shuffles, Holm-corrected, with its margin."""
    name, cats = result.encoding, result.categories
    null = f"(position shuffles within each window, {result.draws} each; Holm over {result.tests} tests, alpha {result.alpha:g}"
    decided = [j for j, c in enumerate(cats) if c != UNDECIDED]
    if not decided:
        return f"the data cannot decide for {name} in any window (windows of fewer than {result.min_positions} positions, or too few shuffles)"
    run = decided[0]
    while run < len(cats) and cats[run] == "better":
        run += 1
    last = run - 1
    margin = f"; last better window's adjusted p {result.p_adjusted[last]:.3g}" if last >= decided[0] else ""
    if decided[0] > 0:
        margin += (
            f"; windows before position {result.starts[decided[0]]} have fewer than {result.min_positions} positions"
        )
    if run == len(cats):
        return f"the geometry of {name} is better than random in every window {null}{margin})"
    if cats[run] == UNDECIDED:
        return (
            f"the geometry of {name} is better than random up to position {result.starts[run]}; the data cannot "
            f"decide past {result.starts[run]} (windows of fewer than {result.min_positions} positions) {null}{margin})"
        )
    if "better" not in cats:
        return f"the geometry of {name} is better than random in no window {null}; smallest adjusted p {np.nanmin(result.p_adjusted):.3g})"
    window = f"window [{result.starts[run]}, {result.ends[run]})"
    if run == decided[0]:
        better = [j for j, c in enumerate(cats) if c == "better"]
        return (
            f"the geometry of {name} is not better than random in its first decided {window}; better in "
            f"{len(better)} of {len(decided)} decided windows, from position {result.starts[better[0]]} {null}; "
            f"{window}: adjusted p {result.p_adjusted[run]:.3g}, {cats[run]})"
        )
    return (
        f"the geometry of {name} is better than random up to position {result.starts[run]} ({window}); from there on "
        f"it is not {null}{margin}; {window}: adjusted p {result.p_adjusted[run]:.3g}, {cats[run]})"
    )


Distances = Callable[[np.ndarray], np.ndarray]


def window_distances(dense: np.ndarray | None, counts: Counts, positions: np.ndarray, which: str) -> Distances:
    """``rows -> D`` between the kept positions of index ``rows``: a slice of the dense D when there is one,
    else (past the dense limit) ``position_geometry(counts.select(...))`` on those positions alone."""

    def distances(rows: np.ndarray) -> np.ndarray:
        if dense is not None:
            return dense[np.ix_(rows, rows)]
        return position_geometry(counts.select(positions[rows]), min_count=1).matrix(which)

    return distances


@dataclass(frozen=True)
class _Window:
    start: int
    end: int
    members: np.ndarray
    rows: np.ndarray  # the scored members (a sample past the limit)


def plan_windows(positions: np.ndarray, count: int, seed: int, limit: int = LIMIT) -> list[_Window]:
    """The windows of ``positions`` (sorted) and the members each scores."""
    edges = window_edges(positions, count)
    members = window_members(positions, edges)
    return [
        _Window(int(edges[j]), int(edges[j + 1]), member, sampled(member, limit, seed, j))
        for j, member in enumerate(members)
    ]


def score_windows(
    tables: Mapping[str, np.ndarray],
    positions: np.ndarray,
    distances: Distances,
    count: int,
    seed: int = 0,
    draws: int | None = None,
    limit: int = LIMIT,
) -> dict[str, WindowScores]:
    """Every table's :class:`WindowScores` over ``count`` log-spaced windows of ``positions``.

    ``distances(rows)``: D between the kept positions of index ``rows`` (a slice of the dense D, or the
    window's own geometry past the dense limit). ``draws`` None: as many as Holm over every test needs at
    :data:`MARGIN` x alpha (about four times what alpha needs).
    """
    windows = plan_windows(np.asarray(positions), count, seed, limit)
    live = [w for w in windows if w.members.size >= MIN_POSITIONS]
    tests = len(live) * len(tables)
    draws = draws if draws is not None else draws_for(tests, ALPHA * MARGIN)
    found: dict[tuple[int, str], tuple[float, RankTest]] = {}
    for j, window in enumerate(windows):
        if window.members.size < MIN_POSITIONS:
            continue
        target = distances(window.rows)
        nulls = ShuffleNull(target, np.asarray(positions)[window.rows], draws, seed + j)
        rows = {name: table[window.rows] for name, table in tables.items()}  # read once: a table may draw them
        handles = {name: nulls.register(vectors) for name, vectors in rows.items()}
        run = nulls.run()
        for name, handle in handles.items():
            found[j, name] = (scaled_stress(rows[name], target), run[handle]["scaled_stress"])
    keys = list(found)
    settled = decide([{"scaled_stress": found[key][1]} for key in keys])
    tested = {key: test["scaled_stress"] for key, test in zip(keys, settled, strict=True)}
    return {name: _collect(name, windows, found, tested, (draws, tests, seed, limit)) for name in tables}


def _collect(
    name: str,
    windows: list[_Window],
    found: Mapping[tuple[int, str], tuple[float, RankTest]],
    tested: Mapping[tuple[int, str], RankTest],
    settings: tuple[int, int, int, int],
) -> WindowScores:
    """One table's columns of :class:`WindowScores` (NaN and undecided for a window too small to test)."""
    nan = math.nan
    rows = []
    for j in range(len(windows)):
        test = tested.get((j, name))
        if test is None:
            rows.append((nan, nan, nan, nan, nan, UNDECIDED))
            continue
        score = found[j, name][0]
        rows.append((score, test.mean, test.beats, _number(test.p), _number(test.p_adjusted), test.category))
    columns: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 6
    numbers = [tuple(float(v) for v in column) for column in columns[:5]]
    draws, tests, seed, limit = settings
    return WindowScores(
        encoding=name,
        starts=tuple(w.start for w in windows),
        ends=tuple(w.end for w in windows),
        positions=tuple(int(w.members.size) for w in windows),
        scored=tuple(int(w.rows.size) for w in windows),
        scores=numbers[0],
        null_means=numbers[1],
        quantiles=numbers[2],
        p=numbers[3],
        p_adjusted=numbers[4],
        categories=tuple(str(c) for c in columns[5]),
        draws=draws,
        tests=tests,
        seed=seed,
        limit=limit,
    )


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)
