"""A report page: several stress analyses side by side, with their figures.

The one page ``geoanalyze report`` writes and :func:`geoanalyze.write_report` writes::

    # <title>
    <the command line and seed>           (when the page records a run)
    > **Warning:** ...                    per target, what makes its scores untrustworthy
    | target | d | positions | ... |      one row per target ("not analysed" when it failed)
    - <verdict>                           per target analysed
    **Gate passed** / **Gate FAILED**     (with --fail-above / --fail-if)
    ## <target> on <corpus>               per target: its Markdown section, figures linked from
                                          <page>_files/, or why it was not analysed

A new page replaces its figure folder whole, so :func:`check_figure_folder` lets it do so only
when the folder holds nothing but figures a report draws (``<index>-<figure>.png``, the names
:func:`~geoanalyze.report.stress.write_figures` gives): a file of the user's there is never deleted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io import dumps
from ..results import Gate, Judgement, Provenance, StressResult, display_path, markdown_table, md_text, summarize
from .stress import report_header, report_row, write_figures

#: the name of each figure a report draws: ``<index>-<figure>.png`` (report.stress.write_figures)
REPORT_FIGURE = re.compile(r"[0-9]+-(hellinger|mds|shepard|null|layers)\.png")


def check_figure_folder(folder: Path) -> None:
    """Refuse to replace a figure folder that holds anything but an earlier report's figures (a user's
    notes, a subfolder, another image), naming the first such entry; an absent folder passes."""
    if not folder.is_dir() or folder.is_symlink():
        return  # absent, or not a folder: the output checks name it
    foreign = sorted(
        entry.name
        for entry in folder.iterdir()
        if entry.is_symlink() or not entry.is_file() or not REPORT_FIGURE.fullmatch(entry.name)
    )
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise InputError(
            f"{folder / foreign[0]}{more} was not written by a report, and the report replaces its figure "
            f"folder {folder} whole; move it out of the folder, or write the report elsewhere (-o another.md)"
        )


@dataclass(frozen=True)
class NotAnalysed:
    """A target the page names without scores: why its analysis failed."""

    target: str
    reason: str


@dataclass(frozen=True)
class ReportPage:
    """The page's text, its summary table, and what its targets say.

    ``documents``: per target, its JSON document with its gate (or its error); ``crossings``: the
    gate lines every target crossed, each prefixed with its target; ``failed``: the targets not analysed.
    """

    text: str
    header: list[str]
    rows: list[list[Any]]
    verdicts: list[str]
    documents: list[dict[str, Any]]
    failed: list[str]
    crossings: list[str]
    gate: Judgement | None
    comparisons: tuple[str, ...] = ()
    #: every target's analysis, or why it failed, in page order
    outcomes: tuple[StressResult | NotAnalysed, ...] = ()

    def to_json(self, run: Provenance | None = None, report: str | None = None, comparison: Any = None) -> str:
        """What ``report -f json`` prints: the run, the page written, every target's document with its gate,
        the page's gate and (``report --baseline``) the comparison with the baseline."""
        document = {"run": run, "report": report, "targets": self.documents, "gate": self.gate and self.gate.to_dict()}
        return dumps({**document, **({} if comparison is None else {"comparison": comparison.to_dict()})})


