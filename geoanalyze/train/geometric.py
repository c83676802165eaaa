r"""The synthetic geometric tasks of EΔ-MHC-Geo (PAPERS.md §3) and a compact MSE training loop.

Sequence tasks (inputs x_0..x_{T-2}, targets x_1..x_{T-1}, MSE over every step and component):

gyroscope   d = 16, x_{t+1} = R x_t, R a rotation by theta ~ U[0.1, 2.5] in one random plane
            (a new plane and angle per sequence), x_0 a random unit vector.
stability   "echo": d = 64, every step is one fixed random unit vector plus N(0, 0.001^2) noise
            (per sequence); the best prediction is the vector itself, MSE floor 1e-6.
near-pi     d = 64, x_{t+1} = R x_t with R a rotation by 3.10 rad in one random plane.
near-pi-multi  d = 64, R rotates all 32 planes of a random orthonormal basis by 3.14 rad (R ~ -I).

negation    bare operators: y = -x for x ~ N(0, I_64); ``train_size`` samples, 500 validation.

Every draw comes from ``numpy.random.default_rng([seed, task index, split])``: a task is a pure
function of its seed. The loop is :func:`.core.fit` with :mod:`.loop`'s schedule (warm-up + cosine
to lr / 10, AdamW (0.9, 0.95), weight decay on matrices, clipping) and an MSE loss plus the model's
regulariser, on CPU inside :func:`.determinism.deterministic` (a fixed thread count, deterministic kernels).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from ..errors import InputError
from . import core
from .determinism import deterministic
from .loop import lr_at, parameter_groups, seed_everything

SEQUENCE_TASKS = ("gyroscope", "stability", "near-pi", "near-pi-multi")
TASKS = (*SEQUENCE_TASKS, "norm-deviation", "negation")

#: (dimension, sequence length, training sequences, validation sequences) of the paper
PAPER_SIZES: dict[str, tuple[int, int, int, int]] = {
    "gyroscope": (16, 256, 9000, 1000),
    "stability": (64, 128, 900, 100),
    "near-pi": (64, 128, 900, 100),
    "near-pi-multi": (64, 128, 900, 100),
}
NOISE = 0.001


@dataclass(frozen=True)
class SequenceData:
    """One task's tensors: ``train`` and ``valid`` (N, T, d) float32 sequences."""

    name: str
    train: torch.Tensor
    valid: torch.Tensor

    @property
    def dim(self) -> int:
        return int(self.train.shape[-1])


def random_plane(rng: np.random.Generator, d: int) -> np.ndarray:
    """An orthonormal pair (2, d): the plane of a rotation, uniform on the Grassmannian."""
    q, _ = np.linalg.qr(rng.standard_normal((d, 2)))
    return q.T


def plane_rotation(e: np.ndarray, theta: float) -> np.ndarray:
    r"""R = I + (cos theta - 1)(e1 e1^T + e2 e2^T) + sin theta (e2 e1^T - e1 e2^T): rotation by theta in span(e1, e2)."""
    e1, e2 = e
    d = e.shape[1]
    return (
        np.eye(d)
        + (math.cos(theta) - 1.0) * (np.outer(e1, e1) + np.outer(e2, e2))
        + math.sin(theta) * (np.outer(e2, e1) - np.outer(e1, e2))
    )


def rollout(rotation: np.ndarray, start: np.ndarray, length: int) -> np.ndarray:
    """x_0 = start, x_{t+1} = R x_t: (length, d)."""
    out = np.empty((length, start.shape[0]))
    out[0] = start
    for t in range(1, length):
        out[t] = rotation @ out[t - 1]
    return out


def _unit(rng: np.random.Generator, d: int) -> np.ndarray:
    x = rng.standard_normal(d)
    return x / np.linalg.norm(x)


