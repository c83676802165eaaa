r"""EΔ-MHC-Geo (PAPERS.md §3): the operators' guarantees, and the five models on the synthetic benchmarks.

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
from ..report.progress import ProgressBars
from .record import (
    Check,
    ExperimentOptions,
    ExperimentResult,
    Stopwatch,
    apply_overrides,
    check,
    fmt,
    markdown_table,
)

PAPER_SEEDS = (42, 123, 456)

#: the paper's table (PAPERS.md §3): task -> model -> reported mean
PAPER_TABLE: dict[str, dict[str, str]] = {
    "gyroscope": {"gpt": "3.78e-3", "ddl": "3.36e-3", "mhc": "4.02e-3", "jpmhc": "3.08e-4", "edelta": "1.02e-3"},
    "stability": {"gpt": "16.4e-6", "ddl": "15.3e-6", "mhc": "8650e-6", "jpmhc": "8.19e-6", "edelta": "4.35e-6"},
    "near-pi": {"gpt": "1.19e-5", "ddl": "1.11e-5", "mhc": "9.64e-3", "jpmhc": "6.54e-6", "edelta": "1.44e-6"},
    "near-pi-multi": {"gpt": "3.34e-6", "ddl": "3.75e-6", "mhc": "1.63e-3", "jpmhc": "1.69e-6", "edelta": "1.24e-6"},
    "norm-deviation": {"edelta": "0.001"},
    "negation": {"ddl": "beta -> 1.995, cos 0.96", "jpmhc": "cos -0.30", "edelta": "gamma -> 0.051, cos 0.96"},
}

#: settings of edelta-benchmarks per preset; every key can be overridden with key=value
SETTINGS: dict[str, dict[str, Any]] = {
    "ci": {
        "models": "gpt,ddl,mhc,jpmhc,edelta",
        "tasks": "gyroscope,stability,near-pi,near-pi-multi,norm-deviation,negation",
        "seeds": "",  # empty: the options' seed alone
        "n_embd": 64,  # at least the tasks' d = 64, or the input projection is a bottleneck
        "layer_divisor": 3,  # the paper's layer counts divided by this (at least 1)
        "length": 32,
        "n_train": 256,
        "n_valid": 64,
        "steps": 300,
        "batch_size": 32,
        "lr": 2e-3,
        "warmup_steps": 30,
        "eval_every": 50,
        "model_gate_weight": 0.1,
        "negation_models": "ddl,jpmhc,edelta",
        "negation_sizes": "10,100,500",
        "negation_steps": 2000,
        "negation_lr": 1e-3,
        "negation_warmup_steps": 15,
        "negation_gate_weight": 0.5,
        "cpu_threads": 1,
    },
    "paper": {
        "models": "gpt,ddl,mhc,jpmhc,edelta",
        "tasks": "gyroscope,stability,near-pi,near-pi-multi,norm-deviation,negation",
        "seeds": "42,123,456",
        "n_embd": 128,
        "layer_divisor": 1,
        "length": 0,  # 0: the paper's (256 gyroscope, 128 others)
        "n_train": 0,  # 0: the paper's (9000 gyroscope, 900 others)
        "n_valid": 0,
        "steps": 2000,
        "batch_size": 64,
        "lr": 1e-3,
        "warmup_steps": 100,
        "eval_every": 100,
        "model_gate_weight": 0.1,
        "negation_models": "ddl,jpmhc,edelta,cayley,householder",
        "negation_sizes": "10,25,50,100,200,500",
        "negation_steps": 2000,
        "negation_lr": 1e-3,
        "negation_warmup_steps": 100,
        "negation_gate_weight": 0.5,
        "cpu_threads": 1,
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
        check(
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
        check(
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
        check("cayley-det", "max |det Q - 1| <= 1e-9 (float64)", det_err, det_err <= 1e-9, paper="det Q = +1")
    )
    checks.append(
        check(
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
        check(
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
        check(
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
        check(
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
        check(
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
        check(
            "deep-norm",
            "max | ||G_48 ... G_1 x|| - 1 | <= 1e-4 for Cayley, Householder and collapsed hybrids (float32)",
            orth,
            orth <= 1e-4,
            detail=", ".join(f"{name}: {value:.2e}" for name, value in deep.items()),
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
    return apply_overrides(SETTINGS[preset], overrides, "edelta-benchmarks")


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


def edelta_benchmarks(options: ExperimentOptions) -> ExperimentResult:
    """Every model on every task over seeds; the table beside the paper's; the negation verdict."""
    from ..models.edelta import MODEL_NAMES, PRESETS, EDeltaModel, count_parameters, preset_config
    from ..train.geometric import SEQUENCE_TASKS, TASKS, FitConfig, make_sequences, unit_sequences
    from ..train.loop import select_device

    watch = Stopwatch()
    settings = resolve_settings(options.preset, list(options.overrides))
    models = _names(settings["models"], MODEL_NAMES, "model")
    tasks = _names(settings["tasks"], TASKS, "task")
    negation_models = _names(settings["negation_models"], tuple(NEGATION_KINDS), "negation model")
    seeds = _ints(settings["seeds"], "seeds") or [options.seed]
    sizes = _ints(settings["negation_sizes"], "negation_sizes")
    requested = "cuda" if options.preset == "paper" and options.device == "auto" else options.device
    device = select_device(requested)

    def model_config(name: str, d: int) -> Any:
        base = PRESETS[name]
        layers = max(1, round(base["n_layers"] / settings["layer_divisor"]))
        hidden = round(base.get("hidden", 0) * settings["n_embd"] / 128)
        return preset_config(
            name,
            d_in=d,
            n_embd=settings["n_embd"],
            n_layers=layers,
            hidden=hidden,
            gate_weight=settings["model_gate_weight"],
        )

    counts = {name: count_parameters(EDeltaModel(model_config(name, 16))) for name in models}
    sequence_tasks = [t for t in tasks if t in SEQUENCE_TASKS]
    train_tasks = list(sequence_tasks)
    if "norm-deviation" in tasks and "stability" not in train_tasks:
        train_tasks.append("stability")  # the norm probe reads the models trained on stability
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {t: {m: [] for m in models} for t in train_tasks}
    norms: dict[str, dict[str, list[float]]] = {"init": {m: [] for m in models}, "trained": {m: [] for m in models}}
    negation: dict[str, dict[int, list[dict[str, Any]]]] = {m: {s: [] for s in sizes} for m in negation_models}
    n_runs = len(train_tasks) * len(models) * len(seeds)
    n_runs += len(negation_models) * len(sizes) * len(seeds) if "negation" in tasks else 0

    fit_config = FitConfig(
        steps=settings["steps"],
        batch_size=settings["batch_size"],
        lr=settings["lr"],
        warmup_steps=settings["warmup_steps"],
        eval_every=settings["eval_every"],
    )
    with ProgressBars(options.progress) as bars, cpu_threads(device, settings["cpu_threads"]):
        advance = bars.track("edelta-benchmarks", total=n_runs)
        for seed in seeds:
            for task in train_tasks:
                sequences = make_sequences(
                    task,
                    seed,
                    length=settings["length"] or None,
                    n_train=settings["n_train"] or None,
                    n_valid=settings["n_valid"] or None,
                )
                for name in models:
                    config = model_config(name, sequences.dim)
                    runs[task][name].append(_train_one(config, sequences, fit_config, seed, device))
                    if task == "stability" and "norm-deviation" in tasks:
                        model = runs[task][name][-1].pop("model")
                        probe = unit_sequences(seed, settings["n_embd"]).to(device)
                        norms["trained"][name].append(_norm_deviation(model, probe))
                        torch.manual_seed(seed)
                        fresh = EDeltaModel(config).to(device)
                        norms["init"][name].append(_norm_deviation(fresh, probe))
                    runs[task][name][-1].pop("model", None)
                    advance(1)
            if "negation" in tasks:
                for name in negation_models:
                    for size in sizes:
                        negation[name][size].append(
                            _negation_one(name, size, seed, settings, device, fit_config.batch_size)
                        )
                        advance(1)

    checks = _verdicts(runs, negation, sizes, "negation" in tasks)
    figures = _figures(options, runs, negation, sizes)
    table_rows = _table(runs, norms, negation, models, tasks, sizes)
    sections = [
        "### Results beside the paper's\n\n"
        f"Mean ± sd over seeds {', '.join(map(str, seeds))}; validation MSE unless stated. Settings: "
        + ", ".join(f"{k}={v}" for k, v in settings.items())
        + f"; device {device.type}.\n\n"
        + markdown_table(["task", "model", "ours", "paper"], table_rows),
        "### Parameters\n\n"
        + markdown_table(
            ["model", "residual", "layers", "parameters (d_in 16)"],
            [[m, PRESETS[m]["residual"], model_config(m, 16).n_layers, counts[m]] for m in models],
        ),
    ]
    if "negation" in tasks:
        sections.append(_negation_section(negation, sizes))
    data = {
        "settings": settings,
        "seeds": seeds,
        "parameters": counts,
        "runs": {t: {m: runs[t][m] for m in models} for t in train_tasks},
        "norm_deviation": norms,
        "negation": {m: {str(s): v for s, v in negation[m].items()} for m in negation_models},
        "paper": PAPER_TABLE,
    }
    return ExperimentResult(
        "edelta-benchmarks",
        "GPT / DDL / mHC / JPmHC / EΔ on gyroscope, stability, norm deviation, near-pi and negation",
        checks,
        data=data,
        sections=sections,
        figures=figures,
        preset=options.preset,
        seconds=watch(),
    )


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
    """mean | ||G(x)|| - 1 | of the model's composed shortcuts on unit vectors (one forward pass)."""
    model.eval()
    with torch.no_grad():
        return float((model.shortcut(probe).norm(dim=-1) - 1).abs().mean())


