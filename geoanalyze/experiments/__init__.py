"""The papers' claims as experiments with a verdict: ``geoanalyze verify NAME``.

Each experiment is a function ``run(options) -> ExperimentResult`` in a module of this package,
registered here by name with the module path, so listing them imports nothing heavy::

    from geoanalyze.experiments import run_experiment, ExperimentOptions
    result = run_experiment("necessity", ExperimentOptions(preset="ci", work_dir=Path("out")))
    result.passed, result.checks

Every experiment runs at the presets ``smoke`` (seconds on a CPU, with its own looser thresholds),
``ci`` (CPU minutes) and ``paper`` (GPU scale).

Importing this package does not import torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .record import PRESET_NAMES, Check, ExperimentOptions, ExperimentResult, check, markdown, write_result


@dataclass(frozen=True)
class Experiment:
    """A registry entry: ``target`` is "module:function" inside this package.

    ``presets``: the presets it runs at; every experiment has ``smoke`` (seconds on a CPU, looser
    thresholds: it checks that the experiment runs), ``ci`` (CPU minutes) and ``paper`` (GPU scale).
    """

    name: str
    summary: str
    paper: str
    target: str
    #: wall minutes at --preset ci on a 2-core CPU at the pinned thread count, the comparisons of trained models
    #: over 3 seeds: measured for mds-training (13.2), length-generalization (5.0), vision-2d (1.7) and joformer-reference
    #: (8.6); lm-vocab and edelta-benchmarks, which also run 3 seeds, are 3x their one-seed times
    minutes_ci: float
    presets: tuple[str, ...] = PRESET_NAMES

    def load(self) -> Any:
        module, function = self.target.split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), function)


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "necessity",
            "Theorem 1: no PE -> permutation-equivariant, at chance on an order task; every PE solves it",
            "arXiv 2604.05217",
            "positional:necessity",
            2.0,
        ),
        Experiment(
            "separation",
            "Theorem 4: a learned PE keeps distinct positions apart throughout training",
            "arXiv 2604.05217",
            "positional:separation",
            1.0,
        ),
        Experiment(
            "monotonicity",
            "Conjecture: after MLM, statistically close positions get close vectors (violation rate < 50%)",
            "arXiv 2604.05217",
            "positional:monotonicity",
            4.0,
        ),
        Experiment(
            "mds-training",
            "MDS PE (frozen, as init) vs learned vs sinusoidal vs low-rank at equal steps",
            "arXiv 2604.05217",
            "positional:mds_training",
            13.0,
        ),
        Experiment(
            "sinusoidal-optimality",
            "sinusoidal (best base, width, scale) against the exact MDS from smooth to rough corpora, and SST-2",
            "arXiv 2604.05217",
            "optimality:sinusoidal_optimality",
            0.5,
        ),
        Experiment(
            "alibi-rank1",
            "ALiBi's line against the rank-1 and exact MDS on shift corpora from short to long, others, SST-2",
            "arXiv 2604.05217",
            "optimality:alibi_rank1",
            0.5,
        ),
        Experiment(
            "mds-parameters",
            "r (n + d) vs n d at the MDS rank within 0.01 scaled stress of full rank: samples, SST-2, IMDB",
            "arXiv 2604.05217",
            "optimality:mds_parameters",
            1.0,
        ),
        Experiment(
            "journey",
            "JoFormer algebra: associativity, path (in)dependence, flat regime, equivariance, DFT, norms",
            "arXiv 2505.15507",
            "journey:journey_checks",
            0.5,
        ),
        Experiment(
            "length-generalization",
            "LMs with RoPE / JoFormer-fixed / JoFormer-projected trained at L, evaluated at 2L, 4L, 8L",
            "arXiv 2505.15507",
            "joformer:length_generalization",
            5.0,
        ),
        Experiment(
            "joformer-reference",
            "the value-path formula (attention, SSM, JoFormer) numerically; the published variants beside ours",
            "arXiv 2505.15507",
            "joformer:joformer_reference",
            9.0,
        ),
        Experiment(
            "lm-vocab",
            "JoFormer-projected / -learned vs RoFormer LMs at 8k/16k/32k BPE (IMDB train -> WikiText-2 validation)",
            "arXiv 2505.15507",
            "joformer:lm_vocab",
            30.0,
        ),
        Experiment(
            "vision-2d",
            "a small ViT on 8x8 digits: 2D-RoPE vs JoFormer axial with value rotation vs dense rotations",
            "arXiv 2505.15507",
            "joformer:vision_2d",
            2.0,
        ),
        Experiment(
            "edelta",
            "EΔ guarantees: Q^T Q = I for any beta, det Q = +1, det H = -1, hybrid at gamma in {0, 1}, deep norms",
            "arXiv 2605.06729",
            "edelta:edelta_checks",
            0.5,
        ),
        Experiment(
            "edelta-benchmarks",
            "GPT / DDL / mHC / JPmHC / EΔ on the synthetic tasks, protocol=reference (the paper's) or causal (ours)",
            "arXiv 2605.06729",
            "edelta:edelta_benchmarks",
            90.0,
        ),
    )
}


def register(experiment: Experiment) -> None:
    """Add an experiment (a name already taken is replaced)."""
    EXPERIMENTS[experiment.name] = experiment


def get_experiment(name: str) -> Experiment:
    """The registry entry of ``name``; InputError listing the choices when unknown."""
    if name not in EXPERIMENTS:
        raise InputError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def run_experiment(name: str, options: ExperimentOptions) -> ExperimentResult:
    """Run experiment ``name`` with ``options``; the result's ``checks`` carry the verdict."""
    experiment = get_experiment(name)
    if options.preset not in experiment.presets:
        raise InputError(f"unknown preset {options.preset!r}; choose one of {', '.join(experiment.presets)}")
    run = experiment.load()
    import torch

    from ..train.determinism import fixed_threads

    if options.device == "cuda" or (
        options.device == "auto" and options.preset == "paper" and torch.cuda.is_available()
    ):
        return run(options)
    # On CPU the whole experiment, training and evaluation, runs at one fixed thread count
    # (GEOANALYZE_CPU_THREADS, default 1): its numbers are bit-identical per seed whatever the
    # machine's thread count (docs/determinism.md). The models are small: a second thread rarely
    # halves a step, and on a loaded 2-core machine one thread is many times faster.
    with fixed_threads():
        return run(options)


__all__ = [
    "EXPERIMENTS",
    "PRESET_NAMES",
    "Check",
    "Experiment",
    "ExperimentOptions",
    "ExperimentResult",
    "check",
    "get_experiment",
    "markdown",
    "register",
    "run_experiment",
    "write_result",
]
