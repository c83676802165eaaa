"""The Python face of ``geoanalyze stress`` and ``geoanalyze report``: score, judge, render.

Each function mirrors a command, with the command's option names as keyword arguments::

    import geoanalyze as ga

    result = ga.score("rope:d=64", dataset="sample_corpora/drift-words.txt", null_draws=4)
    result.verdict.sentence             # the one line under the table (ga.verdict(result))
    result.verdict.shape                # "better", "indistinguishable", "worse" or "undecided"
    result.scores["rope:d=64"].observed["scaled_stress"]
    result.to_json()                    # what `stress -f json` prints (a JSON string; ga.to_json(result))
    result.to_markdown()                # what `stress -f markdown` prints (ga.to_markdown(result))
    ga.write_report([result, other], "page.md")   # the page `report -o page.md` writes, with figures

The result is a frozen :class:`~geoanalyze.results.StressResult`; its ``geometry`` and
``vectors`` are the arrays behind the scores (``ga.write_figures(result, folder)`` draws them).
For vectors you made yourself, ``ga.score_vectors(P, D)`` (every score) with
``ga.null_calibration(P, D)`` (where P falls among random encodings of its shape).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import analysis, notes
from .analysis import StressOptions, split_specs
from .results import StressResult

__all__ = ["score", "score_vectors", "to_json", "to_markdown", "verdict", "write_report"]


#: the command's option names (underscores) that name a StressOptions field otherwise
RENAMED = {"estimate": "distance", "max_length": "max_positions"}
#: options of `geoanalyze stress` that are the command line's own, and what to use in Python instead
COMMAND_ONLY = {
    "fail_above": "a gate on the exit code; compare result.scores[name].observed[score] with your limit",
    "fail_if": "a gate on the exit code; read result.scores[name].categories",
    "format": "result.to_json() and result.to_markdown() give the json and markdown formats",
    "output": "write result.to_json() to a file",
    "no_legend": "ga.to_markdown(result, legend=False)",
}


#: what the command line uses of the library, so that ``cli/`` imports only this public face: module -> its
#: names (``name:alias`` where two modules share a name), each module loaded on first use of one of its
#: names, so ``geoanalyze --help`` imports neither torch nor transformers
_FACE = {
    "analysis": "DEFAULT_WIDTH check_not_a_typo known_distances",
    "cache": "caching file_digests turn_off",
    "checkpoints": "load_checkpoint",
    "checkpoints.load": "resolve_checkpoint",
    "checkpoints.write": "write_into_checkpoint",
    "corpus.marginals": "DEFAULT_MIN_COUNT PositionalCounts check_mergeable tokenizer_identity",
    "corpus.positions": "PositionSet PositionSpec pool_positions",
    "corpus.sources": "DATASETS data_dir_from_env default_tokenizer files_read reads_columns resolve_source",
    "corpus.streaming": "CountJob compute_counts connect",
    "corpus.synthetic": "KINDS synthetic_corpus tokenizer_words",
    "corpus.tokenize": "get_tokenizer",
    "encodings": "get_encoding is_encoding_spec list_encodings",
    "experiments": "EXPERIMENTS ExperimentOptions PRESET_NAMES get_experiment run_experiment write_result "
    "markdown:experiment_markdown",
    "experiments.record": "PRESET_NOTES check_rows",
    "geometry.distances": "PositionGeometry position_geometry",
    "geometry.mds": "mds_encoding",
    "geometry.null": "TESTED_ASPECTS",
    "geometry.sampled": "check_dense",
    "geometry.shuffle": "MIN_SHUFFLES",
    "hub": "packaged_minilm_path",
    "tracking": "TrackResult compare find_series find_several parse_fail_if_worse track",
    "tracking.figures": "draw_track training_figure",
    "tracking.probe": "GeometryProbe",
    "tracking.series": "Member",
    "tracking.track": "TRACK_CONSEQUENCE position_rows series_of layer_rows:track_layer_rows legend:track_legend",
    "train": "train",
    "train.config": "PRESETS resolve_config valid_keys",
    "train.loop": "RunExtras",
}
_WHERE = {
    alias: (module, name)
    for module, names in _FACE.items()
    for name, alias in (f"{entry}:{entry}".split(":")[:2] for entry in names.split())
}


def __getattr__(name: str) -> Any:
    """A name of :data:`_FACE`, read from its module (imported on first use) at each use, never cached
    here: the module's own attribute is the one (a test that replaces it replaces it for the CLI too)."""
    import importlib

    if name not in _WHERE:
        raise AttributeError(f"module 'geoanalyze.api' has no attribute {name!r}")
    module, original = _WHERE[name]
    return getattr(importlib.import_module(f"geoanalyze.{module}"), original)


def analysis_keywords() -> list[str]:
    """The keywords :func:`score` takes after ``target`` and ``dataset``: the command's names."""
    from dataclasses import fields

    names = {field.name for field in fields(StressOptions)} - {"dataset", "default_width", "max_positions"}
    return sorted(names | set(RENAMED) | {"no_cache", "plot_dir", "progress"})


