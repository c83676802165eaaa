"""The checks of ``edelta-benchmarks``, each a test over the plan's seeds at the preset's :class:`Limits`.

MSEs are compared on a log10 scale ("decades"), per seed: log10(plateau / MSE) is how many decades
below predicting zero a run ends; two models' runs pair by seed. Every function here takes plain
per-seed numbers, so each verdict can be flipped by a unit test (tests/unit/experiments).

Importing this module does not import torch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from . import stat_tests as st
from .edelta_settings import LIMITS, Limits
from .record import Check, fmt

if TYPE_CHECKING:
    from .edelta_runs import Plan, Results

#: the paper's EΔ stability MSE (arXiv 2605.06729, Table; docs/edelta.md): plateau 1/64 over it is ~3,600x
PAPER_STABILITY_MSE = 4.35e-6


def mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and sample sd (0 for one value)."""
    array = np.asarray(values, dtype=float)
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def cell(values: list[float]) -> str:
    """'mean ± sd' over seeds, or the one value."""
    mean, sd = mean_sd(values)
    return f"{fmt(mean)} ± {fmt(sd)}" if len(values) > 1 else fmt(mean)


def mean(values: list[float]) -> float:
    """The mean, NaN for no values."""
    return mean_sd(values)[0] if values else math.nan


def decades(mses: list[float], plateau: float) -> list[float]:
    """log10(plateau / MSE) per run: decades below predicting zero (NaN for a non-positive MSE)."""
    return [math.log10(plateau / m) if m > 0 and math.isfinite(m) else math.nan for m in mses]


def verdicts(plan: Plan, results: Results, limits: Limits | None = None) -> list[Check]:
    """The checks, at ``limits`` (:data:`LIMITS` of the preset; ci's by default), each a test over ``plan.seeds``."""
    limits = limits or LIMITS["ci"]
    s, runs = plan.settings, results.runs
    seeds = list(plan.seeds)
    checks = [finite_check(results)]

    def mses(task: str, name: str = "edelta") -> list[float]:
        return [r["valid_mse"] for r in runs.get(task, {}).get(name, [])]

    def gates(task: str) -> list[float]:
        return [r["gate"] for r in runs.get(task, {}).get("edelta", [])]

    edelta = "edelta" in s.models
    if edelta and "stability" in runs:
        others = {m: mses("stability", m) for m in s.models if m != "edelta"}
        plateau = results.plateaus["stability"]
        checks += stability_checks(mses("stability"), others, plateau, seeds, limits, s.model_gate_weight)
    if edelta and "norm-deviation" in s.tasks:
        deviation = results.norms["model"]
        checks.append(norm_check(deviation["edelta"], seeds, limits.norm_max, {m: deviation[m] for m in s.models}))
    for task, expected in (("near-pi", "high"), ("near-pi-multi", "low")):
        if edelta and task in s.tasks:
            checks.append(gate_check(task, gates(task), seeds, expected, limits, mses(task)))
    checks += sweep_checks(results, seeds, limits)
    if "negation" in s.tasks and "edelta" in results.negation and s.negation_sizes:
        size = max(s.negation_sizes)
        last = results.negation["edelta"][size]
        checks += negation_checks([r["gate"] for r in last], [r["cosine"] for r in last], size, seeds, limits)
    return checks


def finite_check(results: Results) -> Check:
    """Every training run ends with a finite validation MSE."""
    values = [r["valid_mse"] for per_model in results.runs.values() for rs in per_model.values() for r in rs]
    return st.tolerance_check(
        "finite",
        "every training run ends with a finite validation MSE",
        float(sum(not math.isfinite(v) for v in values)),
        all(math.isfinite(v) for v in values),
        detail=f"{len(values)} runs; value: how many are not finite",
    )


