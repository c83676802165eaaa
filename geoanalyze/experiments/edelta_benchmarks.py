"""``edelta-benchmarks`` (arXiv 2605.06729; docs/edelta.md): the five models on the paper's synthetic tasks.

GPT / DDL / mHC / JPmHC / EΔ trained on gyroscope, stability, near-pi (single and multi-plane),
the norm deviation of their shortcuts, and the bare operators on negation, under one protocol
(``reference``: the paper's code; ``causal``: ours); a table of mean ± sd over seeds beside the
paper's. Verdict: on negation with 500 samples EΔ's gate collapses (below 0.1 or above 0.9) with
cosine >= 0.9, and the checks of :mod:`.edelta_verdicts`.

The settings are :mod:`.edelta_settings`; the runs :mod:`.edelta_runs`; this module runs the plan
and writes the result: sections, figures, data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .edelta_settings import GATE_HIGH, GATE_LOW, LIMITS, benchmark_settings
from .edelta_verdicts import cell, mean, verdicts
from .record import ExperimentOptions, ExperimentResult, Stopwatch, markdown_table
from .registry import experiment

if TYPE_CHECKING:
    from .edelta_runs import Negations, Plan, Results, Runs


#: the paper's table (arXiv 2605.06729, docs/edelta.md): task -> model -> reported mean
PAPER_TABLE: dict[str, dict[str, str]] = {
    "gyroscope": {"gpt": "3.78e-3", "ddl": "3.36e-3", "mhc": "4.02e-3", "jpmhc": "3.08e-4", "edelta": "1.02e-3"},
    "stability": {"gpt": "16.4e-6", "ddl": "15.3e-6", "mhc": "8650e-6", "jpmhc": "8.19e-6", "edelta": "4.35e-6"},
    "near-pi": {"gpt": "1.19e-5", "ddl": "1.11e-5", "mhc": "9.64e-3", "jpmhc": "6.54e-6", "edelta": "1.44e-6"},
    "near-pi-multi": {"gpt": "3.34e-6", "ddl": "3.75e-6", "mhc": "1.63e-3", "jpmhc": "1.69e-6", "edelta": "1.24e-6"},
    "norm-deviation": {"edelta": "0.001"},
    "negation": {"ddl": "beta -> 1.995, cos 0.96", "jpmhc": "cos -0.30", "edelta": "gamma -> 0.051, cos 0.96"},
}

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


@experiment(
    "edelta-benchmarks",
    summary="GPT / DDL / mHC / JPmHC / EΔ on the synthetic tasks, protocol=reference (the paper's) or causal (ours)",
    paper="arXiv 2605.06729",
    minutes_ci=90.0,
)
def edelta_benchmarks(options: ExperimentOptions) -> ExperimentResult:
    """Every model on every task over seeds under one protocol; the sweeps; the table beside the paper's; verdicts."""
    from ..progress import ProgressBars
    from ..train.loop import select_device
    from .edelta_runs import Plan, Results, run_jobs

    watch = Stopwatch()
    settings = benchmark_settings(options.preset, list(options.overrides))
    plan = Plan.of(settings, options.seed)
    requested = "cuda" if options.preset == "paper" and options.device == "auto" else options.device
    device = select_device(requested)
    results = Results.empty(plan)
    jobs = plan.jobs()
    with ProgressBars(options.progress) as bars:
        advance = bars.track(f"edelta-benchmarks ({settings.protocol})", total=len(jobs))
        for job, outcome in zip(jobs, run_jobs(settings, jobs, device, advance), strict=True):
            results.add(job, outcome)
    counts = parameter_rows(plan)
    return ExperimentResult(
        "edelta-benchmarks",
        f"GPT / DDL / mHC / JPmHC / EΔ on gyroscope, stability, norm deviation, near-pi and negation "
        f"({settings.protocol} protocol)",
        verdicts(plan, results, LIMITS[options.preset]),
        data=result_data(plan, results, counts),
        sections=sections(plan, results, counts, device.type),
        figures=figures(options, results, settings.negation_sizes),
        preset=options.preset,
        seconds=watch(),
    )


def result_data(plan: Plan, results: Results, counts: list[list[Any]]) -> dict[str, Any]:
    """The record's ``data``: the settings as echoed, seeds, parameter counts, every run, the paper's table."""
    return {
        "settings": plan.settings.to_dict(),
        "seeds": plan.seeds,
        "parameters": {row[0]: row[4] for row in counts},
        "plateaus": results.plateaus,
        "runs": results.runs,
        "norm_deviation": results.norms,
        "sweeps": results.sweeps,
        "negation": {m: {str(s): v for s, v in results.negation[m].items()} for m in plan.settings.negation_models},
        "paper": PAPER_TABLE,
    }


