r"""EΔ-MHC-Geo (arXiv 2605.06729; docs/edelta.md): the operators' guarantees, ``geoanalyze verify edelta``.

``edelta`` (seconds): Q^T Q = I for beta from 1e-6 to 1e6, the closed form against
torch.linalg.solve, det Q = +1 and |lambda + 1| = 2 / sqrt(1 + t^2) > 0 (no eigenvalue -1),
det H = -1, the hybrid orthogonal exactly at gamma in {0, 1}, DDL at beta in {0, 2}, Sinkhorn
doubly stochastic, norms through a deep stack of operators, and the universal zero gradient of a
symmetric gate regulariser at gamma = 1/2. Each check is one function below, measured on random
inputs drawn in a fixed order from one generator seeded by ``--seed``.

The five models on the synthetic benchmarks are ``edelta-benchmarks``: :mod:`.edelta_benchmarks`
(its settings :mod:`.edelta_settings`, runs :mod:`.edelta_runs`, checks :mod:`.edelta_verdicts`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from .record import Check, ExperimentOptions, ExperimentResult, Stopwatch, markdown_table
from .registry import experiment
from .stat_tests import tolerance_check

if TYPE_CHECKING:
    import torch

#: the betas of the orthogonality and determinant checks: 1e-6 .. 1e6
BETAS = [10.0**e for e in range(-6, 7)]


@experiment(
    "edelta",
    summary="EΔ guarantees: Q^T Q = I for any beta, det Q = +1, det H = -1, hybrid at gamma in {0, 1}, deep norms",
    paper="arXiv 2605.06729",
    minutes_ci=0.5,
)
def edelta_checks(options: ExperimentOptions) -> ExperimentResult:
    """The operators' algebraic guarantees, measured on random inputs (on CPU, one thread: small tensors)."""
    import torch

    from .edelta_runs import cpu_threads

    with cpu_threads(torch.device("cpu"), 1):
        return guarantees(options)


def guarantees(options: ExperimentOptions) -> ExperimentResult:
    """Every check in order; the draws of one generator seeded by ``options.seed`` feed them in that order."""
    import torch

    watch = Stopwatch()
    if options.overrides:
        raise InputError("edelta takes no overrides; remove them (edelta-benchmarks takes key=value settings)")
    g = torch.Generator().manual_seed(options.seed)
    data: dict[str, Any] = {"betas": BETAS}
    orthogonal, data["orthogonality"] = orthogonality_check(g)
    u64, v64 = torch.randn(64, 16, generator=g).double(), torch.randn(64, 16, generator=g).double()
    checks = [orthogonal, closed_form_check(u64, v64), *cayley_det_checks(u64, v64), householder_check(g)]
    uh, vh, kh = (torch.randn(256, 8, generator=g) for _ in range(3))
    hybrid, data["hybrid"] = hybrid_check(uh, vh, kh)
    ddl, data["ddl"] = ddl_check(kh)
    sinkhorn, data["sinkhorn"] = sinkhorn_check(g)
    deep, data["deep_norms"] = deep_norm_check(options.seed)
    zero, data["zero_gradient"] = zero_gradient(options.seed)
    checks += [hybrid, ddl, sinkhorn, deep, zero]
    section = "### Per-beta orthogonality\n\n" + markdown_table(
        ["n, beta", "max |Q^T Q - I|"], [[key, value] for key, value in data["orthogonality"].items()]
    )
    return ExperimentResult(
        "edelta",
        "EΔ guarantees: Q^T Q = I for any beta, det Q = +1, det H = -1, hybrid at gamma in {0, 1}, deep norms",
        checks,
        data=data,
        sections=[section],
        preset=options.preset,
        seconds=watch(),
    )


def orthogonality_check(g: torch.Generator) -> tuple[Check, dict[str, float]]:
    """Q^T Q = I in float32 for every beta, n = 4 (the model's streams) and n = 64 (the negation task)."""
    import torch

    from ..models.residual import cayley_matrix

    worst, per_beta = 0.0, {}
    for n in (4, 64):
        u, v = torch.randn(256, n, generator=g), torch.randn(256, n, generator=g)
        for beta in BETAS:
            q = cayley_matrix(u, v, beta)
            err = float((q.transpose(-1, -2) @ q - torch.eye(n)).abs().max())
            per_beta[f"n={n}, beta={beta:g}"] = err
            worst = max(worst, err)
    check = tolerance_check(
        "cayley-orthogonal",
        "max |Q^T Q - I| <= 1e-5 in float32, beta in 1e-6..1e6, n in {4, 64}",
        worst,
        worst <= 1e-5,
        paper="Q^T Q = I for every input and beta (Thm 4.1)",
        detail="256 random (u, v) per n and beta",
    )
    return check, per_beta


