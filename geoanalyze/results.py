"""What a stress analysis found, as typed results: its scores, its verdict, its JSON and its Markdown.

::

    StressResult                          one target against the geometry D of one corpus
     |- dataset: CorpusInfo               the corpus, the tokenizer, max_length, limit
     |- scores: {name: EncodingScores}    per table: every score, its rank test, a category per aspect
     |- discriminability                  per aspect, whether this corpus can rank on it
     |- layers: (LayerRow, ...)           checkpoints: P W_Q, P W_K, query, key, hidden per layer
     |- peaks: {projection: LayerPeak}
     |- checkpoint: CheckpointInfo | None
     |- geometry, vectors, truth          the arrays the figures draw (never in the JSON)
     |- summary: Summary                  the table's rows, the verdict sentence, warnings, limits, legend
     '- verdict: Verdict                  one category per aspect, the sentence, what is not ranked

``result.to_json()`` is the document ``geoanalyze stress -f json`` prints; its keys are a stable
schema (a new key only ever adds). ``result.to_markdown()`` is the section ``-f markdown`` prints.
A score is ``table.observed[key]`` for the keys of :func:`geoanalyze.geometry.scores.all_scores`;
``table.null[key]`` its rank test (:func:`geoanalyze.geometry.null.rank_test`). The gate
(``--fail-above``, ``--fail-if``) is a :class:`Gate`; :meth:`Gate.record` is how every format reports it.

The two text rules every output follows live here too: numbers to 4 significant digits
(:func:`fmt`) and paths without a site-packages or home prefix (:func:`display_path`).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .geometry.null import ALPHA, ASPECT_WORDS, ASPECTS, D_ASPECTS, TESTED_ASPECTS, RankTest
from .geometry.shuffle import can_decide, draws_for
from .io import FLAT, IF_SET, NOT_IN_JSON, Record, dumps, serialise, serialise_fields
from .io import markdown_table as gfm_table

if TYPE_CHECKING:
    from .corpus.positions import PositionSet
    from .geometry.distances import NoiseSummary, PositionGeometry
    from .geometry.sampled import PositionSample
    from .geometry.windows import WindowScores


# --- the typed result -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodingScores(Record):
    """Every score of one table of position vectors, tested against shuffles of its own positions.

    ``observed``: score name -> value, in the order of :func:`~geoanalyze.geometry.scores.all_scores`.
    ``null``: score name -> its shuffle test (geometry/shuffle.py) over ``null_draws`` shuffles. ``categories``:
    aspect -> better / indistinguishable / worse / undecided (None: its score was not computed).
    ``bootstrap``: the target's 95% intervals under ``--bootstrap`` (score -> low, high, sd, bias).
    """

    observed: Mapping[str, float] = field(metadata=FLAT)
    dim: int
    null: Mapping[str, RankTest]
    null_draws: int
    categories: Mapping[str, str | None]
    bootstrap: Mapping[str, Any] | None = field(default=None, metadata=IF_SET)
    #: the shuffle test it waits for (analysis.settle fills null and categories, then clears it)
    handle: int | None = field(default=None, repr=False, compare=False, metadata=NOT_IN_JSON)
    #: past the dense limit: score -> its jackknife standard error over the sampled positions (geometry/sampled.py)
    standard_errors: Mapping[str, float] | None = field(default=None, metadata=IF_SET)


@dataclass(frozen=True)
class LayerRow:
    """One row of the layer table: layer ``layer``'s ``projection`` (P·W_Q, P·W_K, query, key, hidden).

    ``positions_used``: the kept positions enough sampled sequences reach (forward-pass rows only).
    """

    layer: int
    projection: str
    observed: Mapping[str, float]
    null: Mapping[str, RankTest]
    categories: Mapping[str, str | None]
    positions_used: int | None = None
    #: the shuffle test it waits for (analysis.settle fills null and categories, then clears it)
    handle: int | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        used = {} if self.positions_used is None else {"positions_used": self.positions_used}
        head = {"layer": self.layer, "projection": self.projection, **used}
        return {**head, **self.observed, "null": serialise(self.null), "categories": dict(self.categories)}


@dataclass(frozen=True)
class LayerPeak(Record):
    """Per projection: the layers of lowest scaled stress and violation, of peak raw stress, and the
    layers better than their position shuffles per aspect."""

    peak_stress_layer: int
    peak_stress: float
    best_scaled_stress_layer: int
    best_scaled_stress: float
    best_violation_layer: int
    best_violation: float
    better_layers: Mapping[str, list[int]]
    layers: list[int]


@dataclass(frozen=True)
class CheckpointInfo(Record):
    """What a checkpoint is (architecture, position mechanism, size) and, per row kind of the
    tables (position, projected, query_key, hidden), whether it was measured or why not."""

    path: str
    origin: str
    architecture: str | None
    model_type: str | None
    position_kind: str
    position_mechanism: Mapping[str, Any]
    hidden_size: int
    layers: int
    parameters: Any
    rows: Mapping[str, str]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AspectDecision:
    """Whether one aspect's score can separate encodings on this corpus (None: too few draws to say)."""

    discriminates: bool | None
    reason: str | None = None
    #: the probe table's category (the D-based aspects only: shape, order, local order)
    probe_category: str | None = None

    def to_dict(self, aspect: str) -> dict[str, Any]:
        probe = {"probe_category": self.probe_category} if aspect in D_ASPECTS else {}
        return {"discriminates": self.discriminates, "reason": self.reason, **probe}


@dataclass(frozen=True)
class Discriminability:
    """Per aspect, whether this corpus can rank encodings on it (docs/scores.md, "Discriminability")."""

    probe: str
    aspects: Mapping[str, AspectDecision]

    def undecidable(self) -> set[str]:
        """The aspects whose score cannot separate encodings here (not those too few draws leave open)."""
        return {aspect for aspect, entry in self.aspects.items() if entry.discriminates is False}

    def to_dict(self) -> dict[str, Any]:
        aspects = {aspect: entry.to_dict(aspect) for aspect, entry in self.aspects.items()}
        return {"probe": self.probe, "aspects": aspects}


@dataclass(frozen=True)
class CorpusInfo(Record):
    """The corpus (its description: name, kind, location, split), the tokenizer and the lengths read."""

    source: Mapping[str, Any] = field(metadata=FLAT)
    tokenizer: str
    max_length: int
    limit: int | None

    @property
    def name(self) -> str:
        return str(self.source["name"])


@dataclass(frozen=True, kw_only=True)
class NullSettings(Record):
    """The null every table is held against: ``draws`` shuffles of which position each of its vectors
    belongs to (geometry/shuffle.py), the run's ``tests`` p-values adjusted together by Holm at ``alpha``."""

    kind: str = "permutation"
    draws: int
    correction: str = "holm"
    tests: int = 0
    alpha: float = ALPHA
    seed: int

    @property
    def decidable(self) -> bool:
        """Whether the draws can reach Holm's first level (else every category is undecided)."""
        return can_decide(self.draws, self.tests, self.alpha)