def sections(plan: Plan, results: Results, counts: list[list[Any]], device: str) -> list[str]:
    """The page: the table beside the paper's, the parameter counts, the sweeps and negation when they ran."""
    s = plan.settings
    echo = ", ".join(f"{k}={v}" for k, v in s.to_dict().items())
    parts = [
        f"### Results beside the paper's (protocol `{s.protocol}`)\n\n"
        + PROTOCOL_NOTES[s.protocol]
        + f"\n\nMean ± sd over seeds {', '.join(map(str, plan.seeds))}; validation MSE unless stated; "
        f"'× below plateau' divides the MSE of predicting zero by ours. Settings: {echo}; device {device}.\n\n"
        + markdown_table(["task", "model", "ours", "× below plateau", "paper"], table_rows(plan, results)),
        "### Parameters\n\n"
        + markdown_table(["model", "residual", "layers", "width", "parameters", "without position table"], counts),
    ]
    if results.sweeps:
        parts.append(sweep_section(results))
    if "negation" in s.tasks:
        parts.append(negation_section(results.negation, s.negation_sizes))
    return parts


def parameter_rows(plan: Plan) -> list[list[Any]]:
    """Per model: residual, layers, width, parameters (with the position table of the paper's gyroscope, 256 steps
    under the reference protocol) and without it; at d_in 16."""
    from ..models.edelta import EDeltaModel, count_parameters

    rows = []
    for name in plan.settings.models:
        config = plan.config(name, 16, 256)
        count = count_parameters(EDeltaModel(config))
        rows.append(
            [name, config.residual, config.n_layers, config.n_embd, count, count - config.positions * config.n_embd]
        )
    return rows


def table_rows(plan: Plan, results: Results) -> list[list[Any]]:
    """The main table: per task and model, ours (mean ± sd), × below the plateau, the paper's."""
    rows: list[list[Any]] = []
    s = plan.settings
    for task in s.tasks:
        if task in results.runs:
            rows += sequence_rows(task, s.models, results)
        elif task == "norm-deviation":
            norms = results.norms
            for name in s.models:
                ours = (
                    f"{cell(norms['model'][name])} (at init {cell(norms['model at init'][name])}; "
                    f"shortcuts {cell(norms['shortcut'][name])})"
                )
                rows.append([task, name, ours, None, PAPER_TABLE[task].get(name)])
        elif task == "negation" and s.negation_sizes:
            rows += negation_rows(results.negation, max(s.negation_sizes))
    return rows


def sequence_rows(task: str, models: tuple[str, ...], results: Results) -> list[list[Any]]:
    rows = []
    for name in models:
        runs = results.runs[task][name]
        mses = [r["valid_mse"] for r in runs]
        ours = cell(mses)
        if name == "edelta":
            ours += f" (gamma {cell([r['gate'] for r in runs])})"
        below = f"{results.plateaus[task] / mean(mses):.3g}" if mean(mses) > 0 else None
        rows.append([task, name, ours, below, PAPER_TABLE[task].get(name)])
    return rows


def negation_rows(negation: Negations, size: int) -> list[list[Any]]:
    rows = []
    for name, per_size in negation.items():
        runs = per_size[size]
        ours = f"cos {cell([r['cosine'] for r in runs])}"
        if name == "edelta":
            ours = f"gamma {cell([r['gate'] for r in runs])}, " + ours
        if name == "ddl":
            ours = f"beta {cell([r['beta'] for r in runs])}, " + ours
        rows.append([f"negation ({size} samples)", name, ours, None, PAPER_TABLE["negation"].get(name)])
    return rows


def sweep_section(results: Results) -> str:
    rows = []
    for sweep, per_value in results.sweeps.items():
        task = sweep.split(" ", 1)[1]
        for value, runs in per_value.items():
            mses = [r["valid_mse"] for r in runs]
            below = f"{results.plateaus[task] / mean(mses):.3g}"
            rows.append([sweep, value, cell(mses), cell([r["gate"] for r in runs]), below])
    return "### Sweeps (EΔ alone)\n\n" + markdown_table(
        ["sweep", "init_gate_bias (weight 0.5) or L_gate weight", "validation MSE", "gamma", "× below plateau"], rows
    )


def negation_section(negation: Negations, sizes: tuple[int, ...]) -> str:
    header = ["operator", *[f"cos @ {s}" for s in sizes], *[f"gamma @ {s}" for s in sizes]]
    rows = []
    for name, per_size in negation.items():
        cos = [cell([r["cosine"] for r in per_size[s]]) for s in sizes]
        gates = [cell([r["gate"] for r in per_size[s]]) if name == "edelta" else None for s in sizes]
        rows.append([name, *cos, *gates])
    return "### Negation (bare operators) by training-set size\n\n" + markdown_table(header, rows)


def figures(options: ExperimentOptions, results: Results, sizes: tuple[int, ...]) -> dict[str, str]:
    """The loss curves (one panel per task) and EΔ's gate over training, with their captions."""
    drawn: dict[str, str] = {}
    if results.runs:
        loss_figure(results.runs, options.work_dir / "edelta_loss_curves.png")
        drawn["edelta_loss_curves.png"] = "Validation MSE over training, one line per model and seed"
    if gate_figure(results, sizes, options.work_dir / "edelta_gate.png"):
        drawn["edelta_gate.png"] = "EΔ's gate gamma over training, one look per task and seed (a point: one evaluation)"
    return drawn


