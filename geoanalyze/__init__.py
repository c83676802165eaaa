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

#: module -> the names it lends the package, each module imported on first use of one of them
_FROM = {
    "analysis": "StressOptions",
    "api": "score score_vectors to_json to_markdown verdict write_report",
    "checkpoints.rows": "CaptureResult LayerRows capture",
    "corpus.marginals": "PositionalCounts count_positions",
    "corpus.sources": "DATASETS load_texts resolve_source",
    "corpus.synthetic": "SyntheticCorpus synthetic_corpus",
    "corpus.streaming": "CountJob compute_counts",
    "corpus.tokenize": "get_tokenizer",
    "encodings": "get_encoding",
    "errors": "GeoanalyzeError",
    "geometry.distances": "PositionGeometry fisher_rao_distances hellinger_distances position_geometry",
    "geometry.mds": "LowRankEncoding MDSResult classical_mds low_rank_encoding stress_curve",
    "experiments.record": "VerifyResult",
    "geometry.null": "null_calibration",
    "geometry.shuffle": "shuffle_test",
    "report.page": "ReportPage",
    "report.stress": "write_figures",
    "results": "CheckpointInfo CountsResult DatasetsResult DistancesResult EncodingScores EncodingsResult Gate "
    "Judgement LayerRow MdsResult StressResult Verdict",
    "tracking": "TrackResult",
    "train.loop": "TrainResult",
}
_EXPORTS = {name: f"geoanalyze.{module}" for module, names in _FROM.items() for name in names.split()}

__all__ = [
    "DATASETS",
    "CaptureResult",
    "CheckpointInfo",
    "CountJob",
    "CountsResult",
    "DatasetsResult",
    "DistancesResult",
    "EncodingScores",
    "EncodingsResult",
    "Gate",
    "GeoanalyzeError",
    "Judgement",
    "LayerRow",
    "LayerRows",
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
    "TrainResult",
    "Verdict",
    "VerifyResult",
    "__version__",
    "capture",
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
    from .checkpoints.rows import CaptureResult, LayerRows, capture
    from .corpus.marginals import PositionalCounts, count_positions
    from .corpus.sources import DATASETS, load_texts, resolve_source
    from .corpus.streaming import CountJob, compute_counts
    from .corpus.synthetic import SyntheticCorpus, synthetic_corpus
    from .corpus.tokenize import get_tokenizer
    from .encodings import get_encoding
    from .errors import GeoanalyzeError
    from .experiments.record import VerifyResult
    from .geometry.distances import PositionGeometry, fisher_rao_distances, hellinger_distances, position_geometry
    from .geometry.mds import LowRankEncoding, MDSResult, classical_mds, low_rank_encoding, stress_curve
    from .geometry.null import null_calibration
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
    from .train.loop import TrainResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'geoanalyze' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
