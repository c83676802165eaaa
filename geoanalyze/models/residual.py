r"""Residual operators: what a block does to its shortcut, behind one small protocol.

The residual state of a token is read as a matrix X in R^{n x c}: n streams of c = d / n
features each (mHC's layout; n = 1 is the plain vector). Every operator mixes the streams with
an n x n matrix computed from the token, so it costs O(n c) per token and never builds a
(B, T, d, d) matrix. The kinds (:data:`RESIDUALS`) and their updates are tabled in docs/edelta.md;
the ``-ref`` kinds reproduce the baselines of the reference code (arash-shahmansoori/edelta,
commit f51372f), the plain names are our variants.

The protocol: ``residual(x, norm, branch)`` returns X' (B, T, d) given the block's LayerNorm and
branch F; ``residual.operator(x)`` is the shortcut map G alone (the "bare operator");
``residual.aux_loss`` is the regulariser of the last forward pass (0 but for the gate) and
``residual.gate`` its gamma (None without a gate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from ..errors import InputError

RESIDUALS = ("plain", "ddl", "mhc", "jpmhc", "cayley", "householder", "hybrid", "ddl-ref", "mhc-ref", "jpmhc-ref")
POOLINGS = ("token", "sequence")
GATES = ("plain", "entropy")
#: the kinds whose branch F runs at the width of one stream (d / n), not d
NARROW_BRANCH = ("jpmhc-ref",)
JPMHC_REF_ALPHA = 0.1
JPMHC_REF_ITERATIONS = 2
SINKHORN_ITERATIONS = 20
JPMHC_ITERATIONS = 3
_EPS = 1e-12

Branch = Callable[[torch.Tensor], torch.Tensor]


# --- the operators as pure functions -------------------------------------------------------------


def _as_streams(x: torch.Tensor, n: int) -> torch.Tensor:
    """(..., d) -> (..., n, d / n)."""
    if x.shape[-1] % n:
        raise InputError(f"width {x.shape[-1]} is not divisible by the stream count {n}; choose n dividing the width")
    return x.unflatten(-1, (n, x.shape[-1] // n))


def cayley_plane(u: torch.Tensor, v: torch.Tensor, beta: torch.Tensor | float) -> tuple[torch.Tensor, ...]:
    r"""The rank-2 structure of A = u v^T - v u^T: an orthonormal pair (e1, e2) and t = beta/2 |u ∧ v|.

    A = r (e1 e2^T - e2 e1^T) with e1 = u / |u|, e2 = v_perp / |v_perp|, v_perp = v - (e1 . v) e1,
    r = |u| |v_perp| = sqrt(|u|^2 |v|^2 - (u . v)^2). Orthogonalising first (rather than taking
    |u|^2 |v|^2 - (u . v)^2 directly) avoids the cancellation when u and v are nearly parallel,
    and Q stays orthogonal to round-off however large beta is (no (I + M) with entries ~ beta).

    Returns e1, e2 (..., n) and t (..., 1).
    """
    beta = torch.as_tensor(beta, dtype=u.dtype, device=u.device)
    norm_u = u.norm(dim=-1, keepdim=True)
    e1 = u / norm_u.clamp_min(_EPS)
    v_perp = v - (e1 * v).sum(-1, keepdim=True) * e1
    # Gram-Schmidt twice ("twice is enough"): one pass leaves e1 . e2 ~ eps |v| / |v_perp|, large
    # when v is nearly parallel to u; the second brings it to round-off.
    v_perp = v_perp - (e1 * v_perp).sum(-1, keepdim=True) * e1
    norm_v = v_perp.norm(dim=-1, keepdim=True)
    e2 = v_perp / norm_v.clamp_min(_EPS)
    t = 0.5 * beta * norm_u * norm_v
    return e1, e2, t


def lowrank_apply(x: torch.Tensor, w: torch.Tensor, core: torch.Tensor) -> torch.Tensor:
    r"""(I - W K W^T) x: every shortcut here is the identity minus a rank-r update (r <= 3).

    x (..., n, c), W (..., n, r), K (..., r, r). When n > c (vectors, n = 64, c = 1) it is applied as
    x - W (K (W^T x)), O(n r c) per token, the n x n matrix never formed. When n <= c (the model's
    4 streams of 32) the per-token n x n matrix is no larger than the token itself, and one batched
    n x n product beats three skinny ones (2 to 4x on CPU), so it is formed: never a d x d one.
    """
    n, c = x.shape[-2], x.shape[-1]
    if n <= c:
        eye = torch.eye(n, dtype=x.dtype, device=x.device)
        return (eye - (w @ core) @ w.transpose(-1, -2)) @ x  # (..., n, n) @ (..., n, c)
    return x - w @ (core @ (w.transpose(-1, -2) @ x))  # (..., n, c)


def cayley_factors(
    u: torch.Tensor, v: torch.Tensor, beta: torch.Tensor | float, unit: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""W = [e1, e2] (..., n, 2) and K (..., 2, 2) with Q = I - W K W^T the Cayley transform of A = u v^T - v u^T.

    With A = r S, S = e1 e2^T - e2 e1^T (:func:`cayley_plane`) and t = beta r / 2: S^2 = -P, P = W W^T
    the projector on span(e1, e2), so (I + t S)^{-1} = I - P + (P - t S) / (1 + t^2) (Woodbury for a
    rank-2 update, solved once by hand) and

        Q = I - 2t / (1 + t^2) (t P + S),   K = 2t / (1 + t^2) [[t, 1], [-1, t]],

    a rotation by phi in the (e1, e2) plane with cos phi = (1 - t^2) / (1 + t^2) > -1: orthogonal,
    det +1, never the eigenvalue -1, for every beta.

    ``unit=True`` is the reference's bare operator: u and v normalised and orthogonalised before
    A is formed, so |u| = |v_perp| = 1 and t = beta / 2.
    """
    e1, e2, t = cayley_plane(u, v, beta)
    if unit:
        t = 0.5 * torch.as_tensor(beta, dtype=u.dtype, device=u.device).expand_as(t)
    scale = 2.0 * t / (1.0 + t * t)  # (..., 1)
    one = torch.ones_like(t)
    core = torch.stack([torch.cat([t, one], -1), torch.cat([-one, t], -1)], -2) * scale.unsqueeze(-1)
    return torch.stack([e1, e2], -1), core  # (..., n, 2), (..., 2, 2)


