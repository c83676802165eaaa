r"""The resumable (and data-parallel) runner of ``geoanalyze train``: a configuration of :func:`.core.fit`.

Per step: the task's batch, a forward pass (bf16 autocast on CUDA only), cross-entropy on the
labelled positions, AdamW at :func:`lr_at`'s rate, the gradient clipped (docs/training.md). Every
``eval_every`` steps (and after the last) the hook :class:`RunLog` scores the held-out stream and
writes a metrics line and a checkpoint. Resuming is exact: batches, dropout seeds and the learning
rate are pure functions of (seed, step), and the checkpoint holds the weights and the optimiser
moments; on CPU the run is inside :func:`.determinism.deterministic`, bit-identical per seed.

Files in ``output_dir``::

    metrics.jsonl                one line per evaluation: step, lr, train_loss, train_accuracy,
                                 eval_loss, eval_accuracy, time_s
    checkpoint/model.safetensors the model (Transformer.save), with config.json
    checkpoint/optimizer.safetensors  AdamW's per-parameter tensors, named "<index>.<key>"
    checkpoint/trainer.json      step, the TrainConfig, the optimiser's parameter groups and scalars

No file is unpickled: tensors are safetensors, everything else JSON. A checkpoint is written into
``checkpoint.partial/`` and renamed into place, so a crash never leaves a mixed one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from .. import notes
from ..errors import FormatError, IncompatibleError, InputError, first_line
from ..io import FORMAT_VERSION, METADATA_KEY, Record, atomic_path, staged_folder, to_jsonable, write_text
from ..models import ModelConfig, Transformer
from ..models.config import TABLE_KINDS
from ..models.positional import PositionalEncoding
from ..progress import ProgressBars, progress_interval
from .config import TrainConfig
from .core import Hook, RunState, Schedule, every, fit
from .determinism import deterministic
from .tasks import IGNORE, Batch, Task, build_task

METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoint"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer.json"
CHECKPOINT_KIND = "train-checkpoint"
DROPOUT_STREAM = 2  # the third stream of (seed, stream, step) seeds, after the tasks' train and eval


#: how often the progress line's running loss is refreshed (a device sync each time)
INFO_SECONDS = 1.0


@dataclass(frozen=True)
class TrainResult(Record):
    """A finished run: the metrics of its last evaluation, its parameter counts and settings.

    :meth:`to_json` (its fields) is what ``geoanalyze train -f json`` prints; ``figure`` is where the
    command drew the training curves (None until drawn).
    """

    output_dir: Path
    metrics: Mapping[str, float]
    parameters: int
    pe_parameters: int
    config: TrainConfig
    figure: Path | None = None


def train(
    config: TrainConfig,
    output_dir: str | Path,
    resume: bool = False,
    progress: bool = True,
    observe: Callable[[Transformer], dict[str, float]] | None = None,
    extras: RunExtras | None = None,
) -> TrainResult:
    """Train the model ``config`` describes on its task; return the run with the metrics of its last evaluation.

    Parameters
    ----------
    config : the run.
    output_dir : where ``metrics.jsonl`` and ``checkpoint/`` go (created if needed).
    resume : continue the run in ``output_dir`` from its checkpoint. Everything but the model may
        differ from the first run's config (more steps, say); the model must be the same.
    progress : show a progress bar on stderr (only when it is a terminal).
    observe : called with the (unwrapped) model at every evaluation; the numbers it returns join
        that evaluation's metrics line (e.g. the separation of the position table).
    extras : the geometry probe every ``geometry_every`` steps and the checkpoints kept (:class:`RunExtras`).

    Under ``torchrun`` (WORLD_SIZE > 1) the run is data-parallel (DDP; nccl on CUDA, gloo on CPU):
    every process draws the same batch of step s and trains on its rows ``rank::world``, the loss is
    scaled so the averaged gradient is the whole batch's, and only rank 0 writes files. With
    dropout 0 it computes what one process would, up to the order of floating-point sums.

    Raises
    ------
    InputError : CUDA asked for and absent; ``output_dir`` already holds a run and resume is False;
        resume is True and there is no checkpoint; batch_size not divisible by the world size.
    IncompatibleError : the checkpoint is of another model or task.
    """
    group = init_distributed(config)
    try:
        # the staged run folder is removed by the CLI's signal handler too
        with deterministic(select_device(config.device, group.local_rank)), contextlib.ExitStack() as staging:
            run = _start(config, Path(output_dir).expanduser(), resume, group, staging)
            try:
                metrics = _loop(run, progress, observe, extras)
            finally:
                if run.staged is not None:
                    shutil.rmtree(run.staged, ignore_errors=True)
    finally:
        group.close()
    parameters = sum(p.numel() for p in run.model.parameters())
    pe_parameters = sum(p.numel() for p in run.model.pe.parameters())
    return TrainResult(Path(output_dir), metrics, parameters, pe_parameters, config)


@dataclass
class Run:
    """A run's state as the runner threads it: settings, folder, task, model, optimiser and where it starts.

    A new run is written into ``staged`` and renamed onto ``out`` with its first checkpoint; ``last``
    is the latest evaluation's metrics (a resumed run's checkpoint's until the first).
    """

    config: TrainConfig
    out: Path
    metrics_path: Path
    task: Task
    model: Transformer
    optimizer: torch.optim.Optimizer
    device: torch.device
    group: ProcessGroup
    staged: Path | None = None
    start: int = 0
    time_before: float = 0.0
    last: dict[str, float] = field(default_factory=dict)


def _start(config: TrainConfig, out: Path, resume: bool, group: ProcessGroup, staging: contextlib.ExitStack) -> Run:
    """The run to train: its checkpoint's state when resumed, else a new model in a staged folder."""
    device = select_device(config.device, group.local_rank)
    # Checked before the data is read and tokenized, so a wrong folder fails at once.
    checkpoint = _read_checkpoint(out, config) if resume else None
    if not resume and _find_checkpoint(out) is not None:
        raise InputError(f"{out} already holds a training run; resume it or choose another output folder")
    if not resume and group.is_main and _stopped_before_first_checkpoint(out):
        # Nothing to resume: the run is started over in the same folder, and says so.
        notes.note(f"{out} held a run stopped before its first checkpoint; it was started over")
        (out / METRICS_FILE).unlink(missing_ok=True)
        shutil.rmtree(out / f"{CHECKPOINT_DIR}.partial", ignore_errors=True)
    group.barrier()  # every rank has looked at the folder before rank 0 writes into it
    task = build_task(config)
    model_config = fit_model_config(config, task)
    seed_everything(config.seed)
    if checkpoint is not None:
        folder, state = checkpoint
        model, optimizer = _restore(folder, state, config, model_config, device)
        run = Run(config, out, out / METRICS_FILE, task, model, optimizer, device, group)
        run.start, run.time_before, run.last = int(state["step"]), float(state["time_s"]), state["metrics"]
        if group.is_main:
            _truncate_metrics(run.metrics_path, run.start)
        return run
    model = Transformer(model_config).to(device)
    run = Run(config, out, out / METRICS_FILE, task, model, make_optimizer(model, config), device, group)
    if group.is_main:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.is_dir() and any(out.iterdir()):
                out.mkdir(exist_ok=True)  # a folder of other files: the run is written into it
            else:
                # A new run is written aside and appears with its first checkpoint: a run that
                # fails or is killed before it leaves no folder that holds nothing to resume.
                _remove_dead_stagings(out)
                run.staged = staging.enter_context(staged_folder(out.with_name(f".{out.name}.{os.getpid()}.staged")))
                run.metrics_path = run.staged / METRICS_FILE
        except OSError as exc:
            raise InputError(f"cannot write {out}: {exc.strerror}; choose another output folder") from exc
    return run


