"""Geometry over training: a series of checkpoints scored against one corpus geometry.

``find_series`` (series.py) orders the checkpoints (``find_several``: several series side by side); ``track`` (track.py) scores them, counting the
corpus once and drawing the null once; ``compare`` (compare.py) holds a checkpoint against a
baseline; ``draw_track`` (figures.py) draws every score against step. docs/tracking.md.
"""

from .compare import Comparison, compare, parse_fail_if_worse
from .series import Member, find_series, find_several
from .track import StepRecord, TrackResult, track

__all__ = [
    "Comparison",
    "Member",
    "StepRecord",
    "TrackResult",
    "compare",
    "find_series",
    "find_several",
    "parse_fail_if_worse",
    "track",
]
