"""The training runs of ``edelta-benchmarks``: the plan, its typed jobs, and running them (here or in workers).

A :class:`Plan` is what one run of the experiment trains under one protocol (never mixed): every
model on every sequence task per seed (:class:`TrainJob`), EΔ alone at each point of the sweeps
(:class:`SweepJob`), and the bare operators on negation (:class:`NegationJob`). Each job seeds
itself, so :func:`run_jobs` gives the same results in one process or in ``workers`` spawned ones.
A job's :class:`Outcome` is its JSON record (seed, validation MSE, gate, history) with the
predict-zero plateau and the norm probes beside it; :class:`Results` collects them per task and model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, cast

import torch

from .edelta_settings import GATE_WEIGHTS, INIT_BIASES, INIT_SWEEP_WEIGHT, NEGATION_KINDS, BenchmarkSettings

NORM_KINDS = ("model", "model at init", "shortcut")


class RunRecord(TypedDict):
    """A sequence task's run as the record holds it: its seed, final validation MSE and gate, every evaluation."""

    seed: int
    valid_mse: float
    gate: float
    history: tuple[dict[str, float], ...]


class NegationRecord(TypedDict):
    """A negation run as the record holds it: its seed, final cosine, MSE, gate and beta, the gate's curve."""

    seed: int
    cosine: float
    valid_mse: float
    gate: float
    beta: float
    gate_curve: list[list[float]]


#: task (or sweep) -> model (or the sweep's point) -> its runs, one per seed
Runs = dict[str, dict[str, list[RunRecord]]]
#: model -> training-set size -> its runs, one per seed
Negations = dict[str, dict[int, list[NegationRecord]]]


@dataclass(frozen=True)
class TrainJob:
    """A model trained on a sequence task; ``norms``: probe its norm deviation after (the stability runs)."""

    seed: int
    task: str
    model: str
    norms: bool = False

    def overrides(self) -> dict[str, float]:
        return {}


@dataclass(frozen=True)
class SweepJob:
    """EΔ at one point of a sweep: ``sweep`` names it ("init-robustness near-pi"), ``value`` is the point as text."""

    sweep: str
    value: str
    seed: int
    task: str
    gate_weight: float
    gate_bias: float | None = None
    model: str = "edelta"

    def overrides(self) -> dict[str, float]:
        """The model settings this point changes."""
        return {"gate_weight": self.gate_weight, **({} if self.gate_bias is None else {"gate_bias": self.gate_bias})}


@dataclass(frozen=True)
class NegationJob:
    """A bare operator fitted to x -> -x on ``size`` samples."""

    seed: int
    model: str
    size: int


Job = TrainJob | SweepJob | NegationJob


@dataclass(frozen=True)
class Outcome:
    """One job's result: ``record`` as the JSON holds it; the sequence tasks' plateau and norm probes beside it."""

    record: RunRecord | NegationRecord
    plateau: float | None = None
    norms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """What one edelta-benchmarks run trains: ``settings`` (validated) and the seeds they give."""

    settings: BenchmarkSettings
    seeds: tuple[int, ...]

    @classmethod
    def of(cls, settings: BenchmarkSettings, seed: int) -> Plan:
        """The plan of ``settings``; without explicit seeds, ``n_seeds`` seeds counted from ``seed``."""
        return cls(settings, settings.seeds or tuple(seed + k for k in range(max(1, settings.n_seeds))))

    @property
    def reference(self) -> bool:
        return self.settings.protocol == "reference"

    @property
    def train_tasks(self) -> list[str]:
        """The sequence tasks every model trains on (stability too when the norm probe reads it)."""
        from ..train.geometric import SEQUENCE_TASKS

        train = [t for t in self.settings.tasks if t in SEQUENCE_TASKS]
        if "norm-deviation" in self.settings.tasks and "stability" not in train:
            train.append("stability")  # the norm probe reads the models trained on stability
        return train

    def config(self, name: str, d: int, length: int, **overrides: Any) -> Any:
        """Model ``name`` at the experiment's scale, as the protocol defines it."""
        from ..models.edelta import PRESETS, REFERENCE_PRESETS, preset_config

        s = self.settings
        base = (REFERENCE_PRESETS if self.reference else PRESETS)[name]
        fields: dict[str, Any] = {
            "d_in": d,
            "n_embd": s.n_embd,
            "n_layers": max(1, round(base["n_layers"] / s.layer_divisor)),
            "hidden": round(base.get("hidden", 0) * s.n_embd / 128),
            "gate_weight": s.model_gate_weight,
            "gate": s.gate,
        }
        if self.reference:
            fields["positions"] = length  # the reference's block_size: inputs + 1
        return preset_config(name, reference=self.reference, **{**fields, **overrides})

    def jobs(self) -> list[Job]:
        """Every training run, each independent of the others (its own seeds), in a fixed order."""
        jobs: list[Job] = []
        for seed in self.seeds:
            jobs += self.seed_jobs(seed)
        return jobs

    def seed_jobs(self, seed: int) -> list[Job]:
        """The runs of one seed: the models on the tasks, the sweeps, negation."""
        s = self.settings
        norms = "norm-deviation" in s.tasks
        jobs: list[Job] = [
            TrainJob(seed, task, m, norms=task == "stability" and norms) for task in self.train_tasks for m in s.models
        ]
        if "init-robustness" in s.sweeps:
            jobs += [
                SweepJob(f"init-robustness {task}", f"{bias:g}", seed, task, INIT_SWEEP_WEIGHT, gate_bias=bias)
                for task in ("near-pi", "near-pi-multi")
                for bias in INIT_BIASES
            ]
        if "gate-weight" in s.sweeps:
            jobs += [SweepJob("gate-weight gyroscope", f"{w:g}", seed, "gyroscope", w) for w in GATE_WEIGHTS]
        if "negation" in s.tasks:
            jobs += [NegationJob(seed, m, size) for m in s.negation_models for size in s.negation_sizes]
        return jobs


