r"""The reference protocol of EΔ-MHC-Geo (code arash-shahmansoori/edelta, commit f51372f): its tasks, metric and negation loop.

``verify edelta-benchmarks --set protocol=reference`` trains on these; ``protocol=causal`` on
:mod:`geoanalyze.train.geometric`'s (our design). What differs from ours, task by task (gyroscope,
stability, near-pi, the data seed, the norm deviation and the negation loop), is tabled in
docs/edelta.md; the reference's data are drawn with numpy's legacy ``RandomState`` in its own
order, so the sequences are the reference's own.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from ..errors import InputError
from ..train.core import RunState, Schedule, evaluating, every, fit
from ..train.geometric import PAPER_SIZES, SequenceData, task_sizes

if TYPE_CHECKING:
    from ..models.edelta import BareOperator

#: (dimension, sequence length, training sequences, validation sequences) of the reference: the paper's, but
#: near-pi's two tasks
REFERENCE_SIZES = {**PAPER_SIZES, "near-pi": (64, 128, 1000, 500), "near-pi-multi": (64, 128, 1000, 500)}
DATA_SEED = 42
VALID_SEED_OFFSET = 1000  # near-pi's validation trajectories: seed + 1000
NEGATION_VALID_SEED = 999
NOISE = 0.001
THETA = {"near-pi": 3.10, "near-pi-multi": 3.14}


def plane_rollout(start: np.ndarray, planes: list[tuple[int, int]], theta: float, length: int) -> np.ndarray:
    r"""x_t = R^t x_0 for R rotating each coordinate plane (i, j) of ``planes`` by theta: (length, d).

    In closed form (R^t rotates by t theta): x_t[i] = cos(t theta) x_i - sin(t theta) x_j,
    x_t[j] = sin(t theta) x_i + cos(t theta) x_j; the reference multiplies by R t times (the same
    to ~1e-13 in float64).
    """
    angles = theta * np.arange(length)[:, None]  # (T, 1)
    cos, sin = np.cos(angles), np.sin(angles)
    out = np.repeat(start[None, :], length, axis=0)
    for i, j in planes:
        out[:, i] = cos[:, 0] * start[i] - sin[:, 0] * start[j]
        out[:, j] = sin[:, 0] * start[i] + cos[:, 0] * start[j]
    return out


def _gyroscope(count: int, d: int, length: int, rng: np.random.RandomState) -> np.ndarray:
    out = np.empty((count, length, d))
    for s in range(count):
        v = rng.randn(d)
        v = v / np.linalg.norm(v)
        theta = rng.uniform(0.1, 2.5)
        i = rng.randint(0, d - 1)
        j = rng.randint(i + 1, d)
        out[s] = plane_rollout(v, [(i, j)], theta, length)
    return out


def _stability(count: int, d: int, length: int, rng: np.random.RandomState) -> np.ndarray:
    out = np.empty((count, length, d))
    for s in range(count):
        key = rng.randn(d)
        out[s] = key / np.linalg.norm(key) + NOISE * rng.randn(length, d)
    return out


def _near_pi(task: str, count: int, d: int, length: int, rng: np.random.RandomState) -> np.ndarray:
    planes = [(0, 1)] if task == "near-pi" else [(2 * p, 2 * p + 1) for p in range(d // 2)]
    out = np.empty((count, length, d))
    for s in range(count):
        v = rng.randn(d)
        out[s] = plane_rollout(v / np.linalg.norm(v), planes, THETA[task], length)
    return out


def reference_sequences(
    task: str,
    seed: int = DATA_SEED,
    length: int | None = None,
    n_train: int | None = None,
    n_valid: int | None = None,
) -> SequenceData:
    """Task ``task``'s sequences as the reference generates them (sizes: :data:`REFERENCE_SIZES` unless given).

    Gyroscope and stability draw training then validation sequences from one stream; near-pi draws
    the validation trajectories from seed + 1000.
    """
    d, length, n_train, n_valid = task_sizes(task, REFERENCE_SIZES, length, n_train, n_valid)
    if task in ("gyroscope", "stability"):
        generate = _gyroscope if task == "gyroscope" else _stability
        both = generate(n_train + n_valid, d, length, np.random.RandomState(seed))
        train, valid = both[:n_train], both[n_train:]
    else:
        train = _near_pi(task, n_train, d, length, np.random.RandomState(seed))
        valid = _near_pi(task, n_valid, d, length, np.random.RandomState(seed + VALID_SEED_OFFSET))
    return SequenceData(task, torch.from_numpy(train).float(), torch.from_numpy(valid).float())


def predict_zero_mse(sequences: torch.Tensor) -> float:
    """The plateau: MSE of predicting 0 for every next step, mean of x_{1..T-1}^2 (stability: ~1/64)."""
    return float(sequences[:, 1:].double().square().mean())


def model_norm_deviation(model: nn.Module, probe: torch.Tensor) -> dict[str, Any]:
    r"""The reference's norm deviation: unit vectors (S, T, d_in) through the whole model.

    Returns ``deviation`` = mean_t | mean_s ||pred_{s,t}|| - 1 | and the per-position mean norms.
    Sequence pooling is per sequence, so one batched pass equals the reference's one-by-one passes.
    """
    model.eval()
    with torch.no_grad():
        norms = model(probe).norm(dim=-1).double()  # (S, T)
    mean = norms.mean(dim=0)  # (T,)
    return {"deviation": float((mean - 1.0).abs().mean()), "mean_norms": mean.tolist()}


# --- negation -------------------------------------------------------------------------------------


def reference_negation_data(seed: int, size: int, d: int = 64, n_valid: int = 500) -> tuple[torch.Tensor, torch.Tensor]:
    """(train (size, d), valid (n_valid, d)): x ~ N(0, I) from torch.manual_seed(seed) and (999), as the reference."""
    if size < 1:
        raise InputError(f"train_size must be at least 1, got {size}")
    torch.manual_seed(NEGATION_VALID_SEED)
    valid = torch.randn(n_valid, d)
    torch.manual_seed(seed)
    return torch.randn(size, d), valid


def fit_reference_negation(
    op: BareOperator,
    train: torch.Tensor,
    valid: torch.Tensor,
    steps: int,
    eval_every: int,
    lr: float = 1e-3,
    batch_size: int = 32,
) -> list[dict[str, float]]:
    r"""The reference's negation loop (train_reflection.py): AdamW(lr) with PyTorch's defaults, constant
    lr, batches of min(32, n) drawn with replacement, MSE(G(x), -x) + L_gate, no clipping.

    Records every ``eval_every`` steps (and the first and last): cosine(G(x), -x) and MSE on
    ``valid``, gamma (EΔ) and beta (DDL) averaged over the first 100 validation samples.
    """
    n = train.shape[0]

    def batches(step: int) -> torch.Tensor:
        return train[torch.randint(0, n, (min(batch_size, n),))]  # torch's global generator, as the reference

    history: list[dict[str, float]] = []

    def record(state: RunState) -> None:
        with evaluating(op):
            history.append({"step": state.step, "train_loss": state.loss, **negation_metrics(op, valid)})

    def loss(model: nn.Module, x: torch.Tensor, step: int) -> torch.Tensor:
        return negation_loss(op, x)

    schedule = Schedule(steps, lr, grad_clip=0.0, optimizer=lambda model: torch.optim.AdamW(model.parameters(), lr=lr))
    fit(op, batches, loss, schedule, [every(eval_every, record, last=steps, first=True)])
    return history


def negation_loss(op: BareOperator, x: torch.Tensor) -> torch.Tensor:
    """The reference's objective: MSE(G(x), -x), plus the operator's gate loss when it is positive."""
    loss = F.mse_loss(op(x), -x)
    aux = op.aux_loss()
    if isinstance(aux, torch.Tensor) and float(aux.detach()) > 0:
        loss = loss + aux
    return loss


def negation_metrics(op: BareOperator, valid: torch.Tensor) -> dict[str, float]:
    """cosine(G(x), -x) and MSE over ``valid``; gamma and beta read on its first 100 samples (NaN when absent)."""
    y = op(valid)
    metrics = {
        "cosine": float(F.cosine_similarity(y, -valid, dim=-1).mean()),
        "valid_mse": float(F.mse_loss(y, -valid)),
    }
    op(valid[:100])
    gate = op.gate()
    beta = getattr(op.residual, "beta", None)
    metrics["gate"] = math.nan if gate is None else gate
    metrics["beta"] = math.nan if beta is None else float(beta.mean())
    return metrics
