r"""EΔ-MHC-Geo (arXiv 2605.06729; docs/edelta.md): the operators' guarantees, and the five models on the synthetic benchmarks.

``edelta`` (seconds): Q^T Q = I for beta from 1e-6 to 1e6, the closed form against
torch.linalg.solve, det Q = +1 and |lambda + 1| = 2 / sqrt(1 + t^2) > 0 (no eigenvalue -1),
det H = -1, the hybrid orthogonal exactly at gamma in {0, 1}, DDL at beta in {0, 2}, Sinkhorn
doubly stochastic, and norms through a deep stack of operators.

``edelta-benchmarks``: GPT / DDL / mHC / JPmHC / EΔ trained on gyroscope, stability, near-pi
(single and multi-plane), the norm deviation of their shortcuts, and the bare operators on
negation; a table of mean ± sd over seeds beside the paper's. Verdict: on negation with 500
samples EΔ's gate collapses (below 0.1 or above 0.9) with cosine >= 0.9.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from ..models.residual import GATES
from ..progress import ProgressBars
from .record import (
    Check,
    ExperimentOptions,
    ExperimentResult,
    Stopwatch,
    apply_overrides,
    fmt,
    markdown_table,
)
from .stat_tests import tolerance_check

PAPER_SEEDS = (42, 123, 456)

#: the paper's table (arXiv 2605.06729, docs/edelta.md): task -> model -> reported mean
PAPER_TABLE: dict[str, dict[str, str]] = {
    "gyroscope": {"gpt": "3.78e-3", "ddl": "3.36e-3", "mhc": "4.02e-3", "jpmhc": "3.08e-4", "edelta": "1.02e-3"},
    "stability": {"gpt": "16.4e-6", "ddl": "15.3e-6", "mhc": "8650e-6", "jpmhc": "8.19e-6", "edelta": "4.35e-6"},
    "near-pi": {"gpt": "1.19e-5", "ddl": "1.11e-5", "mhc": "9.64e-3", "jpmhc": "6.54e-6", "edelta": "1.44e-6"},
    "near-pi-multi": {"gpt": "3.34e-6", "ddl": "3.75e-6", "mhc": "1.63e-3", "jpmhc": "1.69e-6", "edelta": "1.24e-6"},
    "norm-deviation": {"edelta": "0.001"},
    "negation": {"ddl": "beta -> 1.995, cos 0.96", "jpmhc": "cos -0.30", "edelta": "gamma -> 0.051, cos 0.96"},
}

PROTOCOLS = ("reference", "causal")
SWEEPS = ("init-robustness", "gate-weight")
INIT_BIASES = (1.5, 0.0, -1.5)  # the reference's run_near_pi.sh, at L_gate weight 0.5
INIT_SWEEP_WEIGHT = 0.5
GATE_WEIGHTS = (0.0, 0.05, 0.1, 0.2)  # the reference's run_ablation.sh, on gyroscope
ALL_TASKS = "gyroscope,stability,near-pi,near-pi-multi,norm-deviation,negation"

#: settings of edelta-benchmarks per preset; every key can be overridden with key=value
SETTINGS: dict[str, dict[str, Any]] = {
    "smoke": {  # seconds: every code path at toy size, for tests
        "protocol": "reference",
        "gate": "plain",
        "models": "gpt,ddl,mhc,jpmhc,edelta",
        "tasks": ALL_TASKS,
        "seeds": "",  # empty: n_seeds seeds from the options' seed
        "n_seeds": 1,  # one seed: every comparison is undecided (a test needs >= 2)
        "n_embd": 16,
        "layer_divisor": 9,
        "length": 6,
        "n_train": 8,
        "n_valid": 4,
        "steps": 2,
        "batch_size": 4,
        "lr": 1e-3,
        "warmup_steps": 1,
        "eval_every": 2,
        "model_gate_weight": 0.1,
        "sweeps": "init-robustness,gate-weight",
        "negation_models": "ddl,jpmhc,edelta",
        "negation_sizes": "4",
        "negation_steps": 3,
        "negation_lr": 1e-3,
        "negation_warmup_steps": 1,
        "negation_gate_weight": 0.5,
        "cpu_threads": 1,
        "workers": 1,  # > 1: independent runs in that many processes (the GPU script uses 16)
    },
    "ci": {  # CPU minutes: long enough that EΔ leaves the predict-zero plateau (measured: at ~600 steps)
        "protocol": "reference",
        "gate": "plain",
        "models": "gpt,ddl,mhc,jpmhc,edelta",
        "tasks": ALL_TASKS,
        "seeds": "",
        "n_seeds": 3,  # the checks are t-tests over seeds: >= 2 to decide, 3 for a 2-dof bound
        "n_embd": 64,  # at least the tasks' d = 64, or the input projection is a bottleneck
        "layer_divisor": 3,  # the paper's layer counts divided by this (at least 1)
        "length": 32,
        "n_train": 256,
        "n_valid": 64,
        "steps": 1200,
        "batch_size": 32,
        "lr": 1e-3,
        "warmup_steps": 100,
        "eval_every": 100,
        "model_gate_weight": 0.1,
        "sweeps": "init-robustness,gate-weight",
        "negation_models": "ddl,jpmhc,edelta",
        "negation_sizes": "10,100,500",
        "negation_steps": 2000,
        "negation_lr": 1e-3,
        "negation_warmup_steps": 15,
        "negation_gate_weight": 0.5,
        "cpu_threads": 1,
        "workers": 1,  # > 1: independent runs in that many processes (the GPU script uses 16)
    },
    "paper": {
        "protocol": "reference",
        "gate": "plain",
        "models": "gpt,ddl,mhc,jpmhc,edelta",
        "tasks": ALL_TASKS,
        "seeds": "42,123,456",
        "n_seeds": 3,
        "n_embd": 128,
        "layer_divisor": 1,
        "length": 0,  # 0: the protocol's (256 gyroscope, 128 others)
        "n_train": 0,  # 0: the protocol's (reference: 9000 gyroscope, 900 stability, 1000 near-pi)
        "n_valid": 0,
        "steps": 2000,
        "batch_size": 64,
        "lr": 1e-3,
        "warmup_steps": 100,
        "eval_every": 100,
        "model_gate_weight": 0.1,
        "sweeps": "init-robustness,gate-weight",
        "negation_models": "ddl,jpmhc,edelta,cayley,householder",
        "negation_sizes": "10,25,50,100,200,500",
        "negation_steps": 2000,
        "negation_lr": 1e-3,
        "negation_warmup_steps": 100,
        "negation_gate_weight": 0.5,
        "cpu_threads": 1,
        "workers": 1,  # > 1: independent runs in that many processes (the GPU script uses 16)
    },
}

NEGATION_KINDS = {"ddl": "ddl", "jpmhc": "jpmhc", "edelta": "hybrid", "cayley": "cayley", "householder": "householder"}
GATE_LOW, GATE_HIGH, COSINE_MIN = 0.1, 0.9, 0.9


# --- edelta: the guarantees ----------------------------------------------------------------------


def edelta_checks(options: ExperimentOptions) -> ExperimentResult:
    """The operators' algebraic guarantees, measured on random inputs (on CPU, one thread: small tensors)."""
    with cpu_threads(torch.device("cpu"), 1):
        return _edelta_checks(options)