def _negation_one(
    name: str, size: int, seed: int, settings: dict[str, Any], device: torch.device, batch_size: int
) -> dict[str, Any]:
    from ..models.edelta import BareOperator
    from ..train.geometric import FitConfig, fit, negation_data

    torch.manual_seed(seed)
    op = BareOperator(NEGATION_KINDS[name], gate_weight=settings["negation_gate_weight"]).to(device)
    train, valid = negation_data(seed, size)
    valid = valid.to(device)
    gates: list[float] = []

    def evaluate() -> dict[str, float]:
        y = op(valid)
        gate = op.gate()
        gates.append(float("nan") if gate is None else gate)
        beta = getattr(op.residual, "beta", None)
        return {
            "cosine": float(torch.nn.functional.cosine_similarity(y, -valid, dim=-1).mean()),
            "valid_mse": float(torch.nn.functional.mse_loss(y, -valid)),
            "gate": gates[-1],
            "beta": float("nan") if beta is None else float(beta.mean()),
        }

    config = FitConfig(
        steps=settings["negation_steps"],
        batch_size=batch_size,
        lr=settings["negation_lr"],
        warmup_steps=settings["negation_warmup_steps"],
        eval_every=max(1, settings["negation_steps"] // 20),
        seed=seed,
    )
    history = fit(op, train, -train, config, evaluate, device, op.aux_loss)
    last = history[-1]
    return {
        "seed": seed,
        "cosine": last["cosine"],
        "valid_mse": last["valid_mse"],
        "gate": last["gate"],
        "beta": last["beta"],
        "gate_curve": [[r["step"], r["gate"]] for r in history],
    }


def _mean_sd(values: list[float]) -> tuple[float, float]:
    array = np.asarray(values, dtype=float)
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def _cell(values: list[float]) -> str:
    mean, sd = _mean_sd(values)
    return f"{fmt(mean)} ± {fmt(sd)}" if len(values) > 1 else fmt(mean)


def _table(
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    norms: dict[str, dict[str, list[float]]],
    negation: dict[str, dict[int, list[dict[str, Any]]]],
    models: list[str],
    tasks: list[str],
    sizes: list[int],
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for task in tasks:
        if task in runs:
            for name in models:
                mses = [r["valid_mse"] for r in runs[task][name]]
                cell = _cell(mses)
                if name == "edelta":
                    cell += f" (gamma {_cell([r['gate'] for r in runs[task][name]])})"
                rows.append([task, name, cell, PAPER_TABLE[task].get(name)])
        elif task == "norm-deviation":
            for name in models:
                cell = f"{_cell(norms['trained'][name])} (at init {_cell(norms['init'][name])})"
                rows.append([task, name, cell, PAPER_TABLE[task].get(name)])
        elif task == "negation" and sizes:
            size = max(sizes)
            for name, per_size in negation.items():
                results = per_size[size]
                cell = f"cos {_cell([r['cosine'] for r in results])}"
                if name == "edelta":
                    cell = f"gamma {_cell([r['gate'] for r in results])}, " + cell
                if name == "ddl":
                    cell = f"beta {_cell([r['beta'] for r in results])}, " + cell
                rows.append([f"negation ({size} samples)", name, cell, PAPER_TABLE["negation"].get(name)])
    return rows


def _negation_section(negation: dict[str, dict[int, list[dict[str, Any]]]], sizes: list[int]) -> str:
    header = ["operator", *[f"cos @ {s}" for s in sizes], *[f"gamma @ {s}" for s in sizes]]
    rows = []
    for name, per_size in negation.items():
        cos = [_cell([r["cosine"] for r in per_size[s]]) for s in sizes]
        gates = [_cell([r["gate"] for r in per_size[s]]) if name == "edelta" else None for s in sizes]
        rows.append([name, *cos, *gates])
    return "### Negation (bare operators) by training-set size\n\n" + markdown_table(header, rows)


def _verdicts(
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    negation: dict[str, dict[int, list[dict[str, Any]]]],
    sizes: list[int],
    with_negation: bool,
) -> list[Check]:
    values = [r["valid_mse"] for per_model in runs.values() for results in per_model.values() for r in results]
    finite = all(math.isfinite(v) for v in values)
    checks = [
        check(
            "finite",
            "every training run ends with a finite validation MSE",
            float(sum(not math.isfinite(v) for v in values)),
            finite,
            detail=f"{len(values)} runs",
        )
    ]
    if with_negation and "edelta" in negation and sizes:
        size = max(sizes)
        gate, _ = _mean_sd([r["gate"] for r in negation["edelta"][size]])
        cosine, _ = _mean_sd([r["cosine"] for r in negation["edelta"][size]])
        checks.append(
            check(
                "negation-gate",
                f"EΔ gate on negation ({size} samples) collapses: gamma < {GATE_LOW} or > {GATE_HIGH}",
                gate,
                gate < GATE_LOW or gate > GATE_HIGH,
                paper="gamma -> 0.051",
                detail="mean over seeds of the mean gamma on the validation set",
            )
        )
        checks.append(
            check(
                "negation-cosine",
                f"EΔ cosine(G(x), -x) on negation ({size} samples) >= {COSINE_MIN}",
                cosine,
                cosine >= COSINE_MIN,
                paper="0.96",
            )
        )
    return checks


def _figures(
    options: ExperimentOptions,
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    negation: dict[str, dict[int, list[dict[str, Any]]]],
    sizes: list[int],
) -> dict[str, str]:
    from ..report.figures import _pyplot, _save

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