def _sequence(name: str, rng: np.random.Generator, d: int, length: int) -> np.ndarray:
    if name == "gyroscope":
        return rollout(plane_rotation(random_plane(rng, d), rng.uniform(0.1, 2.5)), _unit(rng, d), length)
    if name == "stability":
        return _unit(rng, d)[None, :] + NOISE * rng.standard_normal((length, d))
    if name == "near-pi":
        return rollout(plane_rotation(random_plane(rng, d), 3.10), _unit(rng, d), length)
    if name == "near-pi-multi":
        basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
        rotation = np.eye(d)
        for i in range(d // 2):
            rotation = plane_rotation(basis[:, 2 * i : 2 * i + 2].T, 3.14) @ rotation
        return rollout(rotation, _unit(rng, d), length)
    raise InputError(f"unknown task {name!r}; choose one of {', '.join(SEQUENCE_TASKS)}")


def task_sizes(
    task: str, sizes: dict[str, tuple[int, int, int, int]], length: int | None, n_train: int | None, n_valid: int | None
) -> tuple[int, int, int, int]:
    """(dimension, length, training and validation sequences) of ``task`` in ``sizes``, those given replacing
    the table's; InputError for an unknown task or a length under 2."""
    if task not in sizes:
        raise InputError(f"unknown sequence task {task!r}; choose one of {', '.join(SEQUENCE_TASKS)}")
    d, table_length, table_train, table_valid = sizes[task]
    length = length or table_length
    if length < 2:
        raise InputError(f"sequence length must be at least 2 (one input, one target), got {length}")
    return d, length, n_train or table_train, n_valid or table_valid


def make_sequences(
    name: str, seed: int, length: int | None = None, n_train: int | None = None, n_valid: int | None = None
) -> SequenceData:
    """The sequences of task ``name`` (one of :data:`SEQUENCE_TASKS`), the paper's sizes unless given."""
    d, length, n_train, n_valid = task_sizes(name, PAPER_SIZES, length, n_train, n_valid)
    task_index = SEQUENCE_TASKS.index(name)
    splits = []
    for split, count in enumerate((n_train, n_valid)):
        rng = np.random.default_rng([seed, task_index, split])
        splits.append(torch.from_numpy(np.stack([_sequence(name, rng, d, length) for _ in range(count)])).float())
    return SequenceData(name, splits[0], splits[1])


def negation_data(seed: int, train_size: int, n_valid: int = 500, d: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """x ~ N(0, I_d): (train_size, d) and (n_valid, d); the target is -x."""
    if train_size < 1:
        raise InputError(f"train_size must be at least 1, got {train_size}")
    rng = np.random.default_rng([seed, len(TASKS), 0])
    train = rng.standard_normal((train_size, d))
    valid = np.random.default_rng([seed, len(TASKS), 1]).standard_normal((n_valid, d))
    return torch.from_numpy(train).float(), torch.from_numpy(valid).float()


def unit_sequences(seed: int, d: int, n_sequences: int = 50, length: int = 100) -> torch.Tensor:
    """The norm-deviation probe: (n_sequences, length, d) i.i.d. random unit vectors."""
    x = np.random.default_rng([seed, len(TASKS), 2]).standard_normal((n_sequences, length, d))
    return torch.from_numpy(x / np.linalg.norm(x, axis=-1, keepdims=True)).float()


# --- the loop ------------------------------------------------------------------------------------


@dataclass
class FitConfig:
    """The optimiser schedule (the paper's: AdamW (0.9, 0.95), lr 1e-3 -> 1e-4, 100 warm-up, clip 1, wd 0.1)."""

    steps: int = 2000
    batch_size: int = 64
    lr: float = 1e-3
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 100
    seed: int = 42

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_every"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.warmup_steps < 0:
            raise InputError(f"warmup_steps must be at least 0, got {self.warmup_steps}")
        if not self.lr > 0:
            raise InputError(f"lr must be positive, got {self.lr}")


@dataclass(frozen=True)
class FitHistory:
    """A fit's evaluations in order: each record holds step, lr, train_loss (the mean since the
    record before), the ``evaluate()`` metrics and time_s."""

    records: tuple[dict[str, float], ...]

    @property
    def last(self) -> dict[str, float]:
        return self.records[-1]


def fit(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    config: FitConfig,
    evaluate: Callable[[], dict[str, float]],
    device: torch.device,
    aux_loss: Callable[[], Any] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> FitHistory:
    """Train ``model`` with MSE(model(inputs[batch]), targets[batch]) (+ ``aux_loss()``); return the eval history.

    Batches are drawn with a generator seeded by ``config.seed`` (with replacement when the set is
    smaller than a batch). Every ``eval_every`` steps and after the last, ``evaluate()`` (run
    under no_grad, model in eval mode) adds its metrics to a record with step, lr, train_loss
    (the mean since the last record) and time_s. On CPU the loop runs at a fixed thread count
    with deterministic kernels (:func:`.determinism.deterministic`): bit-identical per seed.
    """
    model.to(device)
    generator = torch.Generator().manual_seed(config.seed)
    n = inputs.shape[0]

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if n <= config.batch_size:
            index = torch.arange(n)
        else:
            index = torch.randint(n, (config.batch_size,), generator=generator)
        return inputs[index].to(device), targets[index].to(device)

    def loss(
        model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], step: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = batch
        mse = F.mse_loss(model(x), y)
        return mse + (aux_loss() if aux_loss is not None else 0.0), mse  # the MSE is what the records show

    history: list[dict[str, float]] = []
    losses: list[torch.Tensor] = []
    began = time.perf_counter()

    def record(state: core.RunState) -> None:
        assert state.logged is not None
        losses.append(state.logged)
        if on_step is not None:
            on_step(state.step)

    def log(state: core.RunState) -> None:
        with core.evaluating(model):
            metrics = evaluate()
        train_loss = float(torch.stack(losses).mean())
        history.append({"step": state.step, "lr": state.lr, "train_loss": train_loss, **metrics})
        history[-1]["time_s"] = round(time.perf_counter() - began, 3)
        losses.clear()

    # lr_at reads only lr, warmup_steps, steps and min_lr_ratio, which FitConfig has (hence the ignore)
    schedule = core.Schedule(
        config.steps,
        lambda step: lr_at(step, config),  # type: ignore[arg-type]
        config.grad_clip,
        lambda model: torch.optim.AdamW(parameter_groups(model, config.weight_decay), lr=config.lr, betas=(0.9, 0.95)),
    )
    with deterministic(device):
        core.fit(model, batches, loss, schedule, [record, core.every(config.eval_every, log, last=config.steps)])
    return FitHistory(tuple(history))


def sequence_mse(model: nn.Module, sequences: torch.Tensor, device: torch.device, chunk: int = 256) -> float:
    """Next-step MSE of ``model`` over ``sequences`` (N, T, d), in chunks."""
    total, count = 0.0, 0
    for start in range(0, sequences.shape[0], chunk):
        batch = sequences[start : start + chunk].to(device)
        pred = model(batch[:, :-1])
        total += float(F.mse_loss(pred, batch[:, 1:], reduction="sum"))
        count += batch[:, 1:].numel()
    return total / count


def train_sequence_task(
    model: nn.Module,
    data: SequenceData,
    config: FitConfig,
    device: torch.device,
    on_step: Callable[[int], None] | None = None,
) -> FitHistory:
    """Fit ``model`` (an :class:`~geoanalyze.models.edelta.EDeltaModel`) to next-step prediction on ``data``.

    Each record has ``valid_mse`` and ``gate`` (mean gamma of the hybrids in the evaluation, or NaN).
    """
    seed_everything(config.seed)
    train = data.train

    def evaluate() -> dict[str, float]:
        mse = sequence_mse(model, data.valid, device)
        gate = getattr(model, "gate", lambda: None)()
        return {"valid_mse": mse, "gate": float("nan") if gate is None else gate}

    aux = getattr(model, "aux_loss", None)
    return fit(model, train[:, :-1], train[:, 1:], config, evaluate, device, aux, on_step)