def _edelta_checks(options: ExperimentOptions) -> ExperimentResult:
    from ..models.residual import (
        cayley_matrix,
        cayley_plane,
        delta_apply,
        householder_apply,
        hybrid_apply,
        sinkhorn,
    )

    watch = Stopwatch()
    if options.overrides:
        raise InputError("edelta takes no overrides; remove them (edelta-benchmarks takes key=value settings)")
    g = torch.Generator().manual_seed(options.seed)
    betas = [10.0**e for e in range(-6, 7)]
    checks: list[Check] = []
    data: dict[str, Any] = {"betas": betas}

    # Q^T Q = I in float32, n = 4 (the model's streams) and n = 64 (the negation task)
    worst, per_beta = 0.0, {}
    for n in (4, 64):
        u, v = torch.randn(256, n, generator=g), torch.randn(256, n, generator=g)
        for beta in betas:
            q = cayley_matrix(u, v, beta)
            err = float((q.transpose(-1, -2) @ q - torch.eye(n)).abs().max())
            per_beta[f"n={n}, beta={beta:g}"] = err
            worst = max(worst, err)
    data["orthogonality"] = per_beta
    checks.append(
        tolerance_check(
            "cayley-orthogonal",
            "max |Q^T Q - I| <= 1e-5 in float32, beta in 1e-6..1e6, n in {4, 64}",
            worst,
            worst <= 1e-5,
            paper="Q^T Q = I for every input and beta (Thm 4.1)",
            detail="256 random (u, v) per n and beta",
        )
    )

    # the closed form against the dense solve, in float64 where the solve is well conditioned
    u64, v64 = torch.randn(64, 16, generator=g).double(), torch.randn(64, 16, generator=g).double()
    a = u64[:, :, None] * v64[:, None, :] - v64[:, :, None] * u64[:, None, :]
    eye = torch.eye(16, dtype=torch.float64)
    solve_err = 0.0
    for beta in (1e-3, 1e-1, 1.0, 10.0, 100.0):
        dense = torch.linalg.solve(eye + beta / 2 * a, eye - beta / 2 * a)
        solve_err = max(solve_err, float((cayley_matrix(u64, v64, beta) - dense).abs().max()))
    checks.append(
        tolerance_check(
            "closed-form-vs-solve",
            "max |Q_closed - solve(I + M, I - M)| <= 1e-10 (float64, n = 16, beta 1e-3..100)",
            solve_err,
            solve_err <= 1e-10,
            detail="Woodbury rank-2 closed form against torch.linalg.solve",
        )
    )

    # det Q = +1, and the eigenvalue nearest -1 sits exactly where the closed form says
    det_err, eig_rel, eig_min = 0.0, 0.0, math.inf
    for beta in betas:
        q = cayley_matrix(u64[:, :8], v64[:, :8], beta)
        det_err = max(det_err, float((torch.linalg.det(q) - 1).abs().max()))
        _, _, t = cayley_plane(u64[:, :8], v64[:, :8], beta)
        distance = (torch.linalg.eigvals(q) + 1).abs().min(dim=-1).values  # (64,)
        expected = 2.0 / torch.sqrt(1.0 + t[:, 0] ** 2)
        eig_rel = max(eig_rel, float(((distance - expected).abs() / expected).max()))
        eig_min = min(eig_min, float(distance.min()))
    checks.append(
        tolerance_check("cayley-det", "max |det Q - 1| <= 1e-9 (float64)", det_err, det_err <= 1e-9, paper="det Q = +1")
    )
    checks.append(
        tolerance_check(
            "cayley-no-minus-one",
            "min |lambda + 1| = 2 / sqrt(1 + t^2) > 0 within 1e-6 relative (float64)",
            eig_rel,
            eig_rel <= 1e-6 and eig_min > 0,
            paper="Cayley never has eigenvalue -1 (Thm 4.6)",
            detail=f"smallest |lambda + 1| = {eig_min:.3e} (beta = 1e6)",
        )
    )

    # Householder: det -1, orthogonal
    k = torch.randn(256, 8, generator=g).double()
    h = householder_apply(torch.eye(8, dtype=torch.float64).expand(256, 8, 8), k)
    h_det = float((torch.linalg.det(h) + 1).abs().max())
    h_orth = float((h.transpose(-1, -2) @ h - torch.eye(8, dtype=torch.float64)).abs().max())
    checks.append(
        tolerance_check(
            "householder-det",
            "max |det H_2(k) + 1| <= 1e-9 and |H^T H - I| <= 1e-12 (float64)",
            h_det,
            h_det <= 1e-9 and h_orth <= 1e-12,
            paper="det H = -1",
            detail=f"|H^T H - I| = {h_orth:.1e}",
        )
    )

    # hybrid: orthogonal at gamma in {0, 1} only; DDL at beta in {0, 2} only
    n = 8
    uh, vh, kh = (torch.randn(256, n, generator=g) for _ in range(3))
    eye32 = torch.eye(n).expand(256, n, n)
    hybrid = {}
    for gamma in (0.0, 0.25, 0.5, 1.0):
        m = hybrid_apply(eye32, uh, vh, 1.0, kh, gamma)
        hybrid[gamma] = float((m.transpose(-1, -2) @ m - torch.eye(n)).abs().max())
    ends = max(hybrid[0.0], hybrid[1.0])
    checks.append(
        tolerance_check(
            "hybrid-endpoints",
            "G_gamma orthogonal (|G^T G - I| <= 1e-5) at gamma in {0, 1}, not at gamma = 1/2",
            ends,
            ends <= 1e-5 and hybrid[0.5] > 1e-2,
            detail=f"|G^T G - I| at gamma 0.25: {hybrid[0.25]:.3f}, 0.5: {hybrid[0.5]:.3f}",
        )
    )
    data["hybrid"] = hybrid
    ddl = {}
    for beta in (0.0, 0.5, 1.0, 2.0):
        m = delta_apply(eye32, kh, beta)
        ddl[beta] = float((m.transpose(-1, -2) @ m - torch.eye(n)).abs().max())
    checks.append(
        tolerance_check(
            "ddl-endpoints",
            "I - beta k k^T orthogonal (<= 1e-5) at beta in {0, 2}, not at beta = 1",
            max(ddl[0.0], ddl[2.0]),
            max(ddl[0.0], ddl[2.0]) <= 1e-5 and ddl[1.0] > 0.5,
            detail=f"|A^T A - I| at beta 0.5: {ddl[0.5]:.3f}, 1: {ddl[1.0]:.3f}",
        )
    )
    data["ddl"] = ddl

    # Sinkhorn: doubly stochastic in 20 iterations, where its linear convergence gets there
    spreads = {}
    for label, logits in (
        ("U[-1, 1], n = 2..16", [2 * torch.rand(4096, m, m, generator=g) - 1 for m in (2, 4, 8, 16)]),
        (
            "mHC init 2 I + 0.01 U[-1, 1], n = 4",
            [2.0 * torch.eye(4) + 0.01 * (2 * torch.rand(4096, 4, 4, generator=g) - 1)],
        ),
        ("2 I + U[-1, 1], n = 4", [2.0 * torch.eye(4) + (2 * torch.rand(4096, 4, 4, generator=g) - 1)]),
    ):
        ps = [sinkhorn(x) for x in logits]
        spreads[label] = max(max(float((p.sum(-1) - 1).abs().max()), float((p.sum(-2) - 1).abs().max())) for p in ps)
    data["sinkhorn"] = spreads
    sk = max(spreads["U[-1, 1], n = 2..16"], spreads["mHC init 2 I + 0.01 U[-1, 1], n = 4"])
    checks.append(
        tolerance_check(
            "sinkhorn",
            "rows and columns sum to 1 within 1e-6 after 20 iterations (logits in U[-1, 1]; the mHC init)",
            sk,
            sk <= 1e-6,
            paper="mHC: doubly stochastic H_res",
            detail=f"wider logits converge slower: 2 I + U[-1, 1] leaves {spreads['2 I + U[-1, 1], n = 4']:.1e}",
        )
    )

    # norms through a deep stack: 48 operators with random generators on 128-wide tokens
    deep = _deep_norms(options.seed)
    data["deep_norms"] = deep
    orth = max(deep["cayley"], deep["householder"], deep["hybrid gamma=1"], deep["hybrid gamma=0"])
    checks.append(
        tolerance_check(
            "deep-norm",
            "max | ||G_48 ... G_1 x|| - 1 | <= 1e-4 for Cayley, Householder and collapsed hybrids (float32)",
            orth,
            orth <= 1e-4,
            detail=", ".join(f"{name}: {value:.2e}" for name, value in deep.items()),
        )
    )

    # Theorem (universal zero gradient): a symmetric f(gamma) = f(1 - gamma) has f'(1/2) = 0, so a
    # gate at gamma = 1/2 for every input gets no gradient from L_gate
    zero = zero_gradient_check(options.seed)
    data["zero_gradient"] = zero
    symmetric = max(zero["symmetric"].values())
    checks.append(
        tolerance_check(
            "zero-gradient",
            "symmetric regularisers have f'(1/2) = 0 (<= 1e-12), and L_gate gives a gate at gamma = 1/2 "
            "no gradient; an asymmetric f and a biased gate get one (> 1e-3)",
            max(symmetric, zero["gate at 1/2"]),
            symmetric <= 1e-12
            and zero["gate at 1/2"] <= 1e-12
            and zero["asymmetric"] > 1e-3
            and zero["gate at bias -1.5"] > 1e-3,
            paper="Theorem 7.3 (universal zero gradient at the midpoint)",
            detail=", ".join(f"{k}: {v:.1e}" for k, v in zero["symmetric"].items())
            + f"; gate at 1/2: {zero['gate at 1/2']:.1e}, asymmetric: {zero['asymmetric']:.2f}, "
            f"gate at bias -1.5: {zero['gate at bias -1.5']:.2e}",
        )
    )

    section = "### Per-beta orthogonality\n\n" + markdown_table(
        ["n, beta", "max |Q^T Q - I|"], [[key, value] for key, value in per_beta.items()]
    )
    return ExperimentResult(
        "edelta",
        "EΔ guarantees: Q^T Q = I for any beta, det Q = +1, det H = -1, hybrid at gamma in {0, 1}, deep norms",
        checks,
        data=data,
        sections=[section],
        preset=options.preset,
        seconds=watch(),
    )


