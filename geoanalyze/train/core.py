r"""The training core: the one loop every training run in the package is a configuration of.

    state = fit(model, batches, loss, schedule, hooks)

Per step s = state.step + 1 .. schedule.steps::

    lr_s        = schedule.lr(s)                  (a float: a constant rate)
    b_s         = batches(s)                      (drawn after step s - 1's hooks)
    J_s, m_s    = loss(model, b_s, s)             (the objective, and what the step logs: J_s by default)
    g           = grad J_s, scaled to norm <= schedule.grad_clip when that is > 0
    theta      <- optimizer step with g at lr_s
    hook(state)   for every hook, in order        (state.step = s, state.lr = lr_s, state.logged = m_s)

What differs between runs is configuration, not a loop of their own (docs/architecture.md):
``geoanalyze train`` (:mod:`.loop`: seeded batches and dropout, warm-up + cosine, evaluation and
checkpoint hooks, the DDP wrapper under torchrun, a resumed run's state), the EΔ tasks
(:mod:`.geometric`: MSE plus the model's regulariser) and the experiments' loops.

Exactness: ``fit`` does exactly the operations above in that order and nothing else (no hidden
reseeding, no extra random draw), so a run configured here computes, bit for bit, what the
hand-written loop it replaces computed. Resuming from a state whose model and optimiser are a copy
of step k's, with batches a pure function of the step, ends where the run never interrupted ends.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import nn

B = TypeVar("B")  # a batch: whatever ``batches`` returns and ``loss`` takes

#: the loss of one step: the objective to differentiate, or (objective, what the step logs)
StepLoss = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
#: AdamW, or another optimiser, over the model's parameters
OptimizerFactory = Callable[[nn.Module], torch.optim.Optimizer]


@dataclass(frozen=True)
class Schedule:
    """How the parameters move: the number of steps, the rate per step, clipping and the optimiser.

    lr : the learning rate of step s (1-based) as a function, or a float for a constant rate.
    grad_clip : the gradient's global norm is clipped to it (``clip_grad_norm_``); 0 leaves it.
    optimizer : builds the optimiser when ``fit`` starts a run (a resumed run brings its own in the state);
        by default PyTorch's AdamW with its defaults at the first step's rate.
    """

    steps: int
    lr: float | Callable[[int], float]
    grad_clip: float = 0.0
    optimizer: OptimizerFactory | None = None

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step``."""
        return self.lr(step) if callable(self.lr) else self.lr

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        if self.optimizer is not None:
            return self.optimizer(model)
        return torch.optim.AdamW(model.parameters(), lr=self.lr_at(1))


@dataclass
class RunState:
    """Where a run stands; what every hook reads after each step.

    optimizer : the optimiser (its moments are the run's state besides the model).
    step : the last step completed (0 before the first; a resumed run starts from its checkpoint's).
    lr : that step's learning rate.
    logged : what that step's loss logged (detached): the objective unless the loss said otherwise.
    """

    optimizer: torch.optim.Optimizer
    step: int = 0
    lr: float = math.nan
    logged: torch.Tensor | None = None

    @property
    def loss(self) -> float:
        """The logged value of the last step as a float (one device sync); NaN before the first step."""
        return math.nan if self.logged is None else float(self.logged)


#: called after every step with the run's state
Hook = Callable[[RunState], None]


def fit(
    model: nn.Module,
    batches: Callable[[int], B],
    loss: Callable[[nn.Module, B, int], StepLoss],
    schedule: Schedule,
    hooks: Sequence[Hook] = (),
    state: RunState | None = None,
) -> RunState:
    """Train ``model`` from ``state`` (default: a new run, the schedule's optimiser) to ``schedule.steps``.

    Parameters
    ----------
    model : put in training mode; what ``loss`` calls and whose gradient is clipped (a DDP wrapper
        under torchrun, so the gradients are averaged over processes).
    batches : ``batches(step)``, the batch of step ``step``.
    loss : ``loss(model, batch, step)``: the objective, or (objective, what the step logs).
    schedule : steps, learning rate, clipping, optimiser.
    hooks : each called after every step with the state, in order (evaluation, logging, checkpoints:
        an evaluating hook returns the model to training mode, :func:`evaluating` does).
    state : a run to continue; returned, updated, at the end.
    """
    state = state if state is not None else RunState(schedule.make_optimizer(model))
    optimizer = state.optimizer
    model.train()
    for step in range(state.step + 1, schedule.steps + 1):
        lr = schedule.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        objective, logged = split_loss(loss(model, batches(step), step))
        optimizer.zero_grad(set_to_none=True)
        objective.backward()
        if schedule.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), schedule.grad_clip)
        optimizer.step()
        state.step, state.lr, state.logged = step, lr, logged.detach()
        for hook in hooks:
            hook(state)
    return state


def split_loss(value: StepLoss) -> tuple[torch.Tensor, torch.Tensor]:
    """(objective, logged) of a loss's return: a lone tensor logs itself."""
    if isinstance(value, tuple):
        return value
    return value, value


def every(interval: int, hook: Hook, last: int | None = None, first: bool = False) -> Hook:
    """``hook`` at the steps that are multiples of ``interval``, at step ``last``, and at step 1 when ``first``."""

    def at(state: RunState) -> None:
        step = state.step
        if step % interval == 0 or step == last or (first and step == 1):
            hook(state)

    return at


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """``model`` in evaluation mode without gradients, back in training mode after."""
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train()


__all__ = ["Hook", "RunState", "Schedule", "StepLoss", "evaluating", "every", "fit", "split_loss"]