def _unknown() -> np.ndarray | None:
    return None


@dataclass(frozen=True, eq=False)
class StressResult:
    """The stress analysis of one target (a checkpoint or an encoding spec) on one corpus.

    ``positions``: the kept positions (N_i >= min-count); ``width``: the width the compared
    encodings are drawn at; ``scores``: the target first (when it has position vectors), then the
    compared encodings. ``geometry`` (the distances), ``vectors`` (each table scored) and
    :attr:`truth` are what the figures draw; they are not in the JSON.
    """

    target: str
    kind: str
    dataset: CorpusInfo
    distance: str
    width: int
    positions: np.ndarray
    left_out: Mapping[str, Any]
    noise: NoiseSummary
    scores: Mapping[str, EncodingScores]
    null: NullSettings
    discriminability: Discriminability
    geometry: PositionGeometry = field(repr=False, metadata=NOT_IN_JSON)
    layers: tuple[LayerRow, ...] = ()
    peaks: Mapping[str, LayerPeak] = field(default_factory=dict)
    checkpoint: CheckpointInfo | None = field(default=None, metadata=IF_SET)
    vectors: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False, metadata=NOT_IN_JSON)
    #: computes the exact distances between the kept positions when the corpus's true marginals are
    #: known (a synthetic corpus, or a sample file with ``<name>.marginals.npy``); see :attr:`truth`
    exact_distances: Callable[[], np.ndarray | None] = field(default=_unknown, repr=False, metadata=NOT_IN_JSON)
    #: what the analysis noted for the user (:mod:`geoanalyze.notes`): a fallback taken, a model read in a
    #: way worth knowing; the command line prints them on stderr, the JSON leaves them out
    notes: tuple[str, ...] = field(default=(), metadata=NOT_IN_JSON)
    #: the position set scored when --positions is not ``all`` (its spec and each position's bucket)
    position_set: PositionSet | None = field(default=None, metadata=IF_SET)
    #: past the dense limit, the seeded sample of positions the scores were estimated on (geometry/sampled.py)
    sample: PositionSample | None = field(default=None, metadata=IF_SET)
    #: scores against position (--windows; geometry/windows.py): per table, its windows; empty when off
    windows: Mapping[str, WindowScores] = field(default_factory=dict, metadata=IF_SET)

    @property
    def target_scores(self) -> EncodingScores | None:
        """The target's own scores (None: it has no absolute position vectors)."""
        return self.scores.get(self.target)

    @property
    def distances(self) -> np.ndarray:
        """The target distance D between the kept positions (naive or corrected)."""
        return self.geometry.matrix(self.distance)

    @cached_property
    def truth(self) -> np.ndarray | None:
        """The exact distances between the kept positions (NaN where unknown), or None; computed once."""
        return self.exact_distances()

    @property
    def summary(self) -> Summary:
        """What the table, the JSON and the Markdown all say (:func:`summarize`; its paths are shown
        from the working directory: ``summarize(result, base)`` shows them from ``base``)."""
        return summarize(self)

    @property
    def verdict(self) -> Verdict:
        """One category per aspect, the verdict sentence and what is not ranked."""
        return self.verdict_from()

    def verdict_from(self, base: Path | None = None) -> Verdict:
        """:attr:`verdict`, its sentence naming the target from ``base`` (:func:`display_path`)."""
        mine = self.target_scores
        categories = {aspect: mine.categories.get(aspect) for aspect in ASPECTS} if mine else dict.fromkeys(ASPECTS)
        return Verdict(
            **categories,
            sentence=summarize(self, base).verdict,
            not_ranked=tuple(sorted(self.discriminability.undecidable(), key=list(ASPECTS).index)),
            null_draws=mine.null_draws if mine else None,
        )

    def document(self, base: Path | None = None) -> dict[str, Any]:
        """The JSON document as Python values (numpy values left to :func:`geoanalyze.io.to_jsonable`;
        paths in sentences shown from ``base``, default the working directory)."""
        shown = {"verdict": self.verdict_from(base).to_dict(), "summary": summarize(self, base).to_dict()}
        return {**serialise_fields(self), **shown}

    def to_json(self, base: Path | None = None, **extra: Any) -> str:
        """The JSON ``geoanalyze stress -f json`` prints (non-finite numbers as null; paths shown from
        ``base``); ``extra`` keys follow the document's own (the command adds ``gate``, ``run`` and,
        with --plot-dir, ``figures``)."""
        return dumps({**self.document(base), **extra})

    def to_markdown(self, figures: Mapping[str, str] | None = None, **shown: Any) -> str:
        """The Markdown section ``geoanalyze stress -f markdown`` prints: :func:`markdown` (``shown``: its
        ``level``, ``show_legend``, ``gate`` and ``base``)."""
        return markdown(self, figures, **shown)


# --- what the result says: rows, verdict, warnings, limits, legend ----------------------------------


@dataclass(frozen=True)
class ScoreColumn:
    """One score of the encodings table: its key in the scores, its label, and its legend line."""

    key: str
    label: str
    legend: str


#: The encodings table, scale-free scores first. A new score is one entry here (the table, the
#: Markdown, the legend and the --fail-above names all follow this list).
SCORE_COLUMNS: list[ScoreColumn] = [
    ScoreColumn(
        "scaled_stress",
        "scaled",
        "scaled stress: stress after the best rescaling of the vectors (0 = the shape of D up to a factor; "
        "scale-free, lower is better)",
    ),
    ScoreColumn(
        "monotonicity_violation",
        "violation",
        "share of position pairs the vectors order against D (0 = same order, 0.5 = chance; lower is better)",
    ),
    ScoreColumn(
        "anchored_monotonicity_violation",
        "anchored",
        "violation among pairs that share a position (local order; lower is better)",
    ),
    ScoreColumn(
        "lag_violation",
        "lag viol.",
        "monotonicity in position lag: per anchor, share of pairs where the farther position (in |i - j|) "
        "sits closer (0 = monotone in lag, 0.5 = chance; lower is better)",
    ),
    ScoreColumn(
        "relative_separation",
        "rel. sep.",
        "closest two positions' distance / the median distance (0 = two positions collide; higher keeps them apart)",
    ),
    ScoreColumn(
        "stress",
        "stress",
        "raw stress: grows with the vectors' size, so it ranks widths and norms, not shapes; compare scaled",
    ),
]
#: above this share of sampling noise in the naive distance, the scores rank encodings against noise
NOISE_WARNING = 0.5
#: a score nearer 0 than this is float64 round-off of 0 (MDS's own 2.22e-16): every table shows it as 0
ROUND_OFF = 1e-12


def shown_score(value: Any) -> Any:
    """A score as every table and sentence shows it: within :data:`ROUND_OFF` of 0 as 0.0 (the JSON
    keeps the value computed); anything else unchanged."""
    if isinstance(value, Real) and not isinstance(value, bool) and 0 < abs(float(value)) < ROUND_OFF:
        return 0.0
    return value