def zero_gradient_check(seed: int) -> dict[str, Any]:
    r"""|f'(1/2)| by autograd (float64) for symmetric regularisers f(gamma) = f(1 - gamma), an asymmetric
    control gamma^2 (1 - gamma) (f'(1/2) = 1/4), and the largest |dL_gate / d(gate weight, bias)| of a
    hybrid whose gate starts at weight 0 and bias 0 (gamma = 1/2 for every input) or bias -1.5."""
    from ..models.residual import HybridResidual

    regularisers = {
        "4g(1-g)": lambda g: 4 * g * (1 - g),
        "entropy": lambda g: -(g * g.log() + (1 - g) * (1 - g).log()),
        "(g(1-g))^2": lambda g: (g * (1 - g)) ** 2,
        "sin(pi g)": lambda g: torch.sin(math.pi * g),
    }

    def slope(f: Any) -> float:
        g = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
        (grad,) = torch.autograd.grad(f(g), g)
        return abs(float(grad))

    def gate_gradient(bias: float) -> float:
        torch.manual_seed(seed)
        residual = HybridResidual(16, 4, 8, gate_bias=bias, gate_weight=1.0).double()
        residual.operator(torch.randn(4, 5, 16, dtype=torch.float64))
        aux = residual.aux_loss
        assert isinstance(aux, torch.Tensor) and residual.nets is not None
        rows = residual.nets.linear_slice("gate")
        weight, bias_grad = torch.autograd.grad(aux, [residual.nets.first.weight, residual.nets.first.bias])
        return max(float(weight[rows].abs().max()), float(bias_grad[rows].abs().max()))

    return {
        "symmetric": {name: slope(f) for name, f in regularisers.items()},
        "asymmetric": slope(lambda g: g * g * (1 - g)),
        "gate at 1/2": gate_gradient(0.0),
        "gate at bias -1.5": gate_gradient(-1.5),
    }


def _deep_norms(seed: int, depth: int = 48, d: int = 128) -> dict[str, float]:
    """max | ||y|| - 1 | after ``depth`` operators, each with fresh random generators, on unit tokens (4 streams)."""
    from ..models.residual import make_residual

    torch.manual_seed(seed)
    x = torch.randn(2, 32, d)
    x = x / x.norm(dim=-1, keepdim=True)
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "cayley": ("cayley", {}),
        "householder": ("householder", {}),
        "hybrid gamma=1": ("hybrid", {"gate_bias": 40.0}),
        "hybrid gamma=0": ("hybrid", {"gate_bias": -40.0}),
        "hybrid gamma=0.5": ("hybrid", {"gate_bias": 0.0}),
        "ddl": ("ddl", {}),
        "mhc": ("mhc", {}),
    }
    out = {}
    with torch.no_grad():
        for name, (kind, extra) in cases.items():
            y = x
            for _ in range(depth):
                # PyTorch's default initialisation: generator outputs of order 1, so Q and H are far from I
                y = make_residual(kind, d, n_streams=4, maps=False, **extra).operator(y)
            out[name] = float((y.norm(dim=-1) - 1).abs().max())
    return out


