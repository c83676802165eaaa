"""Which positions are scored: every one, a stride, a range, or log-spaced buckets (``--positions``).

A choice is a list of disjoint, ordered position intervals [start, stop) over the positions the
counts reach (0..n-1). A stride or a range chooses intervals of one position each: their counts are
the positions' own. ``log:N`` cuts the n positions into N log-spaced buckets, and a bucket's counts
are the sum of its positions' counts, count row and split-half row alike (one sparse indicator
product, no loop over positions). So a bucket's N is the sum of its positions' N_i, its marginal is
the mixture of its positions' marginals weighted by their N_i, and its two halves are the pooled
halves: the noise floor and the corrected distance of a bucket are those of its pooled counts.

A bucket is compared with an encoding at its *representative position*: the N_i-weighted mean of its
positions, rounded to the nearest position. The pooled marginal is the mixture weighted by N_i; under
a marginal that drifts linearly in position, that mixture is the marginal at the weighted mean
position, so that is where an encoding's vector is the fair one to compare with. A bucket of one
position is represented by it, so ``stride:1`` and ``log:n`` (n buckets over n positions) are exactly
``all``. docs/definitions.md, "Positions, strides and buckets", has the definitions and an example.

The pooled counts (:class:`PooledCounts`) keep each bucket's row at its representative position and
zero rows elsewhere, so everything downstream (the min-count filter, the geometry, the encodings'
positions, the null) reads the representative positions as it reads positions today.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .marginals import DEFAULT_MIN_COUNT, PositionalCounts, position_runs

KINDS = ("all", "stride", "log", "range")
_FIX = "use all, stride:K, log:N or range:A-B (positions A to B-1)"


def _whole(text: str, what: str, spec: str) -> int:
    """``text`` as a whole number (``64``, ``1e9``); InputError naming the spec otherwise."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not value.is_integer():
        raise InputError(f"--positions {spec}: {what} {text!r} is not a whole number; {_FIX}")
    return int(value)


@dataclass(frozen=True)
class PositionSpec:
    """A parsed ``--positions`` value: ``kind`` (all, stride, log, range), its number (K, N or A) and,
    for a range, its end B (exclusive)."""

    kind: str = "all"
    value: int = 0
    stop: int = 0

    @classmethod
    def parse(cls, text: str) -> PositionSpec:
        """``all``, ``stride:K`` (K >= 1), ``log:N`` (N >= 2) or ``range:A-B`` (0 <= A < B); InputError
        with one line naming the problem otherwise."""
        spec = text.strip()
        kind, colon, rest = spec.partition(":")
        kind = kind.strip().lower()
        if kind == "all" and not colon:
            return cls()
        if kind not in KINDS or kind == "all" or not rest.strip():
            raise InputError(f"--positions {text!r} is not a position set; {_FIX}")
        if kind == "range":
            first, dash, last = rest.partition("-")
            if not dash:
                raise InputError(f"--positions {spec}: a range is A-B, e.g. range:0-512; {_FIX}")
            start, stop = _whole(first.strip(), "start", spec), _whole(last.strip(), "end", spec)
            if start < 0 or stop <= start:
                raise InputError(f"--positions {spec}: a range needs 0 <= A < B (positions A to B-1)")
            return cls("range", start, stop)
        value = _whole(rest.strip(), "K" if kind == "stride" else "N", spec)
        least = 1 if kind == "stride" else 2
        if value < least:
            what = "a stride K of at least 1" if kind == "stride" else "at least 2 buckets"
            raise InputError(f"--positions {spec}: {value} is too small, it needs {what}")
        return cls(kind, value)

    @classmethod
    def of(cls, spec: PositionSpec | str) -> PositionSpec:
        """``spec`` parsed when it is text (a Python caller's ``positions="log:64"``)."""
        return cls.parse(spec) if isinstance(spec, str) else spec

    @property
    def is_all(self) -> bool:
        """Whether every position is scored (today's behaviour)."""
        return self.kind == "all"

    def __str__(self) -> str:
        if self.kind == "range":
            return f"range:{self.value}-{self.stop}"
        return self.kind if self.is_all else f"{self.kind}:{self.value}"

    def intervals(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The chosen [start, stop) intervals over positions 0..n-1: (starts, stops), disjoint and in order.

        InputError when the set cannot be made of n positions (more buckets than positions, a range
        past them) or holds fewer than 2 positions.
        """
        if self.kind == "log":
            if self.value > n:
                raise InputError(
                    f"--positions {self}: {self.value} buckets but the corpus reaches {n} positions; "
                    f"ask for at most log:{n}"
                )
            edges = log_edges(n, self.value)
            return edges[:-1], edges[1:]
        if self.kind == "range" and self.stop > n:
            raise InputError(f"--positions {self}: the corpus reaches {n} positions (0..{n - 1}); lower the end to {n}")
        chosen = {
            "all": np.arange(n),
            "stride": np.arange(0, n, max(self.value, 1)),
            "range": np.arange(self.value, self.stop),
        }[self.kind].astype(np.int64)
        if chosen.size < 2:
            raise InputError(
                f"--positions {self} keeps {chosen.size} of the {n} positions reached and distances need 2; "
                f"use a stride of at most {max(n - 1, 1)}"
            )
        return chosen, chosen + 1


ALL = PositionSpec()


def log_edges(n: int, buckets: int) -> np.ndarray:
    """The N + 1 edges 0 = e_0 < e_1 < ... < e_N = n of N log-spaced buckets [e_k, e_k+1) over n positions.

    e_k is (n + 1)^(k/N) - 1 rounded, then made strictly increasing: raised to at least e_(k-1) + 1
    (the first buckets are single positions) and lowered to at most n - N + k (every later bucket keeps
    a position). Needs 1 <= N <= n; with N = n every bucket is one position.
    """
    k = np.arange(buckets + 1, dtype=np.int64)
    target = np.rint(np.exp(k / buckets * np.log(n + 1.0))).astype(np.int64) - 1
    target[0], target[-1] = 0, n
    lower = k + np.maximum.accumulate(target - k)
    return np.minimum(lower, n - buckets + k)


@dataclass
class PooledCounts(PositionalCounts):
    """Counts pooled into a position set: bucket b's summed counts sit at row ``labels[b]`` (its
    representative position), every other row is zero.

    ``starts``/``stops`` are the buckets' [start, stop) intervals, ``labels`` their representative
    positions (strictly increasing), ``spec`` the set they make.
    """

    spec: PositionSpec = ALL
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    stops: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def bucket_totals(self) -> np.ndarray:
        """N of each bucket: the sum of its positions' N_i."""
        return self.totals[self.labels]

    def kept_positions(self, min_count: int = DEFAULT_MIN_COUNT) -> np.ndarray:
        """The representative positions of the buckets with N >= min_count."""
        return self.labels[self.bucket_totals >= min_count]

    def left_out(self, min_count: int = DEFAULT_MIN_COUNT) -> dict[str, Any]:
        """The buckets ``min_count`` leaves out: their positions as inclusive runs, and how many buckets."""
        dropped = self.bucket_totals < min_count
        members = [np.arange(a, b) for a, b in zip(self.starts[dropped], self.stops[dropped], strict=True)]
        positions = np.concatenate(members) if members else np.zeros(0, dtype=np.int64)
        return {
            "min_count": int(min_count),
            "positions": position_runs(positions),
            "count": int(dropped.sum()),
            "reason": f"N < {min_count} sequences in the bucket ({self.spec})",
        }

    def ranges_at(self, positions: np.ndarray) -> np.ndarray:
        """The [start, stop) interval of the bucket represented at each of ``positions``, shape (k, 2)."""
        at = np.searchsorted(self.labels, np.asarray(positions, dtype=np.int64))
        return np.stack([self.starts[at], self.stops[at]], axis=1)