def _remove_dead_stagings(out: Path) -> None:
    """Staged run folders of ``out`` that a killed process left (its pid is gone)."""
    for folder in out.parent.glob(f".{out.name}.*.staged"):
        pid = folder.name[len(out.name) + 2 : -len(".staged")]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def _loop(
    run: Run, progress: bool, observe: Callable[[Transformer], dict[str, float]] | None, extras: RunExtras | None
) -> dict[str, float]:
    """The run from step ``run.start`` to ``config.steps``: :func:`.core.fit` with the runner's batches, loss and hooks."""
    config, task, group = run.config, run.task, run.group
    run.model.train()
    sequence_level = task.n_classes > 0
    trained = group.wrap(run.model, unused_heads=sequence_level)
    with contextlib.ExitStack() as stack:
        bars = stack.enter_context(ProgressBars(progress and group.is_main))
        metrics_file = stack.enter_context(run.metrics_path.open("a", encoding="utf-8")) if group.is_main else None
        advance = bars.track(f"training {task.name}", total=config.steps)
        advance(run.start)
        log = RunLog(run, advance, progress, observe, metrics_file)

        def step_loss(trained: nn.Module, batch: Batch, step: int) -> tuple[torch.Tensor, torch.Tensor]:
            return _train_step(trained, batch, config, run.device, sequence_level, step, group)

        fit(
            trained,
            lambda step: group.shard(task.train_batch(step)),
            step_loss,
            Schedule(config.steps, lambda step: lr_at(step, config), config.grad_clip),
            [log, *(extras.hooks(log) if extras is not None and group.is_main else [])],
            RunState(run.optimizer, step=run.start),
        )
    return run.last


