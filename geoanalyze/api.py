"""The Python face of ``geoanalyze stress`` and ``geoanalyze report``: score, judge, render.

Each function mirrors a command, with the command's option names as keyword arguments::

    import geoanalyze as ga

    result = ga.score("rope:d=64", dataset="sample_corpora/drift-words.txt", null_draws=4)
    ga.verdict(result)                  # the one line under the table
    ga.to_json(result)                  # what `stress -f json` prints (a dict)
    ga.to_markdown(result)              # what `stress -f markdown` prints
    ga.write_report([result, other], "page.md")   # what `report -o page.md` writes, with figures

and, for vectors you made yourself, ``ga.score_vectors(P, D)`` (every score) with
``ga.null_calibration(P, D)`` (where P falls among random encodings of its shape).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .analysis import StressOptions, analyze

__all__ = ["score", "score_vectors", "to_json", "to_markdown", "verdict", "write_report"]


def score(
    target: str,
    dataset: str = "sst2",
    *,
    max_length: int | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Score a checkpoint (hub name or folder) or an encoding spec (``rope:d=64``) against a corpus.

    ``dataset`` is what ``--dataset`` takes (a name, a file or folder, ``synthetic:...``); the
    other keywords are the options of ``geoanalyze stress`` with underscores: ``split``,
    ``data_dir``, ``limit``, ``tokenizer``, ``max_length``, ``min_count``, ``distance``,
    ``layers``, ``compare`` (a sequence of specs), ``width``, ``null_draws``, ``seed``,
    ``bootstrap``, ``max_sequences``, ``device``, ``dtype``, ``batch_size``, ``cache``.
    Returns the analysis (pass it to :func:`to_json`, :func:`to_markdown`, :func:`report`).
    """
    if "compare" in options and isinstance(options["compare"], str):
        from .cli.stress import split_specs

        options["compare"] = split_specs(options["compare"])
    return analyze(target, StressOptions(dataset=dataset, max_positions=max_length, **options), progress=progress)


def verdict(result: dict[str, Any]) -> str:
    """The one-line verdict of the stress table (null test and shape against the standard encodings)."""
    from .report.stress import summarize

    return str(summarize(result)["verdict"])


def to_json(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready document ``stress -f json`` prints: scores, summary (rows, verdict, warnings, legend)."""
    from .io import to_jsonable
    from .report.stress import document

    return dict(to_jsonable(document(result)))


def to_markdown(result: dict[str, Any], legend: bool = True, figures: dict[str, str] | None = None) -> str:
    """The Markdown section ``stress -f markdown`` prints (GFM tables, verdict, legend)."""
    from .report.stress import markdown

    return markdown(result, figures, show_legend=legend)


def write_report(results: Sequence[dict[str, Any]], output: str | os.PathLike[str], title: str | None = None) -> Path:
    """Write a Markdown page of several analyses with their figures in ``<name>_files/``; return its path."""
    from .io import write_text
    from .report.render import markdown_table
    from .report.stress import markdown, report_header, report_row, summarize, write_figures

    page_path = Path(output)
    folder = page_path.parent / f"{page_path.stem}_files"
    rows, verdicts, sections = [], [], []
    for index, result in enumerate(results):
        summary = summarize(result)
        rows.append(report_row(result, summary))
        verdicts.append(f"- {summary['verdict']}")
        figures = write_figures(result, folder, prefix=f"{index}-")
        links = {name: f"{folder.name}/{Path(path).name}" for name, path in figures.items()}
        sections.append(markdown(result, links))
    dataset = results[0]["dataset"]["name"] if results else "-"
    heading = f"# {title or f'Positional geometry report: {dataset}'}"
    text = "\n".join([heading, "", markdown_table(report_header(), rows), "", *verdicts, "", *sections])
    write_text(page_path, text)
    return page_path


def score_vectors(positions: Any, distances: Any) -> dict[str, float]:
    """Every score of position vectors (n x d) against target distances (n x n)."""
    from .geometry.scores import all_scores

    return all_scores(positions, distances)