def stress_options(dataset: str, options: Mapping[str, Any]) -> StressOptions:
    """``options`` by the command's names (``estimate``, ``max_length``, ``no_cache``) as StressOptions;
    an unknown or command-only keyword is an InputError naming the valid ones."""
    from difflib import get_close_matches

    from .errors import InputError

    valid = analysis_keywords()
    values: dict[str, Any] = {}
    for name, value in options.items():
        if name in COMMAND_ONLY:
            raise InputError(f"score() has no {name}= ({COMMAND_ONLY[name]})")
        if name == "no_cache":
            values["cache"] = not value
        elif name in RENAMED:
            values[RENAMED[name]] = value
        elif name in valid:
            values[name] = value
        else:
            close = get_close_matches(name, valid, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise InputError(f"score() got an unknown keyword {name}=; {hint}it takes: {', '.join(valid)}")
    if isinstance(values.get("compare"), str):
        values["compare"] = split_specs(values["compare"])
    return StressOptions(dataset=dataset, **values)


def score(
    target: str | os.PathLike[str] | Callable[..., Any],
    dataset: str | os.PathLike[str] = "sst2",
    *,
    plot_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    **options: Any,
) -> StressResult:
    """Score a checkpoint (hub name or folder), an encoding spec (``rope:d=64``) or a callable
    ``f(positions) -> (n, k)`` (named by its ``__name__``) against a corpus.

    ``dataset`` is what ``--dataset`` takes (a name, a file or folder, ``synthetic:...``); the
    other keywords are the analysis options of ``geoanalyze stress`` with underscores: ``split``,
    ``data_dir``, ``text_column``, ``limit``, ``tokenizer``, ``max_length``, ``min_count``,
    ``estimate`` (or ``distance``), ``layers``, ``compare`` (a sequence of specs or callables, or one
    comma-separated string), ``width``, ``null_draws``, ``seed``, ``bootstrap``, ``max_sequences``,
    ``device``, ``dtype``, ``batch_size``, ``no_cache`` (or ``cache``: False neither reads nor writes any
    cache), ``trust_remote_code``, and ``plot_dir`` (the figures are drawn there, as ``--plot-dir`` draws
    them). The command line's own options (``fail_above``, ``fail_if``, ``format``, ``output``) and any
    other keyword raise an :class:`~geoanalyze.errors.InputError` naming the valid keywords. Returns the
    typed result (``result.to_json()``, ``result.to_markdown()``).
    """
    from .cache import caching

    if options.get("data_dir") is not None:
        options["data_dir"] = os.fspath(options["data_dir"])
    if isinstance(target, os.PathLike):  # a checkpoint folder given as a Path
        target = os.fspath(target)
    stress = stress_options(os.fspath(dataset), options)
    with caching(stress.cache):
        result = analyze(target, stress, progress=progress)
        if plot_dir is not None:
            from .report.stress import write_figures

            write_figures(result, plot_dir)
    return result


def analyze(
    target: str | Callable[..., Any],
    options: StressOptions,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
) -> StressResult:
    """:func:`geoanalyze.analysis.analyze`, with the notes the analysis recorded on the result (``result.notes``)."""
    with notes.collecting() as recorded:
        result = analysis.analyze(target, options, progress=progress)
    return replace(result, notes=tuple(recorded.messages))


def verdict(result: StressResult) -> str:
    """The one-line verdict of the stress table (null test and shape against the standard encodings)."""
    return result.verdict.sentence


def to_json(result: StressResult) -> str:
    """The JSON ``stress -f json`` prints (scores, verdict, summary), as a string: ``result.to_json()``."""
    return result.to_json()


def to_markdown(result: StressResult, legend: bool = True, figures: dict[str, str] | None = None) -> str:
    """The Markdown section ``stress -f markdown`` prints (GFM tables, verdict, legend)."""
    return result.to_markdown(figures, show_legend=legend)


def write_report(results: Sequence[StressResult], output: str | os.PathLike[str], title: str | None = None) -> Path:
    """Write the page ``geoanalyze report`` writes for ``results``, with their figures in ``<name>_files/``;
    return its path. ``title``: the page's heading (default: "Positional geometry report: <corpus>")."""
    import shutil

    from .io import staged_folder, write_text
    from .report.page import build_report

    page_path = Path(output)
    name = results[0].dataset.name if results else "-"
    figures = page_path.parent / f"{page_path.stem}_files"
    # The figures folder is replaced whole, as the CLI's is: an earlier page's figures never stay.
    with staged_folder(figures.with_name(f".{figures.name}.{os.getpid()}.partial")) as staging:
        page = build_report(results, staging, title or f"Positional geometry report: {name}", link_dir=figures.name)
        if figures.is_dir() and not figures.is_symlink():
            shutil.rmtree(figures)
        staging.rename(figures)
    write_text(page_path, page.text)
    return page_path


def score_vectors(positions: Any, distances: Any) -> dict[str, float]:
    """Every score of position vectors (n x d) against target distances (n x n)."""
    from .geometry.scores import all_scores

    return all_scores(positions, distances)