# --- edelta-benchmarks ---------------------------------------------------------------------------


def resolve_settings(preset: str, overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The preset's settings with ``key=value`` overrides (typed like the default); InputError on unknown keys."""
    settings = apply_overrides(SETTINGS[preset], overrides, "edelta-benchmarks")
    for key, choices in (("protocol", PROTOCOLS), ("gate", GATES)):
        if settings[key] not in choices:
            raise InputError(f"unknown {key} {settings[key]!r}; choose one of {', '.join(choices)}")
    return settings


def _names(value: str, choices: tuple[str, ...] | list[str], what: str) -> list[str]:
    names = [s.strip() for s in value.split(",") if s.strip()]
    for name in names:
        if name not in choices:
            raise InputError(f"unknown {what} {name!r}; choose among {', '.join(choices)}")
    return names


def _ints(value: str, what: str) -> list[int]:
    try:
        return [int(s) for s in value.split(",") if s.strip()]
    except ValueError as exc:
        raise InputError(f"{what} must be comma-separated integers, got {value!r}") from exc


class _Plan:
    """What one edelta-benchmarks run trains, under one protocol (never mixed)."""

    def __init__(self, settings: dict[str, Any], seed: int) -> None:
        from ..models.edelta import MODEL_NAMES
        from ..train.geometric import SEQUENCE_TASKS, TASKS

        self.settings = settings
        self.reference = settings["protocol"] == "reference"
        self.models = _names(settings["models"], MODEL_NAMES, "model")
        self.tasks = _names(settings["tasks"], TASKS, "task")
        self.sweeps = _names(settings["sweeps"], SWEEPS, "sweep")
        self.negation_models = _names(settings["negation_models"], tuple(NEGATION_KINDS), "negation model")
        self.seeds = _ints(settings["seeds"], "seeds") or [seed + k for k in range(max(1, settings["n_seeds"]))]
        self.sizes = _ints(settings["negation_sizes"], "negation_sizes")
        train = [t for t in self.tasks if t in SEQUENCE_TASKS]
        if "norm-deviation" in self.tasks and "stability" not in train:
            train.append("stability")  # the norm probe reads the models trained on stability
        self.train_tasks = train  # every model trains on these; the sweeps train EΔ alone on theirs
        self._data: dict[tuple[str, int], Any] = {}

    def sequences(self, task: str, seed: int) -> Any:
        """The task's data: the reference generates it once (seed 42) for every training seed."""
        from ..train.geometric import make_sequences
        from .edelta_reference import DATA_SEED, reference_sequences

        key = (task, DATA_SEED if self.reference else seed)
        if key not in self._data:
            make = reference_sequences if self.reference else make_sequences
            s = self.settings
            self._data[key] = make(
                task, key[1], length=s["length"] or None, n_train=s["n_train"] or None, n_valid=s["n_valid"] or None
            )
        return self._data[key]

    def config(self, name: str, d: int, length: int, **overrides: Any) -> Any:
        """Model ``name`` at the experiment's scale, as the protocol defines it."""
        from ..models.edelta import PRESETS, REFERENCE_PRESETS, preset_config

        s = self.settings
        base = (REFERENCE_PRESETS if self.reference else PRESETS)[name]
        fields: dict[str, Any] = {
            "d_in": d,
            "n_embd": s["n_embd"],
            "n_layers": max(1, round(base["n_layers"] / s["layer_divisor"])),
            "hidden": round(base.get("hidden", 0) * s["n_embd"] / 128),
            "gate_weight": s["model_gate_weight"],
            "gate": s["gate"],
        }
        if self.reference:
            fields["positions"] = length  # the reference's block_size: inputs + 1
        return preset_config(name, reference=self.reference, **{**fields, **overrides})

    def jobs(self) -> list[dict[str, Any]]:
        """Every training run, each independent of the others (its own seeds), in a fixed order."""
        jobs: list[dict[str, Any]] = []
        for seed in self.seeds:
            for task in self.train_tasks:
                norms = task == "stability" and "norm-deviation" in self.tasks
                jobs += [
                    {"kind": "train", "seed": seed, "task": task, "model": m, "overrides": {}, "norms": norms}
                    for m in self.models
                ]
            if "init-robustness" in self.sweeps:
                jobs += [
                    {
                        "kind": "sweep",
                        "sweep": f"init-robustness {task}",
                        "value": f"{bias:g}",
                        "seed": seed,
                        "task": task,
                        "model": "edelta",
                        "overrides": {"gate_bias": bias, "gate_weight": INIT_SWEEP_WEIGHT},
                    }
                    for task in ("near-pi", "near-pi-multi")
                    for bias in INIT_BIASES
                ]
            if "gate-weight" in self.sweeps:
                jobs += [
                    {
                        "kind": "sweep",
                        "sweep": "gate-weight gyroscope",
                        "value": f"{weight:g}",
                        "seed": seed,
                        "task": "gyroscope",
                        "model": "edelta",
                        "overrides": {"gate_weight": weight},
                    }
                    for weight in GATE_WEIGHTS
                ]
            if "negation" in self.tasks:
                jobs += [
                    {"kind": "negation", "seed": seed, "model": m, "size": size}
                    for m in self.negation_models
                    for size in self.sizes
                ]
        return jobs


def _run_jobs(settings: dict[str, Any], jobs: list[dict[str, Any]], device: torch.device, advance: Any) -> list[Any]:
    """The jobs' results in order: in this process, or (``workers`` > 1) in that many spawned processes
    (the runs are independent and seed themselves, so the results are the same; on a GPU the small
    models leave it idle between kernels, and parallel processes fill it)."""
    workers = min(settings["workers"], len(jobs))
    if workers <= 1:
        with cpu_threads(device, settings["cpu_threads"]):
            results = []
            for job in jobs:
                results.append(_run_job(settings, job, device.type))
                advance(1)
            return results
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_run_job, settings, job, device.type): i for i, job in enumerate(jobs)}
        out: list[Any] = [None] * len(jobs)
        for future in as_completed(futures):
            out[futures[future]] = future.result()
            advance(1)
    return out