def representatives(totals: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Each bucket's representative position: the N_i-weighted mean of its positions, rounded half up and
    kept inside the bucket (a bucket of no counts: its first position)."""
    sizes = stops - starts
    member, bucket = _members(starts, sizes)
    weight = totals[member].astype(np.float64)
    mass = np.bincount(bucket, weights=weight, minlength=starts.size)
    moment = np.bincount(bucket, weights=weight * member, minlength=starts.size)
    mean = np.divide(moment, mass, out=starts.astype(np.float64), where=mass > 0)
    return np.clip(np.floor(mean + 0.5).astype(np.int64), starts, stops - 1)


def _members(starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every position of the buckets, in order, and the bucket each belongs to (vectorised)."""
    offsets = np.cumsum(sizes) - sizes
    member = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(offsets - starts, sizes)
    return member, np.repeat(np.arange(starts.size, dtype=np.int64), sizes)


def pool_positions(counts: PositionalCounts, spec: PositionSpec | str = ALL) -> PositionalCounts:
    """The counts of the chosen position set: ``counts`` itself for ``all``, else :class:`PooledCounts`.

    One sparse product: an n x n indicator P with P[label_b, i] = 1 for position i in bucket b sums
    the count rows and the split-half rows of each bucket into its representative row.
    """
    spec = PositionSpec.of(spec)
    if spec.is_all:
        return counts
    n = counts.n_positions
    starts, stops = spec.intervals(n)
    labels = representatives(counts.totals, starts, stops)
    member, bucket = _members(starts, stops - starts)
    indicator = sp.csr_array((np.ones(member.size, dtype=np.int64), (labels[bucket], member)), shape=(n, n))
    pooled, half = (_canonical(indicator @ matrix) for matrix in (counts.counts, counts.half))
    metadata = dict(counts.metadata, positions=str(spec))
    if int((stops - starts).max()) > 1:
        metadata["pooled"] = True  # a bucket's marginal is a mixture: no single true marginal is it
    return PooledCounts(pooled, half, metadata, counts.vocab, spec, starts, stops, labels)


def _canonical(matrix: Any) -> sp.csr_array:
    result = sp.csr_array(matrix)
    result.sum_duplicates()
    result.eliminate_zeros()
    return result


@dataclass(frozen=True)
class PositionSet:
    """What a result says of a position set other than ``all``: the spec and, for each scored position,
    the [start, end) interval of positions its counts pool."""

    spec: str
    buckets: np.ndarray

    @classmethod
    def of(cls, counts: Any, positions: np.ndarray) -> PositionSet | None:
        """The set ``counts`` were pooled into, at the scored ``positions``; None for every position."""
        if not isinstance(counts, PooledCounts):
            return None
        return cls(str(counts.spec), counts.ranges_at(positions))

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "buckets": self.buckets.tolist()}

    def line(self) -> str:
        """The table's line: the spec, how many positions it scores and the positions they pool."""
        pooled = int((self.buckets[:, 1] - self.buckets[:, 0]).sum()) if self.buckets.size else 0
        return f"{self.spec}: {len(self.buckets)} scored, pooling {pooled} positions"
