"""The residual operators against independent computations: dense solves, explicit matrices, float64 references."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.errors import InputError
from geoanalyze.models.residual import (
    NARROW_BRANCH,
    RESIDUALS,
    Generators,
    cayley_apply,
    cayley_factors,
    cayley_matrix,
    cayley_plane,
    delta_apply,
    entropy_proxy,
    householder_apply,
    hybrid_apply,
    iterative_cayley_apply,
    jpmhc_reference_cayley,
    make_residual,
    sinkhorn,
    skew_from_vector,
)

SETTINGS = settings(max_examples=40, deadline=None)
log_beta = st.floats(min_value=-6.0, max_value=6.0)
dims = st.integers(min_value=2, max_value=64)
seeds = st.integers(min_value=0, max_value=2**31 - 1)


pytestmark = pytest.mark.usefixtures("one_thread")


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
    width = 4 if kind in NARROW_BRANCH else 16  # JPmHC's F runs on one stream
    branch = torch.nn.Linear(width, width)
    assert residual(x, torch.nn.LayerNorm(width), branch).shape == x.shape
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


# --- the reference code's variants (protocol=reference) --------------------------------------------


def test_unit_cayley_is_the_references_normalised_rotation() -> None:
    """unit=True against the reference's bare operator: u, v normalised, v orthogonalised, dense solve."""
    u, v = _vectors(11, 6, 8, dtype=torch.float64), _vectors(12, 6, 8, dtype=torch.float64)
    beta = torch.rand(6, 1, generator=torch.Generator().manual_seed(13), dtype=torch.float64) * 5
    un = torch.nn.functional.normalize(u, dim=-1)
    vn = torch.nn.functional.normalize(v, dim=-1)
    vn = torch.nn.functional.normalize(vn - (un * vn).sum(-1, keepdim=True) * un, dim=-1)
    eye = torch.eye(8, dtype=torch.float64)
    m = beta[:, :, None] / 2 * _skew(un, vn)
    dense = torch.linalg.solve(eye + m, eye - m)
    w, core = cayley_factors(u * 7.0, v * 0.1, beta, unit=True)  # the lengths of u and v do not matter
    closed = eye - w @ core @ w.transpose(-1, -2)
    assert torch.allclose(closed, dense, atol=1e-12)


def test_entropy_proxy_on_hand_computed_gram_matrices() -> None:
    # one token, n = 2 streams of c = 2: X = [[1, 0], [0, 2]] -> G = diag(1, 4), ||G||^2 = 17, tr = 5
    x = torch.tensor([[[[1.0, 0.0], [0.0, 2.0]]]], dtype=torch.float64)  # (B=1, T=1, n=2, c=2)
    assert float(entropy_proxy(x)) == pytest.approx(1 - 17 / 25, abs=1e-9)
    # parallel streams (rank-1 G): phi = 0; n orthonormal streams: phi = 1 - 1/n
    parallel = torch.tensor([[1.0, 2.0], [2.0, 4.0], [-1.0, -2.0]], dtype=torch.float64)[None, None]
    assert float(entropy_proxy(parallel)) == pytest.approx(0.0, abs=1e-9)
    assert float(entropy_proxy(torch.eye(4, dtype=torch.float64)[None, None])) == pytest.approx(0.75, abs=1e-9)
    # streams (1, 1) and (1, 0): G = [[2, 1], [1, 1]], ||G||^2 = 7, tr = 3
    x = torch.tensor([[[[1.0, 1.0], [1.0, 0.0]]]], dtype=torch.float64)  # G = [[2, 1], [1, 1]]: 7 / 9
    assert float(entropy_proxy(x)) == pytest.approx(1 - 7 / 9, abs=1e-9)
    # sequence pooling: the mean over positions of the per-token values
    seq = torch.cat([torch.eye(4, dtype=torch.float64)[None, None], parallel.new_zeros(1, 1, 4, 4)], 1)
    seq[0, 1, :, 0] = 1.0  # four parallel streams at position 1: phi = 0
    assert entropy_proxy(seq, pool=True).shape == (1, 1, 1)
    assert float(entropy_proxy(seq, pool=True)) == pytest.approx(0.375, abs=1e-9)


def test_entropy_gate_scales_the_logit_by_one_plus_phi() -> None:
    residual = make_residual("hybrid", 8, n_streams=4, hidden=4, gate="entropy")
    nets = residual.nets
    torch.nn.init.normal_(nets.first.weight[nets.linear_slice("gate")])
    x = torch.randn(2, 3, 8)
    residual.operator(x)
    logit = nets(x)["gate"]
    expected = torch.sigmoid(logit * (1 + entropy_proxy(x.view(2, 3, 4, 2))))
    assert residual.gate is not None and torch.allclose(residual.gate, expected, atol=1e-6)


