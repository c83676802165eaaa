r"""The statistical tests behind every ``verify`` check: what is claimed, against what, over which seeds.

Every check of an experiment is one of these, and its claim names it:

superiority       A is better than B: the one-sided 95% lower bound of the mean difference (A - B,
                  oriented so that positive means A is better) is above 0.
non-inferiority   A is not worse than B by more than a stated margin delta: the lower bound is above
                  -delta. The margin is fixed in the claim's units (accuracy points, a ratio), never
                  made of the observed spread.
equivalence       |A - B| < delta (TOST): two one-sided tests at 5% each, i.e. the lower bound above
                  -delta and the upper bound below +delta.
tolerance         a deterministic quantity (an algebraic identity on random inputs, a figure on a corpus's
                  true distances) measured against a stated bound; no sampling, no seeds.

The bounds over seeds are Student's t: with the per-seed differences d_1..d_n (paired where the
seeds pair the runs: the same seed, data and schedule for A and B; against a constant, d_i = a_i - c),
mean m, sample sd s (n - 1 in the denominator),

    lower = m - t_{0.95, n-1} s / sqrt(n),    upper = m + t_{0.95, n-1} s / sqrt(n),

which is the one-sided paired t-test at 5% (``scipy.stats.ttest_rel(a, b, alternative="greater")``
rejects "A no better than B + c" exactly when lower > c). With fewer than 2 seeds there is no spread:
the test **cannot decide**, and the verdict says so (``decided`` False) instead of passing.

Two other sampling units appear: held-out sequences (an accuracy over n sequences, binomial sd
sqrt(p (1 - p) / n), normal bound with z_{0.95}) and random-null draws (a score against the mean and
sd of the same score on random tables: beaten when below the null mean by ``z`` null sds).
A trend over a handful of corpora is a one-sided Spearman test (exact permutation p for n <= 8).

Importing this module does not import torch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .record import Check, Statistics

LEVEL = 0.95  #: the one-sided confidence of every bound (a 5% test)
MINIMUM_SEQUENCES = 30  #: the fewest held-out sequences :func:`proportion` decides on (the normal approximation)
KINDS = ("superiority", "non-inferiority", "equivalence", "tolerance")
#: whether the bounds (lower, upper) of a test over replicates pass, per kind, at its margin delta
PASSES: dict[str, Callable[[float, float, float], bool]] = {
    "superiority": lambda lower, upper, margin: lower > 0,
    "non-inferiority": lambda lower, upper, margin: lower > -margin,
    "equivalence": lambda lower, upper, margin: lower > -margin and upper < margin,
}


@dataclass(frozen=True)
class TestResult:
    """One statistical test, measured.

    Attributes
    ----------
    kind : "superiority", "non-inferiority", "equivalence" or "tolerance".
    margin : delta, in ``unit`` (0 for superiority and tolerance).
    mean : the mean difference A - B, oriented so that positive means A is better (tolerance: the value).
    sd : sample sd of the differences over the replicates (NaN with fewer than 2; 0 for tolerance).
    lower, upper : the one-sided 95% bounds of the mean difference (tolerance: the value itself).
    passed : the verdict (False when undecided).
    decided : False when the replicates are too few for the test to decide.
    seeds : the seeds the replicates came from.
    n : the number of replicates (seeds, held-out sequences or null draws: ``replicates``).
    replicates : what was replicated: "seeds", "held-out sequences", "null draws", "corpora", or "".
    unit : the unit of the difference and of the margin ("points", "x", "", ...).
    method : how the bound was computed, in words ("paired t, 2 dof", ...).
    statement : the claim in words, without the kind (the kind and margin are prefixed by :meth:`claim`).
    values : extra numbers a reader needs (per-seed values of A and B, the threshold ...).
    """

    kind: str
    margin: float
    mean: float
    sd: float
    lower: float
    upper: float
    passed: bool
    decided: bool
    seeds: tuple[int, ...] = ()
    n: int = 0
    replicates: str = "seeds"
    unit: str = ""
    method: str = ""
    statement: str = ""
    values: dict[str, Any] = field(default_factory=dict)

    __test__ = False  # not a pytest class

    @property
    def label(self) -> str:
        """The kind, with its margin: "non-inferiority, margin 2 points"."""
        if self.kind in ("non-inferiority", "equivalence"):
            return f"{self.kind}, margin {_number(self.margin)}{_unit(self.unit)}"
        return self.kind

    def claim(self) -> str:
        """The claim sentence: the test's kind and margin, then what it states."""
        return f"{self.label}: {self.statement}" if self.statement else self.label

    def detail(self) -> str:
        """Mean, spread, bound and the seeds: what a reader needs to judge the verdict."""
        if self.kind == "tolerance":
            return f"measured {_number(self.mean)}{_unit(self.unit)} (deterministic: no seeds, no spread)"
        u = _unit(self.unit)
        if self.replicates == "corpora":
            rho = float(self.values.get("rho", self.mean))
            text = f"Spearman rho {_signed(rho)} over {_count(self.n, 'corpus', 'corpora')}"
            return text + (f"; {self.method}" if self.decided else "; UNDECIDED: too few corpora for p < 0.05")
        if self.replicates == "null draws":
            text = (
                f"null mean - ours {_signed(self.mean)}{u}, null sd {_number(self.sd)}{u} over "
                f"{_count(self.n, 'null draw', 'null draws')}; less {self.method.removeprefix('beyond ')}: "
                f"{_signed(self.lower)}{u}"
            )
            return text if self.decided else text + "; UNDECIDED: too few null draws"
        parts = [f"mean difference {_signed(self.mean)}{u}"]
        if self.n >= 2 and math.isfinite(self.sd):
            parts.append(f"sd {_number(self.sd)}{u} over {_count(self.n, self.replicates[:-1], self.replicates)}")
        if self.decided:
            bounds = f"one-sided 95% lower bound {_signed(self.lower)}{u}"
            if self.kind == "equivalence":
                bounds += f", upper bound {_signed(self.upper)}{u}"
            parts.append(bounds + (f" ({self.method})" if self.method else ""))
        elif self.replicates == "seeds":
            parts.append(
                f"UNDECIDED: {_count(self.n, 'seed gives', 'seeds give')} no spread; the test needs at least 2"
            )
        else:
            parts.append(f"UNDECIDED: {self.n} {self.replicates} are too few for this test")
        if self.seeds:
            parts.append(("seed " if len(self.seeds) == 1 else "seeds ") + ", ".join(str(s) for s in self.seeds))
        return "; ".join(parts)

    def check(self, name: str, paper: str | None = None, detail: str = "", value: float | None = None) -> Check:
        """The :class:`Check` of this test (``value``: the figure shown as ours, default the mean difference)."""
        shown = self.mean if value is None else float(value)
        text = self.detail() + (f"; {detail}" if detail else "")
        return Check(
            name,
            self.claim(),
            float(shown),
            bool(self.passed and self.decided and not math.isnan(shown)),
            paper,
            text,
            test=self.kind,
            decided=self.decided,
            statistics=self.to_dict(),
        )

    def to_dict(self) -> Statistics:
        return {
            "kind": self.kind,
            "margin": self.margin,
            "mean": self.mean,
            "sd": self.sd,
            "lower": self.lower,
            "upper": self.upper,
            "level": LEVEL,
            "n": self.n,
            "replicates": self.replicates,
            "seeds": list(self.seeds),
            "unit": self.unit,
            "method": self.method,
            "passed": self.passed,
            "decided": self.decided,
            **({"values": self.values} if self.values else {}),
        }