def sweep_checks(results: Results, seeds: list[int], limits: Limits) -> list[Check]:
    """init-robustness on near-pi and near-pi-multi, and the L_gate weight ablation, for the sweeps that ran."""
    checks = []
    for task in ("near-pi", "near-pi-multi"):
        per_bias = results.sweeps.get(f"init-robustness {task}")
        if per_bias:
            checks.append(
                robustness_check(
                    task,
                    {b: [r["valid_mse"] for r in rs] for b, rs in per_bias.items()},
                    {b: [r["gate"] for r in rs] for b, rs in per_bias.items()},
                    results.plateaus[task],
                    seeds,
                    limits,
                )
            )
    per_weight = results.sweeps.get("gate-weight gyroscope")
    if per_weight:
        checks.append(gate_weight_check({w: [r["valid_mse"] for r in rs] for w, rs in per_weight.items()}, seeds))
    return checks


def stability_checks(
    edelta: list[float],
    others: dict[str, list[float]],
    plateau: float,
    seeds: list[int],
    limits: Limits,
    weight: float = 0.1,
) -> list[Check]:
    """edelta-learns (the paper's level), edelta-leaves-plateau (ours, §7) and stability-best, from per-seed MSEs."""
    n = len(seeds)
    ours = decades(edelta, plateau)
    paper_decades = math.log10(plateau / PAPER_STABILITY_MSE)
    margin = limits.paper_margin
    checks = [
        st.non_inferiority(
            ours,
            paper_decades,
            margin,
            seeds=seeds,
            unit="decades",
            statement=f"EΔ (L_gate weight {weight:g}) learns stability to the paper's level: log10(plateau / MSE) "
            f"not below the paper's {paper_decades:.2f} (plateau / 4.35e-6 = {10**paper_decades:,.0f}x) by more "
            f"than {margin:g} decades, i.e. MSE <= plateau / {10 ** (paper_decades - margin):,.0f}, one-sample over "
            f"{n} seeds ({limits.note})",
        ).check(
            "edelta-learns",
            paper=f"4.35e-6 ({10**paper_decades:,.0f}x below the plateau)",
            value=float(np.mean(edelta)) if edelta else math.nan,
            detail=f"value: the mean MSE; plateau (predict zero) {plateau:.3e}; mean "
            f"{10 ** float(np.mean(ours)):.3g}x below it",
        ),
        st.superiority(
            ours,
            1.0,
            seeds=seeds,
            unit="decades",
            statement=f"EΔ leaves the predict-zero plateau: MSE more than 10x below it (log10(plateau / MSE) > 1), "
            f"one-sample over {n} seeds (ours, docs/edelta.md §7: not the paper's figure)",
        ).check("edelta-leaves-plateau", value=float(np.mean(ours))),
    ]
    if others:
        tests = [
            st.superiority(ours, decades(values, plateau), seeds=seeds, unit="decades", statement=f"EΔ below {name}")
            for name, values in others.items()
        ]
        checks.append(
            st.all_of(
                "stability-best",
                tests,
                f"EΔ's stability MSE is below every other model's (log10 MSE paired over {n} seeds)",
                paper="EΔ 4.35e-6 < JPmHC 8.19e-6 < DDL 15.3e-6 < GPT 16.4e-6",
            )
        )
    return checks


def norm_check(deviation: list[float], seeds: list[int], norm_max: float, per_model: dict[str, list[float]]) -> Check:
    """EΔ's norm deviation below ``norm_max`` (10x the paper's 0.001), one-sample over seeds."""
    return st.superiority(
        [norm_max] * len(deviation),
        deviation,
        seeds=seeds,
        statement=f"EΔ's norm deviation (unit vectors through the trained stability model) is below {norm_max:g} "
        f"(10x the paper's 0.001), one-sample over {len(seeds)} seeds",
    ).check(
        "norm-deviation",
        paper="0.001",
        value=mean(deviation),
        detail="value: the mean deviation; " + ", ".join(f"{m}: {mean(v):.3g}" for m, v in per_model.items()),
    )


def gate_check(
    task: str, gamma: list[float], seeds: list[int], expected: str, limits: Limits, mse: list[float]
) -> Check:
    """EΔ's gate on near-pi above ``gate_high`` (rotation) or on near-pi-multi below ``gate_low`` (reflection)."""
    high = expected == "high"
    bound = limits.gate_high if high else limits.gate_low
    return st.superiority(
        gamma,
        bound,
        higher_is_better=high,
        seeds=seeds,
        statement=f"EΔ's gate on {task} goes to "
        + (f"1 (rotation): gamma > {bound:g}" if high else f"0 (reflection): gamma < {bound:g}")
        + f", one-sample over {len(seeds)} seeds",
    ).check(
        f"gate-{task}",
        paper="gamma -> 1" if high else "gamma -> 0",
        value=mean(gamma),
        detail=f"value: the mean gamma; MSE {cell(mse)}",
    )