@dataclass
class RunLog:
    """The runner's hook: the running sums since the last evaluation, the progress line, and every
    ``eval_every`` steps (and after the last) an evaluation, one metrics line and a checkpoint."""

    run: Run
    advance: Callable[..., None]
    progress: bool
    observe: Callable[[Transformer], dict[str, float]] | None
    metrics_file: TextIO | None
    began: float = field(init=False)
    shown: float = field(init=False)
    refresh: float = field(init=False)
    train_sums: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.began = self.shown = time.perf_counter()
        self.refresh = min(INFO_SECONDS, progress_interval())
        self.train_sums = _zeros(self.run.device)

    def __call__(self, state: RunState) -> None:
        assert state.logged is not None
        self.train_sums += state.logged
        self.advance(1)
        if self.progress and self.run.group.is_main and time.perf_counter() - self.shown >= self.refresh:
            # the running loss since the last evaluation, read (one device sync) at most once a second
            loss_sum, _, _, steps_done = self.train_sums.tolist()
            accuracy = self.run.last.get("eval_accuracy")
            evaluated = f", eval acc {accuracy:.3g}" if isinstance(accuracy, float | int) else ""
            self.advance(0, info=f"loss {loss_sum / max(steps_done, 1.0):.4g}{evaluated}")
            self.shown = time.perf_counter()
        if state.step % self.run.config.eval_every == 0 or state.step == self.run.config.steps:
            self.evaluate(state)

    def evaluate(self, state: RunState) -> None:
        """Score the held-out stream, log the metrics line, write the checkpoint; reset the running sums."""
        run, config, group = self.run, self.run.config, self.run.group
        sequence_level = run.task.n_classes > 0
        eval_loss, eval_accuracy = evaluate(run.model, run.task, config.eval_batches, run.device, sequence_level, group)
        loss_sum, correct, count, steps_done = group.sum(self.train_sums).tolist()
        run.last = last = {
            "step": state.step,
            "lr": lr_at(state.step, config),
            "train_loss": loss_sum / steps_done,  # steps_done summed over ranks, as the losses
            "train_accuracy": correct / max(count, 1.0),
            "eval_loss": eval_loss,
            "eval_accuracy": eval_accuracy,
            **(self.observe(run.model) if self.observe is not None else {}),
            "time_s": round(run.time_before + time.perf_counter() - self.began, 3),
        }
        self.advance(0, info=f"loss {last['train_loss']:.4g}, eval acc {last['eval_accuracy']:.3g}")
        if self.metrics_file is not None:
            # Standard JSON, as every geoanalyze output: a diverged (NaN) loss is written as null.
            self.metrics_file.write(json.dumps(to_jsonable(last), allow_nan=False) + "\n")
            self.metrics_file.flush()
            _save_checkpoint(run.staged or run.out, run.model, state.optimizer, config, state.step, last)
            if run.staged is not None:
                os.replace(run.staged, run.out)  # the run appears with its first checkpoint (onto an empty folder too)
                run.staged = None
        group.barrier()
        self.train_sums = _zeros(run.device)