#: each aspect's score, as the table labels it
ASPECT_LABELS = {
    "shape": "scaled",
    "order": "violation",
    "local_order": "anchored",
    "lag": "lag viol.",
    "separation": "rel. sep.",
}
#: encodings that are references rather than competitors in the verdict
REFERENCES = ("mds", "random")
#: how a category is written in the tables' "null" column
SYMBOLS = {"better": "+", "indistinguishable": "=", "worse": "-", "undecided": "?", None: " "}


@dataclass(frozen=True)
class SummaryRow:
    """One row of the encodings table: the scores of :data:`SCORE_COLUMNS` (None: not computed), how
    many null draws it beats, its categories, and the earlier row it equals (identical scores)."""

    encoding: str
    dim: int
    values: Mapping[str, float | None]
    null_beaten: int
    null_draws: int
    categories: Mapping[str, str | None]
    same_as: str | None = None

    @property
    def beats_null(self) -> bool:
        return self.null_draws > 0 and self.null_beaten == self.null_draws

    def to_dict(self) -> dict[str, Any]:
        tested = {name: getattr(self, name) for name in ("null_beaten", "null_draws", "beats_null")}
        return {
            "encoding": self.encoding,
            "dim": self.dim,
            **self.values,
            **tested,
            "categories": dict(self.categories),
            "same_as": self.same_as,
        }


@dataclass(frozen=True)
class Summary(Record):
    """What every format says: the table's rows, the verdict sentence, warnings (what makes the scores
    untrustworthy and what to do), limits (one line per aspect this corpus cannot rank on), legend."""

    rows: tuple[SummaryRow, ...]
    verdict: str
    warnings: tuple[str, ...]
    limits: tuple[str, ...]
    legend: tuple[str, ...]
    #: what the verdict is about, said beside it (a synthetic corpus)
    caveats: tuple[str, ...] = ()

    def row(self, name: str) -> SummaryRow | None:
        return next((row for row in self.rows if row.encoding == name), None)


@dataclass(frozen=True)
class Verdict(Record):
    """The target's verdict: its category against its position shuffles per aspect (better, indistinguishable, worse,
    undecided; None without position vectors), the sentence, and the aspects this corpus cannot rank."""

    shape: str | None
    order: str | None
    local_order: str | None
    lag: str | None
    separation: str | None
    sentence: str
    not_ranked: tuple[str, ...]
    null_draws: int | None
    alpha: float = ALPHA

    @property
    def categories(self) -> dict[str, str | None]:
        """aspect -> category, in the order of :data:`geoanalyze.geometry.null.ASPECTS`."""
        return {aspect: getattr(self, aspect) for aspect in ASPECTS}


def beaten(scores: EncodingScores) -> tuple[int, int]:
    """(null draws with a higher violation than this table, draws): the rank-based null test."""
    draws = int(scores.null_draws)
    return round(scores.null["monotonicity_violation"]["beats"] * draws), draws


def category_code(categories: Mapping[str, Any]) -> str:
    """The tested aspects' categories as one compact cell: "++++" (shape, order, local order, lag)."""
    return "".join(SYMBOLS.get(categories.get(aspect), "?") for aspect in TESTED_ASPECTS)


def summary_rows(result: StressResult) -> tuple[SummaryRow, ...]:
    """One row per table, in the order scored; a row with the same scores as an earlier one says so."""
    rows = []
    seen: dict[tuple[Any, ...], str] = {}
    for name, scores in result.scores.items():
        wins, draws = beaten(scores)
        values = {c.key: scores.observed.get(c.key) for c in SCORE_COLUMNS}
        key = tuple(None if value is None else round(float(value), 12) for value in values.values())
        same = seen.setdefault(key, name)
        rows.append(
            SummaryRow(name, scores.dim, values, wins, draws, dict(scores.categories), same if same != name else None)
        )
    return tuple(rows)


def warnings(result: StressResult) -> tuple[str, ...]:
    """What makes the scores untrustworthy, and what to do: a naive distance that is mostly noise."""
    fix = (
        "use --estimate corrected (it removes the expected noise), or more text (a larger corpus, no --limit), "
        "or a higher --min-count"
        if result.distance == "naive"
        else "use more text (a larger corpus, no --limit) or a higher --min-count"
    )
    line = noise_warning(result.noise.get("noise_fraction"), result.distance, fix, "these scores rank encodings")
    return () if line is None else (line,)


def noise_warning(noise: Any, distance: str, fix: str, what: str = "scores on it rank encodings") -> str | None:
    """The warning of a distance that is mostly sampling noise (fraction above :data:`NOISE_WARNING`),
    with ``fix``; None when the fraction is lower or unknown. ``stress`` and ``distances`` both give it."""
    if noise is None or noise != noise or noise <= NOISE_WARNING:
        return None
    return (
        f"noise fraction {noise:.2f} (above {NOISE_WARNING}): most of the {distance} distance between "
        f"positions is sampling noise, so {what} against noise; {fix}"
    )


def distance_warnings(noise: Mapping[str, Any]) -> list[str]:
    """The warnings of ``geoanalyze distances`` (its noise summary): the naive distance mostly noise."""
    fix = (
        "use the corrected distance (it removes the expected noise: geoanalyze stress --estimate corrected), "
        "or more text (a larger corpus, no --limit), or a higher --min-count"
    )
    line = noise_warning(noise.get("noise_fraction"), "naive", fix)
    return [] if line is None else [line]


def summarize(result: StressResult, base: Path | None = None) -> Summary:
    """What the table, the JSON and the Markdown all say: rows, verdict, warnings, limits, legend (paths
    shown from ``base``: :func:`display_path`)."""
    rows = summary_rows(result)
    sentence = verdict_sentence(result, rows, base)
    return Summary(rows, sentence, warnings(result), limits(result), legend(result, rows, base), caveats(result))


def caveats(result: StressResult) -> tuple[str, ...]:
    """What the verdict is about, where a reader could take it for more: a synthetic corpus."""
    if result.truth is None:
        return ()
    return (
        f"{result.dataset.name} is a synthetic corpus whose true geometry is known (sample_corpora/README.md): "
        "this verdict is about that corpus, not about natural text; pass --dataset sst2 --data-dir DIR, or a "
        "corpus of your own, for that",
    )


def limits(result: StressResult) -> tuple[str, ...]:
    """One line per aspect that cannot separate encodings on this corpus, saying why."""
    return limit_lines(result.discriminability, "the verdict does not rank on it")