def closed_form_check(u64: torch.Tensor, v64: torch.Tensor) -> Check:
    """The closed form against the dense solve, in float64 where the solve is well conditioned."""
    import torch

    from ..models.residual import cayley_matrix

    a = u64[:, :, None] * v64[:, None, :] - v64[:, :, None] * u64[:, None, :]
    eye = torch.eye(16, dtype=torch.float64)
    solve_err = 0.0
    for beta in (1e-3, 1e-1, 1.0, 10.0, 100.0):
        dense = torch.linalg.solve(eye + beta / 2 * a, eye - beta / 2 * a)
        solve_err = max(solve_err, float((cayley_matrix(u64, v64, beta) - dense).abs().max()))
    return tolerance_check(
        "closed-form-vs-solve",
        "max |Q_closed - solve(I + M, I - M)| <= 1e-10 (float64, n = 16, beta 1e-3..100)",
        solve_err,
        solve_err <= 1e-10,
        detail="Woodbury rank-2 closed form against torch.linalg.solve",
    )


def cayley_det_checks(u64: torch.Tensor, v64: torch.Tensor) -> list[Check]:
    """det Q = +1, and the eigenvalue nearest -1 sits exactly where the closed form says."""
    import torch

    from ..models.residual import cayley_matrix, cayley_plane

    det_err, eig_rel, eig_min = 0.0, 0.0, math.inf
    for beta in BETAS:
        q = cayley_matrix(u64[:, :8], v64[:, :8], beta)
        det_err = max(det_err, float((torch.linalg.det(q) - 1).abs().max()))
        _, _, t = cayley_plane(u64[:, :8], v64[:, :8], beta)
        distance = (torch.linalg.eigvals(q) + 1).abs().min(dim=-1).values  # (64,)
        expected = 2.0 / torch.sqrt(1.0 + t[:, 0] ** 2)
        eig_rel = max(eig_rel, float(((distance - expected).abs() / expected).max()))
        eig_min = min(eig_min, float(distance.min()))
    return [
        tolerance_check(
            "cayley-det", "max |det Q - 1| <= 1e-9 (float64)", det_err, det_err <= 1e-9, paper="det Q = +1"
        ),
        tolerance_check(
            "cayley-no-minus-one",
            "min |lambda + 1| = 2 / sqrt(1 + t^2) > 0 within 1e-6 relative (float64)",
            eig_rel,
            eig_rel <= 1e-6 and eig_min > 0,
            paper="Cayley never has eigenvalue -1 (Thm 4.6)",
            detail=f"smallest |lambda + 1| = {eig_min:.3e} (beta = 1e6)",
        ),
    ]


def householder_check(g: torch.Generator) -> Check:
    """Householder: det -1, orthogonal."""
    import torch

    from ..models.residual import householder_apply

    k = torch.randn(256, 8, generator=g).double()
    h = householder_apply(torch.eye(8, dtype=torch.float64).expand(256, 8, 8), k)
    h_det = float((torch.linalg.det(h) + 1).abs().max())
    h_orth = float((h.transpose(-1, -2) @ h - torch.eye(8, dtype=torch.float64)).abs().max())
    return tolerance_check(
        "householder-det",
        "max |det H_2(k) + 1| <= 1e-9 and |H^T H - I| <= 1e-12 (float64)",
        h_det,
        h_det <= 1e-9 and h_orth <= 1e-12,
        paper="det H = -1",
        detail=f"|H^T H - I| = {h_orth:.1e}",
    )


def _departure(m: torch.Tensor) -> float:
    """max |M^T M - I| of a batch of square matrices."""
    import torch

    return float((m.transpose(-1, -2) @ m - torch.eye(m.shape[-1])).abs().max())