@dataclass
class Results:
    """The outcomes collected: runs and sweeps per task, norms per kind, negation per size; a plateau per task."""

    runs: Runs
    norms: dict[str, dict[str, list[float]]]
    negation: Negations
    sweeps: Runs = field(default_factory=dict)
    plateaus: dict[str, float] = field(default_factory=dict)

    @classmethod
    def empty(cls, plan: Plan) -> Results:
        s = plan.settings
        return cls(
            runs={t: {m: [] for m in s.models} for t in plan.train_tasks},
            norms={k: {m: [] for m in s.models} for k in NORM_KINDS},
            negation={m: {size: [] for size in s.negation_sizes} for m in s.negation_models},
        )

    def add(self, job: Job, outcome: Outcome) -> None:
        if isinstance(job, NegationJob):
            self.negation[job.model][job.size].append(cast(NegationRecord, outcome.record))
            return
        record = cast(RunRecord, outcome.record)  # a training job's
        assert outcome.plateau is not None
        self.plateaus[job.task] = outcome.plateau
        for kind, value in outcome.norms.items():
            self.norms[kind][job.model].append(value)
        if isinstance(job, TrainJob):
            self.runs[job.task][job.model].append(record)
        else:
            self.sweeps.setdefault(job.sweep, {}).setdefault(job.value, []).append(record)


def run_jobs(
    settings: BenchmarkSettings, jobs: list[Job], device: torch.device, advance: Callable[[int], Any]
) -> list[Outcome]:
    """The jobs' outcomes in order: in this process, or (``workers`` > 1) in that many spawned processes
    (the runs are independent and seed themselves, so the results are the same; on a GPU the small
    models leave it idle between kernels, and parallel processes fill it)."""
    workers = min(settings.workers, len(jobs))
    if workers <= 1:
        with cpu_threads(device, settings.cpu_threads):
            results = []
            for job in jobs:
                results.append(run_job(settings, job, device.type))
                advance(1)
            return results
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_job, settings, job, device.type): i for i, job in enumerate(jobs)}
        out: list[Any] = [None] * len(jobs)
        for future in as_completed(futures):
            out[futures[future]] = future.result()
            advance(1)
    return out


def run_job(settings: BenchmarkSettings, job: Job, device_type: str) -> Outcome:
    """One training run (a model on a task, a sweep point, or a bare operator on negation)."""
    plan = Plan.of(settings, job.seed)
    device = torch.device(device_type)
    with cpu_threads(device, settings.cpu_threads):
        if isinstance(job, NegationJob):
            return Outcome(negation_one(plan, job.model, job.size, job.seed, device))
        return sequence_one(plan, job, device)


def sequences(plan: Plan, task: str, seed: int) -> Any:
    """The task's data: the reference generates it once (seed 42) for every training seed."""
    from ..train.geometric import make_sequences
    from .edelta_reference import DATA_SEED, reference_sequences

    make = reference_sequences if plan.reference else make_sequences
    s = plan.settings
    return make(
        task,
        DATA_SEED if plan.reference else seed,
        length=s.length or None,
        n_train=s.n_train or None,
        n_valid=s.n_valid or None,
    )


