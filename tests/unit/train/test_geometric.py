"""The synthetic geometric tasks (exactly as PAPERS.md §3 describes them, seeded) and the MSE loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from geoanalyze.errors import InputError
from geoanalyze.train.geometric import (
    NOISE,
    FitConfig,
    fit,
    make_sequences,
    negation_data,
    plane_rotation,
    random_plane,
    sequence_mse,
    unit_sequences,
)
from geoanalyze.train.loop import lr_at

pytestmark = pytest.mark.usefixtures("one_thread")


def test_plane_rotation_is_a_rotation_by_theta_in_its_plane() -> None:
    rng = np.random.default_rng(0)
    e = random_plane(rng, 7)
    r = plane_rotation(e, 0.8)
    assert np.allclose(r.T @ r, np.eye(7), atol=1e-12)
    assert math.isclose(np.linalg.det(r), 1.0, abs_tol=1e-12)
    assert math.isclose(np.trace(r), 5 + 2 * math.cos(0.8), abs_tol=1e-12)
    assert math.isclose(e[0] @ r @ e[0], math.cos(0.8), abs_tol=1e-12)
    w = rng.standard_normal(7)
    w -= e.T @ (e @ w)  # orthogonal to the plane: fixed
    assert np.allclose(r @ w, w)


def _step_angles(seq: np.ndarray) -> tuple[np.ndarray, float]:
    """The rotation of one sequence recovered from its steps: the plane's rank and the angle in it."""
    diffs = seq[1:] - seq[:-1]
    singular = np.linalg.svd(diffs, compute_uv=False)
    basis = np.linalg.svd(diffs, full_matrices=False)[2][:2]  # the plane spanned by the motion
    p0, p1 = basis @ seq[0], basis @ seq[1]
    angle = math.acos(np.clip(p0 @ p1 / (np.linalg.norm(p0) * np.linalg.norm(p1)), -1, 1))
    return singular, angle


def test_gyroscope_rotates_unit_vectors_in_one_plane_by_an_angle_in_range() -> None:
    data = make_sequences("gyroscope", seed=1, length=40, n_train=30, n_valid=5)
    assert data.train.shape == (30, 40, 16) and data.valid.shape == (5, 40, 16)
    seqs = data.train.double().numpy()
    assert np.allclose(np.linalg.norm(seqs, axis=-1), 1.0, atol=1e-6)
    angles = []
    for seq in seqs:
        singular, angle = _step_angles(seq)
        assert singular[2] < 1e-5 * singular[0]  # every step moves within one plane
        angles.append(angle)
    assert min(angles) >= 0.1 - 1e-4 and max(angles) <= 2.5 + 1e-4
    assert np.std(angles) > 0.2  # a fresh angle per sequence


def test_near_pi_single_and_multi_plane() -> None:
    single = make_sequences("near-pi", seed=2, length=12, n_train=6, n_valid=2).train.double().numpy()
    for seq in single:
        singular, angle = _step_angles(seq)
        assert singular[2] < 1e-5 * singular[0]
        assert math.isclose(angle, 3.10, abs_tol=1e-4)
    multi = make_sequences("near-pi-multi", seed=2, length=12, n_train=4, n_valid=2).train.double().numpy()
    # every plane at 3.14 rad: x_{t+1} ~ -x_t, off by |1 + e^{3.14 i}| = 2 |cos 1.57| per unit norm
    gap = np.linalg.norm(multi[:, 1:] + multi[:, :-1], axis=-1)
    assert np.allclose(gap, 2 * abs(math.cos(1.57)), atol=1e-5)
    assert np.allclose(np.linalg.norm(multi, axis=-1), 1.0, atol=1e-5)


def test_stability_is_a_fixed_unit_vector_plus_small_noise() -> None:
    data = make_sequences("stability", seed=3, n_train=20, n_valid=4)
    assert data.train.shape == (20, 128, 64)  # the paper's length: 127 prediction steps
    seqs = data.train.double().numpy()
    centre = seqs.mean(axis=1)
    assert np.allclose(np.linalg.norm(centre, axis=-1), 1.0, atol=1e-3)
    noise = seqs - centre[:, None]
    assert math.isclose(noise.std(), NOISE, rel_tol=0.05)
    assert np.linalg.norm(centre[0] - centre[1]) > 0.5  # a new vector per sequence


def test_tasks_are_pure_functions_of_the_seed() -> None:
    a = make_sequences("gyroscope", seed=5, length=8, n_train=4, n_valid=2)
    b = make_sequences("gyroscope", seed=5, length=8, n_train=4, n_valid=2)
    c = make_sequences("gyroscope", seed=6, length=8, n_train=4, n_valid=2)
    assert torch.equal(a.train, b.train) and torch.equal(a.valid, b.valid)
    assert not torch.equal(a.train, c.train)
    assert not torch.equal(a.train[:2], a.valid)  # the splits differ
    x, v = negation_data(1, 10)
    assert x.shape == (10, 64) and v.shape == (500, 64)
    assert torch.equal(x, negation_data(1, 10)[0])
    u = unit_sequences(0, 32)
    assert u.shape == (50, 100, 32)
    assert torch.allclose(u.norm(dim=-1), torch.ones(50, 100))


def test_the_schedule_is_the_shared_warmup_cosine() -> None:
    config = FitConfig(steps=200, warmup_steps=10, lr=1e-3)
    assert lr_at(5, config) == pytest.approx(5e-4)
    assert lr_at(10, config) == pytest.approx(1e-3)
    assert lr_at(200, config) == pytest.approx(1e-4)  # cosine down to lr / 10


def test_fit_learns_a_linear_map_and_records_evaluations() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 4)
    w = torch.randn(4, 4)
    model = torch.nn.Linear(4, 4)

    def evaluate() -> dict[str, float]:
        return {"valid_mse": float(torch.nn.functional.mse_loss(model(x), x @ w))}

    config = FitConfig(steps=120, batch_size=32, lr=5e-2, warmup_steps=5, eval_every=40, weight_decay=0.0, seed=1)
    history = fit(model, x, x @ w, config, evaluate, torch.device("cpu")).records
    assert [r["step"] for r in history] == [40, 80, 120]
    assert history[-1]["valid_mse"] < 1e-3 < history[0]["train_loss"]


def test_sequence_mse_is_next_step_mse() -> None:
    seqs = torch.randn(3, 5, 2)
    identity = torch.nn.Identity()
    expected = float(((seqs[:, 1:] - seqs[:, :-1]) ** 2).mean())
    assert sequence_mse(identity, seqs, torch.device("cpu"), chunk=2) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: make_sequences("spiral", 0), "unknown sequence task 'spiral'"),
        (lambda: make_sequences("gyroscope", 0, length=1), "at least 2"),
        (lambda: negation_data(0, 0), "train_size"),
        (lambda: FitConfig(steps=0), "steps"),
        (lambda: FitConfig(lr=0.0), "lr"),
    ],
)
def test_bad_input_is_one_clear_error(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=message):
        call()
