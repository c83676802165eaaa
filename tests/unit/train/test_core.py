"""The training core (train/core.py): fit equals a hand-written loop bit for bit; resuming, clipping, a
constant rate and the hooks are settings of it."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from geoanalyze.train.core import RunState, Schedule, evaluating, every, fit

STEPS = 12


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    return x, x @ torch.randn(6, 3, generator=g) + 0.1 * torch.randn(64, 3, generator=g)


def model() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.2), nn.Tanh(), nn.Linear(8, 3))


def rows(step: int) -> torch.Tensor:
    """The batch of step ``step``: a pure function of the step."""
    return torch.randint(64, (16,), generator=torch.Generator().manual_seed(step))


def rate(step: int) -> float:
    return 1e-2 * min(1.0, step / 3) * (1 - step / (2 * STEPS))


def mse(net: nn.Module, index: torch.Tensor, step: int) -> torch.Tensor:
    torch.manual_seed(100 + step)  # dropout masks a function of the step, as the runner's
    x, y = data()
    return F.mse_loss(net(x[index]), y[index])


def hand_loop(net: nn.Module, clip: float, lr: float | None = None) -> list[float]:
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.05)
    net.train()
    losses = []
    for step in range(1, STEPS + 1):
        for group in optimizer.param_groups:
            group["lr"] = rate(step) if lr is None else lr
        loss = mse(net, rows(step), step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip > 0:
            nn.utils.clip_grad_norm_(net.parameters(), clip)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def adamw(net: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.05)


def same_parameters(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("clip", [0.0, 0.05])
def test_fit_equals_a_hand_loop_bit_for_bit(clip: float) -> None:
    by_hand, fitted = model(), model()
    losses = hand_loop(by_hand, clip)
    logged: list[float] = []
    state = fit(
        fitted, rows, mse, Schedule(STEPS, rate, grad_clip=clip, optimizer=adamw), [lambda s: logged.append(s.loss)]
    )
    assert same_parameters(by_hand, fitted)
    assert logged == losses
    assert state.step == STEPS and state.lr == rate(STEPS)


def test_clipping_is_a_setting_that_changes_the_run() -> None:
    clipped, free = model(), model()
    norms: list[float] = []

    def grad_norm(state: RunState) -> None:  # the gradient the step used: cleared only by the next step
        norms.append(float(torch.cat([p.grad.flatten() for p in clipped.parameters()]).norm()))

    fit(clipped, rows, mse, Schedule(STEPS, rate, grad_clip=0.05, optimizer=adamw), [grad_norm])
    fit(free, rows, mse, Schedule(STEPS, rate, optimizer=adamw))
    assert max(norms) <= 0.05 * (1 + 1e-5)
    assert not same_parameters(clipped, free)


def test_a_constant_rate_is_a_float() -> None:
    by_hand, fitted = model(), model()
    hand_loop(by_hand, clip=1.0, lr=3e-3)
    rates: list[float] = []

    def seen(state: RunState) -> None:
        rates.append(state.lr)
        assert all(group["lr"] == 3e-3 for group in state.optimizer.param_groups)

    fit(fitted, rows, mse, Schedule(STEPS, 3e-3, grad_clip=1.0, optimizer=adamw), [seen])
    assert rates == [3e-3] * STEPS
    assert same_parameters(by_hand, fitted)


def test_the_default_optimiser_is_adamw_with_its_defaults_at_the_first_rate() -> None:
    net = model()
    state = fit(net, rows, mse, Schedule(0, 2e-3))
    assert isinstance(state.optimizer, torch.optim.AdamW)
    group = state.optimizer.param_groups[0]
    assert group["lr"] == 2e-3 and group["weight_decay"] == 0.01 and group["betas"] == (0.9, 0.999)
    assert state.step == 0 and math.isnan(state.lr) and math.isnan(state.loss)


def test_resuming_from_a_copy_of_step_k_ends_where_the_uninterrupted_run_ends() -> None:
    straight = model()
    fit(straight, rows, mse, Schedule(STEPS, rate, grad_clip=0.5, optimizer=adamw))

    first = model()
    state = fit(first, rows, mse, Schedule(5, rate, grad_clip=0.5, optimizer=adamw))
    # a checkpoint: the weights and the optimiser's moments, loaded into a fresh model and optimiser
    resumed = model()
    resumed.load_state_dict(copy.deepcopy(first.state_dict()))
    optimizer = adamw(resumed)
    optimizer.load_state_dict(copy.deepcopy(state.optimizer.state_dict()))
    steps: list[int] = []
    fit(
        resumed,
        rows,
        mse,
        Schedule(STEPS, rate, grad_clip=0.5),
        [lambda s: steps.append(s.step)],
        RunState(optimizer, step=5),
    )
    assert steps == list(range(6, STEPS + 1))
    assert same_parameters(straight, resumed)


def test_a_loss_may_log_something_else_than_its_objective() -> None:
    def loss(net: nn.Module, index: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        value = mse(net, index, step)
        return value + 1.0, value

    plain, shifted = model(), model()
    logged: list[float] = []
    fit(plain, rows, mse, Schedule(3, rate, optimizer=adamw), [lambda s: logged.append(s.loss)])
    fit(shifted, rows, loss, Schedule(3, rate, optimizer=adamw), [lambda s: logged.append(s.loss)])
    assert logged[:3] == logged[3:]  # a constant added to the objective: the same gradients and logged MSE
    assert same_parameters(plain, shifted)


def test_every_fires_at_multiples_the_last_step_and_optionally_the_first() -> None:
    seen: list[int] = []
    hooks = [every(4, lambda s: seen.append(s.step), last=10), every(4, lambda s: seen.append(-s.step), first=True)]
    fit(model(), rows, mse, Schedule(10, 1e-3), hooks)
    assert [s for s in seen if s > 0] == [4, 8, 10]
    assert [-s for s in seen if s < 0] == [1, 4, 8]


def test_evaluating_is_eval_mode_without_gradients_then_training_mode() -> None:
    net = model()
    net.train()
    with evaluating(net):
        assert not net.training and not torch.is_grad_enabled()
    assert net.training and torch.is_grad_enabled()
    with pytest.raises(RuntimeError), evaluating(net):
        raise RuntimeError
    assert net.training