def _run_job(settings: dict[str, Any], job: dict[str, Any], device_type: str) -> dict[str, Any]:
    """One training run (a model on a task, a sweep point, or a bare operator on negation)."""
    from ..models.edelta import EDeltaModel
    from ..train.geometric import FitConfig, unit_sequences
    from .edelta_reference import model_norm_deviation, predict_zero_mse

    plan = _Plan(settings, job["seed"])
    device = torch.device(device_type)
    seed = job["seed"]
    with cpu_threads(device, settings["cpu_threads"]):
        if job["kind"] == "negation":
            return _negation_one(plan, job["model"], job["size"], seed, device)
        data = plan.sequences(job["task"], seed)
        length = int(data.train.shape[1])
        config = plan.config(job["model"], data.dim, length, **job["overrides"])
        fit_config = FitConfig(
            steps=settings["steps"],
            batch_size=settings["batch_size"],
            lr=settings["lr"],
            warmup_steps=settings["warmup_steps"],
            eval_every=settings["eval_every"],
        )
        result = _train_one(config, data, fit_config, seed, device)
        model = result.pop("model")
        result["plateau"] = predict_zero_mse(data.valid)
        if job.get("norms"):
            probe_length = min(100, length)  # within the position table
            probe = unit_sequences(seed, data.dim, length=probe_length).to(device)
            wide = unit_sequences(seed, config.n_embd, length=probe_length).to(device)
            torch.manual_seed(seed)
            fresh = EDeltaModel(config).to(device)
            result["norms"] = {
                "model": model_norm_deviation(model, probe)["deviation"],
                "model at init": model_norm_deviation(fresh, probe)["deviation"],
                "shortcut": _norm_deviation(model, wide),
            }
        return result


def edelta_benchmarks(options: ExperimentOptions) -> ExperimentResult:
    """Every model on every task over seeds under one protocol; the sweeps; the table beside the paper's; verdicts."""
    from ..train.loop import select_device

    watch = Stopwatch()
    settings = resolve_settings(options.preset, list(options.overrides))
    plan = _Plan(settings, options.seed)
    requested = "cuda" if options.preset == "paper" and options.device == "auto" else options.device
    device = select_device(requested)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {t: {m: [] for m in plan.models} for t in plan.train_tasks}
    norms: dict[str, dict[str, list[float]]] = {k: {m: [] for m in plan.models} for k in NORM_KINDS}
    sweeps: dict[str, dict[str, list[dict[str, Any]]]] = {}
    negation: dict[str, dict[int, list[dict[str, Any]]]] = {
        m: {s: [] for s in plan.sizes} for m in plan.negation_models
    }
    plateaus: dict[str, float] = {}
    jobs = plan.jobs()
    with ProgressBars(options.progress) as bars:
        advance = bars.track(f"edelta-benchmarks ({settings['protocol']})", total=len(jobs))
        for job, result in zip(jobs, _run_jobs(settings, jobs, device, advance), strict=True):
            if job["kind"] == "negation":
                negation[job["model"]][job["size"]].append(result)
                continue
            plateaus[job["task"]] = result.pop("plateau")
            for kind, value in result.pop("norms", {}).items():
                norms[kind][job["model"]].append(value)
            if job["kind"] == "train":
                runs[job["task"]][job["model"]].append(result)
            else:
                sweeps.setdefault(job["sweep"], {}).setdefault(job["value"], []).append(result)

    counts = _parameter_rows(plan)
    checks = _verdicts(plan, runs, norms, sweeps, negation, plateaus, LIMITS[options.preset])
    figures = _figures(options, runs, negation, plan.sizes)
    protocol = settings["protocol"]
    sections = [
        f"### Results beside the paper's (protocol `{protocol}`)\n\n"
        + PROTOCOL_NOTES[protocol]
        + f"\n\nMean ± sd over seeds {', '.join(map(str, plan.seeds))}; validation MSE unless stated; "
        "'× below plateau' divides the MSE of predicting zero by ours. Settings: "
        + ", ".join(f"{k}={v}" for k, v in settings.items())
        + f"; device {device.type}.\n\n"
        + markdown_table(
            ["task", "model", "ours", "× below plateau", "paper"], _table(plan, runs, norms, negation, plateaus)
        ),
        "### Parameters\n\n"
        + markdown_table(["model", "residual", "layers", "width", "parameters", "without position table"], counts),
    ]
    if sweeps:
        sections.append(_sweep_section(sweeps, plateaus))
    if "negation" in plan.tasks:
        sections.append(_negation_section(negation, plan.sizes))
    data = {
        "settings": settings,
        "seeds": plan.seeds,
        "parameters": {row[0]: row[4] for row in counts},
        "plateaus": plateaus,
        "runs": runs,
        "norm_deviation": norms,
        "sweeps": sweeps,
        "negation": {m: {str(s): v for s, v in negation[m].items()} for m in plan.negation_models},
        "paper": PAPER_TABLE,
    }
    return ExperimentResult(
        "edelta-benchmarks",
        f"GPT / DDL / mHC / JPmHC / EΔ on gyroscope, stability, norm deviation, near-pi and negation ({protocol} protocol)",
        checks,
        data=data,
        sections=sections,
        figures=figures,
        preset=options.preset,
        seconds=watch(),
    )


NORM_KINDS = ("model", "model at init", "shortcut")
PROTOCOL_NOTES = {
    "reference": (
        "Reference protocol (the code of arash-shahmansoori/edelta, commit f51372f): axis-aligned "
        "gyroscope planes, one fixed near-pi rotation for the whole dataset, data drawn once with seed "
        "42, a learned position table, every Linear from N(0, 0.02), the reference's DDL / mHC / JPmHC, "
        "and EΔ's and DDL's generators pooled over the whole sequence: **not causal** (every position "
        "sees the sequence mean). Norm deviation: unit vectors through the whole trained stability model."
    ),
    "causal": (
        "Causal protocol (this project's design): per-token generators (causal), random rotation planes, "
        "a new near-pi rotation per sequence, data drawn per seed, no position table, our DDL (with the "
        "DDL paper's write term), mHC (static pre / post weights) and JPmHC (norm-bounded generator)."
    ),
}


def _parameter_rows(plan: _Plan) -> list[list[Any]]:
    """Per model: residual, layers, width, parameters (with the position table of the paper's gyroscope, 256 steps
    under the reference protocol) and without it; at d_in 16."""
    from ..models.edelta import EDeltaModel, count_parameters

    rows = []
    for name in plan.models:
        config = plan.config(name, 16, 256)
        count = count_parameters(EDeltaModel(config))
        rows.append(
            [name, config.residual, config.n_layers, config.n_embd, count, count - config.positions * config.n_embd]
        )
    return rows