def loss_figure(runs: Runs, path: Any) -> None:
    """Validation MSE against step, one panel per task, one look per model (its seeds alike); when
    every run was evaluated once (smoke), one panel of the final values, task by task."""
    from ..plotting import Looks, pyplot, save, series, single_points

    plt = pyplot()
    looks = Looks(*dict.fromkeys(name for per_model in runs.values() for name in per_model))
    histories = {
        f"{task} {name}": [r["history"] for r in results] for task, m in runs.items() for name, results in m.items()
    }
    if single_points(histories):
        figure, axis = plt.subplots(figsize=(1.6 * len(runs) + 3.5, 3.8), layout="constrained")
        _final_values(axis, runs, looks)
        save(figure, path)
        return
    figure, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), layout="constrained", squeeze=False)
    for axis, (task, per_model) in zip(axes[0], runs.items(), strict=True):
        for name, results in per_model.items():
            for i, result in enumerate(results):
                steps = [r["step"] for r in result["history"]]
                mses = [r["valid_mse"] for r in result["history"]]
                series(axis, steps, mses, looks(name), label=name if i == 0 else None, alpha=0.9)
        axis.set_yscale("log")
        axis.set_title(task)
        axis.set_xlabel("training step")
        axis.set_ylabel("validation MSE (log scale)")
        axis.legend(fontsize=7)
    save(figure, path)


def _final_values(axis: Any, runs: Runs, looks: Any) -> None:
    """Each model's validation MSE per task (one point per seed), the models side by side in each task."""
    tasks = list(runs)
    models = list(dict.fromkeys(name for per_model in runs.values() for name in per_model))
    width = 0.7 / max(len(models), 1)
    steps = sorted({r["history"][-1]["step"] for m in runs.values() for rs in m.values() for r in rs})
    for k, name in enumerate(models):
        x, y = [], []
        for t, task in enumerate(tasks):
            for result in runs[task].get(name, []):
                x.append(t + (k - (len(models) - 1) / 2) * width)
                y.append(result["history"][-1]["valid_mse"])
        axis.plot(x, y, label=name, **looks(name).points())
    axis.set_yscale("log")
    axis.set_xticks(range(len(tasks)), tasks)
    axis.set_xlabel("task")
    axis.set_ylabel("validation MSE (log scale)")
    axis.set_title(f"validation MSE after {', '.join(map(str, steps))} steps (one evaluation per run)")
    axis.legend(fontsize=7)


def gate_figure(results: Results, sizes: tuple[int, ...], path: Any) -> bool:
    """EΔ's gate curves, when there are any (False: nothing drawn, nothing written). When every
    sequence-task run was evaluated once (smoke), their gates are a panel of their own, one column
    per task and seed, beside the negation curves (at one step they would all lie on one point)."""
    from ..plotting import Looks, dot_plot, pyplot, save, series, single_points

    tasks = {
        f"{task} (seed {result['seed']})": result["history"]
        for task, per_model in results.runs.items()
        for result in per_model.get("edelta", [])
    }
    negation = results.negation["edelta"][max(sizes)] if "edelta" in results.negation and sizes else []
    if not tasks and not negation:
        return False
    apart = bool(negation) and single_points({name: [history] for name, history in tasks.items()})
    plt = pyplot()
    figure, axes = plt.subplots(1, 2 if apart else 1, figsize=(10 if apart else 6, 3.8), layout="constrained")
    panels = list(np.atleast_1d(axes))
    looks = Looks()
    if apart:
        dot_plot(panels[0], {name: [history[-1]["gate"]] for name, history in tasks.items()}, looks, "task (seed)")
        steps = sorted({history[-1]["step"] for history in tasks.values()})
        panels[0].set_title(f"sequence tasks (one evaluation, at step {', '.join(map(str, steps))})")
        panels[-1].set_title(f"negation, a training set of {max(sizes)}")
    else:
        for name, history in tasks.items():
            series(panels[-1], [r["step"] for r in history], [r["gate"] for r in history], looks(name), label=name)
    for result in negation:
        curve = np.asarray(result["gate_curve"])
        label = f"negation {max(sizes)} (seed {result['seed']})"
        series(panels[-1], curve[:, 0], curve[:, 1], looks(label), label=label)
    panels[-1].set_xlabel("training step")
    for axis in panels:
        axis.axhline(GATE_LOW, color="grey", lw=0.8)
        axis.axhline(GATE_HIGH, color="grey", lw=0.8)
        axis.set_ylabel("mean gate gamma (0-1)")
        axis.set_ylim(0, 1)
        axis.legend(fontsize=7)
    figure.suptitle(f"EΔ's gate over training (grey: the bounds {GATE_LOW} and {GATE_HIGH})")
    save(figure, path)
    return True