def limit_lines(decided: Discriminability, consequence: str) -> tuple[str, ...]:
    """One line per aspect ``decided`` says this corpus cannot rank on: why, and ``consequence``."""
    return tuple(
        f"{ASPECT_WORDS[aspect]} ({ASPECT_LABELS[aspect]}) cannot separate encodings on this corpus: "
        f"{entry.reason}; {consequence}"
        for aspect, entry in decided.aspects.items()
        if entry.discriminates is False
    )


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def against_random(categories: Mapping[str, Any], null: NullSettings) -> str:
    """The verdict's last clause: in which aspects the vectors carry position (better than their own
    position shuffles, Holm-corrected over the run), in which they do not."""
    if not null.decidable:
        return (
            f"{null.draws} shuffles cannot decide any of the run's {null.tests} tests at {ALPHA:.0%} after Holm "
            f"(it needs {draws_for(null.tests, null.alpha)}): omit --null-draws"
        )
    better = [ASPECT_WORDS[a] for a in TESTED_ASPECTS if categories.get(a) == "better"]
    other = [
        f"{ASPECT_WORDS[a]} ({categories.get(a) or 'not computed'})"
        for a in TESTED_ASPECTS
        if categories.get(a) != "better"
    ]
    parts = []
    if better:
        parts.append(f"carries position in {_join(better)} (better than its shuffles)")
    if other:
        parts.append(f"shows none in {_join(other)}")
    return f"against {null.draws} shuffles of its positions (Holm over {null.tests} tests), it " + "; it ".join(parts)


def shape_clause(mine: SummaryRow, rows: Sequence[SummaryRow]) -> str | None:
    """The target's scaled stress beside the best standard encoding's (None: nothing to compare with)."""
    references = [
        row
        for row in rows
        if row.encoding != mine.encoding
        and row.encoding.split(":")[0] not in REFERENCES
        and row.values["scaled_stress"] is not None
    ]
    if not references:
        return None
    best = min(references, key=lambda row: row.values["scaled_stress"])  # type: ignore[arg-type, return-value]
    mine_scaled, best_scaled = mine.values["scaled_stress"], best.values["scaled_stress"]
    assert best_scaled is not None
    if mine_scaled is not None and mine_scaled <= best_scaled * (1 + 1e-9):
        return (
            f"no standard encoding has a better shape (scaled {fmt(shown_score(mine_scaled))}; "
            f"best other {best.encoding} {fmt(shown_score(best_scaled))})"
        )
    ratio = mine_scaled / best_scaled if mine_scaled is not None and best_scaled > 0 else float("inf")
    return (
        f"its shape is {ratio:.2g}x the scaled stress of the best standard encoding "
        f"({best.encoding} {fmt(shown_score(best_scaled))}; this target {fmt(shown_score(mine_scaled))})"
    )


def verdict_sentence(result: StressResult, rows: Sequence[SummaryRow], base: Path | None = None) -> str:
    """One line on the target: its shape beside the standard encodings (only where this corpus can tell
    shapes apart), the MDS floor, then in plain words in which aspects it carries position and in which not."""
    target = result.target
    by_name = {row.encoding: row for row in rows}
    mine = by_name.get(target)
    if mine is None:
        return f"{target}: no absolute position vectors to score; read the layer-by-layer rows"
    parts: list[str] = []
    shapes_differ = "shape" not in result.discriminability.undecidable()
    if not shapes_differ:
        parts.append("shape not ranked (this corpus cannot separate shapes)")
    elif (clause := shape_clause(mine, rows)) is not None:
        parts.append(clause)
    mds = by_name.get("mds")
    if mds is not None and target != "mds" and shapes_differ:
        parts.append(f"MDS floor {fmt(shown_score(mds.values['scaled_stress']))}")
    parts.append(against_random(mine.categories, result.null))
    return f"{display_path(target, base)}: " + "; ".join(parts)


def legend(result: StressResult, rows: Sequence[SummaryRow], base: Path | None = None) -> tuple[str, ...]:
    """The lines printed under the table (what each column and each special row means)."""
    lines = [distance_legend(result)]
    lines += [f"{c.label}: {c.legend}" for c in SCORE_COLUMNS]
    lines.append(vs_random_legend(result.null))
    lines += row_legend(result, rows, base)
    names = {row.encoding.split(":")[0] for row in rows}
    if "mds" in names:
        lines.append("mds: classical MDS of D itself, the best fit any encoding can reach (a floor, not a rival)")
    if "random" in names:
        lines.append("random: one i.i.d. Gaussian encoding (what no position information scores)")
    for row in rows:
        if row.same_as:
            kinds = {row.encoding.split(":")[0], row.same_as.split(":")[0]}
            if kinds == {"rope", "sinusoidal"}:
                why = ": RoPE's (cos, sin) coordinates are the sinusoidal table's, reordered, so distances are equal"
            elif len(kinds) == 1:
                why = ": the same encoding at the same width"
            else:
                why = ": their vectors have the same distances between positions"
            lines.append(f"{row.encoding} has the same scores as {row.same_as}{why}")
    if any(value is not None and shown_score(value) != value for row in rows for value in row.values.values()):
        lines.append(
            f"0: a score within {ROUND_OFF:g} of 0 is float64 round-off of 0 and shown as 0 (the JSON keeps it)"
        )
    lines.append(width_legend(result, rows))
    return tuple(lines)


def distance_legend(result: StressResult) -> str:
    """What D, the geometry every score compares with, is."""
    corrected = " with the expected sampling noise removed" if result.distance == "corrected" else ""
    return (
        f"D: the {result.distance} Hellinger distance between every two kept positions' token distributions in "
        f"this corpus{corrected} (the geometry every score measures the vectors against; docs/scores.md)"
    )


def row_legend(result: StressResult, rows: Sequence[SummaryRow], base: Path | None = None) -> list[str]:
    """One line per row of the table that is not a reference (mds and random have their own): the
    target, and each compared encoding by its family's description."""
    from .encodings.registry import REGISTRY

    lines = []
    for row in rows:
        family = row.encoding.split(":")[0]
        if row.encoding == result.target:
            what = "its own position vectors" if result.kind == "checkpoint" else "the encoding analysed"
            what += rope_scaling_text(result.checkpoint)
            lines.append(f"{display_path(row.encoding, base)}: the target, {what}")
        elif family not in REFERENCES and (known := REGISTRY.families.get(family)) is not None:
            lines.append(f"{row.encoding}: {known.summary}")
    return lines


def rope_scaling_text(checkpoint: CheckpointInfo | None) -> str:
    """A checkpoint's RoPE scaling as its config sets it (read by transformers: the frequencies and the
    attention scaling its rotary module holds), or "" (no checkpoint, no rope, or no scaling)."""
    sets = (checkpoint.position_mechanism.get("rope") or {}) if checkpoint is not None else {}
    scaled = {
        str(rope.get("rope_type")): rope.get("attention_scaling", 1.0)
        for rope in sets.values()
        if rope.get("rope_type") not in (None, "default")
    }
    shown = ", ".join(f"{name} (attention scaling {fmt(value)})" for name, value in scaled.items())
    return f", RoPE scaled by its config: {shown}" if shown else ""