@contextlib.contextmanager
def cpu_threads(device: torch.device, threads: int) -> Iterator[None]:
    """Run on ``threads`` intra-op threads on CPU (0: torch's default), restoring the setting after.

    These models are tiny (a step is hundreds of small kernels), so extra threads only add
    synchronisation; on a loaded 2-core machine one thread ran the CI runs 10 to 20x faster.
    """
    if device.type != "cpu" or threads <= 0:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _train_one(config: Any, data: Any, fit_config: Any, seed: int, device: torch.device) -> dict[str, Any]:
    from ..models.edelta import EDeltaModel
    from ..train.geometric import train_sequence_task

    torch.manual_seed(seed)
    model = EDeltaModel(config)
    history = train_sequence_task(model, data, replace(fit_config, seed=seed), device)
    return {
        "seed": seed,
        "valid_mse": history[-1]["valid_mse"],
        "gate": history[-1]["gate"],
        "history": history,
        "model": model,
    }


def _norm_deviation(model: Any, probe: torch.Tensor) -> float:
    """Ours: mean | ||G(x)|| - 1 | of the model's composed shortcuts on unit vectors (one forward pass)."""
    model.eval()
    with torch.no_grad():
        return float((model.shortcut(probe).norm(dim=-1) - 1).abs().mean())