def sequence_one(plan: Plan, job: TrainJob | SweepJob, device: torch.device) -> Outcome:
    """A model trained on a sequence task: its record, the task's plateau, and (stability) its norm probes."""
    from ..models.edelta import EDeltaModel
    from ..train.geometric import FitConfig
    from .edelta_reference import predict_zero_mse

    s, seed = plan.settings, job.seed
    data = sequences(plan, job.task, seed)
    length = int(data.train.shape[1])
    config = plan.config(job.model, data.dim, length, **job.overrides())
    fit_config = FitConfig(
        steps=s.steps, batch_size=s.batch_size, lr=s.lr, warmup_steps=s.warmup_steps, eval_every=s.eval_every
    )
    torch.manual_seed(seed)
    model = EDeltaModel(config)
    record = train_one(model, data, replace(fit_config, seed=seed), device)
    probed = isinstance(job, TrainJob) and job.norms
    norms = norm_probes(model, config, data.dim, length, seed, device) if probed else {}
    return Outcome(record, predict_zero_mse(data.valid), norms)


def train_one(model: Any, data: Any, fit_config: Any, device: torch.device) -> RunRecord:
    """Train ``model`` (seeded by the caller); its record: seed, final validation MSE and gate, the history."""
    from ..train.geometric import train_sequence_task

    history = train_sequence_task(model, data, fit_config, device).records
    return {
        "seed": fit_config.seed,
        "valid_mse": history[-1]["valid_mse"],
        "gate": history[-1]["gate"],
        "history": history,
    }


def norm_probes(model: Any, config: Any, d: int, length: int, seed: int, device: torch.device) -> dict[str, float]:
    """The norm deviation of the trained model, of the same model at its initialisation, and of its shortcuts."""
    from ..models.edelta import EDeltaModel
    from ..train.geometric import unit_sequences
    from .edelta_reference import model_norm_deviation

    probe_length = min(100, length)  # within the position table
    probe = unit_sequences(seed, d, length=probe_length).to(device)
    wide = unit_sequences(seed, config.n_embd, length=probe_length).to(device)
    torch.manual_seed(seed)
    fresh = EDeltaModel(config).to(device)
    return {
        "model": model_norm_deviation(model, probe)["deviation"],
        "model at init": model_norm_deviation(fresh, probe)["deviation"],
        "shortcut": shortcut_norm_deviation(model, wide),
    }


def shortcut_norm_deviation(model: Any, probe: torch.Tensor) -> float:
    """Ours: mean | ||G(x)|| - 1 | of the model's composed shortcuts on unit vectors (one forward pass)."""
    model.eval()
    with torch.no_grad():
        return float((model.shortcut(probe).norm(dim=-1) - 1).abs().mean())


def negation_one(plan: Plan, name: str, size: int, seed: int, device: torch.device) -> NegationRecord:
    """A bare operator on negation under the plan's protocol: final cosine, MSE, gate, beta and the gate's curve."""
    from ..models.edelta import BareOperator

    s = plan.settings
    if plan.reference:
        from .edelta_reference import fit_reference_negation, reference_negation_data

        train, valid = reference_negation_data(seed, size)
        op = BareOperator(NEGATION_KINDS[name], gate_weight=s.negation_gate_weight, reference=True)
        history = fit_reference_negation(
            op.to(device),
            train.to(device),
            valid.to(device),
            s.negation_steps,
            max(1, s.negation_steps // 20),
            lr=s.negation_lr,
        )
    else:
        history = causal_negation(name, size, seed, s, device)
    last = history[-1]
    return {
        "seed": seed,
        "cosine": last["cosine"],
        "valid_mse": last["valid_mse"],
        "gate": last["gate"],
        "beta": last["beta"],
        "gate_curve": [[r["step"], r["gate"]] for r in history],
    }


def causal_negation(name: str, size: int, seed: int, s: BenchmarkSettings, device: torch.device) -> list[Any]:
    """Our negation run: the sequence tasks' schedule (warm-up, cosine, AdamW (0.9, 0.95), clipping)."""
    from ..models.edelta import BareOperator
    from ..train.geometric import FitConfig, fit, negation_data

    torch.manual_seed(seed)
    op = BareOperator(NEGATION_KINDS[name], gate_weight=s.negation_gate_weight).to(device)
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
        steps=s.negation_steps,
        batch_size=s.batch_size,
        lr=s.negation_lr,
        warmup_steps=s.negation_warmup_steps,
        eval_every=max(1, s.negation_steps // 20),
        seed=seed,
    )
    return list(fit(op, train, -train, config, evaluate, device, op.aux_loss).records)


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
