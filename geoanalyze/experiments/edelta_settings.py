"""What ``edelta-benchmarks`` trains, per preset, and the thresholds of its checks (docs/edelta.md).

:class:`BenchmarkSettings` is one frozen dataclass; the presets are ``replace(CI, ...)`` with only
their differences, and every field is a ``--set key=value`` override
(``geoanalyze verify edelta-benchmarks --set seeds=42,123 --set models=gpt,edelta``), lists written
comma-separated. The record echoes the settings under ``data.settings`` with the same names
(lists as that comma-separated text). :class:`Limits` holds the checks' thresholds per preset.

Importing this module does not import torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import InputError
from .settings import Settings, choose

PROTOCOLS = ("reference", "causal")
SWEEPS = ("init-robustness", "gate-weight")
INIT_BIASES = (1.5, 0.0, -1.5)  # the reference's run_near_pi.sh, at L_gate weight 0.5
INIT_SWEEP_WEIGHT = 0.5
GATE_WEIGHTS = (0.0, 0.05, 0.1, 0.2)  # the reference's run_ablation.sh, on gyroscope
ALL_TASKS = ("gyroscope", "stability", "near-pi", "near-pi-multi", "norm-deviation", "negation")
#: the bare operator of each negation model (models.edelta.BareOperator kinds)
NEGATION_KINDS = {"ddl": "ddl", "jpmhc": "jpmhc", "edelta": "hybrid", "cayley": "cayley", "householder": "householder"}
GATE_LOW, GATE_HIGH, COSINE_MIN = 0.1, 0.9, 0.9


@dataclass(frozen=True)
class BenchmarkSettings(Settings):
    """The settings of one edelta-benchmarks run; the defaults are the ci preset's (CPU minutes: long enough
    that EΔ leaves the predict-zero plateau, measured at ~600 steps)."""

    protocol: str = "reference"  # reference (the paper's code) or causal (ours)
    gate: str = "plain"  # plain (the paper's) or entropy (the reference code's)
    models: tuple[str, ...] = ("gpt", "ddl", "mhc", "jpmhc", "edelta")
    tasks: tuple[str, ...] = ALL_TASKS
    seeds: tuple[int, ...] = ()  # empty: n_seeds seeds from the options' seed
    n_seeds: int = 3  # the checks are t-tests over seeds: >= 2 to decide, 3 for a 2-dof bound
    n_embd: int = 64  # at least the tasks' d = 64, or the input projection is a bottleneck
    layer_divisor: int = 3  # the paper's layer counts divided by this (at least 1)
    length: int = 32  # 0: the protocol's (256 gyroscope, 128 others)
    n_train: int = 256  # 0: the protocol's (reference: 9000 gyroscope, 900 stability, 1000 near-pi)
    n_valid: int = 64
    steps: int = 1200
    batch_size: int = 32
    lr: float = 1e-3
    warmup_steps: int = 100
    eval_every: int = 100
    model_gate_weight: float = 0.1
    sweeps: tuple[str, ...] = SWEEPS
    negation_models: tuple[str, ...] = ("ddl", "jpmhc", "edelta")
    negation_sizes: tuple[int, ...] = (10, 100, 500)
    negation_steps: int = 2000
    negation_lr: float = 1e-3
    negation_warmup_steps: int = 15
    negation_gate_weight: float = 0.5
    cpu_threads: int = 1
    workers: int = 1  # > 1: independent runs in that many processes (the GPU script uses 16)

    def validate(self) -> BenchmarkSettings:
        """Itself, once every name is known (InputError naming the first that is not)."""
        from ..models.edelta import MODEL_NAMES
        from ..models.residual import GATES
        from ..train.geometric import TASKS

        for key, value, choices in (("protocol", self.protocol, PROTOCOLS), ("gate", self.gate, GATES)):
            if value not in choices:
                raise InputError(f"unknown {key} {value!r}; choose one of {', '.join(choices)}")
        choose(self.models, MODEL_NAMES, "model")
        choose(self.tasks, TASKS, "task")
        choose(self.sweeps, SWEEPS, "sweep")
        choose(self.negation_models, tuple(NEGATION_KINDS), "negation model")
        return self


CI = BenchmarkSettings()
#: every preset of edelta-benchmarks: ci's settings with only the differences
SETTINGS: dict[str, BenchmarkSettings] = {
    # seconds: every code path at toy size, for tests; one seed: every comparison is undecided (a test needs >= 2)
    "smoke": replace(
        CI,
        n_seeds=1,
        n_embd=16,
        layer_divisor=9,
        length=6,
        n_train=8,
        n_valid=4,
        steps=2,
        batch_size=4,
        warmup_steps=1,
        eval_every=2,
        negation_sizes=(4,),
        negation_steps=3,
        negation_warmup_steps=1,
    ),
    "ci": CI,
    "paper": replace(
        CI,
        seeds=(42, 123, 456),
        n_embd=128,
        layer_divisor=1,
        length=0,
        n_train=0,
        n_valid=0,
        steps=2000,
        batch_size=64,
        negation_models=("ddl", "jpmhc", "edelta", "cayley", "householder"),
        negation_sizes=(10, 25, 50, 100, 200, 500),
        negation_warmup_steps=100,
    ),
}


def benchmark_settings(preset: str, overrides: list[str] | tuple[str, ...]) -> BenchmarkSettings:
    """The preset's settings with ``key=value`` overrides (typed by the fields); InputError on unknown keys or names."""
    return SETTINGS[preset].override(overrides, "edelta-benchmarks").validate()


@dataclass(frozen=True)
class Limits:
    """The thresholds of the checks at one preset.

    paper_margin: decades that edelta-learns allows below the paper's ~3,600x (``note`` says why);
    spread_decades: the init-robustness equivalence margin (1 decade: 10x, the reference's
    run_near_pi.sh reading); norm_max: 10x the paper's 0.001; the gates and cosine: the reference's
    expected outcomes. smoke's only ask that two steps give sane numbers.
    """

    preset: str
    paper_margin: float
    norm_max: float
    spread_decades: float
    note: str
    gate_low: float = GATE_LOW
    gate_high: float = GATE_HIGH
    cosine_min: float = COSINE_MIN


PAPER_LIMITS = Limits(
    "paper",
    paper_margin=math.log10(2.0),
    norm_max=0.01,
    spread_decades=1.0,
    note="paper preset: the paper's scale, a factor-2 margin for its unstated seed spread",
)
LIMITS: dict[str, Limits] = {
    "paper": PAPER_LIMITS,
    "ci": replace(
        PAPER_LIMITS,
        preset="ci",
        paper_margin=2.0,
        note="ci preset: 2 decades below the paper's level, the scale gap of the baselines at ci (GPT 1.08e-3 "
        "against the paper's 16.4e-6: 1.8 decades; docs/edelta.md §6): threshold plateau / 36",
    ),
    "smoke": Limits(
        "smoke",
        paper_margin=4.0,
        norm_max=1.0,
        spread_decades=6.0,
        note="smoke preset: 2 steps at toy size, 4 decades of margin: it checks only that the run gives a number",
        gate_low=0.5,
        gate_high=0.0,
        cosine_min=-1.0,
    ),
}