def hybrid_check(uh: torch.Tensor, vh: torch.Tensor, kh: torch.Tensor) -> tuple[Check, dict[float, float]]:
    """The hybrid is orthogonal at gamma in {0, 1} only."""
    import torch

    from ..models.residual import hybrid_apply

    eye = torch.eye(kh.shape[-1]).expand(kh.shape[0], kh.shape[-1], kh.shape[-1])
    hybrid = {gamma: _departure(hybrid_apply(eye, uh, vh, 1.0, kh, gamma)) for gamma in (0.0, 0.25, 0.5, 1.0)}
    ends = max(hybrid[0.0], hybrid[1.0])
    check = tolerance_check(
        "hybrid-endpoints",
        "G_gamma orthogonal (|G^T G - I| <= 1e-5) at gamma in {0, 1}, not at gamma = 1/2",
        ends,
        ends <= 1e-5 and hybrid[0.5] > 1e-2,
        detail=f"|G^T G - I| at gamma 0.25: {hybrid[0.25]:.3f}, 0.5: {hybrid[0.5]:.3f}",
    )
    return check, hybrid


def ddl_check(kh: torch.Tensor) -> tuple[Check, dict[float, float]]:
    """DDL's I - beta k k^T is orthogonal at beta in {0, 2} only."""
    import torch

    from ..models.residual import delta_apply

    eye = torch.eye(kh.shape[-1]).expand(kh.shape[0], kh.shape[-1], kh.shape[-1])
    ddl = {beta: _departure(delta_apply(eye, kh, beta)) for beta in (0.0, 0.5, 1.0, 2.0)}
    check = tolerance_check(
        "ddl-endpoints",
        "I - beta k k^T orthogonal (<= 1e-5) at beta in {0, 2}, not at beta = 1",
        max(ddl[0.0], ddl[2.0]),
        max(ddl[0.0], ddl[2.0]) <= 1e-5 and ddl[1.0] > 0.5,
        detail=f"|A^T A - I| at beta 0.5: {ddl[0.5]:.3f}, 1: {ddl[1.0]:.3f}",
    )
    return check, ddl


def sinkhorn_check(g: torch.Generator) -> tuple[Check, dict[str, float]]:
    """Sinkhorn: doubly stochastic in 20 iterations, where its linear convergence gets there."""
    import torch

    from ..models.residual import sinkhorn

    spreads = {}
    for label, logits in (
        ("U[-1, 1], n = 2..16", [2 * torch.rand(4096, m, m, generator=g) - 1 for m in (2, 4, 8, 16)]),
        (
            "mHC init 2 I + 0.01 U[-1, 1], n = 4",
            [2.0 * torch.eye(4) + 0.01 * (2 * torch.rand(4096, 4, 4, generator=g) - 1)],
        ),
        ("2 I + U[-1, 1], n = 4", [2.0 * torch.eye(4) + (2 * torch.rand(4096, 4, 4, generator=g) - 1)]),
    ):
        ps = [sinkhorn(x) for x in logits]
        spreads[label] = max(max(float((p.sum(-1) - 1).abs().max()), float((p.sum(-2) - 1).abs().max())) for p in ps)
    sk = max(spreads["U[-1, 1], n = 2..16"], spreads["mHC init 2 I + 0.01 U[-1, 1], n = 4"])
    check = tolerance_check(
        "sinkhorn",
        "rows and columns sum to 1 within 1e-6 after 20 iterations (logits in U[-1, 1]; the mHC init)",
        sk,
        sk <= 1e-6,
        paper="mHC: doubly stochastic H_res",
        detail=f"wider logits converge slower: 2 I + U[-1, 1] leaves {spreads['2 I + U[-1, 1], n = 4']:.1e}",
    )
    return check, spreads


def deep_norm_check(seed: int) -> tuple[Check, dict[str, float]]:
    """Norms through a deep stack: 48 operators with random generators on 128-wide tokens."""
    deep = deep_norms(seed)
    orth = max(deep["cayley"], deep["householder"], deep["hybrid gamma=1"], deep["hybrid gamma=0"])
    check = tolerance_check(
        "deep-norm",
        "max | ||G_48 ... G_1 x|| - 1 | <= 1e-4 for Cayley, Householder and collapsed hybrids (float32)",
        orth,
        orth <= 1e-4,
        detail=", ".join(f"{name}: {value:.2e}" for name, value in deep.items()),
    )
    return check, deep


