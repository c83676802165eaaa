"""A checkpoint against a baseline: did a fine-tune damage the position geometry?

For each scale-free score of the position row, B's value beside A's, the change B - A, and the
null's spread: the standard deviation of that score's test statistic over the shuffles of A's
own positions (docs/scores.md §5; the scaled stress itself, the rank discordance for the
violations), the size of a change that scrambling A's positions makes. Relative separation has
no shuffle test, and so no spread.

``--fail-if-worse SCORE[=TOL]`` fails when B is worse than A by more than TOL in the score's own
units (worse: higher for the violations and scaled stress, lower for relative separation); TOL
defaults to the null's spread (relative separation needs one given).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..geometry.null import ASPECTS, LOWER_IS_BETTER
from ..geometry.shuffle import TESTED as SHUFFLE_TESTED
from ..results import Discriminability, fmt
from .track import LABELS, TRACKED, StepRecord


def score_names() -> dict[str, str]:
    """Every name --fail-if-worse accepts -> the score: the aspects, the score keys, the column labels."""
    names = {aspect: score for aspect, score in ASPECTS.items()}
    names.update({score: score for score in TRACKED})
    names.update({label.replace(" ", "").rstrip("."): score for score, label in LABELS.items()})
    return names


def parse_fail_if_worse(items: Sequence[str]) -> dict[str, float | None]:
    """'order' -> {monotonicity_violation: None} (the null's spread); 'order=0.01' -> 0.01."""
    names = score_names()
    rules: dict[str, float | None] = {}
    for item in items:
        name, sep, value = (part.strip() for part in item.partition("="))
        key = name.lower().replace("-", "_").replace(" ", "").rstrip(".")
        if key not in names:
            raise InputError(f"--fail-if-worse: unknown score {name!r}; choose one of {', '.join(names)}")
        tolerance: float | None = None
        if sep:
            try:
                tolerance = float(value)
            except ValueError as exc:
                raise InputError(f"--fail-if-worse {item!r}: {value!r} is not a number") from exc
            if not math.isfinite(tolerance) or tolerance < 0:
                raise InputError(f"--fail-if-worse {item!r}: the tolerance must be a finite number >= 0")
        if names[key] in rules:
            raise InputError(f"--fail-if-worse {names[key]} is given twice; give each score once")
        if tolerance is None and names[key] not in SHUFFLE_TESTED:
            raise InputError(
                f"--fail-if-worse {name}: relative separation has no shuffle spread to default to; "
                f"give a tolerance, e.g. {name}=0.05"
            )
        rules[names[key]] = tolerance
    return rules


@dataclass(frozen=True)
class Change:
    """One score of B against A: the values, the change B - A, the null's spread, and how much worse B is."""

    score: str
    baseline: float
    candidate: float
    spread: float
    tolerance: float | None = None

    @property
    def change(self) -> float:
        return self.candidate - self.baseline

    @property
    def worse_by(self) -> float:
        """How much worse B is than A (negative: better), in the score's units."""
        return self.change if LOWER_IS_BETTER.get(self.score, True) else -self.change

    @property
    def direction(self) -> str:
        """The change read the score's way: "better", "worse", "same" (or "undefined")."""
        if not math.isfinite(self.worse_by):
            return "undefined"
        return "worse" if self.worse_by > 0 else "better" if self.worse_by < 0 else "same"

    @property
    def beyond_spread(self) -> bool:
        return math.isfinite(self.spread) and abs(self.change) > self.spread

    @property
    def limit(self) -> float:
        return self.spread if self.tolerance is None else self.tolerance

    @property
    def failed(self) -> bool:
        """Worse beyond the tolerance; an undefined score fails closed."""
        if not (math.isfinite(self.baseline) and math.isfinite(self.candidate)):
            return True
        return self.worse_by > self.limit

    def to_dict(self, gated: bool) -> dict[str, Any]:
        record = {
            "score": self.score,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "change": self.change,
            "null_spread": self.spread,
            "beyond_null_spread": self.beyond_spread,
            "worse_by": self.worse_by,
        }
        if gated:
            record.update({"tolerance": self.limit, "failed": self.failed})
        return record


@dataclass(frozen=True)
class Comparison:
    """B (``candidate``) against A (``baseline``): one :class:`Change` per score, the gated ones' rules."""

    baseline: str
    candidate: str
    changes: tuple[Change, ...]
    gated: tuple[str, ...] = ()
    #: score -> why this corpus cannot rank encodings on it (its change says nothing about which is better)
    not_ranked: Mapping[str, str] = field(default_factory=dict)

    @property
    def crossed(self) -> list[Change]:
        return [change for change in self.changes if change.score in self.gated and change.failed]

    def rows(self) -> tuple[list[str], list[list[Any]]]:
        # "change is": better or worse whichever way the score reads (rel. sep. is better higher)
        header = ["score", "baseline", "candidate", "change", "null sd", "beyond null", "change is", "gate"]
        rows = [
            [
                LABELS[c.score],
                c.baseline,
                c.candidate,
                c.change,
                c.spread if math.isfinite(c.spread) else "-",  # rel. sep.: no shuffle test, no spread
                "yes" if c.beyond_spread else "no",
                "not ranked" if c.score in self.not_ranked else c.direction,
                ("FAIL" if c.failed else "pass") if c.score in self.gated else "-",
            ]
            for c in self.changes
        ]
        return header, rows

    def lines(self) -> list[str]:
        lines = [f"baseline {self.baseline}; candidate {self.candidate}"]
        for score, reason in self.not_ranked.items():
            lines.append(
                f"cannot decide: {LABELS[score]} cannot separate encodings on this corpus ({reason}), so its "
                "change says nothing about which table is better"
            )
        for c in self.crossed:
            lines.append(
                f"{LABELS[c.score]} is worse by {fmt(c.worse_by)} (limit {fmt(c.limit)}"
                f"{', the null spread' if c.tolerance is None else ''})"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "scores": [c.to_dict(c.score in self.gated) for c in self.changes],
            "crossed": [c.score for c in self.crossed],
            "not_ranked": dict(self.not_ranked),
        }


def compare(
    baseline: StepRecord,
    candidate: StepRecord,
    rules: Mapping[str, float | None],
    decided: Discriminability | None = None,
) -> Comparison:
    """B's position scores against A's; ``rules``: score -> tolerance (None: the null's spread); ``decided``:
    the corpus's discriminability, whose aspects it cannot rank the comparison says so for."""
    for record in (baseline, candidate):
        if record.error is not None:
            raise InputError(f"--baseline: {record.checkpoint} could not be scored ({record.error})")
        if record.position is None:
            raise InputError(
                f"--baseline compares position tables, and {record.checkpoint} has no position vectors; "
                "compare its layers with track --layers instead"
            )
    assert baseline.position is not None and candidate.position is not None
    changes = tuple(
        Change(
            score,
            float(baseline.position.observed[score]),
            float(candidate.position.observed[score]),
            float(baseline.position.null[score].sd) if score in baseline.position.null else math.nan,
            rules.get(score),
        )
        for score in TRACKED
    )
    not_ranked = {
        ASPECTS[aspect]: entry.reason or "not ranked"
        for aspect, entry in (decided.aspects.items() if decided is not None else ())
        if entry.discriminates is False
    }
    return Comparison(baseline.checkpoint, candidate.checkpoint, changes, tuple(rules), not_ranked)
