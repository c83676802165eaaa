"""The residual operators against independent computations: dense solves, explicit matrices, float64 references."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.errors import InputError
from geoanalyze.models.residual import (
    RESIDUALS,
    Generators,
    cayley_apply,
    cayley_matrix,
    cayley_plane,
    delta_apply,
    householder_apply,
    hybrid_apply,
    iterative_cayley_apply,
    make_residual,
    sinkhorn,
    skew_from_vector,
)

SETTINGS = settings(max_examples=40, deadline=None)
log_beta = st.floats(min_value=-6.0, max_value=6.0)
dims = st.integers(min_value=2, max_value=64)
seeds = st.integers(min_value=0, max_value=2**31 - 1)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Small tensors: one intra-op thread is faster (and much faster on a loaded machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _vectors(seed: int, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _skew(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return u[..., :, None] * v[..., None, :] - v[..., :, None] * u[..., None, :]


# --- Cayley ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4, 16, 64])
@pytest.mark.parametrize("beta", [1e-4, 0.1, 1.0, 7.0, 100.0])
def test_cayley_closed_form_matches_dense_solve(n: int, beta: float) -> None:
    u, v = _vectors(1, 8, n, dtype=torch.float64), _vectors(2, 8, n, dtype=torch.float64)
    eye = torch.eye(n, dtype=torch.float64)
    m = beta / 2 * _skew(u, v)
    dense = torch.linalg.solve(eye + m, eye - m)
    assert torch.allclose(cayley_matrix(u, v, beta), dense, atol=1e-11, rtol=0)


def test_cayley_apply_equals_matrix_product_on_columns() -> None:
    u, v, x = _vectors(3, 5, 7, 4), _vectors(4, 5, 7, 4), _vectors(5, 5, 7, 4, 3)
    beta = torch.rand(5, 7, 1, generator=torch.Generator().manual_seed(6)) * 5
    explicit = cayley_matrix(u, v, beta) @ x
    assert torch.allclose(cayley_apply(x, u, v, beta), explicit, atol=1e-5)


@SETTINGS
@given(n=dims, exponent=log_beta, seed=seeds)
def test_cayley_is_orthogonal_for_any_beta_in_float32(n: int, exponent: float, seed: int) -> None:
    u, v = _vectors(seed, 4, n), _vectors(seed + 1, 4, n)
    q = cayley_matrix(u, v, 10.0**exponent)
    assert (q.transpose(-1, -2) @ q - torch.eye(n)).abs().max() <= 1e-5


@SETTINGS
@given(n=st.integers(2, 12), exponent=log_beta, seed=seeds)
def test_cayley_det_is_plus_one_and_never_minus_one(n: int, exponent: float, seed: int) -> None:
    u, v = _vectors(seed, 3, n, dtype=torch.float64), _vectors(seed + 1, 3, n, dtype=torch.float64)
    beta = 10.0**exponent
    q = cayley_matrix(u, v, beta)
    assert torch.allclose(torch.linalg.det(q), torch.ones(3, dtype=torch.float64), atol=1e-9)
    # the eigenvalue nearest -1 is e^{i phi} with cos phi = (1 - t^2) / (1 + t^2): |lambda + 1| = 2 / sqrt(1 + t^2)
    _, _, t = cayley_plane(u, v, beta)
    distance = (torch.linalg.eigvals(q) + 1).abs().min(dim=-1).values
    expected = 2.0 / torch.sqrt(1 + t[:, 0] ** 2)
    assert torch.all(distance > 0)
    assert torch.allclose(distance, expected, rtol=1e-6, atol=0)


def test_cayley_nearly_parallel_generators_stay_orthogonal() -> None:
    u = _vectors(7, 16, 8)
    v = u + 1e-4 * _vectors(8, 16, 8)  # one Gram-Schmidt pass alone would lose orthogonality here
    q = cayley_matrix(u, v, 1e6)
    assert (q.transpose(-1, -2) @ q - torch.eye(8)).abs().max() <= 1e-5


def test_cayley_zero_generators_give_identity_and_finite_gradients() -> None:
    u = torch.zeros(2, 4, requires_grad=True)
    v = torch.randn(2, 4, requires_grad=True)
    x = torch.randn(2, 4, 3)
    y = cayley_apply(x, u, v, 1.0)
    assert torch.allclose(y, x)
    y.sum().backward()
    assert u.grad is not None and torch.isfinite(u.grad).all() and v.grad is not None and torch.isfinite(v.grad).all()


def test_cayley_gradients_match_finite_differences() -> None:
    u, v, x = (
        _vectors(9, 2, 5, dtype=torch.float64),
        _vectors(10, 2, 5, dtype=torch.float64),
        _vectors(11, 2, 5, 2, dtype=torch.float64),
    )
    beta = torch.tensor([[0.7], [3.0]], dtype=torch.float64)
    for tensor in (u, v, x, beta):
        tensor.requires_grad_(True)
    assert torch.autograd.gradcheck(cayley_apply, (x, u, v, beta))


# --- Householder, DDL, hybrid ----------------------------------------------------------------------


@SETTINGS
@given(n=st.integers(2, 16), seed=seeds)
def test_householder_matches_explicit_matrix_det_minus_one(n: int, seed: int) -> None:
    k = _vectors(seed, 3, n, dtype=torch.float64)
    unit = k / k.norm(dim=-1, keepdim=True)
    explicit = torch.eye(n, dtype=torch.float64) - 2 * unit[:, :, None] * unit[:, None, :]
    h = householder_apply(torch.eye(n, dtype=torch.float64).expand(3, n, n), k)
    assert torch.allclose(h, explicit, atol=1e-12)
    assert torch.allclose(torch.linalg.det(h), -torch.ones(3, dtype=torch.float64), atol=1e-9)
    assert torch.allclose(householder_apply(unit[..., None], k), -unit[..., None], atol=1e-12)  # negates k


@SETTINGS
@given(n=st.integers(2, 16), seed=seeds, beta=st.sampled_from([0.0, 2.0]))
def test_ddl_is_orthogonal_exactly_at_beta_0_and_2(n: int, seed: int, beta: float) -> None:
    k = _vectors(seed, 3, n)
    a = delta_apply(torch.eye(n).expand(3, n, n), k, beta)
    assert (a.transpose(-1, -2) @ a - torch.eye(n)).abs().max() <= 1e-5


@SETTINGS
@given(n=st.integers(2, 16), seed=seeds, beta=st.floats(0.05, 1.95))
def test_ddl_is_not_orthogonal_between(n: int, seed: int, beta: float) -> None:
    k = _vectors(seed, 1, n)
    a = delta_apply(torch.eye(n)[None], k, beta)
    # along k the eigenvalue is 1 - beta, elsewhere 1: ||A^T A - I||_2 = |(1 - beta)^2 - 1|
    deviation = float(torch.linalg.matrix_norm(a.transpose(-1, -2) @ a - torch.eye(n), ord=2).max())
    assert math.isclose(deviation, abs((1 - beta) ** 2 - 1), rel_tol=1e-4, abs_tol=1e-6)


@SETTINGS
@given(n=st.integers(2, 16), seed=seeds, gamma=st.sampled_from([0.0, 1.0]), exponent=log_beta)
def test_hybrid_is_orthogonal_at_gamma_0_and_1(n: int, seed: int, gamma: float, exponent: float) -> None:
    u, v, k = _vectors(seed, 2, n), _vectors(seed + 1, 2, n), _vectors(seed + 2, 2, n)
    g = hybrid_apply(torch.eye(n).expand(2, n, n), u, v, 10.0**exponent, k, gamma)
    assert (g.transpose(-1, -2) @ g - torch.eye(n)).abs().max() <= 1e-5


def test_hybrid_interpolates_and_is_not_orthogonal_at_half() -> None:
    u, v, k, x = _vectors(1, 3, 6), _vectors(2, 3, 6), _vectors(3, 3, 6), _vectors(4, 3, 6, 2)
    gamma = torch.tensor([[0.3], [0.5], [0.9]])
    expected = 0.0 + gamma[..., None] * cayley_apply(x, u, v, 2.0) + (1 - gamma[..., None]) * householder_apply(x, k)
    assert torch.allclose(hybrid_apply(x, u, v, 2.0, k, gamma), expected, atol=1e-6)
    g = hybrid_apply(torch.eye(6).expand(3, 6, 6), u, v, 2.0, k, 0.5)
    assert (g.transpose(-1, -2) @ g - torch.eye(6)).abs().max() > 1e-2


# --- Sinkhorn, iterative Cayley ------------------------------------------------------------------


@SETTINGS
@given(n=st.integers(2, 8), seed=seeds)
def test_sinkhorn_is_doubly_stochastic(n: int, seed: int) -> None:
    logits = 2 * torch.rand(16, n, n, generator=torch.Generator().manual_seed(seed)) - 1
    p = sinkhorn(logits)
    assert (p >= 0).all()
    assert (p.sum(-1) - 1).abs().max() <= 1e-6
    assert (p.sum(-2) - 1).abs().max() <= 1e-6


def test_sinkhorn_matches_plain_iteration_and_survives_large_logits() -> None:
    logits = _vectors(5, 4, 4, dtype=torch.float64)
    m = logits.exp()
    for _ in range(20):
        m = m / m.sum(-1, keepdim=True)
        m = m / m.sum(-2, keepdim=True)
    assert torch.allclose(sinkhorn(logits), m, atol=1e-12)
    big = sinkhorn(torch.full((3, 3), 500.0) + torch.eye(3))  # exp(500) overflows float32; the log domain does not
    assert torch.isfinite(big).all()


def test_skew_from_vector_is_skew_symmetric() -> None:
    w = skew_from_vector(_vectors(6, 2, 10), 5)
    assert torch.allclose(w, -w.transpose(-1, -2))
    assert w.shape == (2, 5, 5)


def test_iterative_cayley_converges_to_the_exact_transform() -> None:
    n = 6
    w = skew_from_vector(_vectors(7, 3, n * (n - 1) // 2, dtype=torch.float64), n)
    m = w / (2 * (1 + w.flatten(-2).norm(dim=-1)[..., None, None]))
    x = _vectors(8, 3, n, 2, dtype=torch.float64)
    eye = torch.eye(n, dtype=torch.float64)
    exact = torch.linalg.solve(eye + m, (eye - m) @ x)
    errors = [float((iterative_cayley_apply(x, m, k) - exact).abs().max()) for k in (1, 3, 10, 40)]
    assert errors == sorted(errors, reverse=True)
    assert errors[-1] < 1e-10


# --- modules and bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", RESIDUALS)
def test_every_residual_keeps_the_shape(kind: str) -> None:
    residual = make_residual(kind, 16, n_streams=4, hidden=8)
    x = torch.randn(2, 5, 16)
    branch = torch.nn.Linear(16, 16)
    assert residual(x, torch.nn.LayerNorm(16), branch).shape == x.shape
    assert residual.operator(x).shape == x.shape


def test_ddl_block_update_matches_formula() -> None:
    residual = make_residual("ddl", 8, n_streams=4, hidden=4)
    x, v = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    out = residual(x, lambda h: h, lambda h: v)
    nets = residual.nets(x)
    k = torch.nn.functional.normalize(nets["k"], dim=-1)  # (B, T, n)
    beta = 2 * torch.sigmoid(nets["beta"])  # (B, T, 1)
    xs, vs = x.view(2, 3, 4, 2), v.view(2, 3, 4, 2)
    expected = torch.empty_like(xs)
    for b in range(2):
        for t in range(3):
            kk = k[b, t][:, None]
            value = vs[b, t].T @ k[b, t]  # v = V^T k
            expected[b, t] = (torch.eye(4) - beta[b, t] * kk @ kk.T) @ xs[b, t] + beta[b, t] * kk @ value[None]
    assert torch.allclose(out, expected.flatten(-2), atol=1e-6)


def test_fused_generators_equal_separate_networks() -> None:
    nets = Generators(6, 4, {"a": 3, "b": 1}, {"g": 1})
    x = torch.randn(2, 5, 6)
    out = nets(x)
    w, b = nets.first.weight, nets.first.bias
    for i, name in enumerate(("a", "b")):
        hidden = torch.nn.functional.gelu(x @ w[4 * i : 4 * i + 4].T + b[4 * i : 4 * i + 4])
        assert torch.allclose(out[name], nets.second[name](hidden), atol=1e-6)
    assert torch.allclose(out["g"], x @ w[8:9].T + b[8:9], atol=1e-6)


def test_hybrid_module_equals_the_functional_form() -> None:
    residual = make_residual("hybrid", 12, n_streams=4, gate_bias=0.4)
    torch.nn.init.normal_(residual.nets.first.weight[residual.nets.linear_slice("gate")])
    x = torch.randn(2, 3, 12)
    out = residual.nets(x)
    gamma = torch.sigmoid(out["gate"])
    beta = torch.nn.functional.softplus(out["beta"])
    expected = hybrid_apply(x.view(2, 3, 4, 3), out["u"], out["v"], beta, out["k"], gamma)
    assert torch.allclose(residual.operator(x), expected.flatten(-2), atol=1e-5)


def test_orthogonal_operators_preserve_token_norms() -> None:
    x = torch.randn(3, 7, 32)
    for kind, extra in (
        ("cayley", {}),
        ("householder", {}),
        ("hybrid", {"gate_bias": 40.0}),
        ("hybrid", {"gate_bias": -40.0}),
    ):
        residual = make_residual(kind, 32, n_streams=4, **extra)
        assert torch.allclose(residual.operator(x).norm(dim=-1), x.norm(dim=-1), rtol=1e-5)


def test_hybrid_gate_regulariser_is_four_gamma_one_minus_gamma() -> None:
    residual = make_residual("hybrid", 8, n_streams=2, gate_bias=0.3, gate_weight=0.1)
    residual.operator(torch.randn(2, 3, 8))
    gamma = torch.sigmoid(torch.tensor(0.3))
    assert residual.gate is not None and torch.allclose(residual.gate, gamma.expand(2, 3, 1))
    assert math.isclose(
        float(torch.as_tensor(residual.aux_loss).detach()), float(0.1 * 4 * gamma * (1 - gamma)), rel_tol=1e-6
    )


def test_sequence_pooling_mixes_positions_and_token_pooling_does_not() -> None:
    x = torch.randn(1, 6, 16)
    changed = x.clone()
    changed[0, -1] += 3.0
    for pooling, causal in (("token", True), ("sequence", False)):
        residual = make_residual("cayley", 16, n_streams=4, pooling=pooling)
        torch.nn.init.normal_(residual.nets.second["beta"].bias, 3.0)
        same = torch.allclose(residual.operator(x)[0, :-1], residual.operator(changed)[0, :-1])
        assert same is causal


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: delta_apply(torch.randn(3, 1), torch.randn(3), 2.5), "beta must lie in"),
        (lambda: delta_apply(torch.randn(3, 1), torch.randn(3), torch.tensor([-0.1, 1.0])), "beta must lie in"),
        (
            lambda: hybrid_apply(torch.randn(3, 1), torch.randn(3), torch.randn(3), 1.0, torch.randn(3), 1.5),
            "gamma must lie in",
        ),
        (lambda: make_residual("cayley", 10, n_streams=4), "not divisible"),
        (lambda: make_residual("nope", 8), "unknown residual 'nope'"),
        (lambda: make_residual("cayley", 8, pooling="mean"), "unknown pooling"),
        (lambda: make_residual("hybrid", 8, gate_bias=math.inf), "gate_bias"),
        (lambda: make_residual("hybrid", 8, gate_weight=-1.0), "gate_weight"),
        (lambda: make_residual("ddl", 8, beta_max=3.0), "beta_max"),
        (lambda: sinkhorn(torch.zeros(2, 2), iterations=0), "iteration"),
    ],
)
def test_bad_input_is_one_clear_error(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=message):
        call()