def vs_random_legend(null: NullSettings) -> str:
    """What the "null" column says."""
    return (
        f"null: shape, order, local order and lag (the scaled, violation, anchored and lag viol. columns, in that "
        f"order) against {null.draws} shuffles of which position each of the row's vectors belongs to (does it "
        f"carry position?), two-sided, Holm-corrected over the run's {null.tests} tests at {null.alpha:.0%}: "
        "+ better than shuffled, - worse, = indistinguishable, ? undecided (too few shuffles); rel. sep. has no "
        "test (no shuffle changes it)"
    )


def width_legend(result: StressResult, rows: Sequence[SummaryRow]) -> str:
    """The d column: the width each compared encoding is drawn at, as the table shows it."""
    others = []
    names = {row.encoding.split(":")[0]: row.dim for row in rows if row.encoding != result.target}
    if "alibi" in names:
        others.append(f"alibi has one coordinate per head ({names['alibi']})")
    if "mds" in names:
        others.append(f"mds one per positive eigenvalue of D ({names['mds']})")
    tail = f"; {'; '.join(others)}" if others else ""
    return f"d: vector width; sinusoidal, rope and random are drawn at the compared width ({result.width}){tail}"


# --- the tables every format shows ------------------------------------------------------------------


def header_rows(result: StressResult, base: Path | None = None) -> list[tuple[str, Any]]:
    """The corpus, tokenizer, positions, the distance D every score compares with, and the noise."""
    source, noise = result.dataset.source, result.noise
    split = f" (split {source['split']})" if source["split"] else ""
    read = f", read as {source['read']}" if source.get("read") else ""  # --read, when not rows
    scored = [("positions scored", result.position_set.line())] if result.position_set is not None else []
    return [
        ("corpus", display_path(source["location"], base) + split + read),
        ("tokenizer", display_path(result.dataset.tokenizer, base)),
        *scored,
        ("positions kept", f"{kept_count(result)} (min-count {result.left_out.get('min_count')})"),
        ("left out", fmt(result.left_out.get("positions"))),
        ("distance D", f"{result.distance} Hellinger"),
        ("noise fraction / snr", f"{fmt(noise['noise_fraction'])} / {fmt(noise['snr'])}"),
    ] + ([("scaling path", result.sample.describe())] if result.sample is not None else [])


def kept_count(result: StressResult) -> int:
    """The kept positions: all of them, also when the scores were estimated on a sample of them."""
    return result.sample.of if result.sample is not None else len(result.positions)


def score_rows(result: StressResult) -> tuple[list[str], list[list[Any]]]:
    """Header and rows of the encodings table: scale-free scores first, then raw stress and the categories."""
    header = ["encoding", "d", *[c.label for c in SCORE_COLUMNS], "null"]
    rows = [
        [row.encoding, row.dim, *[shown_score(row.values[c.key]) for c in SCORE_COLUMNS], category_code(row.categories)]
        for row in summary_rows(result)
    ]
    if result.sample is not None:  # the scaling path: each estimate with its standard error
        rows = [with_errors(row, result.scores[row[0]].standard_errors or {}) for row in rows]
    return header, rows


def with_errors(row: list[Any], errors: Mapping[str, float]) -> list[Any]:
    """A row of the encodings table with ``value ± SE`` for each score that has a standard error."""
    cells = list(row)
    for place, column in enumerate(SCORE_COLUMNS, start=2):
        if column.key in errors and cells[place] is not None:
            cells[place] = f"{fmt(float(cells[place]))} ± {errors[column.key]:.2g}"
    return cells


#: the layer table's score columns (raw stress is in the JSON: it follows the vectors' size, not their shape)
LAYER_COLUMNS = [c for c in SCORE_COLUMNS if c.key != "stress"]


def layer_rows(result: StressResult) -> tuple[list[str], list[list[Any]]]:
    """Header and rows of the layer table."""
    header = ["layer", "projection", *[c.label for c in LAYER_COLUMNS], "null"]
    rows = [
        [
            row.layer,
            row.projection,
            *[shown_score(row.observed.get(c.key)) for c in LAYER_COLUMNS],
            category_code(row.categories),
        ]
        for row in result.layers
    ]
    return header, rows


#: what each row of the layer table is (P: the checkpoint's position table, one row per position)
PROJECTION_LEGEND = {
    "P·W_Q": "P·W_Q, P·W_K: the position table P through layer l's query and key weights W_Q, W_K (bias left "
    "out): what each position alone puts into a query and a key",
    "query": "query, key: per position, the mean query and key that layer l's attention receives (after RoPE, "
    "if any), over the sampled sequences",
    "hidden": "hidden: per position, the mean hidden state layer l outputs (layer 0 = the embedding output)",
}
#: the caveat of every centroid row (query, key, hidden), said wherever those rows are shown
CENTROID_CAVEAT = (
    "query, key and hidden rows are centroids: each averages the tokens seen at its position, so it follows "
    "the corpus's per-position token distributions (what D is made of) even in a model with no position "
    "encoding; a + there says what the layer receives, not that the model encodes position (the position "
    "table's rows and the P·W rows say that)"
)


def projection_legend(projections: set[str]) -> list[str]:
    """The lines saying what each shown row kind is, and the centroid caveat when centroid rows are shown."""
    lines = [line for key, line in PROJECTION_LEGEND.items() if key in projections]
    if projections & {"query", "key", "hidden"}:
        lines.append(CENTROID_CAVEAT)
    return lines