def _negation_one(plan: _Plan, name: str, size: int, seed: int, device: torch.device) -> dict[str, Any]:
    from ..models.edelta import BareOperator

    settings = plan.settings
    if plan.reference:
        from .edelta_reference import fit_reference_negation, reference_negation_data

        train, valid = reference_negation_data(seed, size)
        op = BareOperator(NEGATION_KINDS[name], gate_weight=settings["negation_gate_weight"], reference=True)
        history = fit_reference_negation(
            op.to(device),
            train.to(device),
            valid.to(device),
            settings["negation_steps"],
            max(1, settings["negation_steps"] // 20),
            lr=settings["negation_lr"],
        )
    else:
        history = _causal_negation(name, size, seed, settings, device)
    last = history[-1]
    return {
        "seed": seed,
        "cosine": last["cosine"],
        "valid_mse": last["valid_mse"],
        "gate": last["gate"],
        "beta": last["beta"],
        "gate_curve": [[r["step"], r["gate"]] for r in history],
    }


def _causal_negation(name: str, size: int, seed: int, settings: dict[str, Any], device: torch.device) -> list[Any]:
    """Our negation run: the sequence tasks' schedule (warm-up, cosine, AdamW (0.9, 0.95), clipping)."""
    from ..models.edelta import BareOperator
    from ..train.geometric import FitConfig, fit, negation_data

    torch.manual_seed(seed)
    op = BareOperator(NEGATION_KINDS[name], gate_weight=settings["negation_gate_weight"]).to(device)
    train, valid = negation_data(seed, size)
    valid = valid.to(device)

    def evaluate() -> dict[str, float]:
        y = op(valid)
        gate = op.gate()
        beta = getattr(op.residual, "beta", None)
        return {
            "cosine": float(torch.nn.functional.cosine_similarity(y, -valid, dim=-1).mean()),
            "valid_mse": float(torch.nn.functional.mse_loss(y, -valid)),
            "gate": float("nan") if gate is None else gate,
            "beta": float("nan") if beta is None else float(beta.mean()),
        }

    config = FitConfig(
        steps=settings["negation_steps"],
        batch_size=settings["batch_size"],
        lr=settings["negation_lr"],
        warmup_steps=settings["negation_warmup_steps"],
        eval_every=max(1, settings["negation_steps"] // 20),
        seed=seed,
    )
    return fit(op, train, -train, config, evaluate, device, op.aux_loss)


def _mean_sd(values: list[float]) -> tuple[float, float]:
    array = np.asarray(values, dtype=float)
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def _cell(values: list[float]) -> str:
    mean, sd = _mean_sd(values)
    return f"{fmt(mean)} ± {fmt(sd)}" if len(values) > 1 else fmt(mean)


def _mean(values: list[float]) -> float:
    return _mean_sd(values)[0] if values else math.nan


def _table(
    plan: _Plan,
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    norms: dict[str, dict[str, list[float]]],
    negation: dict[str, dict[int, list[dict[str, Any]]]],
    plateaus: dict[str, float],
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for task in plan.tasks:
        if task in runs:
            for name in plan.models:
                mses = [r["valid_mse"] for r in runs[task][name]]
                cell = _cell(mses)
                if name == "edelta":
                    cell += f" (gamma {_cell([r['gate'] for r in runs[task][name]])})"
                below = f"{plateaus[task] / _mean(mses):.3g}" if _mean(mses) > 0 else None
                rows.append([task, name, cell, below, PAPER_TABLE[task].get(name)])
        elif task == "norm-deviation":
            for name in plan.models:
                cell = (
                    f"{_cell(norms['model'][name])} (at init {_cell(norms['model at init'][name])}; "
                    f"shortcuts {_cell(norms['shortcut'][name])})"
                )
                rows.append([task, name, cell, None, PAPER_TABLE[task].get(name)])
        elif task == "negation" and plan.sizes:
            size = max(plan.sizes)
            for name, per_size in negation.items():
                results = per_size[size]
                cell = f"cos {_cell([r['cosine'] for r in results])}"
                if name == "edelta":
                    cell = f"gamma {_cell([r['gate'] for r in results])}, " + cell
                if name == "ddl":
                    cell = f"beta {_cell([r['beta'] for r in results])}, " + cell
                rows.append([f"negation ({size} samples)", name, cell, None, PAPER_TABLE["negation"].get(name)])
    return rows


def _sweep_section(sweeps: dict[str, dict[str, list[dict[str, Any]]]], plateaus: dict[str, float]) -> str:
    rows = []
    for sweep, per_value in sweeps.items():
        task = sweep.split(" ", 1)[1]
        for value, results in per_value.items():
            mses = [r["valid_mse"] for r in results]
            rows.append(
                [sweep, value, _cell(mses), _cell([r["gate"] for r in results]), f"{plateaus[task] / _mean(mses):.3g}"]
            )
    return "### Sweeps (EΔ alone)\n\n" + markdown_table(
        ["sweep", "init_gate_bias (weight 0.5) or L_gate weight", "validation MSE", "gamma", "× below plateau"], rows
    )


def _negation_section(negation: dict[str, dict[int, list[dict[str, Any]]]], sizes: list[int]) -> str:
    header = ["operator", *[f"cos @ {s}" for s in sizes], *[f"gamma @ {s}" for s in sizes]]
    rows = []
    for name, per_size in negation.items():
        cos = [_cell([r["cosine"] for r in per_size[s]]) for s in sizes]
        gates = [_cell([r["gate"] for r in per_size[s]]) if name == "edelta" else None for s in sizes]
        rows.append([name, *cos, *gates])
    return "### Negation (bare operators) by training-set size\n\n" + markdown_table(header, rows)


def _verdicts(
    plan: _Plan,
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    norms: dict[str, dict[str, list[float]]],
    sweeps: dict[str, dict[str, list[dict[str, Any]]]],
    negation: dict[str, dict[int, list[dict[str, Any]]]],
    plateaus: dict[str, float],
    limits: dict[str, Any] | None = None,
) -> list[Check]:
    """The checks, at ``limits`` (:data:`LIMITS` of the preset), each a test over ``plan.seeds``.

    MSEs are compared on a log10 scale ("decades"), per seed: log10(plateau / MSE) is how many
    decades below predicting zero a run ends; two models' runs pair by seed.
    """
    from . import stat_tests as st

    limits = limits or LIMITS["ci"]
    seeds = plan.seeds
    n = len(seeds)
    values = [r["valid_mse"] for per_model in runs.values() for results in per_model.values() for r in results]
    checks = [
        st.tolerance_check(
            "finite",
            "every training run ends with a finite validation MSE",
            float(sum(not math.isfinite(v) for v in values)),
            all(math.isfinite(v) for v in values),
            detail=f"{len(values)} runs; value: how many are not finite",
        )
    ]

    def mses(task: str, name: str = "edelta") -> list[float]:
        return [r["valid_mse"] for r in runs.get(task, {}).get(name, [])]

    def gates(task: str) -> list[float]:
        return [r["gate"] for r in runs.get(task, {}).get("edelta", [])]

    if "edelta" in plan.models and "stability" in runs:
        checks += stability_checks(
            mses("stability"),
            {m: mses("stability", m) for m in plan.models if m != "edelta"},
            plateaus["stability"],
            seeds,
            limits,
            plan.settings["model_gate_weight"],
        )
    if "edelta" in plan.models and "norm-deviation" in plan.tasks:
        checks.append(
            norm_check(norms["model"]["edelta"], seeds, limits["norm_max"], {m: norms["model"][m] for m in plan.models})
        )
    for task, expected in (("near-pi", "high"), ("near-pi-multi", "low")):
        if "edelta" in plan.models and task in plan.tasks:
            checks.append(gate_check(task, gates(task), seeds, expected, limits, mses(task)))
    for task in ("near-pi", "near-pi-multi"):
        per_bias = sweeps.get(f"init-robustness {task}")
        if per_bias:
            checks.append(
                robustness_check(
                    task,
                    {b: [r["valid_mse"] for r in results] for b, results in per_bias.items()},
                    {b: [r["gate"] for r in results] for b, results in per_bias.items()},
                    plateaus[task],
                    seeds,
                    limits,
                )
            )
    per_weight = sweeps.get("gate-weight gyroscope")
    if per_weight:
        checks.append(
            gate_weight_check({w: [r["valid_mse"] for r in results] for w, results in per_weight.items()}, seeds)
        )
    if "negation" in plan.tasks and "edelta" in negation and plan.sizes:
        size = max(plan.sizes)
        checks += negation_checks(
            [r["gate"] for r in negation["edelta"][size]],
            [r["cosine"] for r in negation["edelta"][size]],
            size,
            seeds,
            limits,
        )
    del n
    return checks


def _decades(mses: list[float], plateau: float) -> list[float]:
    """log10(plateau / MSE) per run: decades below predicting zero (NaN for a non-positive MSE)."""
    return [math.log10(plateau / m) if m > 0 and math.isfinite(m) else math.nan for m in mses]


#: the paper's EΔ stability MSE (arXiv 2605.06729, Table; docs/edelta.md): plateau 1/64 over it is ~3,600x
PAPER_STABILITY_MSE = 4.35e-6


def stability_checks(
    edelta: list[float],
    others: dict[str, list[float]],
    plateau: float,
    seeds: list[int],
    limits: dict[str, Any],
    weight: float = 0.1,
) -> list[Check]:
    """edelta-learns (the paper's level), edelta-leaves-plateau (ours, §7) and stability-best, from per-seed MSEs."""
    from . import stat_tests as st

    n = len(seeds)
    decades = _decades(edelta, plateau)
    paper_decades = math.log10(plateau / PAPER_STABILITY_MSE)
    margin = limits["paper_margin"]
    why = LIMIT_NOTES.get(str(limits.get("preset_name", "")), "")
    checks = [
        st.non_inferiority(
            decades,
            paper_decades,
            margin,
            seeds=seeds,
            unit="decades",
            statement=f"EΔ (L_gate weight {weight:g}) learns stability to the paper's level: log10(plateau / MSE) "
            f"not below the paper's {paper_decades:.2f} (plateau / 4.35e-6 = {10**paper_decades:,.0f}x) by more "
            f"than {margin:g} decades, i.e. MSE <= plateau / {10 ** (paper_decades - margin):,.0f}, one-sample over "
            f"{n} seeds ({why})",
        ).check(
            "edelta-learns",
            paper=f"4.35e-6 ({10**paper_decades:,.0f}x below the plateau)",
            value=float(np.mean(edelta)) if edelta else math.nan,
            detail=f"value: the mean MSE; plateau (predict zero) {plateau:.3e}; mean "
            f"{10 ** float(np.mean(decades)):.3g}x below it",
        ),
        st.superiority(
            decades,
            1.0,
            seeds=seeds,
            unit="decades",
            statement=f"EΔ leaves the predict-zero plateau: MSE more than 10x below it (log10(plateau / MSE) > 1), "
            f"one-sample over {n} seeds (ours, docs/edelta.md §7: not the paper's figure)",
        ).check("edelta-leaves-plateau", value=float(np.mean(decades))),
    ]
    if others:
        tests = [
            st.superiority(
                decades, _decades(values, plateau), seeds=seeds, unit="decades", statement=f"EΔ below {name}"
            )
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
    from . import stat_tests as st

    return st.superiority(
        [norm_max] * len(deviation),
        deviation,
        seeds=seeds,
        statement=f"EΔ's norm deviation (unit vectors through the trained stability model) is below {norm_max:g} "
        f"(10x the paper's 0.001), one-sample over {len(seeds)} seeds",
    ).check(
        "norm-deviation",
        paper="0.001",
        value=_mean(deviation),
        detail="value: the mean deviation; " + ", ".join(f"{m}: {_mean(v):.3g}" for m, v in per_model.items()),
    )


def gate_check(
    task: str, gamma: list[float], seeds: list[int], expected: str, limits: dict[str, Any], mse: list[float]
) -> Check:
    """EΔ's gate on near-pi above ``gate_high`` (rotation) or on near-pi-multi below ``gate_low`` (reflection)."""
    from . import stat_tests as st

    high = expected == "high"
    bound = limits["gate_high"] if high else limits["gate_low"]
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
        value=_mean(gamma),
        detail=f"value: the mean gamma; MSE {_cell(mse)}",
    )


def robustness_check(
    task: str,
    mses: dict[str, list[float]],
    gammas: dict[str, list[float]],
    plateau: float,
    seeds: list[int],
    limits: dict[str, Any],
) -> Check:
    """At L_gate weight 0.5, EΔ learns from every initial gate bias (> 1 decade below the plateau) and every
    bias's MSE is equivalent to bias 0's within ``spread_decades`` (log10, paired over seeds)."""
    from . import stat_tests as st

    margin = limits["spread_decades"]
    reference = _decades(mses["0"], plateau) if "0" in mses else None
    tests = [
        st.superiority(_decades(v, plateau), 1.0, seeds=seeds, unit="decades", statement=f"bias {b} learns")
        for b, v in mses.items()
    ]
    if reference is not None:
        tests += [
            st.equivalence(
                _decades(v, plateau), reference, margin, seeds=seeds, unit="decades", statement=f"bias {b} ~ bias 0"
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
        detail=", ".join(f"bias {b}: MSE {_cell(v)} (gamma {_cell(gammas[b])})" for b, v in mses.items()),
    )


def gate_weight_check(mses: dict[str, list[float]], seeds: list[int]) -> Check:
    """L_gate helps on gyroscope: MSE at weight 0.1 below weight 0's (log10, paired over seeds)."""
    from . import stat_tests as st

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
        value=_mean(mses["0.1"]) / _mean(mses["0"]),
        detail="value: the ratio of mean MSEs (0.1 / 0); " + ", ".join(f"{w}: {_cell(v)}" for w, v in mses.items()),
    )


def negation_checks(
    gamma: list[float], cosine: list[float], size: int, seeds: list[int], limits: dict[str, Any]
) -> list[Check]:
    """EΔ on negation: the gate collapses (its distance to the nearer end below ``gate_low``) and the cosine is
    not below the paper's 0.96 by more than ``0.96 - cosine_min`` (non-inferiority), one-sample over seeds."""
    from . import stat_tests as st

    low, paper_cosine = limits["gate_low"], 0.96
    margin = round(paper_cosine - limits["cosine_min"], 6)
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
            value=_mean(gamma),
            detail="value: the mean over seeds of the mean gamma on validation samples",
        ),
        st.non_inferiority(
            cosine,
            paper_cosine,
            margin,
            seeds=seeds,
            statement=f"EΔ's cosine(G(x), -x) on negation ({size} samples) is not below the paper's 0.96 by more "
            f"than {margin:g} (cosine >= {limits['cosine_min']:g}), one-sample over {len(seeds)} seeds",
        ).check("negation-cosine", paper="0.96", value=_mean(cosine), detail="value: the mean cosine"),
    ]


#: the thresholds of the checks per preset. paper_margin: decades that edelta-learns allows below the
#: paper's ~3,600x (see LIMIT_NOTES for why); spread_decades: the init-robustness equivalence margin
#: (1 decade: 10x, the reference's run_near_pi.sh reading); norm_max: 10x the paper's 0.001; gates and
#: cosine: the reference's expected outcomes. smoke's only ask that two steps give sane numbers.
LIMITS: dict[str, dict[str, Any]] = {
    "paper": {
        "preset_name": "paper",
        "paper_margin": math.log10(2.0),
        "norm_max": 0.01,
        "spread_decades": 1.0,
        "gate_low": GATE_LOW,
        "gate_high": GATE_HIGH,
        "cosine_min": COSINE_MIN,
    },
    "ci": {
        "preset_name": "ci",
        "paper_margin": 2.0,
        "norm_max": 0.01,
        "spread_decades": 1.0,
        "gate_low": GATE_LOW,
        "gate_high": GATE_HIGH,
        "cosine_min": COSINE_MIN,
    },
    "smoke": {
        "preset_name": "smoke",
        "paper_margin": 4.0,
        "norm_max": 1.0,
        "spread_decades": 6.0,
        "gate_low": 0.5,
        "gate_high": 0.0,
        "cosine_min": -1.0,
    },
}
LIMIT_NOTES = {
    "paper": "paper preset: the paper's scale, a factor-2 margin for its unstated seed spread",
    "ci": "ci preset: 2 decades below the paper's level, the scale gap of the baselines at ci (GPT 1.08e-3 "
    "against the paper's 16.4e-6: 1.8 decades; docs/edelta.md §6): threshold plateau / 36",
    "smoke": "smoke preset: 2 steps at toy size, 4 decades of margin: it checks only that the run gives a number",
}


def _figures(
    options: ExperimentOptions,
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    negation: dict[str, dict[int, list[dict[str, Any]]]],
    sizes: list[int],
) -> dict[str, str]:
    from ..plotting import pyplot as _pyplot
    from ..plotting import save as _save

    plt = _pyplot()
    figures: dict[str, str] = {}
    if runs:
        figure, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), layout="constrained", squeeze=False)
        for axis, (task, per_model) in zip(axes[0], runs.items(), strict=True):
            for name, results in per_model.items():
                for i, result in enumerate(results):
                    steps = [r["step"] for r in result["history"]]
                    axis.plot(
                        steps,
                        [r["valid_mse"] for r in result["history"]],
                        label=name if i == 0 else None,
                        color=f"C{list(per_model).index(name)}",
                        alpha=0.9,
                    )
            axis.set_yscale("log")
            axis.set_title(task)
            axis.set_xlabel("step")
            axis.set_ylabel("validation MSE")
            axis.legend(fontsize=7)
        _save(figure, options.work_dir / "edelta_loss_curves.png")
        figures["edelta_loss_curves.png"] = "Validation MSE over training, one line per model and seed"
    figure, axis = plt.subplots(figsize=(6, 3.8), layout="constrained")
    drawn = False
    for task, per_model in runs.items():
        for result in per_model.get("edelta", []):
            steps = [r["step"] for r in result["history"]]
            axis.plot(steps, [r["gate"] for r in result["history"]], label=f"{task} (seed {result['seed']})")
            drawn = True
    if "edelta" in negation and sizes:
        for result in negation["edelta"][max(sizes)]:
            curve = np.asarray(result["gate_curve"])
            axis.plot(curve[:, 0], curve[:, 1], "--", label=f"negation {max(sizes)} (seed {result['seed']})")
            drawn = True
    if drawn:
        axis.axhline(GATE_LOW, color="grey", lw=0.8)
        axis.axhline(GATE_HIGH, color="grey", lw=0.8)
        axis.set_xlabel("step")
        axis.set_ylabel("mean gate gamma")
        axis.set_ylim(0, 1)
        axis.legend(fontsize=7)
        _save(figure, options.work_dir / "edelta_gate.png")
        figures["edelta_gate.png"] = "EΔ's gate gamma over training (solid: sequence tasks; dashed: negation)"
    else:
        plt.close(figure)
    return figures