def test_jpmhc_reference_cayley_is_the_truncated_series_and_converges_to_cayley() -> None:
    raw = _vectors(21, 3, 5, 5, dtype=torch.float64)
    w = raw - raw.transpose(-1, -2)
    eye = torch.eye(5, dtype=torch.float64)
    a = 0.1
    # Y_0 = I + a W; two steps of Y <- I + a/2 W (I + Y): I + aW + a^2/2 W^2 + a^3/4 W^3
    series = eye + a * w + a**2 / 2 * w @ w + a**3 / 4 * w @ w @ w
    assert torch.allclose(jpmhc_reference_cayley(raw), series, atol=1e-12)
    # from Y_0 = I: I + a W + a^2 / 2 W^2
    assert torch.allclose(jpmhc_reference_cayley(raw, start="identity"), eye + a * w + a**2 / 2 * w @ w, atol=1e-12)
    cayley = torch.linalg.solve(eye - a / 2 * w, eye + a / 2 * w)
    assert torch.allclose(jpmhc_reference_cayley(raw, iterations=200), cayley, atol=1e-10)


def test_ddl_reference_block_erases_along_k_in_full_width_then_adds_the_branch() -> None:
    residual = make_residual("ddl-ref", 8, n_streams=4, hidden=4, pooling="sequence")
    x = torch.randn(2, 3, 8)
    branch = torch.nn.Linear(8, 8)
    norm = torch.nn.LayerNorm(8)
    out = residual.nets(x.mean(dim=1))  # the sequence mean (B, d)
    k = torch.nn.functional.normalize(out["k"], dim=-1)  # (B, d): full width
    beta = 2 * torch.sigmoid(out["beta"])  # (B, 1)
    g = torch.stack([(torch.eye(8) - beta[b] * torch.outer(k[b], k[b])) @ x[b].T for b in range(2)]).transpose(1, 2)
    assert torch.allclose(residual(x, norm, branch), g + branch(norm(g)), atol=1e-5)


def test_mhc_reference_block_matches_its_equations() -> None:
    n, c = 4, 3
    residual = make_residual("mhc-ref", n * c, n_streams=n)
    with torch.no_grad():
        residual.alpha.copy_(torch.tensor([0.7, -0.4, 0.9]))
        residual.b_pre.normal_()
    x = torch.randn(2, 5, n * c)
    branch = torch.nn.Linear(n * c, n * c)
    norm = torch.nn.LayerNorm(n * c)
    h = x / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-6) * residual.rms.weight
    wp, wq, wr = residual.phi.weight.split([n, n, n * n])
    pre = torch.sigmoid(0.7 * h @ wp.T + residual.b_pre)
    post = 2 * torch.sigmoid(-0.4 * h @ wq.T + residual.b_post)
    m = torch.exp(0.9 * (h @ wr.T).view(2, 5, n, n) + residual.b_res)
    for _ in range(20):  # the reference's plain Sinkhorn
        m = m / (m.sum(-1, keepdim=True) + 1e-8)
        m = m / (m.sum(-2, keepdim=True) + 1e-8)
    xs = x.view(2, 5, n, c)
    read = torch.einsum("btn,btnc->btc", pre, xs).repeat(1, 1, n)  # the weighted sum, replicated n times
    expected = m @ xs + post[..., None] * branch(norm(read)).view(2, 5, n, c)
    assert torch.allclose(residual(x, norm, branch), expected.flatten(-2), atol=1e-5)
    assert torch.allclose(residual.operator(x), (m @ xs).flatten(-2), atol=1e-5)


def test_jpmhc_reference_block_is_parallel_routing_at_stream_width() -> None:
    n, c = 4, 3
    residual = make_residual("jpmhc-ref", n * c, n_streams=n)
    torch.nn.init.normal_(residual.fused.weight)
    x = torch.randn(2, 5, n * c)
    branch = torch.nn.Linear(c, c)  # F at the width of one stream
    norm = torch.nn.LayerNorm(c)
    f = residual.fused(residual.norm_in(x)).view(2, 5, 3, n, n)
    pre, post = torch.softmax(f[:, :, 0], -1), torch.softmax(f[:, :, 1], -2)
    w = f[:, :, 2] - f[:, :, 2].transpose(-1, -2)
    eye = torch.eye(n)
    y = eye + 0.1 * w
    for _ in range(2):
        y = eye + 0.05 * w @ (eye + y)
    xs = x.view(2, 5, n, c)
    out = branch(norm((pre @ xs).mean(-2)))  # (B, T, c)
    expected = y @ xs + post @ out[:, :, None, :].expand(2, 5, n, c)  # H_post (y (x) 1_n)
    assert torch.allclose(residual(x, norm, branch), expected.flatten(-2), atol=1e-5)


def test_reference_sinkhorn_equals_the_log_domain_one_at_moderate_logits() -> None:
    from geoanalyze.models.residual import sinkhorn_reference

    logits = 2.0 * torch.eye(4, dtype=torch.float64) + torch.rand(64, 4, 4, dtype=torch.float64) - 0.5
    assert torch.allclose(sinkhorn_reference(logits, eps=0.0), sinkhorn(logits), atol=1e-12)
