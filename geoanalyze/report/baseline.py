"""``geoanalyze report --baseline A B``: B's position scores beside A's on the report page.

The arithmetic is tracking's (:func:`geoanalyze.tracking.compare`: the change B - A, the null's
spread, ``--fail-if-worse``); this module holds the two stress analyses against it and puts the
comparison on the page, after the summary table and before the first target's section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IncompatibleError, InputError
from ..results import StressResult, display_path, markdown_table, md_text
from ..tracking import Comparison, StepRecord, compare
from .page import NotAnalysed, ReportPage

#: the heading of the page's comparison
HEADING = "## Against the baseline"


def check_comparable(baseline: StressResult, candidate: StressResult) -> None:
    """A and B must be held against one D (the same kept positions, the same distances: one corpus read
    with one tokenizer's vocabulary) and one null (tables of one width): else a change would be the
    corpora's or the draws', not the model's."""
    width = (getattr(baseline.target_scores, "dim", None), getattr(candidate.target_scores, "dim", None))
    differs = [
        ("kept positions", baseline.positions.shape != candidate.positions.shape
         or not np.array_equal(baseline.positions, candidate.positions)),
        ("corpus geometry D", baseline.distances.shape != candidate.distances.shape
         or not np.allclose(baseline.distances, candidate.distances, rtol=0, atol=1e-12)),
        (f"width ({width[1]}, not {width[0]})", width[0] != width[1]),
    ]  # fmt: skip
    for what, different in differs:
        if different:
            raise IncompatibleError(
                f"--baseline: {display_path(candidate.target)} and {display_path(baseline.target)} differ in their "
                f"{what}; compare checkpoints of one model and tokenizer on one corpus"
            )


def record(index: int, result: StressResult, base: Path | None = None) -> StepRecord:
    """A stress analysis as tracking's record of one checkpoint: its target's own position scores."""
    return StepRecord(index, None, display_path(result.target, base), result.target_scores)


def compare_results(
    baseline: StressResult | NotAnalysed,
    candidate: StressResult | NotAnalysed,
    rules: Mapping[str, float | None],
    base: Path | None = None,
) -> Comparison:
    """B against A (tracking.compare); a target that was not analysed is refused, naming why."""
    for outcome in (baseline, candidate):
        if isinstance(outcome, NotAnalysed):
            raise InputError(f"--baseline: {display_path(outcome.target)} could not be analysed ({outcome.reason})")
    assert isinstance(baseline, StressResult) and isinstance(candidate, StressResult)
    check_comparable(baseline, candidate)
    return compare(record(0, baseline, base), record(1, candidate, base), rules, baseline.discriminability)


def baseline_section(comparison: Comparison) -> str:
    """The page's comparison: the table of Comparison.rows() and a line per crossed gate."""
    lines = [HEADING, "", markdown_table(*comparison.rows()), ""]
    lines += [f"- {md_text(line)}" for line in comparison.lines()]
    lines += [
        "",
        "change: candidate - baseline; null sd: the standard deviation of the score's test statistic over "
        "shuffles of the baseline's positions (none for rel. sep.); beyond null: the change exceeds it; change is: "
        "better or worse as the score reads (lower is better except rel. sep.); gate: --fail-if-worse (limit: its "
        "tolerance, else the null sd).",
        "",
    ]
    return "\n".join(lines)


def with_baseline(
    page: ReportPage, outcomes: Sequence[Any], rules: Mapping[str, float | None], base: Path | None = None
) -> tuple[ReportPage, Comparison]:
    """``page`` with the comparison of its two targets (``outcomes``: A, B) after its summary, and that comparison."""
    if len(outcomes) != 2:
        raise InputError(f"--baseline compares two targets, got {len(outcomes)}; report --baseline A B")
    comparison = compare_results(outcomes[0], outcomes[1], rules, base)
    section = baseline_section(comparison)
    head, sep, rest = page.text.partition("\n## ")
    text = f"{head}\n{section}{sep}{rest}" if sep else f"{page.text}\n\n{section}"
    return replace(page, text=text), comparison