def compared(first: StressResult, other: StressResult, base: Path | None = None) -> str | None:
    """A sentence reading ``other``'s position row against ``first``'s, score by score, each the way it
    reads (lower is better except rel. sep.); None when either has no position vectors."""
    import math

    from ..tracking.compare import Change
    from ..tracking.track import LABELS, TRACKED

    a, b = first.scores.get(first.target), other.scores.get(other.target)
    if a is None or b is None:
        return None
    changes = []
    for score in TRACKED:
        if score not in a.observed or score not in b.observed:
            continue
        spread = a.null[score]["sd"] if score in a.null else math.nan
        changes.append(Change(score, float(a.observed[score]), float(b.observed[score]), float(spread)))
    by = {word: [LABELS[c.score] for c in changes if c.direction == word] for word in ("better", "worse", "same")}
    beyond = [LABELS[c.score] for c in changes if c.direction in ("better", "worse") and c.beyond_spread]
    parts = [f"{word} on {', '.join(names)}" for word, names in by.items() if names]
    if not parts:
        return None
    clear = (
        f"beyond the random tables' spread on {', '.join(beyond)}"
        if beyond
        else "none beyond the random tables' spread"
    )
    shown, against = display_path(other.target, base), display_path(first.target, base)
    return f"{shown} against {against}: {'; '.join(parts)} ({clear}; lower is better except rel. sep.)"


def build_report(
    outcomes: Iterable[StressResult | NotAnalysed],
    figure_dir: Path,
    title: str,
    *,
    link_dir: str | None = None,
    run: Provenance | None = None,
    gate: Gate | None = None,
    show_legend: bool = True,
    base: Path | None = None,
) -> ReportPage:
    """The page of ``outcomes`` (in order; a generator runs each analysis just before its figures),
    drawing each result's figures into ``figure_dir`` as ``<index>-<figure>.png``.

    ``link_dir``: the folder the page links its figures from (default: ``figure_dir``'s name, the
    page's neighbour); ``run``: the provenance the page records (a command's); ``gate``: the rules
    each target is held to, reported per target and for the page; ``base``: the folder paths are
    shown from (:func:`~geoanalyze.results.display_path`; default: the working directory).
    """
    gate = gate or Gate()
    link_dir = link_dir or figure_dir.name
    header = report_header()
    rows: list[list[Any]] = []
    verdicts: list[str] = []
    warnings: list[str] = []
    sections: list[str] = []
    documents: list[dict[str, Any]] = []
    failed: list[str] = []
    crossings: list[str] = []
    results: list[StressResult | NotAnalysed] = []
    for index, outcome in enumerate(outcomes):
        results.append(outcome)
        shown = display_path(outcome.target, base)
        if isinstance(outcome, NotAnalysed):
            failed.append(outcome.target)
            sections.append(f"## {md_text(shown)}\n\nnot analysed: {md_text(outcome.reason)}\n")
            rows.append([shown, *["-"] * (len(header) - 2), "not analysed"])
            documents.append({"target": outcome.target, "error": outcome.reason})
            continue
        judged = gate.judge(outcome)
        crossings += [f"{shown}: {line}" for line in (judged.crossed if judged else ())]
        figures = write_figures(outcome, figure_dir, prefix=f"{index}-", base=base)
        links = {figure.title: f"{link_dir}/{figure.path.name}" for figure in figures}
        sections.append(outcome.to_markdown(links, level=2, show_legend=show_legend, gate=judged, base=base))
        summary = summarize(outcome, base)
        verdicts.append(summary.verdict)
        warnings += [f"{shown}: {line}" for line in summary.warnings]
        rows.append(report_row(outcome, base))
        documents.append({**outcome.document(base), "gate": judged.to_dict() if judged else None})
    page = [f"# {md_text(title)}", "", *([run.markdown, ""] if run is not None else [])]
    page += [f"> **Warning:** {md_text(line)}\n" for line in warnings]
    page += [markdown_table(header, rows), ""]
    page += [f"- {md_text(line)}" for line in verdicts]
    analysed = [outcome for outcome in results if isinstance(outcome, StressResult)]
    comparisons = tuple(line for other in analysed[1:] if (line := compared(analysed[0], other, base)) is not None)
    if comparisons:
        page += ["", *(f"Compared: {md_text(line)}" for line in comparisons)]
    recorded = gate.record(crossings)
    if recorded is not None:
        page += ["", recorded.markdown]
    page += ["", *sections]
    text = "\n".join(page)
    return ReportPage(text, header, rows, verdicts, documents, failed, crossings, recorded, comparisons, tuple(results))