@dataclass(frozen=True)
class RunExtras:
    """What a run does besides training and evaluating (``geoanalyze train --geometry-every / --keep-checkpoints``).

    geometry_every : every this many steps (0: never) the probe scores the model and one line
        ``{"step": s, "geometry": {row: {score: value, ..., "categories": {...}}}, "geometry_s": seconds}``
        joins metrics.jsonl.
    probe : ``probe(task)`` -> the callable that scores the model (built once, when the run starts:
        :class:`geoanalyze.tracking.probe.GeometryProbe`).
    keep_checkpoints : the last K evaluation checkpoints are kept in ``checkpoints/step-<N>/`` (their
        config.json, model.safetensors and trainer.json), for ``geoanalyze track`` to score later.
    """

    geometry_every: int = 0
    probe: Callable[[Task], Callable[[Transformer], Mapping[str, Record]]] | None = None
    keep_checkpoints: int = 0

    def hooks(self, log: RunLog) -> list[Hook]:
        """The hooks that follow the runner's own (rank 0 only)."""
        run, hooks = log.run, []
        if self.geometry_every and self.probe is not None:
            hooks.append(geometry_hook(self.geometry_every, self.probe(run.task), run.model, log))
        if self.keep_checkpoints:

            def keep(state: RunState) -> None:
                keep_checkpoint(run.out, state.step, self.keep_checkpoints)

            hooks.append(every(run.config.eval_every, keep, last=run.config.steps))
        return hooks


def geometry_hook(
    interval: int, score: Callable[[Transformer], Mapping[str, Record]], model: Transformer, log: RunLog
) -> Hook:
    """Every ``interval`` steps: the probe's rows as one metrics line."""

    def geometry(state: RunState) -> None:
        if state.step % interval or log.metrics_file is None:
            return
        began = time.perf_counter()
        rows = score(model)
        line = {"step": state.step, "geometry": rows, "geometry_s": round(time.perf_counter() - began, 4)}
        log.metrics_file.write(json.dumps(to_jsonable(line), allow_nan=False) + "\n")
        log.metrics_file.flush()

    return geometry


#: where the kept checkpoints go inside a run folder (geoanalyze.tracking.series reads them)
KEPT_DIR = "checkpoints"
KEPT_FILES = ("config.json", "model.safetensors", STATE_FILE)


def keep_checkpoint(out: Path, step: int, keep: int) -> None:
    """Copy checkpoint/ (the model and trainer.json) to checkpoints/step-<step>/; keep the newest ``keep``."""
    kept = out / KEPT_DIR
    folder = kept / f"step-{step}"
    for dead in kept.glob(".step-*.partial"):  # a copy a killed run (SIGKILL) left
        shutil.rmtree(dead, ignore_errors=True)
    with staged_folder(kept / f".step-{step}.partial") as staging:
        for name in KEPT_FILES:
            shutil.copy2(out / CHECKPOINT_DIR / name, staging / name)
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    steps = sorted(int(p.name[5:]) for p in kept.glob("step-*") if p.name[5:].isdigit())
    for old in steps[:-keep]:
        shutil.rmtree(kept / f"step-{old}", ignore_errors=True)


# --- data parallelism -----------------------------------------------------------------------------