def cayley_apply(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, beta: torch.Tensor | float) -> torch.Tensor:
    r"""Q x for the Cayley transform Q = (I + beta/2 A)^{-1} (I - beta/2 A), A = u v^T - v u^T, in closed form.

    Q = I - W K W^T (:func:`cayley_factors`), applied in O(n c) per token without a solve.

    Parameters
    ----------
    x : (..., n, c) the vectors (c columns per token; c = 1 for plain vectors).
    u, v : (..., n) generators, with x's leading dimensions (or broadcastable to them).
    beta : scalar or (..., 1) rotation magnitude.
    """
    w, core = cayley_factors(u, v, beta)
    return lowrank_apply(x, w, core)


def cayley_matrix(u: torch.Tensor, v: torch.Tensor, beta: torch.Tensor | float) -> torch.Tensor:
    """The n x n matrix Q of :func:`cayley_apply` (for checks and small n), (..., n, n)."""
    n = u.shape[-1]
    eye = torch.eye(n, dtype=u.dtype, device=u.device).expand(*u.shape[:-1], n, n)
    return cayley_apply(eye, u, v, beta)


def householder_apply(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    r"""H_2(k) x = x - 2 k (k . x) with k normalised to unit length; x (..., n, c), k (..., n).

    H_2 is the reflection through the hyperplane k^⊥: orthogonal, symmetric, det -1, eigenvalue -1
    along k (the one thing a Cayley rotation cannot do).
    """
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(_EPS)
    return x - 2.0 * k.unsqueeze(-1) * (k.unsqueeze(-2) @ x)  # (..., n, 1) (..., 1, c)


def delta_apply(x: torch.Tensor, k: torch.Tensor, beta: torch.Tensor | float) -> torch.Tensor:
    r"""DDL's erase step (I - beta k k^T) x, k unit; orthogonal exactly at beta in {0, 2}.

    beta must lie in [0, 2] (a float out of range raises InputError; a tensor is checked too).
    """
    _check_range("beta", beta, 0.0, 2.0, "DDL's beta lies in [0, 2]: 0 keeps x, 2 reflects it")
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(_EPS)
    beta = torch.as_tensor(beta, dtype=x.dtype, device=x.device)
    dot = torch.einsum("...n,...nc->...c", k, x).unsqueeze(-2)  # (..., 1, c)
    return x - (beta.unsqueeze(-1) if beta.ndim else beta) * k.unsqueeze(-1) * dot


def hybrid_apply(
    x: torch.Tensor,
    u: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor | float,
    k: torch.Tensor,
    gamma: torch.Tensor | float,
) -> torch.Tensor:
    r"""G_gamma x = gamma Q x + (1 - gamma) H_2(k) x; orthogonal exactly at gamma in {0, 1}.

    Between them it is a convex combination of a rotation and a reflection, which shrinks some
    directions (at gamma = 1/2 and Q = H, by as much as the angle between them): hence L_gate.
    """
    _check_range("gamma", gamma, 0.0, 1.0, "the gate gamma is a weight in [0, 1]")
    gamma = torch.as_tensor(gamma, dtype=x.dtype, device=x.device)
    g = gamma.unsqueeze(-1) if gamma.ndim else gamma
    return g * cayley_apply(x, u, v, beta) + (1.0 - g) * householder_apply(x, k)


def sinkhorn(logits: torch.Tensor, iterations: int = SINKHORN_ITERATIONS) -> torch.Tensor:
    r"""Sinkhorn-Knopp in the log domain: exp(logits) scaled to a doubly stochastic matrix, (..., n, n).

    Alternately subtracts each row's and each column's logsumexp (20 iterations by default, as
    mHC); the log domain keeps large logits from overflowing exp. Columns sum to 1 exactly after
    the last half-step; rows converge linearly.
    """
    if iterations < 1:
        raise InputError(f"Sinkhorn needs at least 1 iteration, got {iterations}")
    log_p = logits
    for _ in range(iterations):
        log_p = log_p - torch.logsumexp(log_p, dim=-1, keepdim=True)  # rows
        log_p = log_p - torch.logsumexp(log_p, dim=-2, keepdim=True)  # columns
    return log_p.exp()


def sinkhorn_reference(logits: torch.Tensor, iterations: int = SINKHORN_ITERATIONS, eps: float = 1e-8) -> torch.Tensor:
    r"""The reference code's Sinkhorn-Knopp: M = exp(logits), then ``iterations`` times rows then columns
    divided by their sums + eps. The same matrix as :func:`sinkhorn` while exp does not overflow, in
    about a third of the kernels (no logsumexp), as the mHC baseline of the reference protocol uses it.
    """
    m = logits.exp()
    for _ in range(iterations):
        m = m / (m.sum(dim=-1, keepdim=True) + eps)
        m = m / (m.sum(dim=-2, keepdim=True) + eps)
    return m


def skew_from_vector(w: torch.Tensor, n: int) -> torch.Tensor:
    """(..., n (n - 1) / 2) -> (..., n, n) skew-symmetric W - W^T from the strict upper triangle."""
    rows, cols = torch.triu_indices(n, n, offset=1, device=w.device)
    upper = w.new_zeros(*w.shape[:-1], n, n)
    upper[..., rows, cols] = w
    return upper - upper.transpose(-1, -2)


def iterative_cayley_apply(x: torch.Tensor, m: torch.Tensor, iterations: int = JPMHC_ITERATIONS) -> torch.Tensor:
    r"""y ~ (I + M)^{-1} (I - M) x by the fixed-point iteration y <- x - M (x + y) (Li et al. 2020).

    M (..., n, n) skew-symmetric with ||M||_2 < 1 (so the iteration contracts); x (..., n, c).
    A finite number of iterations gives an approximately orthogonal map, error O(||M||^{k+1}).
    """
    mx = m @ x  # (..., n, c)
    y = x - 2.0 * mx  # the first iterate from y_0 = x
    for _ in range(iterations - 1):
        y = x - mx - m @ y
    return y


def entropy_proxy(xs: torch.Tensor, pool: bool = False) -> torch.Tensor:
    r"""The reference code's "thermodynamic" gate scale: phi = 1 - ||G||_F^2 / tr(G)^2 of the streams' Gram matrix.

    xs (B, T, n, c): G = X X^T (n x n) per token; phi lies in [0, 1 - 1/n]: 0 when the streams are
    parallel (G of rank 1), 1 - 1/n when they are orthogonal and of equal norm. The reference adds
    1e-8 to tr(G)^2. ``pool``: averaged over the sequence, (B, 1, 1), as the reference (not causal);
    otherwise per token, (B, T, 1). The gate is then gamma = sigmoid(logit (1 + phi)) (reference
    commit f51372f; the paper's text has gamma = sigmoid(logit)).
    """
    gram = xs @ xs.transpose(-1, -2)  # (B, T, n, n)
    frobenius = gram.square().sum(dim=(-1, -2))  # (B, T)
    trace = torch.diagonal(gram, dim1=-2, dim2=-1).sum(-1)  # (B, T)
    phi = (1.0 - frobenius / (trace.square() + 1e-8)).unsqueeze(-1)  # (B, T, 1)
    return phi.mean(dim=1, keepdim=True) if pool else phi


def jpmhc_reference_cayley(
    raw: torch.Tensor, alpha: float = JPMHC_REF_ALPHA, iterations: int = JPMHC_REF_ITERATIONS, start: str = "alpha"
) -> torch.Tensor:
    r"""The reference code's JPmHC retraction of an unconstrained raw (..., n, n): W = raw - raw^T,
    Y_0 = I + alpha W (``start="alpha"``, JPmHC's Algorithm 8; ``"identity"``: Y_0 = I, the reference's
    bare negation operator), then ``iterations`` times Y <- I + (alpha / 2) W (I + Y).

    Its fixed point is the Cayley transform (I - alpha/2 W)^{-1} (I + alpha/2 W), reached only while
    ||alpha W / 2|| < 1: W is not bounded, so a trained Y may be far from orthogonal.
    """
    w = raw - raw.transpose(-1, -2)
    eye = torch.eye(w.shape[-1], dtype=w.dtype, device=w.device)
    y = eye + alpha * w if start == "alpha" else eye.expand_as(w)
    for _ in range(iterations):
        y = eye + 0.5 * alpha * (w @ (eye + y))
    return y


def _check_range(name: str, value: torch.Tensor | float, low: float, high: float, why: str) -> None:
    if isinstance(value, torch.Tensor):
        if value.numel() == 0:
            return
        smallest, largest = float(value.detach().min()), float(value.detach().max())
    else:
        smallest = largest = float(value)
    if not (low <= smallest and largest <= high):  # also catches NaN
        raise InputError(
            f"{name} must lie in [{low:g}, {high:g}], got {smallest if smallest < low else largest}; {why}"
        )


# --- the modules -----------------------------------------------------------------------------------


class Generators(nn.Module):
    r"""Several of the reference's 2-layer GELU networks d -> hidden -> out_i reading the same input, fused.

    The first layers are one Linear(d, m hidden + l) (one matrix product instead of m), followed by
    GELU on the m hidden blocks; each network keeps its own second layer. ``linear`` outputs are
    plain affine maps of the input taken from the same product (the gate logit w . x + b). The
    parameters are exactly those of separate networks, concatenated.
    """

    def __init__(self, d: int, hidden: int, outputs: dict[str, int], linear: dict[str, int] | None = None) -> None:
        super().__init__()
        self.hidden, self.names, self.linear = hidden, list(outputs), dict(linear or {})
        self.first = nn.Linear(d, hidden * len(outputs) + sum(self.linear.values()))
        self.second = nn.ModuleDict({name: nn.Linear(hidden, size) for name, size in outputs.items()})

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.first(x)  # (..., m hidden + l)
        cut = self.hidden * len(self.names)
        # the m second layers as one block-diagonal product: one kernel instead of m small ones
        layers: list[nn.Linear] = [self.second[name] for name in self.names]  # type: ignore[misc]
        weight = torch.block_diag(*(layer.weight for layer in layers))  # (sum out_i, m hidden)
        bias = torch.cat([layer.bias for layer in layers])
        parts = F.linear(F.gelu(h[..., :cut]), weight, bias).split([layer.out_features for layer in layers], dim=-1)
        out = dict(zip(self.names, parts, strict=True))
        for name, part in zip(self.linear, h[..., cut:].split(list(self.linear.values()), dim=-1), strict=True):
            out[name] = part
        return out

    def linear_slice(self, name: str) -> slice:
        """The rows of ``first`` that compute the plain affine output ``name``."""
        offset = self.hidden * len(self.names)
        for other, size in self.linear.items():
            if other == name:
                return slice(offset, offset + size)
            offset += size
        raise KeyError(name)


class Residual(nn.Module):
    """Base of every residual operator.

    Parameters
    ----------
    d : token width.
    n_streams : n; must divide d.
    hidden : width of the generator networks.
    pooling : "token" (causal) or "sequence" (mean over positions, not causal).
    """

    def __init__(self, d: int, n_streams: int = 1, hidden: int = 32, pooling: str = "token") -> None:
        super().__init__()
        if d % n_streams:
            raise InputError(f"width {d} is not divisible by n_streams {n_streams}; choose n_streams dividing {d}")
        if pooling not in POOLINGS:
            raise InputError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        self.d, self.n, self.hidden, self.pooling = d, n_streams, hidden, pooling
        self.aux_loss: torch.Tensor | float = 0.0
        self.gate: torch.Tensor | None = None

    def init_special(self, reference: bool = False) -> None:
        """Restore the parameters whose initialisation is part of the method (gate, identity maps) after
        a model re-initialises every matrix. ``reference``: as the reference code, which re-draws the
        pre / post maps with every other Linear and keeps only the gate (weight 0, bias gate_bias)."""

    def context(self, x: torch.Tensor) -> torch.Tensor:
        """What the generators read: x (B, T, d) per token, or its mean over T (B, 1, d), non-causal."""
        return x if self.pooling == "token" else x.mean(dim=1, keepdim=True)

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        """The shortcut map G(x), (B, T, d) -> (B, T, d)."""
        return x

    def forward(self, x: torch.Tensor, norm: Branch, branch: Branch) -> torch.Tensor:
        """X' from X (B, T, d), the block's LayerNorm ``norm`` and branch F."""
        return x + branch(norm(x))


class PlainResidual(Residual):
    """GPT: the identity shortcut, X' = X + F(LN(X))."""


class DeltaResidual(Residual):
    r"""Deep Delta Learning: X' = (I - beta k k^T) X + beta k v^T.

    k = normalise(k_net(x)) in R^n, beta = beta_max sigmoid(beta_net(x)) in [0, beta_max] (<= 2),
    v = V^T k in R^c the branch output V = F(LN(X)) (n x c) read along k: each block erases what the
    state holds along k and writes the branch's value there (X' = X + beta k k^T (V - X)).
    """

    def __init__(self, d: int, n_streams: int = 1, hidden: int = 32, pooling: str = "token", beta_max: float = 2.0):
        super().__init__(d, n_streams, hidden, pooling)
        _check_range("beta_max", beta_max, 1e-6, 2.0, "DDL's beta lies in [0, 2]; choose beta_max in (0, 2]")
        self.beta_max = float(beta_max)
        self.nets = Generators(d, hidden, {"k": n_streams, "beta": 1})
        self.beta: torch.Tensor | None = None

    def _k_beta(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.nets(self.context(x))
        k = F.normalize(out["k"], dim=-1, eps=_EPS)  # (B, T|1, n)
        beta = self.beta_max * torch.sigmoid(out["beta"])  # (B, T|1, 1)
        self.beta = beta.detach()
        return k, beta

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        k, beta = self._k_beta(x)
        xs = _as_streams(x, self.n)  # (B, T, n, c)
        return (xs - beta.unsqueeze(-1) * k.unsqueeze(-1) * (k.unsqueeze(-2) @ xs)).flatten(-2)

    def forward(self, x: torch.Tensor, norm: Branch, branch: Branch) -> torch.Tensor:
        k, beta = self._k_beta(x)
        xs = _as_streams(x, self.n)  # (B, T, n, c)
        vs = _as_streams(branch(norm(x)), self.n)  # (B, T, n, c)
        delta = k.unsqueeze(-2) @ (vs - xs)  # (B, T, 1, c): v^T - k^T X
        return (xs + beta.unsqueeze(-1) * k.unsqueeze(-1) * delta).flatten(-2)


class SinkhornResidual(Residual):
    r"""mHC: X' = H_res X + diag(h_post) F(LN(diag(h_pre) X)), H_res = Sinkhorn(b + alpha tanh(W x)).

    The static logits b start at 2 on the diagonal and 0 elsewhere (H_res = 0.71 I + 0.096 (J - I)
    at n = 4): 20 Sinkhorn iterations reach row sums 1 +- 1e-6 only while the logits spread little
    (a diagonal of 4, nearer the identity, leaves rows off by 1e-4). The data-dependent part starts
    small (alpha = 0.01) as in mHC. h_pre = sigmoid(p), h_post = 2 sigmoid(q), per stream and static
    (0.99 and 1 at init: p = 4.6, q = 0).
    """

    def __init__(self, d: int, n_streams: int = 4, hidden: int = 32, pooling: str = "token"):
        super().__init__(d, n_streams, hidden, pooling)
        self.logit_net = nn.Linear(d, n_streams * n_streams)
        self.alpha = nn.Parameter(torch.tensor(0.01))
        self.static = nn.Parameter(2.0 * torch.eye(n_streams))
        self.pre = nn.Parameter(torch.full((n_streams,), 4.6))
        self.post = nn.Parameter(torch.zeros(n_streams))
        self.mixing: torch.Tensor | None = None

    def _mix(self, x: torch.Tensor) -> torch.Tensor:
        dynamic = torch.tanh(self.logit_net(self.context(x))).unflatten(-1, (self.n, self.n))  # (B, T|1, n, n)
        h = sinkhorn(self.static + self.alpha * dynamic)
        self.mixing = h.detach()
        return h @ _as_streams(x, self.n)  # (B, T, n, c)

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        return self._mix(x).flatten(-2)

    def forward(self, x: torch.Tensor, norm: Branch, branch: Branch) -> torch.Tensor:
        xs = _as_streams(x, self.n)
        read = (torch.sigmoid(self.pre).unsqueeze(-1) * xs).flatten(-2)
        out = _as_streams(branch(norm(read)), self.n)  # (B, T, n, c)
        return (self._mix(x) + 2.0 * torch.sigmoid(self.post).unsqueeze(-1) * out).flatten(-2)


class GeometricResidual(Residual):
    """A shortcut map G followed by the mHC pre / post maps: X' = G + P F(R LN(G)), R = P = I at init.

    ``maps=False`` drops R and P (X' = G + F(LN(G))); a bare operator has no branch and needs none.
    """

    def __init__(self, d: int, n_streams: int = 4, hidden: int = 32, pooling: str = "token", maps: bool = True):
        super().__init__(d, n_streams, hidden, pooling)
        self.pre = nn.Linear(d, d, bias=False) if maps else None
        self.post = nn.Linear(d, d, bias=False) if maps else None
        self.init_special()
        outputs = self.generator_outputs(n_streams)
        if outputs:
            self.nets = Generators(d, hidden, outputs, self.linear_outputs())

    def generator_outputs(self, n: int) -> dict[str, int]:
        """The outputs of the operator's generator networks (name: width) at n streams; none here."""
        return {}

    def linear_outputs(self) -> dict[str, int]:
        """The plain affine outputs of the generators' first layer (:class:`Generators`' ``linear``)."""
        return {}

    def init_special(self, reference: bool = False) -> None:
        for layer in (self.pre, self.post):
            if layer is not None and not reference:
                nn.init.eye_(layer.weight)

    def forward(self, x: torch.Tensor, norm: Branch, branch: Branch) -> torch.Tensor:
        g = self.operator(x)  # (B, T, d)
        if self.pre is None or self.post is None:
            return g + branch(norm(g))
        io = _io_linears(branch)
        if io is None:
            return g + self.post(branch(self.pre(norm(g))))
        # P F(R h) with F = last o core o first is F' with first' = first o R and last' = P o last: the
        # same function and gradients, with the maps folded into the weights (d^3 per call) instead of
        # applied to every token (2 d^2 per token: a third of a GPT block's matrix work).
        assert isinstance(branch, nn.Module)
        first, last, params = io[0], io[1], dict(branch.named_parameters())
        weights = {
            f"{first}.weight": params[f"{first}.weight"] @ self.pre.weight,
            f"{last}.weight": self.post.weight @ params[f"{last}.weight"],
        }
        if f"{last}.bias" in params:
            weights[f"{last}.bias"] = self.post.weight @ params[f"{last}.bias"]
        return g + torch.func.functional_call(branch, weights, (norm(g),), strict=False)


def _io_linears(branch: Branch) -> tuple[str, str] | None:
    """Names of a branch module's first and last Linear (qkv / proj, fc / proj), or None.

    The pre / post maps are folded into them only when the branch is an nn.Module whose input
    enters through its first registered Linear and leaves through its last (attention and MLP here).
    """
    if not isinstance(branch, nn.Module) or not getattr(branch, "folds_maps", False):
        return None
    names = [name for name, module in branch.named_modules() if isinstance(module, nn.Linear)]
    return (names[0], names[-1]) if len(names) >= 2 else None


class IterativeCayleyResidual(GeometricResidual):
    r"""JPmHC: G = Cayley(M) X by :func:`iterative_cayley_apply` (3 iterations), M = W / (2 (1 + ||W||_F)).

    W skew-symmetric, full (not rank 2), from a generator network of the token. The scaling keeps
    ||M||_2 < 1/2, where the fixed-point iteration contracts; the result is orthogonal to O(||M||^3).
    """

    def generator_outputs(self, n: int) -> dict[str, int]:
        return {"w": n * (n - 1) // 2}

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        w = skew_from_vector(self.nets(self.context(x))["w"], self.n)  # (B, T|1, n, n)
        m = w / (2.0 * (1.0 + w.flatten(-2).norm(dim=-1)[..., None, None]))
        return iterative_cayley_apply(_as_streams(x, self.n), m).flatten(-2)


class CayleyResidual(GeometricResidual):
    """EΔ's rotation alone: G = Q(x) X, u, v from generator networks, beta = softplus(beta_net(x)).

    ``unit=True``: u and v normalised and orthogonalised (t = beta / 2), as the reference's bare operator.
    """

    #: u and v normalised and orthogonalised (the reference's bare operator); ``make_residual(..., unit=True)``
    unit = False

    def generator_outputs(self, n: int) -> dict[str, int]:
        return {"u": n, "v": n, "beta": 1}

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        out = self.nets(self.context(x))
        w, core = cayley_factors(out["u"], out["v"], F.softplus(out["beta"]), self.unit)
        return lowrank_apply(_as_streams(x, self.n), w, core).flatten(-2)


class HouseholderResidual(GeometricResidual):
    """EΔ's reflection alone: G = H_2(k(x)) X."""

    def generator_outputs(self, n: int) -> dict[str, int]:
        return {"k": n}

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        return householder_apply(_as_streams(x, self.n), self.nets(self.context(x))["k"]).flatten(-2)


class HybridResidual(GeometricResidual):
    r"""EΔ-MHC-Geo: G = gamma Q X + (1 - gamma) H_2(k) X, gamma = sigmoid(w . x + b).

    ``gate="entropy"`` is the reference code's gate (commit f51372f), not the paper's text:
    gamma = sigmoid((w . x + b)(1 + phi)), phi = :func:`entropy_proxy` of the token's streams
    (sequence-averaged under sequence pooling). ``unit=True`` normalises and orthogonalises u and v
    (t = beta / 2), as the reference's bare negation operator.

    Both terms are the identity minus a low-rank update, so G is too:
    G = I - [e1 e2 k] diag(gamma K, 2 (1 - gamma)) [e1 e2 k]^T (rank 3), applied in one pass.
    The gate starts at w = 0, b = ``gate_bias`` (0 in the model, -1.5 in the negation task);
    ``aux_loss`` = ``gate_weight`` mean 4 gamma (1 - gamma), which pushes gamma to 0 or 1 where G is
    orthogonal.
    """

    #: u and v normalised and orthogonalised (the reference's bare operator); ``make_residual(..., unit=True)``
    unit = False

    def __init__(
        self,
        d: int,
        n_streams: int = 4,
        hidden: int = 32,
        pooling: str = "token",
        maps: bool = True,
        gate_bias: float = 0.0,
        gate_weight: float = 0.1,
        gate: str = "plain",
    ):
        if gate not in GATES:
            raise InputError(f"unknown gate {gate!r}; choose one of {', '.join(GATES)}")
        self.gate_mode = gate
        if not math.isfinite(gate_bias):
            raise InputError(f"gate_bias must be a finite number, got {gate_bias}")
        if not (math.isfinite(gate_weight) and gate_weight >= 0):
            raise InputError(f"gate_weight must be a finite number >= 0, got {gate_weight}")
        self.gate_bias, self.gate_weight = float(gate_bias), float(gate_weight)
        super().__init__(d, n_streams, hidden, pooling, maps)
        self.init_special()  # the gate, now that the generators exist

    def generator_outputs(self, n: int) -> dict[str, int]:
        return {"u": n, "v": n, "beta": 1, "k": n}

    def linear_outputs(self) -> dict[str, int]:
        return {"gate": 1}

    def init_special(self, reference: bool = False) -> None:
        super().init_special(reference)
        nets = getattr(self, "nets", None)  # None while GeometricResidual.__init__ runs
        if nets is not None:
            rows = nets.linear_slice("gate")
            with torch.no_grad():
                nets.first.weight[rows] = 0.0
                nets.first.bias[rows] = self.gate_bias

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        out = self.nets(self.context(x))
        xs = _as_streams(x, self.n)  # (B, T, n, c)
        logit = out["gate"]  # (B, T|1, 1)
        if self.gate_mode == "entropy":
            logit = logit * (1.0 + entropy_proxy(xs, pool=self.pooling == "sequence"))
        gamma = torch.sigmoid(logit)  # (B, T|1, 1)
        self.gate = gamma.detach()
        self.aux_loss = self.gate_weight * (4.0 * gamma * (1.0 - gamma)).mean()
        w, core = cayley_factors(out["u"], out["v"], F.softplus(out["beta"]), self.unit)  # (.., n, 2), (.., 2, 2)
        k = F.normalize(out["k"], dim=-1, eps=_EPS)
        g = gamma.unsqueeze(-1)  # (B, T|1, 1, 1)
        zero = torch.zeros_like(core[..., :1])  # (.., 2, 1)
        top = torch.cat([g * core, zero], -1)  # (.., 2, 3)
        bottom = torch.cat([zero.transpose(-1, -2), 2.0 * (1.0 - g)], -1)  # (.., 1, 3)
        w3 = torch.cat([w, k.unsqueeze(-1)], -1)  # (.., n, 3)
        return lowrank_apply(xs, w3, torch.cat([top, bottom], -2)).flatten(-2)


class DeltaShortcutResidual(DeltaResidual):
    r"""The reference code's DDL block: G = (I - beta k k^T) X, k in the full width d (d streams of 1),
    beta = 2 sigmoid(beta_net), then X' = G + F(LN(G)) with no write term.

    Compared with :class:`DeltaResidual` (the DDL paper's X' = X + beta k (v^T - k^T X)), the branch
    reads the erased state and is added in full.
    """

    def __init__(self, d: int, hidden: int = 32, pooling: str = "token"):
        super().__init__(d, d, hidden, pooling, 2.0)

    def forward(self, x: torch.Tensor, norm: Branch, branch: Branch) -> torch.Tensor:
        g = self.operator(x)  # (B, T, d)
        return g + branch(norm(g))


class MappedResidual(Residual):
    """A residual whose per-token maps (pre, post, H_res) come from :meth:`_maps`; the bare operator is H_res X."""

    def _maps(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        _, _, res = self._maps(x)
        return (res @ _as_streams(x, self.n)).flatten(-2)


class SinkhornReferenceResidual(MappedResidual):
    r"""The reference code's mHC: pre / post weights and H_res all computed from the token.

    h = RMSNorm(x); h_pre = sigmoid(a_pre phi_pre h + b_pre), h_post = 2 sigmoid(a_post phi_post h +
    b_post), H_res = Sinkhorn(a_res mat(phi_res h) + b_res), with b_pre = b_post = 0, b_res = 2 I,
    a = 0.01 at init; X' = H_res X + h_post * F(LN(rep_n(sum_i h_pre_i X_i))): F reads the
    weighted sum of the streams replicated n times. Sinkhorn as the reference runs it
    (:func:`sinkhorn_reference`: exp, then divisions by sums + 1e-8).
    """

    def __init__(self, d: int, n_streams: int = 4, hidden: int = 32, pooling: str = "token"):
        super().__init__(d, n_streams, hidden, pooling)
        n = n_streams
        self.rms = nn.RMSNorm(d, eps=1e-6)
        self.phi = nn.Linear(d, 2 * n + n * n, bias=False)  # phi_pre, phi_post, phi_res side by side
        self.alpha = nn.Parameter(torch.full((3,), 0.01))  # a_pre, a_post, a_res
        self.b_pre = nn.Parameter(torch.zeros(n))
        self.b_post = nn.Parameter(torch.zeros(n))
        self.b_res = nn.Parameter(2.0 * torch.eye(n))
        self.mixing: torch.Tensor | None = None

    def _maps(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = self.n
        p = self.phi(self.rms(x))  # (B, T, 2n + n^2)
        pre = torch.sigmoid(self.alpha[0] * p[..., :n] + self.b_pre)  # (B, T, n)
        post = 2.0 * torch.sigmoid(self.alpha[1] * p[..., n : 2 * n] + self.b_post)  # (B, T, n)
        res = sinkhorn_reference(self.alpha[2] * p[..., 2 * n :].unflatten(-1, (n, n)) + self.b_res)  # (B, T, n, n)
        self.mixing = res.detach()
        return pre, post, res

    def forward(self, x: torch.Tensor, norm: Branch, branch: Branch) -> torch.Tensor:
        pre, post, res = self._maps(x)
        xs = _as_streams(x, self.n)  # (B, T, n, c)
        read = (pre.unsqueeze(-1) * xs).sum(-2)  # (B, T, c): the weighted sum of the streams
        out = _as_streams(branch(norm(read.repeat(1, 1, self.n))), self.n)  # (B, T, n, c)
        return (res @ xs + post.unsqueeze(-1) * out).flatten(-2)


class JPmHCReferenceResidual(MappedResidual):
    r"""The reference code's JPmHC, parallel routing (JPmHC's Eq. 14):

    [H_pre | H_post | H~] = W LN(x) + b (per token), H_pre = row-softmax, H_post = column-softmax,
    H_res = :func:`jpmhc_reference_cayley` (alpha 0.1, 2 iterations from Y_0 = I + alpha W, W unbounded),
    X' = H_res X + H_post (y (x) 1_n), y = F(LN(mean_i (H_pre X)_i)): the branch F (and its LN) run
    at the width of one stream, c = d / n (hence the reference's n_embd 512 for c = 128).
    """

    def __init__(self, d: int, n_streams: int = 4, hidden: int = 32, pooling: str = "token"):
        super().__init__(d, n_streams, hidden, pooling)
        self.norm_in = nn.LayerNorm(d)
        self.fused = nn.Linear(d, 3 * n_streams * n_streams)
        self.mixing: torch.Tensor | None = None

    def _maps(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = self.n
        f = self.fused(self.norm_in(x)).unflatten(-1, (3, n, n))  # (B, T, 3, n, n)
        res = jpmhc_reference_cayley(f[..., 2, :, :])
        self.mixing = res.detach()
        return torch.softmax(f[..., 0, :, :], dim=-1), torch.softmax(f[..., 1, :, :], dim=-2), res

    def forward(self, x: torch.Tensor, norm: Branch, branch: Branch) -> torch.Tensor:
        pre, post, res = self._maps(x)
        xs = _as_streams(x, self.n)  # (B, T, n, c)
        y = branch(norm((pre @ xs).mean(dim=-2)))  # (B, T, c)
        # H_post (y (x) 1_n): row i of the result is (sum_j H_post_ij) y
        return (res @ xs + post.sum(-1, keepdim=True) * y.unsqueeze(-2)).flatten(-2)


class DenseCayleyResidual(Residual):
    r"""The reference's bare JPmHC operator for the negation task: G = Y(x) x with
    Y = :func:`jpmhc_reference_cayley` (``start="identity"``, alpha 0.1, 2 iterations) of a full n x n
    raw matrix from a d -> hidden -> n^2 GELU network; n = d streams of width 1.
    """

    def __init__(self, d: int, hidden: int = 128, pooling: str = "token"):
        super().__init__(d, d, hidden, pooling)
        self.nets = Generators(d, hidden, {"w": d * d})

    def operator(self, x: torch.Tensor) -> torch.Tensor:
        raw = self.nets(self.context(x))["w"].unflatten(-1, (self.n, self.n))  # (B, T|1, n, n)
        y = jpmhc_reference_cayley(raw, start="identity")
        return (y @ _as_streams(x, self.n)).flatten(-2)


@dataclass(frozen=True)
class ResidualSpec:
    """One residual operator, described: :func:`make_residual`'s arguments, built by :meth:`build`.

    ``plain`` ignores the stream count, ``ddl-ref`` uses d streams (k in the full width); ``mhc``
    needs n >= 2 to mix anything; ``maps`` (the pre / post maps) applies to jpmhc, cayley,
    householder and hybrid; ``gate``, ``gate_bias`` and ``gate_weight`` to hybrid; ``unit`` to
    cayley and hybrid; ``beta_max`` to ddl.
    """

    kind: str
    d: int
    n_streams: int = 4
    hidden: int = 32
    pooling: str = "token"
    maps: bool = True
    gate_bias: float = 0.0
    gate_weight: float = 0.1
    beta_max: float = 2.0
    gate: str = "plain"
    unit: bool = False

    def build(self) -> Residual:
        """The residual operator ``kind`` (one of :data:`RESIDUALS`); InputError listing the choices otherwise."""
        kind, d, n, hidden, pooling = self.kind, self.d, self.n_streams, self.hidden, self.pooling
        if kind not in RESIDUALS:
            raise InputError(f"unknown residual {kind!r}; choose one of {', '.join(RESIDUALS)}")
        if kind == "plain":
            return PlainResidual(d, 1, hidden, pooling)
        if kind == "ddl":
            return DeltaResidual(d, n, hidden, pooling, self.beta_max)
        if kind == "ddl-ref":
            return DeltaShortcutResidual(d, hidden, pooling)
        if kind in ("mhc", "mhc-ref", "jpmhc-ref"):
            plain = {"mhc": SinkhornResidual, "mhc-ref": SinkhornReferenceResidual, "jpmhc-ref": JPmHCReferenceResidual}
            return plain[kind](d, n, hidden, pooling)
        if kind == "hybrid":
            residual: GeometricResidual = HybridResidual(
                d, n, hidden, pooling, self.maps, self.gate_bias, self.gate_weight, self.gate
            )
        else:
            geometric = {"cayley": CayleyResidual, "jpmhc": IterativeCayleyResidual, "householder": HouseholderResidual}
            residual = geometric[kind](d, n, hidden, pooling, self.maps)
        if self.unit and isinstance(residual, CayleyResidual | HybridResidual):
            residual.unit = True
        return residual


def make_residual(kind: str, d: int, **options: Any) -> Residual:
    """The residual operator ``kind`` of width ``d``; ``options`` are the other fields of :class:`ResidualSpec`."""
    return ResidualSpec(kind, d, **options).build()