# --- tests over seeds ----------------------------------------------------------------------------------


def t_bounds(differences: Sequence[float], level: float = LEVEL) -> tuple[float, float, float, float]:
    """(mean, sd, lower, upper): the one-sided ``level`` t bounds of the mean of ``differences`` (n - 1 dof).

    sd and the bounds are NaN with fewer than 2 values.
    """
    from scipy.stats import t

    d = np.asarray(differences, dtype=float)
    n = len(d)
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan, math.nan
    sd = float(d.std(ddof=1))
    half = float(t.ppf(level, n - 1)) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half


def compare(
    kind: str,
    a: Sequence[float],
    b: Sequence[float] | float,
    *,
    margin: float = 0.0,
    higher_is_better: bool = True,
    seeds: Sequence[int] = (),
    unit: str = "",
    statement: str = "",
) -> TestResult:
    """Test A against B over seeds: ``kind`` is "superiority", "non-inferiority" or "equivalence".

    ``a``: A's per-seed values; ``b``: B's per-seed values (paired with ``a`` seed by seed) or one
    constant (a one-sample test). The differences are ``a - b`` when higher is better, and ``b - a``
    otherwise, so a positive mean always means A is better; ``margin`` is in those units (``unit``,
    e.g. "points" for accuracies in percent).
    """
    if kind not in ("superiority", "non-inferiority", "equivalence"):
        raise ValueError(f"unknown test kind {kind!r}; choose superiority, non-inferiority or equivalence")
    if kind != "superiority" and not margin > 0:
        raise ValueError(f"a {kind} test needs a margin > 0, got {margin!r}")
    av = np.asarray(a, dtype=float)
    paired = not isinstance(b, (int, float, np.floating, np.integer))
    bv = np.asarray(b, dtype=float) if paired else np.full_like(av, float(b))  # type: ignore[arg-type]
    if av.shape != bv.shape or av.ndim != 1 or not len(av):
        raise ValueError(f"A and B need the same number of seeds (at least one), got {av.shape} and {bv.shape}")
    if seeds and len(seeds) != len(av):
        raise ValueError(f"{len(seeds)} seeds for {len(av)} values")
    sign = 1.0 if higher_is_better else -1.0
    differences = sign * (av - bv)
    mean, sd, lower, upper = t_bounds(differences)
    n = len(differences)
    decided = n >= 2 and math.isfinite(lower)
    passed = decided and PASSES[kind](lower, upper, margin)
    method = f"{'paired' if paired else 'one-sample'} t, {n - 1} dof" if n >= 2 else ""
    return TestResult(
        kind,
        float(margin) if kind != "superiority" else 0.0,
        mean,
        sd,
        lower,
        upper,
        bool(passed),
        decided,
        tuple(int(s) for s in seeds),
        n,
        "seeds",
        unit,
        method,
        statement,
        {"A": av.tolist(), "B": bv.tolist() if paired else float(b)},  # type: ignore[arg-type]
    )