def _ranges(layers: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    runs: list[list[int]] = []
    for layer in layers:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def peak_lines(result: StressResult) -> list[str]:
    """The layer summaries, by scale-free scores and categories only (raw stress follows the vectors' size)."""
    lines = []
    not_ranked = result.discriminability.undecidable()
    for projection, peak in result.peaks.items():
        words = [
            f"{projection}: lowest scaled stress at layer {peak.best_scaled_stress_layer} "
            f"({fmt(shown_score(peak.best_scaled_stress))}), lowest violation at layer {peak.best_violation_layer} "
            f"({fmt(shown_score(peak.best_violation))})"
        ]
        shown = []
        for aspect in TESTED_ASPECTS:
            chosen = peak.better_layers.get(aspect, [])
            where = (
                "no layer" if not chosen else "every layer" if chosen == peak.layers else f"layers {_ranges(chosen)}"
            )
            mark = " (not ranked here)" if aspect in not_ranked else ""
            shown.append(f"{ASPECT_WORDS[aspect]} {where}{mark}")
        words.append("better than shuffled: " + ", ".join(shown))
        lines.append("; ".join(words))
    return lines


def interval_rows(result: StressResult, base: Path | None = None) -> tuple[str, list[str], list[list[Any]]] | None:
    """The target's bootstrap intervals as (title, header, rows); None without --bootstrap."""
    mine = result.target_scores
    intervals = mine.bootstrap if mine else None
    if not intervals or mine is None:
        return None
    labels = {c.key: c.label for c in SCORE_COLUMNS}
    rows = [
        [labels.get(name, name), *(shown_score(x) for x in (mine.observed.get(name), v["low"], v["high"], v["bias"]))]
        for name, v in intervals.items()
        if name != "samples"
    ]
    samples = intervals["samples"]
    title = f"{display_path(result.target, base)}: 95% basic-bootstrap intervals over {samples['count']} resamples of the sequences"
    return title, ["score", "value", "low", "high", "bias"], rows


def markdown(
    result: StressResult,
    figures: Mapping[str, str] | None = None,
    level: int = 2,
    show_legend: bool = True,
    gate: Judgement | None = None,
    base: Path | None = None,
) -> str:
    """A Markdown section for one analysis (tables, verdict, legend, layers, then the figures).

    Every text from outside (paths, names, sentences) goes through :func:`md_text`, so that
    ``<site-packages>`` is not read as an HTML tag; the figures are named by path as well as
    linked, for a page that cannot show them inline (a GitHub job summary).
    """
    summary = summarize(result, base)
    parts = [f"{'#' * level} {md_text(display_path(result.target, base))} on {md_text(result.dataset.name)}", ""]
    parts += [f"- {label}: {md_text(str(value))}" for label, value in header_rows(result, base)]
    parts += ["", *(f"> **Warning:** {md_text(line)}\n" for line in summary.warnings)]
    header, rows = score_rows(result)
    rows = [[display_path(str(row[0]), base), *row[1:]] for row in rows]
    parts += [markdown_table(header, rows), "", f"**Verdict:** {md_text(summary.verdict)}"]
    parts += [f"\n**About the corpus:** {md_text(line)}" for line in summary.caveats]
    parts += [f"\n**Cannot decide:** {md_text(line)}" for line in summary.limits]
    intervals = interval_rows(result, base)
    if intervals:
        title, header, rows = intervals
        parts += ["", f"{md_text(title)}:", "", markdown_table(header, rows)]
    if gate is not None:
        parts += ["", gate.markdown]
    if show_legend:
        parts += ["", "<details><summary>What the columns mean</summary>", ""]
        parts += [f"- {md_text(line)}" for line in summary.legend]
        parts += ["", "</details>"]
    if result.layers:
        parts += layer_markdown(result, show_legend)
    parts += figures_markdown(figures or {}, base)
    return "\n".join(parts) + "\n"


#: what explains the layer table's first two columns
LAYER_LEGEND = "layer: l, the layer whose rows follow (1..L; 0 = the embedding output); projection: the row kind"


def layer_markdown(result: StressResult, show_legend: bool = True) -> list[str]:
    """The layer table, one summary per projection (table order) and what each row is."""
    parts = ["", markdown_table(*layer_rows(result)), ""]
    parts += [f"- {md_text(line)}" for line in peak_lines(result)]
    if show_legend:
        shown = {row.projection for row in result.layers}
        parts += [f"- {md_text(line)}" for line in [LAYER_LEGEND, *projection_legend(shown)]]
    return parts


def figures_markdown(figures: Mapping[str, str], base: Path | None = None) -> list[str]:
    """The figures: named with their paths (a page that cannot show a relative image, such as a GitHub
    job summary, still says where each is), then shown inline where the page can."""
    if not figures:
        return []
    shown = {title: display_path(link, base) for title, link in figures.items()}
    folders = sorted({str(Path(link).parent.as_posix()) for link in shown.values()})
    where = ", ".join(md_code(f"{folder}/") for folder in folders)
    parts = [
        "",
        f"**Figures** (PNG files in {where}; a page that cannot show them inline, such as a GitHub job summary, "
        "shows their names: upload the folder with the page, e.g. as a workflow artifact):",
        "",
    ]
    parts += [f"- {md_text(title)}: {md_code(link)}" for title, link in shown.items()]
    for title, link in shown.items():
        parts += ["", f"![{md_text(title)}]({link_target(link)})"]
    return parts


def link_target(path: str) -> str:
    """A path as a Markdown link target: in angle brackets when it holds a space or parenthesis; a
    line break, a control character, ``<`` and ``>`` (which no target may hold) percent-encoded."""
    path = re.sub(r"[\x00-\x1f\x7f<>]", lambda m: f"%{ord(m[0]):02X}", path)
    return f"<{path}>" if any(ch in path for ch in " ()") else path


def md_code(text: str) -> str:
    """Text from outside the page as an inline code span, shown literally on one line: flattened and
    its controls escaped as by :func:`md_text`, fenced by more backticks than any run inside it."""
    shown = _md_flat(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


#: what starts Markdown inside a line: an HTML tag or autolink (``<`` before a letter, ``/``, ``!``
#: or ``?``), emphasis, a heading, a link, an entity (a ``|`` matters in a table cell only, where
#: :func:`geoanalyze.io.markdown_cell` escapes it; backticks are :func:`_md_backticks`')
_MD_SPECIAL = re.compile(r"(?<!\\)(<(?=[A-Za-z/!?])|[*#\[\]&])")
#: characters no page should carry raw: C0 and C1 controls (an ANSI escape's ESC), DEL, and the
#: bidirectional overrides and isolates (text that reads otherwise than it is)
_MD_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def md_text(text: str) -> str:
    """Text from outside the page (a path, a name, a sentence) as Markdown shows it, on one line and
    contained: nothing in it starts a block, a tag or a span that reaches past it.

    The one escaping function of every name that reaches Markdown: a line break (``\\n``, ``\\r``)
    becomes a space (it would start a heading, a list or a quote); a control character (an ANSI
    escape's ESC) or a bidirectional override is written as its escape (``\\x1b``, ``\\u202e``);
    a ``<`` that would open an HTML tag or an autolink (``<site-packages>`` would vanish as a tag),
    ``*`` (emphasis), ``#`` (a heading), ``[`` and ``]`` (a link) and ``&`` (an entity) are
    backslash-escaped, and so is every backtick of a text whose backticks do not pair up into code
    spans within it (one would open a span running into the rest of the line); a cell's ``|`` is
    :func:`geoanalyze.io.markdown_cell`'s. Escaping twice changes nothing.
    """
    return _md_backticks(_MD_SPECIAL.sub(r"\\\1", _md_flat(text)))


def _md_backticks(text: str) -> str:
    """``text`` with its backticks escaped unless every backtick run closes within it (CommonMark pairs
    a run with the next run of the same length): a caller's code span stays one, a lone backtick of a
    name is shown as itself."""
    runs = [m for m in re.finditer(r"(?<!\\)`+", text)]
    index = 0
    while index < len(runs):
        closer = next((j for j in range(index + 1, len(runs)) if len(runs[j][0]) == len(runs[index][0])), None)
        if closer is None:
            return re.sub(r"(?<!\\)`", r"\\`", text)
        index = closer + 1
    return text


def _md_flat(text: str) -> str:
    """Text on one line (line breaks and tabs as spaces) with its controls written as escapes."""
    flat = re.sub(r"\r\n|[\r\n]", " ", text).replace("\t", " ")
    return _MD_CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", flat)


# --- the gate: --fail-above thresholds and --fail-if conditions ---------------------------------------

#: what --fail-if CATEGORY matches: a category, or one of two unions
FAIL_IF_CATEGORIES = {
    "better": {"better"},
    "indistinguishable": {"indistinguishable"},
    "worse": {"worse"},
    "not-better": {"indistinguishable", "worse"},
    "not-worse": {"better", "indistinguishable"},
}


@dataclass(frozen=True)
class Gate:
    """The rules a target must pass: score -> the limit it may not exceed, aspect -> a --fail-if category."""

    thresholds: Mapping[str, float] = field(default_factory=dict)
    conditions: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.thresholds or self.conditions)

    def crossed(self, result: StressResult | Mapping[str, Any]) -> list[str]:
        """The rules the target breaks, as readable lines (failing closed: see :func:`crossed`)."""
        return crossed(result, self.thresholds) + matched(result, self.conditions)

    def record(self, crossed: Sequence[str]) -> Judgement | None:
        """The gate as every format reports it, given the lines crossed (None when no rule is given)."""
        return Judgement(self.thresholds, self.conditions, tuple(crossed)) if self else None

    def judge(self, result: StressResult | Mapping[str, Any]) -> Judgement | None:
        """:meth:`record` of one target."""
        return self.record(self.crossed(result))


@dataclass(frozen=True)
class Judgement:
    """A gate's rules and the lines a target (or a page of them) crossed: passed when none."""

    thresholds: Mapping[str, float]
    conditions: Mapping[str, str]
    crossed: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.crossed

    def to_dict(self) -> dict[str, Any]:
        """The gate in the JSON of stress and report."""
        return {**serialise_fields(self), "passed": self.passed}

    @property
    def rules(self) -> str:
        """The rules in words: "fail above scaled_stress > 0.5", "fail if shape not-better", or both."""
        rules = [f"{name} > {limit:g}" for name, limit in self.thresholds.items()]
        rules += [f"{aspect} {category}" for aspect, category in self.conditions.items()]
        kinds = "/".join(word for word, given in (("above", self.thresholds), ("if", self.conditions)) if given)
        return f"fail {kinds} " + ", ".join(rules)

    @property
    def markdown(self) -> str:
        """The gate as one Markdown line."""
        if self.crossed:
            return f"**Gate FAILED** ({md_text(self.rules)}): " + "; ".join(md_text(line) for line in self.crossed)
        return f"**Gate passed** ({md_text(self.rules)})"


def _gated(result: StressResult | Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(the target's scores, the noise summary) as JSON values: a gate reads a result or its JSON document."""
    if isinstance(result, StressResult):
        return (result.target_scores.to_dict() if result.target_scores else {}), result.noise
    return (result.get("scores", {}).get(result.get("target"), {}) or {}), (result.get("noise") or {})


def matched(result: StressResult | Mapping[str, Any], conditions: Mapping[str, str]) -> list[str]:
    """The --fail-if conditions the target meets, as readable lines; fails closed (no category: met)."""
    scores, _ = _gated(result)
    categories = scores.get("categories", {}) or {}
    lines = []
    for aspect, category in conditions.items():
        found = categories.get(aspect)
        if found is None or found == "undecided":
            why = "no position vectors to score" if not scores else "not decided"
            lines.append(f"{aspect} has no category ({why}: fails closed)")
        elif found in FAIL_IF_CATEGORIES[category]:
            lines.append(
                f"{aspect} is {found} than its position shuffles"
                if found != "indistinguishable"
                else f"{aspect} is {found} from its position shuffles"
            )
    return lines


def crossed(result: StressResult | Mapping[str, Any], thresholds: Mapping[str, float]) -> list[str]:
    """The thresholds the target crosses, as readable lines.

    Fails closed: a score that is missing, None, NaN or not a number crosses its threshold (a
    gate that cannot be evaluated never passes), and so does any score against a NaN threshold;
    an infinite score (raw stress beyond float64's range) crosses every finite one.
    """
    scores, noise = _gated(result)
    lines = []
    for metric, limit in thresholds.items():
        value = (noise if metric == "noise_fraction" else scores).get(metric)
        number = float(value) if isinstance(value, Real) and not isinstance(value, bool) else math.nan
        if math.isnan(number) or not number <= limit:
            shown = f"{number:.6g}" if not math.isnan(number) else ("not computed" if value is None else "nan")
            reason = (
                " (undefined: fails closed)"
                if math.isnan(number)
                else " (beyond float64's range)"
                if math.isinf(number)
                else ""
            )
            lines.append(f"{metric} {shown} > {limit:g}{reason}")
    return lines


# --- how every output writes numbers and paths ----------------------------------------------------------


def fmt(value: Any) -> str:
    """Numbers to 4 significant digits, ranges [[a, b], ...] as 'a-b, ...', lists joined."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and value and all(isinstance(v, list) and len(v) == 2 for v in value):
        return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in value)
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value) if value else "none"
    if value is None:
        return "-"
    return str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub (GFM) table (:func:`geoanalyze.io.markdown_table`), numbers through :func:`fmt`, text
    through :func:`md_text`."""
    return gfm_table([md_text(str(h)) for h in header], rows, lambda value: md_text(fmt(value)))


#: a path outside the working directory is shown relative to it when it climbs at most this many folders
RELATIVE_UPS = 3


def display_path(path: str | os.PathLike[str], base: str | os.PathLike[str] | None = None) -> str:
    """A path as a report shows it: never an absolute site-packages or home path, relative where it can be.

    Inside an installed package -> ``<site-packages>/pkg/...``; under ``base`` (default: the working
    directory) -> relative; near it (at most :data:`RELATIVE_UPS` folders up, as ``../shared/data`` is
    typed) -> ``../...``; under the home folder -> ``~/...``; otherwise unchanged.
    """
    text = str(path)
    if not os.path.isabs(text):
        return text
    resolved = Path(text)
    roots = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    for root in sorted(roots, key=len, reverse=True):
        with contextlib.suppress(ValueError):
            return "<site-packages>/" + resolved.relative_to(root).as_posix()
    with contextlib.suppress(ValueError):
        relative = resolved.relative_to(here := Path.cwd() if base is None else Path(base))
        return relative.as_posix() or "."
    with contextlib.suppress(ValueError):
        climbed = Path(os.path.relpath(resolved, here))
        ups = len([part for part in climbed.parts if part == ".."])
        if ups <= RELATIVE_UPS and not climbed.is_absolute():
            return climbed.as_posix()
    with contextlib.suppress(ValueError):
        return "~/" + resolved.relative_to(Path.home()).as_posix()
    return text


# --- the results of marginals, distances, mds, datasets list and encodings list -------------------------


@dataclass(frozen=True)
class Provenance(Record):
    """What a result needs to be reproduced: the geoanalyze ``version``, the ``command`` line and the ``seed``."""

    version: str
    command: str
    seed: int | None

    @property
    def markdown(self) -> str:
        """The provenance as one Markdown line."""
        seed = "" if self.seed is None else f", seed {self.seed}"
        return f"geoanalyze {md_text(str(self.version))}{seed}: {md_code(str(self.command))}"


class CommandResult(Record):
    """A frozen dataclass whose JSON (what ``-f json`` prints) is its fields, in order, with numpy
    values as plain ones and non-finite numbers as null (fields marked :data:`NOT_IN_JSON` left out)."""


@dataclass(frozen=True)
class CountsResult(CommandResult):
    """What ``geoanalyze marginals`` reports of the counts it made or merged: ``sources`` each with
    where it came from, ``counting`` what each streamed count did, ``output`` the file written."""

    sources: Sequence[Mapping[str, str]]
    tokenizer: Mapping[str, Any] | None
    n_sequences: int
    n_positions: int
    vocab_size: int
    nonzero: int
    kept_positions: int
    left_out: Mapping[str, Any]
    totals: np.ndarray
    counting: Sequence[Mapping[str, Any]]
    output: str | None

    @classmethod
    def of(
        cls,
        counts: Any,
        sources: Sequence[Mapping[str, str]],
        counting: Sequence[Mapping[str, Any]],
        min_count: int,
        output: str | os.PathLike[str] | None = None,
    ) -> CountsResult:
        """The result of :class:`~geoanalyze.corpus.marginals.PositionalCounts` ``counts``."""
        return cls(
            sources,
            counts.metadata.get("tokenizer"),
            counts.n_sequences,
            counts.n_positions,
            counts.vocab_size,
            int(counts.counts.nnz),
            int(counts.kept_positions(min_count).size),
            counts.left_out(min_count),
            counts.totals,
            counting,
            str(output) if output else None,
        )


@dataclass(frozen=True)
class DistancesResult(CommandResult):
    """What ``geoanalyze distances`` reports of a :class:`~geoanalyze.geometry.distances.PositionGeometry`:
    the kept positions, the noise summary and floors, the files written and the noise warnings."""

    sources: Sequence[Mapping[str, str]]
    metric: str
    positions: np.ndarray
    left_out: Mapping[str, Any]
    noise: Mapping[str, Any]
    noise_floor: np.ndarray
    totals: np.ndarray
    output: str | None
    heatmap: str | None
    warnings: Sequence[str]
    #: the position set scored when --positions is not ``all``
    position_set: PositionSet | None = field(default=None, metadata=IF_SET)

    @classmethod
    def of(
        cls,
        geometry: PositionGeometry,
        sources: Sequence[Mapping[str, str]],
        output: str | os.PathLike[str] | None = None,
        heatmap: str | os.PathLike[str] | None = None,
    ) -> DistancesResult:
        summary = geometry.summary
        return cls(
            sources,
            geometry.metric,
            geometry.positions,
            geometry.left_out,
            summary,
            geometry.noise_floor,
            geometry.totals,
            str(output) if output else None,
            str(heatmap) if heatmap else None,
            distance_warnings(summary),
        )


@dataclass(frozen=True)
class MdsResult(CommandResult):
    """What ``geoanalyze mds`` reports: the eigen-spectrum of the distances, the stress against rank and
    the low-rank encoding P = A W made of them (its rank, width, stress and parameter counts)."""

    sources: Sequence[Mapping[str, str]]
    metric: str
    distance: str
    n_positions: int
    positions: np.ndarray
    effective_rank: int
    tolerance: float
    negative_mass: float
    eigenvalues: np.ndarray
    stress_curve: Mapping[int, float]
    rank: int
    dim: int
    stress: float
    parameters: Mapping[str, Any]
    output: str | None
    checkpoint: Mapping[str, Any] | None
    #: only the top eigenpairs were computed (the effective rank is a lower bound)
    partial: bool = field(default=False, metadata=NOT_IN_JSON)
    #: the position set scored when --positions is not ``all``
    position_set: PositionSet | None = field(default=None, metadata=IF_SET)

    @classmethod
    def of(
        cls,
        fitted: Any,
        curve: Mapping[int, float],
        encoding: Any,
        positions: np.ndarray,
        sources: Sequence[Mapping[str, str]],
        output: str | os.PathLike[str] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> MdsResult:
        """The result of an MDS fit, its stress curve and the encoding made of it (the metric and
        distance are those the encoding's metadata name)."""
        about = encoding.metadata
        return cls(
            sources,
            about["metric"],
            about["distance"],
            len(positions),
            positions,
            fitted.effective_rank,
            fitted.tolerance,
            fitted.negative_mass,
            fitted.eigenvalues,
            curve,
            encoding.rank,
            encoding.dim,
            about["stress"],
            encoding.parameter_counts(),
            str(output) if output else None,
            checkpoint,
            fitted.partial,
        )


@dataclass(frozen=True)
class DatasetRow:
    """One corpus ``geoanalyze datasets list`` knows by name, and the splits the data directory holds of it."""

    name: str
    hub_id: str | None
    config: str | None
    splits: list[str]
    text_column: str | None
    local_splits: list[str]
    description: str

    @property
    def hub_name(self) -> str:
        """The hub id and its config, as the list shows them: ``id (config)``, ``-`` for none."""
        if not self.hub_id:
            return "-"
        return f"{self.hub_id} ({self.config})" if self.config else str(self.hub_id)


@dataclass(frozen=True)
class DatasetsResult(CommandResult):
    """What ``geoanalyze datasets list`` reports: the named corpora and the data directory read."""

    data_dir: str | None
    datasets: tuple[DatasetRow, ...]

    @classmethod
    def of(cls, directory: Path | None) -> DatasetsResult:
        """The named corpora, with the splits ``directory`` (a data directory, or None) holds of each."""
        from .corpus.sources import DATASETS, LOCAL_SUFFIXES
        from .corpus.synthetic import KINDS

        def held(name: str, split: str) -> bool:
            return directory is not None and any((directory / name / f"{split}{s}").is_file() for s in LOCAL_SUFFIXES)

        rows = [
            DatasetRow(
                d.name,
                d.hub_id,
                d.config,
                list(d.splits),
                d.text_column,
                [s for s in d.splits if held(d.name, s)],
                d.description,
            )
            for d in DATASETS.values()
        ]
        about = f"generated with known marginals: synthetic:KIND,n=,length=,vocab=,seed= (KIND: {', '.join(KINDS)})"
        return cls(
            str(directory) if directory else None, (*rows, DatasetRow("synthetic", None, None, [], None, [], about))
        )


@dataclass(frozen=True)
class EncodingsResult(CommandResult):
    """What ``geoanalyze encodings list`` reports: each encoding family's name, summary and parameters."""

    encodings: tuple[Mapping[str, Any], ...]

    def to_json(self) -> str:
        """The JSON list of the families (``-f json``)."""
        return dumps(list(self.encodings))