def zero_gradient(seed: int) -> tuple[Check, dict[str, Any]]:
    """Theorem (universal zero gradient): a symmetric f(gamma) = f(1 - gamma) has f'(1/2) = 0, so a gate at
    gamma = 1/2 for every input gets no gradient from L_gate."""
    zero = zero_gradient_check(seed)
    symmetric = max(zero["symmetric"].values())
    check = tolerance_check(
        "zero-gradient",
        "symmetric regularisers have f'(1/2) = 0 (<= 1e-12), and L_gate gives a gate at gamma = 1/2 "
        "no gradient; an asymmetric f and a biased gate get one (> 1e-3)",
        max(symmetric, zero["gate at 1/2"]),
        symmetric <= 1e-12
        and zero["gate at 1/2"] <= 1e-12
        and zero["asymmetric"] > 1e-3
        and zero["gate at bias -1.5"] > 1e-3,
        paper="Theorem 7.3 (universal zero gradient at the midpoint)",
        detail=", ".join(f"{k}: {v:.1e}" for k, v in zero["symmetric"].items())
        + f"; gate at 1/2: {zero['gate at 1/2']:.1e}, asymmetric: {zero['asymmetric']:.2f}, "
        f"gate at bias -1.5: {zero['gate at bias -1.5']:.2e}",
    )
    return check, zero


#: symmetric gate regularisers f(gamma) = f(1 - gamma) on a tensor gamma: each has f'(1/2) = 0
REGULARISERS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "4g(1-g)": lambda g: 4 * g * (1 - g),
    "entropy": lambda g: -(g * g.log() + (1 - g) * (1 - g).log()),
    "(g(1-g))^2": lambda g: (g * (1 - g)) ** 2,
    "sin(pi g)": lambda g: (math.pi * g).sin(),
}


def zero_gradient_check(seed: int) -> dict[str, Any]:
    r"""|f'(1/2)| by autograd (float64) for symmetric regularisers f(gamma) = f(1 - gamma), an asymmetric
    control gamma^2 (1 - gamma) (f'(1/2) = 1/4), and the largest |dL_gate / d(gate weight, bias)| of a
    hybrid whose gate starts at weight 0 and bias 0 (gamma = 1/2 for every input) or bias -1.5."""
    return {
        "symmetric": {name: slope_at_half(f) for name, f in REGULARISERS.items()},
        "asymmetric": slope_at_half(lambda g: g * g * (1 - g)),
        "gate at 1/2": gate_gradient(seed, 0.0),
        "gate at bias -1.5": gate_gradient(seed, -1.5),
    }


def slope_at_half(f: Callable[[torch.Tensor], torch.Tensor]) -> float:
    """|f'(1/2)| by autograd in float64."""
    import torch

    g = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(f(g), g)
    return abs(float(grad))


def gate_gradient(seed: int, bias: float) -> float:
    """The largest |dL_gate / d(gate weight, bias)| of a fresh hybrid whose gate starts at weight 0 and ``bias``."""
    import torch

    from ..models.residual import HybridResidual

    torch.manual_seed(seed)
    residual = HybridResidual(16, 4, 8, gate_bias=bias, gate_weight=1.0).double()
    residual.operator(torch.randn(4, 5, 16, dtype=torch.float64))
    aux = residual.aux_loss
    assert isinstance(aux, torch.Tensor) and residual.nets is not None
    rows = residual.nets.linear_slice("gate")
    weight, bias_grad = torch.autograd.grad(aux, [residual.nets.first.weight, residual.nets.first.bias])
    return max(float(weight[rows].abs().max()), float(bias_grad[rows].abs().max()))


def deep_norms(seed: int, depth: int = 48, d: int = 128) -> dict[str, float]:
    """max | ||y|| - 1 | after ``depth`` operators, each with fresh random generators, on unit tokens (4 streams)."""
    import torch

    from ..models.residual import make_residual

    torch.manual_seed(seed)
    x = torch.randn(2, 32, d)
    x = x / x.norm(dim=-1, keepdim=True)
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "cayley": ("cayley", {}),
        "householder": ("householder", {}),
        "hybrid gamma=1": ("hybrid", {"gate_bias": 40.0}),
        "hybrid gamma=0": ("hybrid", {"gate_bias": -40.0}),
        "hybrid gamma=0.5": ("hybrid", {"gate_bias": 0.0}),
        "ddl": ("ddl", {}),
        "mhc": ("mhc", {}),
    }
    out = {}
    with torch.no_grad():
        for name, (kind, extra) in cases.items():
            y = x
            for _ in range(depth):
                # PyTorch's default initialisation: generator outputs of order 1, so Q and H are far from I
                y = make_residual(kind, d, n_streams=4, maps=False, **extra).operator(y)
            out[name] = float((y.norm(dim=-1) - 1).abs().max())
    return out
