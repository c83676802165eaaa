"""The reference protocol's building blocks against independent computations: task invariants, the legacy RNG
order, the norm-deviation metric on known maps, the negation data and loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geoanalyze.errors import InputError
from geoanalyze.experiments.edelta_reference import (
    fit_reference_negation,
    model_norm_deviation,
    plane_rollout,
    predict_zero_mse,
    reference_negation_data,
    reference_sequences,
)
from geoanalyze.models.edelta import BareOperator


def _rotation(d: int, planes: list[tuple[int, int]], theta: float) -> np.ndarray:
    r = np.eye(d)
    for i, j in planes:
        r[i, i] = r[j, j] = np.cos(theta)
        r[i, j], r[j, i] = -np.sin(theta), np.sin(theta)
    return r


def test_plane_rollout_equals_repeated_matrix_products() -> None:
    start = np.random.default_rng(0).standard_normal(6)
    planes = [(0, 3), (1, 5)]
    r = _rotation(6, planes, 2.2)
    expected = [start]
    for _ in range(9):
        expected.append(r @ expected[-1])
    assert np.allclose(plane_rollout(start, planes, 2.2, 10), np.stack(expected), atol=1e-12)


def test_gyroscope_rotates_one_axis_aligned_plane_per_sequence_in_the_references_draw_order() -> None:
    data = reference_sequences("gyroscope", length=12, n_train=40, n_valid=10)
    x = data.train.double().numpy()
    assert data.train.shape == (40, 12, 16) and data.valid.shape == (10, 12, 16)
    for seq in x:
        moving = np.flatnonzero(np.abs(seq - seq[0]).max(axis=0) > 1e-6)
        assert len(moving) == 2  # exactly one coordinate plane (i, j), i < j
        i, j = moving
        step = np.arctan2(seq[1, j], seq[1, i]) - np.arctan2(seq[0, j], seq[0, i])
        assert 0.1 - 1e-5 <= step % (2 * np.pi) <= 2.5 + 1e-5
        assert np.allclose(np.linalg.norm(seq, axis=-1), 1.0, atol=1e-6)
    # the reference's draws: np.random.seed(42); per sequence randn(16), uniform, randint(0, 15), randint(i + 1, 16)
    rng = np.random.RandomState(42)
    v = rng.randn(16)
    theta, i = rng.uniform(0.1, 2.5), rng.randint(0, 15)
    j = rng.randint(i + 1, 16)
    expected = _rotation(16, [(i, j)], theta) @ (v / np.linalg.norm(v))
    assert np.allclose(x[0, 1], expected, atol=1e-6)
    assert torch.equal(reference_sequences("gyroscope", length=12, n_train=40, n_valid=10).train, data.train)


def test_near_pi_uses_one_rotation_for_the_whole_dataset() -> None:
    for task, planes, theta in (
        ("near-pi", [(0, 1)], 3.10),
        ("near-pi-multi", [(2 * p, 2 * p + 1) for p in range(32)], 3.14),
    ):
        data = reference_sequences(task, length=5)
        assert data.train.shape == (1000, 5, 64) and data.valid.shape == (500, 5, 64)  # the reference's 1000 / 500
        r = torch.from_numpy(_rotation(64, planes, theta)).float()
        for split in (data.train, data.valid):
            assert torch.allclose(split[:, 1:], split[:, :-1] @ r.T, atol=1e-5)  # x_{t+1} = R x_t, one R
        first = np.random.RandomState(42 + 1000).randn(64)  # the validation trajectories: seed + 1000
        assert np.allclose(data.valid[0, 0].numpy(), first / np.linalg.norm(first), atol=1e-6)


def test_stability_is_a_unit_key_plus_small_noise() -> None:
    data = reference_sequences("stability", length=50, n_train=30, n_valid=5)
    key = data.train.double().mean(dim=1)
    assert torch.allclose(key.norm(dim=-1), torch.ones(30, dtype=torch.float64), atol=1e-3)
    noise = data.train.double() - key[:, None]
    assert 0.0008 < float(noise.std()) < 0.0012
    assert predict_zero_mse(data.valid) == pytest.approx(1 / 64, rel=1e-2)  # the plateau
    with pytest.raises(InputError, match="unknown sequence task"):
        reference_sequences("parity")
    with pytest.raises(InputError, match="at least 2"):
        reference_sequences("stability", length=1)


class _Scale(torch.nn.Module):
    def __init__(self, factors: torch.Tensor) -> None:
        super().__init__()
        self.factors = factors

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factors


def test_norm_deviation_on_known_maps() -> None:
    probe = torch.nn.functional.normalize(torch.randn(4, 10, 6), dim=-1)
    assert model_norm_deviation(_Scale(torch.tensor(2.0)), probe)["deviation"] == pytest.approx(1.0)
    # a norm growing along the positions, 1 + t / 10: mean over positions of t / 10
    ramp = (1 + torch.arange(10) / 10)[None, :, None]
    assert model_norm_deviation(_Scale(ramp), probe)["deviation"] == pytest.approx(0.45)
    # the sequence mean is taken before the absolute value: norms 0.5 and 1.5 average to 1
    halves = torch.tensor([0.5, 1.5, 0.5, 1.5])[:, None, None]
    assert model_norm_deviation(_Scale(halves), probe)["deviation"] == pytest.approx(0.0, abs=1e-6)


def test_negation_data_and_loop() -> None:
    train, valid = reference_negation_data(42, 10)
    torch.manual_seed(999)
    assert torch.equal(valid, torch.randn(500, 64))
    torch.manual_seed(42)
    assert torch.equal(train, torch.randn(10, 64))
    op = BareOperator("hybrid", d=64, hidden=8, gate_weight=0.5, reference=True)
    history = fit_reference_negation(op, train, valid[:50], steps=9, eval_every=4)
    assert [r["step"] for r in history] == [1, 4, 8, 9]
    assert all(-1 <= r["cosine"] <= 1 and 0 < r["gate"] < 1 for r in history)
    ddl = fit_reference_negation(BareOperator("ddl", d=64, hidden=8, reference=True), train, valid[:50], 2, 1)
    assert 0 <= ddl[-1]["beta"] <= 2 and np.isnan(ddl[-1]["gate"])
    with pytest.raises(InputError, match="at least 1"):
        reference_negation_data(0, 0)