def robustness_check(
    task: str,
    mses: dict[str, list[float]],
    gammas: dict[str, list[float]],
    plateau: float,
    seeds: list[int],
    limits: Limits,
) -> Check:
    """At L_gate weight 0.5, EΔ learns from every initial gate bias (> 1 decade below the plateau) and every
    bias's MSE is equivalent to bias 0's within ``spread_decades`` (log10, paired over seeds)."""
    margin = limits.spread_decades
    reference = decades(mses["0"], plateau) if "0" in mses else None
    tests = [
        st.superiority(decades(v, plateau), 1.0, seeds=seeds, unit="decades", statement=f"bias {b} learns")
        for b, v in mses.items()
    ]
    if reference is not None:
        tests += [
            st.equivalence(
                decades(v, plateau), reference, margin, seeds=seeds, unit="decades", statement=f"bias {b} ~ bias 0"
            )
            for b, v in mses.items()
            if b != "0"
        ]
    return st.all_of(
        f"init-robustness-{task}",
        tests,
        f"EΔ on {task} at weight 0.5 learns from every initial gate bias in {{1.5, 0, -1.5}} (MSE more than 10x "
        f"below the plateau) and ends within {margin:g} decades ({10**margin:g}x) of bias 0's MSE, over {len(seeds)} seeds",
        paper="robust to the initial gate",
        detail=", ".join(f"bias {b}: MSE {cell(v)} (gamma {cell(gammas[b])})" for b, v in mses.items()),
    )


def gate_weight_check(mses: dict[str, list[float]], seeds: list[int]) -> Check:
    """L_gate helps on gyroscope: MSE at weight 0.1 below weight 0's (log10, paired over seeds)."""
    log = {w: [math.log10(m) if m > 0 else math.nan for m in v] for w, v in mses.items()}
    return st.superiority(
        log["0.1"],
        log["0"],
        higher_is_better=False,
        seeds=seeds,
        unit="decades",
        statement=f"L_gate helps: EΔ's gyroscope MSE at weight 0.1 is below weight 0's (log10, paired over {len(seeds)} seeds)",
    ).check(
        "gate-weight",
        paper="weight 0.1 (the reference's choice)",
        value=mean(mses["0.1"]) / mean(mses["0"]),
        detail="value: the ratio of mean MSEs (0.1 / 0); " + ", ".join(f"{w}: {cell(v)}" for w, v in mses.items()),
    )


def negation_checks(
    gamma: list[float], cosine: list[float], size: int, seeds: list[int], limits: Limits
) -> list[Check]:
    """EΔ on negation: the gate collapses (its distance to the nearer end below ``gate_low``) and the cosine is
    not below the paper's 0.96 by more than ``0.96 - cosine_min`` (non-inferiority), one-sample over seeds."""
    low, paper_cosine = limits.gate_low, 0.96
    margin = round(paper_cosine - limits.cosine_min, 6)
    nearest = [min(g, 1 - g) for g in gamma]
    return [
        st.superiority(
            nearest,
            low,
            higher_is_better=False,
            seeds=seeds,
            statement=f"EΔ's gate on negation ({size} samples) collapses: min(gamma, 1 - gamma) < {low:g}, "
            f"one-sample over {len(seeds)} seeds",
        ).check(
            "negation-gate",
            paper="gamma -> 0.051",
            value=mean(gamma),
            detail="value: the mean over seeds of the mean gamma on validation samples",
        ),
        st.non_inferiority(
            cosine,
            paper_cosine,
            margin,
            seeds=seeds,
            statement=f"EΔ's cosine(G(x), -x) on negation ({size} samples) is not below the paper's 0.96 by more "
            f"than {margin:g} (cosine >= {limits.cosine_min:g}), one-sample over {len(seeds)} seeds",
        ).check("negation-cosine", paper="0.96", value=mean(cosine), detail="value: the mean cosine"),
    ]