def superiority(a: Sequence[float], b: Sequence[float] | float, **options: Any) -> TestResult:
    """A better than B (see :func:`compare`)."""
    return compare("superiority", a, b, **options)


def non_inferiority(a: Sequence[float], b: Sequence[float] | float, margin: float, **options: Any) -> TestResult:
    """A not worse than B by more than ``margin`` (see :func:`compare`)."""
    return compare("non-inferiority", a, b, margin=margin, **options)


def equivalence(a: Sequence[float], b: Sequence[float] | float, margin: float, **options: Any) -> TestResult:
    """|A - B| < ``margin`` by two one-sided tests (see :func:`compare`)."""
    return compare("equivalence", a, b, margin=margin, **options)


# --- other sampling units ------------------------------------------------------------------------------


def proportion(
    kind: str,
    rate: float,
    n: int,
    reference: float,
    *,
    margin: float = 0.0,
    seeds: Sequence[int] = (),
    statement: str = "",
) -> TestResult:
    """An accuracy ``rate`` over ``n`` held-out sequences against ``reference``: normal bound, binomial sd.

    The difference is 100 (rate - reference) points (higher is better); sd = 100 sqrt(p (1 - p) / n)
    at the observed p (at least 1 / n, so a perfect score keeps a spread). Undecided below
    :data:`MINIMUM_SEQUENCES` sequences (the normal approximation).
    """
    from scipy.stats import norm

    if kind == "superiority" and margin:
        raise ValueError("superiority takes no margin")
    p = min(max(float(rate), 1.0 / n), 1.0 - 1.0 / n)
    sd = 100.0 * math.sqrt(p * (1 - p) / n)
    mean = 100.0 * (float(rate) - float(reference))
    half = float(norm.ppf(LEVEL)) * sd
    lower, upper = mean - half, mean + half
    decided = n >= MINIMUM_SEQUENCES and math.isfinite(mean)
    if kind not in PASSES:
        raise ValueError(f"unknown test kind {kind!r}")
    passed = PASSES[kind](lower, upper, margin)
    return TestResult(
        kind,
        float(margin),
        mean,
        sd,
        lower,
        upper,
        bool(decided and passed),
        decided,
        tuple(int(s) for s in seeds),
        int(n),
        "held-out sequences",
        "points",
        f"normal, binomial sd sqrt(p (1 - p) / {n})",
        statement,
        {"rate": float(rate), "reference": float(reference)},
    )


def beats_null(
    value: float,
    null_mean: float,
    null_sd: float,
    draws: int,
    *,
    z: float = 3.0,
    statement: str = "",
    unit: str = "",
) -> TestResult:
    """Superiority over a random null: ``value`` (lower is better) below the null mean by more than ``z``
    null sds.

    The difference is null mean - value; the "bound" is the difference less z null sds, so the test
    passes when it is above 0. Undecided with fewer than 2 null draws.
    """
    mean = float(null_mean) - float(value)
    spread = z * float(null_sd)
    decided = draws >= 2 and math.isfinite(mean) and math.isfinite(spread)
    return TestResult(
        "superiority",
        0.0,
        mean,
        float(null_sd),
        mean - spread,
        mean + spread,
        bool(decided and mean - spread > 0),
        decided,
        (),
        int(draws),
        "null draws",
        unit,
        f"beyond {z:g} null sds",
        statement,
        {"value": float(value), "null_mean": float(null_mean), "null_sd": float(null_sd)},
    )


