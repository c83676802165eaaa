r"""Scores past the dense limit: on a seeded sample of positions, each with its jackknife standard error.

The dense path holds a few dozen n x n float64 matrices at its peak (:data:`DENSE_MATRICES`), so
past :data:`DENSE_LIMIT` positions it would exceed :data:`DENSE_BUDGET` bytes. There the scores
are estimated on m = :func:`sample_size` positions drawn without replacement from the kept ones
with the run's seed; their distances come from the counts of those positions alone
(``position_geometry(counts.select(sample))``), and every dense step (scores, shuffle null,
categories) runs on the sample unchanged. Each score's standard error is a delete-a-group jackknife
over the sampled positions: G groups of about m / G positions, the score recomputed G times with
one group left out, SE^2 = (G - 1) / G sum_g (s_g - mean s)^2 (Efron & Stein 1981; Efron & Tibshirani,
"An Introduction to the Bootstrap", chapter 11). Separation (a minimum over pairs) has no SE: a sample
of positions holds fewer pairs, so its separation is an upper bound on the full set's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import InputError
from .distances import Counts, PositionGeometry, position_geometry
from .scores import all_scores

#: the dense path's memory budget (bytes)
DENSE_BUDGET = 1 << 30
#: n x n float64 matrices the dense stress path holds at its peak: the geometry's BC, cross-half,
#: corrected BC, naive and corrected distances and the noise summary's temporaries (about 8); per scored
#: table its distances and the shuffle null's three channels (4 x 6 tables); the null's four target
#: channels: 8 + 24 + 4 = 36, rounded down to a power of two for the limit below
DENSE_MATRICES = 32
#: the largest n whose dense path fits :data:`DENSE_BUDGET`: 32 n^2 8 bytes <= 1 GiB, n = 2048
DENSE_LIMIT = math.isqrt(DENSE_BUDGET // (8 * DENSE_MATRICES))
#: positions the scores are estimated on past the limit: the shuffle null costs O(m^2) per draw, and
#: 999 draws of 8 tables at m = 512 take about 30 s on one core (at m = 1024, 220 s), inside the 5-minute
#: goal of issue 34 with counting 131,072 positions and the jackknife
SAMPLE_SIZE = 512
#: groups of the delete-a-group jackknife (9 degrees of freedom for each SE)
JACKKNIFE_GROUPS = 10
#: the scores a jackknife SE is given (separation, a minimum over pairs, is left out: module docstring)
WITH_ERRORS = (
    "stress",
    "scaled_stress",
    "monotonicity_violation",
    "anchored_monotonicity_violation",
    "lag_violation",
)
#: the environment variable that lowers the dense limit (tests, and runs that want the sampled path)
LIMIT_VARIABLE = "GEOANALYZE_DENSE_LIMIT"
_SAMPLE_STREAM = 0x73616D70


def dense_limit() -> int:
    """:data:`DENSE_LIMIT`, or the value of ``GEOANALYZE_DENSE_LIMIT`` (an integer >= 3) when set."""
    given = os.environ.get(LIMIT_VARIABLE)
    if given is None or not given.strip():
        return DENSE_LIMIT
    try:
        value = int(given)
    except ValueError:
        value = 0
    if value < 3:
        raise InputError(f"{LIMIT_VARIABLE}={given[:40]!r} is not an integer >= 3; unset it or give one such as 2048")
    return value


def sample_size(limit: int) -> int:
    """The positions scored past the dense limit: :data:`SAMPLE_SIZE`, never more than ``limit``."""
    return min(SAMPLE_SIZE, limit)


@dataclass(frozen=True)
class PositionSample:
    """The positions scored on the scaling path.

    Attributes
    ----------
    rows : (m,) indices into the kept positions, ascending.
    of : n, the kept positions it is drawn from.
    seed : the seed of the draw.
    groups : (m,) the jackknife group of each sampled row, 0..G-1.
    limit : the dense limit n exceeded.
    """

    rows: np.ndarray
    of: int
    seed: int
    groups: np.ndarray
    limit: int

    @property
    def size(self) -> int:
        return int(self.rows.size)

    def describe(self) -> str:
        """The line the table prints."""
        return f"scored on {self.size} of {self.of} positions (seed {self.seed}), ± = SE"

    def to_dict(self) -> dict[str, Any]:
        return {
            "positions": self.size,
            "of": self.of,
            "seed": self.seed,
            "dense_limit": self.limit,
            "jackknife_groups": int(self.groups.max()) + 1,
        }


def draw_sample(n: int, m: int, seed: int, groups: int = JACKKNIFE_GROUPS, limit: int = DENSE_LIMIT) -> PositionSample:
    """m of the n kept positions without replacement, drawn with ``seed``, and their jackknife groups."""
    if not 3 <= m <= n:
        raise InputError(f"a sample of {m} positions out of {n} cannot be scored; it needs 3..{n}")
    groups = max(2, min(groups, m // 3))
    rng = np.random.default_rng(np.random.SeedSequence([seed, _SAMPLE_STREAM]))
    rows = np.sort(rng.choice(n, size=m, replace=False))
    labels = np.empty(m, dtype=np.int64)
    labels[rng.permutation(m)] = np.arange(m) % groups
    return PositionSample(rows, n, seed, labels, limit)


def jackknife_errors(
    table: np.ndarray, distances: np.ndarray, index: np.ndarray, groups: np.ndarray, scale: float = 1.0
) -> dict[str, float]:
    """Each score of :data:`WITH_ERRORS`: its delete-a-group jackknife SE over the rows (module docstring)."""
    count = int(groups.max()) + 1
    estimates = []
    for group in range(count):
        keep = groups != group
        scores = all_scores(table[keep], distances[np.ix_(keep, keep)], index=index[keep], scale=scale)
        estimates.append([scores[name] for name in WITH_ERRORS])
    values = np.asarray(estimates, dtype=np.float64)
    spread = np.sum(np.square(values - values.mean(axis=0)), axis=0)
    return {name: float(np.sqrt((count - 1) / count * s)) for name, s in zip(WITH_ERRORS, spread, strict=True)}


def sampled_geometry(counts: Counts, kept: np.ndarray, sample: PositionSample, min_count: int) -> PositionGeometry:
    """The Hellinger geometry of the sampled positions ``kept[sample.rows]`` from their counts alone (m x m,
    never n x n); its positions are the corpus's, its ``left_out`` that of every position."""
    positions = kept[sample.rows]
    geometry = position_geometry(counts.select(positions), metric="hellinger", min_count=min_count)
    return replace(geometry, positions=positions, left_out=counts.left_out(min_count))


def check_dense(n: int) -> None:
    """Refuse an n x n geometry past the dense limit (`distances`, `mds`): one line naming its size and the fix."""
    limit = dense_limit()
    if n > limit:
        size = 2 * 8 * n * n / 1e9  # the naive and the corrected matrix, float64
        raise InputError(
            f"{n} kept positions exceed the dense limit of {limit}: their n x n distances file would be "
            f"{size:.3g} GB; choose fewer positions with --positions log:N or stride:K (or raise --min-count)"
        )
