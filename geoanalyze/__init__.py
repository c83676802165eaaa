"""geoanalyze: the geometry of positional encodings in transformers.

The public Python API (the command line is a thin layer over it)::

    from geoanalyze import load_texts, PositionalCounts, hellinger_distances, classical_mds
    from geoanalyze import score, verdict, to_json, to_markdown, write_report  # `stress`, `report`
    from geoanalyze import StressResult, EncodingScores, LayerRow, Verdict       # what score() returns

See ``examples/score_and_report.py``.

Names are imported lazily, so ``import geoanalyze`` (and ``geoanalyze --help``) stays fast
and never imports torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

_EXPORTS = {
    "load_texts": "geoanalyze.corpus.sources",
    "resolve_source": "geoanalyze.corpus.sources",
    "DATASETS": "geoanalyze.corpus.sources",
    "synthetic_corpus": "geoanalyze.corpus.synthetic",
    "SyntheticCorpus": "geoanalyze.corpus.synthetic",
    "get_tokenizer": "geoanalyze.corpus.tokenize",
    "PositionalCounts": "geoanalyze.corpus.marginals",
    "count_positions": "geoanalyze.corpus.marginals",
    "compute_counts": "geoanalyze.corpus.marginals",
    "hellinger_distances": "geoanalyze.geometry.distances",
    "fisher_rao_distances": "geoanalyze.geometry.distances",
    "position_geometry": "geoanalyze.geometry.distances",
    "PositionGeometry": "geoanalyze.geometry.distances",
    "classical_mds": "geoanalyze.geometry.mds",
    "MDSResult": "geoanalyze.geometry.mds",
    "stress_curve": "geoanalyze.geometry.mds",
    "low_rank_encoding": "geoanalyze.geometry.mds",
    "LowRankEncoding": "geoanalyze.geometry.mds",
    "GeoanalyzeError": "geoanalyze.errors",
    "score": "geoanalyze.api",
    "verdict": "geoanalyze.api",
    "to_json": "geoanalyze.api",
    "to_markdown": "geoanalyze.api",
    "write_report": "geoanalyze.api",
    "score_vectors": "geoanalyze.api",
    "StressOptions": "geoanalyze.analysis",
    "StressResult": "geoanalyze.results",
    "EncodingScores": "geoanalyze.results",
    "LayerRow": "geoanalyze.results",
    "CheckpointInfo": "geoanalyze.results",
    "Verdict": "geoanalyze.results",
    "CountsResult": "geoanalyze.results",
    "DistancesResult": "geoanalyze.results",
    "MdsResult": "geoanalyze.results",
    "DatasetsResult": "geoanalyze.results",
    "EncodingsResult": "geoanalyze.results",
    "Judgement": "geoanalyze.results",
    "Gate": "geoanalyze.results",
    "ReportPage": "geoanalyze.report.page",
    "TrackResult": "geoanalyze.tracking",
    "null_calibration": "geoanalyze.geometry.scores",
    "shuffle_test": "geoanalyze.geometry.shuffle",
    "get_encoding": "geoanalyze.encodings",
    "write_figures": "geoanalyze.report.stress",
}

__all__ = [
    "DATASETS",
    "CheckpointInfo",
    "CountsResult",
    "DatasetsResult",
    "DistancesResult",
    "EncodingScores",
    "EncodingsResult",
    "Gate",
    "GeoanalyzeError",
    "Judgement",
    "LayerRow",
    "LowRankEncoding",
    "MDSResult",
    "MdsResult",
    "PositionGeometry",
    "PositionalCounts",
    "ReportPage",
    "StressOptions",
    "StressResult",
    "SyntheticCorpus",
    "TrackResult",
    "Verdict",
    "__version__",
    "classical_mds",
    "compute_counts",
    "count_positions",
    "fisher_rao_distances",
    "get_encoding",
    "get_tokenizer",
    "hellinger_distances",
    "load_texts",
    "low_rank_encoding",
    "null_calibration",
    "position_geometry",
    "resolve_source",
    "score",
    "score_vectors",
    "shuffle_test",
    "stress_curve",
    "synthetic_corpus",
    "to_json",
    "to_markdown",
    "verdict",
    "write_figures",
    "write_report",
]

if TYPE_CHECKING:
    from .analysis import StressOptions
    from .api import score, score_vectors, to_json, to_markdown, verdict, write_report
    from .corpus.marginals import PositionalCounts, compute_counts, count_positions
    from .corpus.sources import DATASETS, load_texts, resolve_source
    from .corpus.synthetic import SyntheticCorpus, synthetic_corpus
    from .corpus.tokenize import get_tokenizer
    from .encodings import get_encoding
    from .errors import GeoanalyzeError
    from .geometry.distances import PositionGeometry, fisher_rao_distances, hellinger_distances, position_geometry
    from .geometry.mds import LowRankEncoding, MDSResult, classical_mds, low_rank_encoding, stress_curve
    from .geometry.scores import null_calibration
    from .geometry.shuffle import shuffle_test
    from .report.page import ReportPage
    from .report.stress import write_figures
    from .results import (
        CheckpointInfo,
        CountsResult,
        DatasetsResult,
        DistancesResult,
        EncodingScores,
        EncodingsResult,
        Gate,
        Judgement,
        LayerRow,
        MdsResult,
        StressResult,
        Verdict,
    )
    from .tracking import TrackResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'geoanalyze' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