def trend(x: Sequence[float], y: Sequence[float], *, increasing: bool = True, statement: str = "") -> TestResult:
    """Superiority of a monotone trend over none: one-sided Spearman test at 5% over the points (x, y).

    The mean is Spearman's rho (sign: + when the trend goes the claimed way); ``lower`` is 0 when the
    one-sided p < 0.05 and -1 otherwise (a p-value has no bound; see ``values["p"]``). Exact
    permutation p for n <= 8, scipy's t approximation above; undecided when even a perfect order could
    not reach p < 0.05 (n <= 3).
    """
    from scipy.stats import spearmanr

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(xs)
    sign = 1.0 if increasing else -1.0
    rho = float(spearmanr(xs, ys).statistic) if n > 2 else math.nan
    oriented = sign * rho
    if n <= 8 and n > 1:
        p = _exact_spearman_p(xs, sign * ys)
    elif n > 8:
        p = float(spearmanr(xs, sign * ys, alternative="greater").pvalue)
    else:
        p = math.nan
    decided = n > 3 and math.isfinite(oriented)
    passed = decided and p < 1 - LEVEL
    return TestResult(
        "superiority",
        0.0,
        oriented,
        math.nan,
        0.0 if passed else -1.0,
        oriented,
        bool(passed),
        decided,
        (),
        n,
        "corpora",
        "",
        f"one-sided Spearman p = {p:.3g}" + (" (exact)" if n <= 8 else " (t approximation)"),
        statement,
        {"rho": rho, "p": p},
    )


def _exact_spearman_p(x: np.ndarray, y: np.ndarray) -> float:
    """P(rho >= observed) over every permutation of y against x (ties by average rank)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x), rankdata(y)
    observed = float(np.corrcoef(rx, ry)[0, 1]) if np.std(rx) and np.std(ry) else 0.0
    count = total = 0
    for permutation in itertools.permutations(ry):
        total += 1
        value = np.asarray(permutation)
        rho = float(np.corrcoef(rx, value)[0, 1]) if np.std(value) else 0.0
        count += rho >= observed - 1e-12
    return count / total


def tolerance(
    value: float, bound: float, *, below: bool = True, strict: bool = False, statement: str = "", unit: str = ""
) -> TestResult:
    """A deterministic quantity against a bound: ``value <= bound`` (``below``) or ``value >= bound``
    (``strict``: < and >)."""
    value = float(value)
    if below:
        passed = value < bound if strict else value <= bound
    else:
        passed = value > bound if strict else value >= bound
    return TestResult(
        "tolerance",
        0.0,
        value,
        0.0,
        value,
        value,
        bool(passed and not math.isnan(value)),
        True,
        (),
        1,
        "",
        unit,
        "",
        statement,
        {"bound": float(bound)},
    )


def tolerance_check(
    name: str, statement: str, value: float, passed: bool, paper: str | None = None, detail: str = ""
) -> Check:
    """A deterministic check (an identity to a tolerance, a count, a sanity condition), labelled so."""
    value = float(value)
    return Check(
        name,
        f"tolerance: {statement}",
        value,
        bool(passed) and not math.isnan(value),
        paper,
        detail or "deterministic: no seeds, no spread",
        test="tolerance",
    )


def all_of(name: str, results: Sequence[TestResult], claim: str, paper: str | None = None, detail: str = "") -> Check:
    """One check that passes when every test in ``results`` passes (undecided when any is undecided).

    ``claim`` states the joint claim; each test's kind, margin and bound go into the detail. The value
    is the smallest lower bound (the weakest test's).
    """
    decided = all(r.decided for r in results)
    passed = decided and all(r.passed for r in results)
    kinds = sorted({r.label for r in results})
    text = " | ".join(f"{r.statement}: {r.detail()}" for r in results)
    weakest = min((r.lower for r in results if math.isfinite(r.lower)), default=math.nan)
    value = weakest if decided else min(r.mean for r in results)
    return Check(
        name,
        f"{' and '.join(kinds)}: {claim}",
        float(value),
        bool(passed and not math.isnan(value)),
        paper,
        text + (f"; {detail}" if detail else ""),
        test=results[0].kind if len({r.kind for r in results}) == 1 else "+".join(sorted({r.kind for r in results})),
        decided=decided,
        statistics={"tests": [r.to_dict() | {"statement": r.statement} for r in results]},
    )


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _number(x: float) -> str:
    if not math.isfinite(x):
        return "nan"
    return f"{x:.4g}" if x == 0 or 1e-3 <= abs(x) < 1e5 else f"{x:.3e}"


def _signed(x: float) -> str:
    text = _number(x)
    return text if text.startswith("-") or text == "nan" else "+" + text


def _unit(unit: str) -> str:
    return "" if not unit else ("x" if unit == "x" else f" {unit}")