class ProcessGroup:
    """This process's place in a data-parallel run; one process (rank 0 of 1) without torchrun.

    Every method is a no-op for a single process, so the loop reads the same either way.
    """

    def __init__(self, rank: int = 0, world: int = 1, local_rank: int = 0, owned: bool = False) -> None:
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.owned = owned  # this process group was created by init_distributed, which must destroy it

    def close(self) -> None:
        """Leave the process group if :func:`init_distributed` created it (gloo aborts at exit otherwise)."""
        if self.owned and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` summed over all processes (a copy)."""
        total = values.clone()
        if self.world > 1:
            torch.distributed.all_reduce(total)
        return total

    def shard(self, batch: Batch) -> Batch:
        """This process's rows of the step's batch: ``rank::world``."""
        if self.world == 1:
            return batch
        rows = slice(self.rank, None, self.world)
        return Batch(batch.input_ids[rows], batch.attention_mask[rows], batch.labels[rows])

    def wrap(self, model: Transformer, unused_heads: bool = False) -> nn.Module:
        """The module the training step calls: DDP around ``model`` when there are several processes.

        ``unused_heads``: a sequence task leaves bert's masked-LM head without gradients, which DDP
        must be told about.
        """
        if self.world == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.local_rank] if next(model.parameters()).is_cuda else None
        return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=unused_heads)


def init_distributed(config: TrainConfig) -> ProcessGroup:
    """Join the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK); a lone process otherwise."""

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return ProcessGroup()
    if config.batch_size % world:
        raise InputError(
            f"batch_size {config.batch_size} is not divisible by the {world} processes; "
            f"set batch_size to a multiple of {world}"
        )
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    dist = torch.distributed
    owned = not dist.is_initialized()
    if owned:
        use_cuda = config.device != "cpu" and torch.cuda.is_available()
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return ProcessGroup(rank, world, local_rank, owned)


# --- the pieces ---------------------------------------------------------------------------------


def select_device(requested: str, local_rank: int = 0) -> torch.device:
    """The device to train on: cpu; cuda (InputError when absent); auto, cuda when available and cpu otherwise.

    ``local_rank`` picks the GPU of this process in a multi-GPU run.
    """
    if requested == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise InputError("device cuda was asked for but CUDA is not available here; set device to cpu or auto")
    return torch.device(f"cuda:{local_rank}" if available else "cpu")


def fit_model_config(config: TrainConfig, task: Task) -> ModelConfig:
    """The model config with the task's ``vocab_size`` and ``n_classes``; checks that its sequences fit."""
    model = replace(config.model, vocab_size=task.vocab_size, n_classes=task.n_classes)
    if model.pe in TABLE_KINDS and task.max_length > model.n_positions:
        key = "order_length" if config.task == "order" else "max_length"
        raise InputError(
            f"{key} {task.max_length} exceeds model.n_positions {model.n_positions}; "
            f"set model.n_positions to at least {task.max_length} or lower {key}"
        )
    return model


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's (CPU and CUDA) global generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def lr_at(step: int, config: TrainConfig) -> float:
    r"""The learning rate of step ``step`` (1-based): linear warm-up, then cosine decay.

    lr_s = lr * s / w for s <= w (w = warmup_steps), else
    lr_s = lr * (m + (1 - m) (1 + cos(\pi (s - w) / (S - w))) / 2), m = min_lr_ratio, S = steps:
    lr at s = w, m * lr at s = S.
    """
    warmup, total = config.warmup_steps, config.steps
    if step <= warmup:
        return config.lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    ratio = config.min_lr_ratio
    return config.lr * (ratio + (1.0 - ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW's two groups: matrices with ``weight_decay``; biases, LayerNorms, embeddings and position tables without."""
    decay: list[nn.Parameter] = []
    exempt: list[nn.Parameter] = []
    for module in model.modules():
        whole_module = isinstance(module, (nn.LayerNorm, nn.Embedding, PositionalEncoding))
        for name, parameter in module.named_parameters(recurse=False):
            if not parameter.requires_grad:
                continue
            no_decay = whole_module or name.endswith("bias") or parameter.ndim < 2
            (exempt if no_decay else decay).append(parameter)
    return [
        {"params": decay, "weight_decay": weight_decay, "decay": True},
        {"params": exempt, "weight_decay": 0.0, "decay": False},
    ]


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW over :func:`parameter_groups`; the learning rate is set every step from :func:`lr_at`."""
    return torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr)


def evaluate(
    model: Transformer,
    task: Task,
    n_batches: int,
    device: torch.device,
    sequence_level: bool,
    group: ProcessGroup | None = None,
) -> tuple[float, float]:
    """(mean loss, accuracy) over the first ``n_batches`` batches of the held-out stream, per labelled position.

    With several processes each scores its rows of every batch and the sums are added up.
    """
    group = group or ProcessGroup()
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=device)
    with torch.no_grad():
        for index in range(n_batches):
            ids, mask, labels = _to_device(group.shard(task.eval_batch(index)), device)
            with _autocast(device):
                sums += loss_terms(model, ids, mask, labels, sequence_level).detach()
    model.train()
    loss_sum, correct, count = group.sum(sums).tolist()
    return loss_sum / max(count, 1.0), correct / max(count, 1.0)


def _train_step(
    model: nn.Module,
    batch: Batch,
    config: TrainConfig,
    device: torch.device,
    sequence_level: bool,
    step: int,
    group: ProcessGroup,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss of one step: (the objective, (loss, correct, labelled positions, 1) as a (4,) float64 tensor).

    The objective is this process's share of the whole batch's mean, times the world size: DDP
    averages the gradients over processes, so the update is the whole batch's mean-loss gradient
    even when processes hold different numbers of labelled tokens (MLM).
    """
    torch.manual_seed(_step_seed(config.seed, step, group.rank))  # dropout masks depend on (seed, step, rank)
    ids, mask, labels = _to_device(batch, device)
    with _autocast(device):
        loss_sum, correct, count = loss_terms(model, ids, mask, labels, sequence_level)
    total = group.sum(count.detach()).clamp(min=1.0)
    loss = loss_sum * group.world / total
    # (loss / world) summed over ranks is the batch's mean loss; so is the step count 1 / world
    share = 1.0 / group.world
    return loss, torch.stack([loss.detach() * share, correct, count, torch.full_like(count, share)]).double()


def loss_terms(
    model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor, sequence_level: bool
) -> torch.Tensor:
    """Forward pass and (summed cross-entropy, correct predictions, labelled positions), a (3,) float32 tensor.

    Token tasks compute logits at the labelled positions only (``logits_at``): the same loss as
    full logits with ignore_index, without the (B T, V) product for the unlabelled tokens.
    """
    if sequence_level:
        no_tokens = torch.zeros_like(ids, dtype=torch.bool)  # skip the (B T, V) token head: unused here
        logits = model(ids, mask, logits_at=no_tokens)["cls_logits"].float()  # (B, C)
    else:
        at = labels != IGNORE  # (B, T)
        logits = model(ids, mask, logits_at=at)["logits"].float()  # (N, V)
        labels = labels[at]  # (N,)
    labelled = labels != IGNORE
    loss_sum = F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")
    correct = ((logits.argmax(dim=-1) == labels) & labelled).sum().float()
    return torch.stack([loss_sum, correct, labelled.sum().float()])


def _to_device(batch: Batch, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(  # type: ignore[return-value]
        torch.from_numpy(array).to(device, non_blocking=True)
        for array in (batch.input_ids, batch.attention_mask, batch.labels)
    )


def _autocast(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on CUDA; full precision on CPU (where bf16 matmuls are slow and not needed)."""
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _step_seed(seed: int, step: int, rank: int = 0) -> int:
    key = [seed, DROPOUT_STREAM, step] + ([rank] if rank else [])  # rank 0 keeps the single-process seeds
    return int(np.random.SeedSequence(key).generate_state(1)[0])


def _zeros(device: torch.device) -> torch.Tensor:
    """The running sums of training since the last evaluation: loss, correct, labelled positions, steps."""
    return torch.zeros(4, dtype=torch.float64, device=device)


# --- checkpoints --------------------------------------------------------------------------------


def _save_checkpoint(
    out: Path, model: Transformer, optimizer: torch.optim.Optimizer, config: TrainConfig, step: int, metrics: dict
) -> None:
    """Write the checkpoint into checkpoint.partial/, then swap it in for checkpoint/."""

    folder = out / CHECKPOINT_DIR
    previous = folder.with_name(f"{CHECKPOINT_DIR}.previous")
    with staged_folder(folder.with_name(f"{CHECKPOINT_DIR}.partial"), create=False) as staging:
        _write_checkpoint_files(staging, model, optimizer, config, step, metrics)
        shutil.rmtree(previous, ignore_errors=True)
        if folder.exists():
            folder.rename(previous)
        staging.rename(folder)
        shutil.rmtree(previous, ignore_errors=True)


def _write_checkpoint_files(
    staging: Path, model: Transformer, optimizer: torch.optim.Optimizer, config: TrainConfig, step: int, metrics: dict
) -> None:
    """The model, the optimiser's tensors and trainer.json into ``staging``."""
    from safetensors.torch import save_file

    model.save(staging)
    tensors, scalars, groups = _split_optimizer_state(optimizer.state_dict())
    header = {METADATA_KEY: json.dumps({"kind": "optimizer", "format_version": FORMAT_VERSION})}
    with atomic_path(staging / OPTIMIZER_FILE) as tmp:
        save_file(tensors, str(tmp), metadata=header)
    state = {
        "kind": CHECKPOINT_KIND,
        "format_version": FORMAT_VERSION,
        "step": step,
        "time_s": metrics["time_s"],
        "metrics": to_jsonable(metrics),
        "config": config.to_dict(),
        "optimizer": {"param_groups": groups, "scalars": scalars},
    }
    write_text(staging / STATE_FILE, json.dumps(state, indent=1) + "\n")  # written last: marks the folder complete


def _find_checkpoint(out: Path) -> Path | None:
    """checkpoint/, or checkpoint.previous/ when a crash came between the two renames of a save."""
    for name in (CHECKPOINT_DIR, f"{CHECKPOINT_DIR}.previous"):
        if (out / name / STATE_FILE).is_file():
            return out / name
    return None


def _stopped_before_first_checkpoint(out: Path) -> bool:
    """A run folder a killed run left before its first checkpoint: a metrics file and/or a partial
    checkpoint, and no complete one."""
    started = (out / METRICS_FILE).exists() or (out / f"{CHECKPOINT_DIR}.partial").exists()
    return started and _find_checkpoint(out) is None


def _read_checkpoint(out: Path, config: TrainConfig) -> tuple[Path, dict[str, Any]]:
    """The checkpoint folder of the run in ``out`` and its trainer.json, checked against ``config``'s task."""
    folder = _find_checkpoint(out)
    if folder is None:
        if _stopped_before_first_checkpoint(out):
            raise InputError(
                f"{out} holds a run stopped before its first checkpoint, so there is nothing to resume; "
                "train without --resume to start it over"
            )
        raise InputError(f"no checkpoint in {out}; train without resume to start a run there")
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested too deep, a huge integer
        raise FormatError(f"{folder / STATE_FILE} is corrupt ({first_line(exc, 120)}); start the run again") from exc
    if not isinstance(state, dict) or state.get("kind") != CHECKPOINT_KIND:
        raise FormatError(f"{folder} is not a geoanalyze training checkpoint; pass the output folder of a run")
    if state.get("format_version") != FORMAT_VERSION:
        raise FormatError(
            f"{folder} has format version {state.get('format_version')}, this geoanalyze reads {FORMAT_VERSION}; "
            "start the run again"
        )
    _check_state(folder, state)
    _check_metrics_log(out / METRICS_FILE)
    saved_task = state["config"]["task"]
    if saved_task != config.task:
        raise IncompatibleError(
            f"{folder} is a checkpoint of task {saved_task}, not {config.task}; resume with task={saved_task} "
            "or train into another folder"
        )
    return folder, state


def _check_state(folder: Path, state: dict[str, Any]) -> None:
    """trainer.json's fields have their types and the checkpoint's files are all there, so a corrupt
    or incomplete checkpoint is one error naming the file, not a failure deep in the loop."""
    where = folder / STATE_FILE
    fix = "restore the folder from a copy, or start the run again in another folder"

    def bad(what: str) -> FormatError:
        return FormatError(f"{where}: {what}; the checkpoint is corrupt: {fix}")

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    step = state.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        raise bad(f"step must be a positive integer, got {step!r}")
    if not number(state.get("time_s")) or state["time_s"] < 0:
        raise bad(f"time_s must be a number of seconds, got {state.get('time_s')!r}")
    if not isinstance(state.get("metrics"), dict):
        raise bad(f"metrics must be an object, got {type(state.get('metrics')).__name__}")
    saved_config = state.get("config")
    if not isinstance(saved_config, dict) or not isinstance(saved_config.get("task"), str):
        raise bad("config must be an object naming the task")
    optimizer = state.get("optimizer")
    if not isinstance(optimizer, dict):
        raise bad(f"optimizer must be an object, got {type(optimizer).__name__}")
    groups, scalars = optimizer.get("param_groups"), optimizer.get("scalars")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise bad("optimizer.param_groups must be a list of objects")
    for group in groups:
        params = group.get("params")
        if not isinstance(params, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in params):
            raise bad("optimizer.param_groups[].params must be a list of parameter indices")
        for key in ("lr", "eps", "weight_decay"):
            if key in group and not number(group[key]):
                raise bad(f"optimizer.param_groups[].{key} must be a number, got {group[key]!r}")
        betas = group.get("betas", [0.9, 0.999])
        if not isinstance(betas, list) or len(betas) != 2 or not all(number(b) for b in betas):
            raise bad(f"optimizer.param_groups[].betas must be two numbers, got {betas!r}")
    if not isinstance(scalars, dict) or not all(_state_name(name) for name in scalars):
        raise bad("optimizer.scalars must be an object of <index>.<key> entries")
    for name in ("config.json", "model.safetensors", OPTIMIZER_FILE):
        if not (folder / name).is_file():
            raise FormatError(f"{folder} lacks {name}: the checkpoint is incomplete; {fix}")


def _state_name(name: str) -> bool:
    index, sep, key = name.partition(".")
    return bool(sep and key and index.isdigit())


def _check_metrics_log(path: Path) -> None:
    """metrics.jsonl is readable before anything is resumed (lines cut short by a kill are dropped
    on resume; bytes that are not text are corruption)."""
    if not path.exists():
        return
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}; check the file") from exc
    for number, line in enumerate(data.split(b"\n"), start=1):
        try:
            what = "a NUL byte" if "\x00" in line.decode("utf-8") else None
        except UnicodeDecodeError:
            what = "not UTF-8 text"
        if what is not None:
            raise FormatError(
                f"{path}, line {number}: {what}; the metrics log is corrupt: remove the line "
                "(or the file, losing the logged metrics) and resume again"
            )


def _restore(
    folder: Path, state: dict[str, Any], config: TrainConfig, model_config: ModelConfig, device: torch.device
) -> tuple[Transformer, torch.optim.Optimizer]:
    """The model and optimiser of a checkpoint; IncompatibleError when its model is not ``model_config``."""
    from safetensors.torch import load_file

    try:
        saved_model = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{folder}/config.json is missing or corrupt ({exc}); start the run again") from exc
    if not isinstance(saved_model, dict):
        raise FormatError(f"{folder}/config.json is not a JSON object; the checkpoint is corrupt: start the run again")
    wanted = model_config.to_dict()
    differing = [key for key in wanted if saved_model.get(key) != wanted[key]]
    if differing:
        key = differing[0]
        raise IncompatibleError(
            f"{folder} holds a model with {key}={saved_model.get(key)!r} but this run asks for {wanted[key]!r}; "
            "resume with the checkpoint's model settings or train into another folder"
        )
    model = Transformer.load(folder, device)
    optimizer = make_optimizer(model, config)
    saved = state["optimizer"]
    where = folder / OPTIMIZER_FILE
    fix = "the checkpoint is corrupt: restore it from a copy, or start the run again in another folder"
    try:
        tensors = load_file(str(where))
    except Exception as exc:  # safetensors' SafetensorError (a bad header, a cut file) is no OSError
        raise FormatError(f"{where} is not a readable safetensors file ({first_line(exc)}); {fix}") from exc
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    for name, tensor in tensors.items():
        index, _, key = name.partition(".")
        moment = key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")  # the per-parameter tensors (step is a scalar)
        if (
            not _state_name(name)
            or int(index) >= len(parameters)
            or (moment and tensor.shape != parameters[int(index)].shape)
        ):
            raise FormatError(f"{where}: {name} does not fit the model of {folder}; {fix}")
    try:
        optimizer.load_state_dict(_join_optimizer_state(tensors, saved["scalars"], saved["param_groups"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise FormatError(
            f"{folder / STATE_FILE}: its optimizer state does not fit the model ({first_line(exc)}); {fix}"
        ) from exc
    for group in optimizer.param_groups:  # the decay of this run's config, as for the learning rate
        group["weight_decay"] = config.weight_decay if group["decay"] else 0.0
    return model, optimizer


def _split_optimizer_state(
    state_dict: dict[str, Any],
) -> tuple[dict[str, torch.Tensor], dict[str, Any], list[dict[str, Any]]]:
    """An optimizer state dict -> (tensors "<index>.<key>", JSON scalars "<index>.<key>", JSON param groups)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for index, per_parameter in state_dict["state"].items():
        for key, value in per_parameter.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{index}.{key}"] = value
    groups = [
        {key: list(v) if isinstance(v, tuple) else v for key, v in group.items()}
        for group in state_dict["param_groups"]
    ]
    return tensors, scalars, groups


def _join_optimizer_state(
    tensors: dict[str, torch.Tensor], scalars: dict[str, Any], groups: list[dict[str, Any]]
) -> dict[str, Any]:
    """The inverse of :func:`_split_optimizer_state`."""
    state: dict[int, dict[str, Any]] = {}
    for name, value in [*tensors.items(), *scalars.items()]:
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    param_groups = [{**group, "betas": tuple(group["betas"])} if "betas" in group else group for group in groups]
    return {"state": state, "param_groups": param_groups}


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop the lines a killed run logged after its checkpoint, so the resumed run's lines follow on."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by the kill
        if isinstance(record, dict) and record.get("step", math.inf) <= step:
            kept.append(line + "\n")
    write_text(path, "".join(kept))
