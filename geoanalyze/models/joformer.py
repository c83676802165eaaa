r"""JoFormer attention: positions as journeys, scores from rotated queries and keys, values transported.

Every position t carries a frame A_t (a rotation of the head's d = hs coordinates). Then

    score_{kj} = <A_k q_k, A_j k_j> / \sqrt{hs},   \alpha = softmax(score + M)
    c_k = \sum_j \alpha_{kj} P_{j->k} v_j,        P_{j->k} = A_k A_j^{-1}

computed without any n x n x d tensor: rotate v_j by A_j^{-1}, attend with SDPA, rotate the output
by A_k (c_k = A_k \sum_j \alpha_{kj} A_j^{-1} v_j). That is O(n d) extra work and memory over
RoPE attention. For toral frames (SO(2)^{d/2}, one angle per interleaved pair) A_t is the angle
vector \phi_t and A_t^{-1} is -\phi_t.

How \phi_t is made (the ``variant``: fixed, learned, projected, dense) is tabled in
docs/joformer.md; the projected journey is a cumulative sum of increments (causal by
construction), the dense one is curved (the generators of different axes do not commute).

``transport_values=False`` keeps the rotated scores and plain values: that is RoPE (1-D) or
2D-RoPE (axial grid) attention with the same code path, the baseline of the vision experiment.
:func:`materialized_journey_attention` builds every P_{j->k}: the O(n^2 d) reference the tests and
the benchmark compare against.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from ..errors import InputError
from .attention import CosSin, SelfAttention
from .config import ModelConfig
from .journey import check_even, rotate_by, rotate_dense, rotate_pairs, rotor, skew

VARIANTS = ("fixed", "learned", "projected", "dense")
#: ModelConfig.attention -> variant
ATTENTION_VARIANTS = {"joformer-fixed": "fixed", "joformer-learned": "learned", "joformer-projected": "projected"}

Grid = tuple[int, int]

# --- pure functions -----------------------------------------------------------------------------


def journey_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    angles: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    dropout_p: float = 0.0,
    transport_values: bool = True,
) -> torch.Tensor:
    r"""c_k = \sum_j \alpha_{kj} R(\phi_k - \phi_j) v_j with \alpha from (R(\phi_k) q_k, R(\phi_j) k_j), factored.

    q, k, v: (B, nh, T, hs); angles: (T, hs/2) or (B|1, nh|1, T, hs/2), or dense orthogonal frames
    A_t (T, hs, hs) in place of the rotations; mask: additive (B|1, nh|1, T, T) or None (then
    ``causal`` decides). Returns (B, nh, T, hs).
    """
    if angles.ndim == 3:  # dense frames: A_j^T = A_j^{-1}
        frames = angles
        rotate, unrotate = (lambda x: rotate_dense(x, frames)), (lambda x: rotate_dense(x, frames, transpose=True))
    elif q.shape[-1] != 2 * angles.shape[-1]:
        raise InputError(f"head dimension {q.shape[-1]} but {angles.shape[-1]} angles; pass hs / 2 angles per position")
    else:
        turn = rotor(angles)  # e^{i phi}, shared by the four rotations
        rotate, unrotate = (lambda x: rotate_by(x, turn)), (lambda x: rotate_by(x, turn.conj()))
    q, k = rotate(q), rotate(k)  # (B, nh, T, hs): A_t q_t, A_t k_t
    if transport_values:
        v = unrotate(v)  # A_j^{-1} v_j
    y = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal and mask is None
    )  # (B, nh, T, hs)
    return rotate(y) if transport_values else y  # A_k sum_j alpha_kj A_j^{-1} v_j


#: :func:`journey_attention` with dense orthogonal frames (T, hs, hs) instead of angles
dense_journey_attention = journey_attention


def transport(weights: torch.Tensor, v: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    r"""The value-path formula c_k = \sum_j w_{kj} P_{j->k} v_j for given weights, flat toral journeys.

    P_{j->k} = R(\phi_k - \phi_j), factored as rotate v by -\phi_j, weigh, rotate by +\phi_k. weights:
    (..., T, T) (any: softmax, softplus, a decay kernel, uniform); v: (..., T, hs); angles (..., T, hs/2).
    Attention (angles 0), a diagonal rotation SSM (w_kj = rho^{k-j}, j <= k) and JoFormer are its cases.
    """
    turn = rotor(angles)
    return rotate_by(weights @ rotate_by(v, turn.conj()), turn)


def materialized_journey_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    angles: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
) -> torch.Tensor:
    r"""The reference: every P_{j->k} = R(\phi_k - \phi_j) applied to every v_j, (B, nh, T, T, hs) memory.

    O(n^2 d) work and memory; the oracle of the tests and the peer of the benchmark. Same arguments
    as :func:`journey_attention` (no dropout).
    """
    hs, T = q.shape[-1], q.shape[-2]
    scores = rotate_pairs(q, angles) @ rotate_pairs(k, angles).transpose(-1, -2) / math.sqrt(hs)  # (B, nh, T, T)
    if mask is not None:
        scores = scores + mask
    elif causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    weights = scores.softmax(dim=-1)  # (B, nh, T, T): alpha_kj
    phi = angles if angles.ndim == 4 else angles[None, None]  # (B|1, nh|1, T, hs/2)
    relative = phi[..., :, None, :] - phi[..., None, :, :]  # (B|1, nh|1, T, T, hs/2): phi_k - phi_j
    transported = rotate_pairs(v[..., None, :, :].expand(*weights.shape, hs), relative)  # (B, nh, T, T, hs)
    return torch.einsum("bhkj,bhkjd->bhkd", weights, transported)  # (B, nh, T, hs)


def grid_positions(rows: int, cols: int, device: torch.device | None = None) -> torch.Tensor:
    """The (T, 2) coordinates (row, column) of a rows x cols grid read row by row (T = rows cols)."""
    r, c = torch.meshgrid(torch.arange(rows, device=device), torch.arange(cols, device=device), indexing="ij")
    return torch.stack((r.flatten(), c.flatten()), dim=1)  # (T, 2)


def rope_frequencies(head_dim: int, base: float) -> torch.Tensor:
    r"""RoPE's \theta_i = b^{-2i/hs}, i < hs/2, float64."""
    return base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)


def axis_frequencies(head_dim: int, base: float, axes: int) -> torch.Tensor:
    """The (axes, hs/2) frequency matrix W of the fixed journey: 1-D RoPE, or axial (2D-RoPE) on a grid.

    Axial: pairs 0..h-1 turn with the row at RoPE frequencies of a 2h-dimensional head, pairs h..hs/2-1
    with the column (h = ceil(hs/4)), so the two axes' generators act on disjoint planes and commute.
    """
    pairs = head_dim // 2
    W = torch.zeros(axes, pairs, dtype=torch.float64)
    if axes == 1:
        W[0] = rope_frequencies(head_dim, base)
        return W
    first = (pairs + 1) // 2
    W[0, :first] = rope_frequencies(2 * first, base)
    W[1, first:] = rope_frequencies(2 * (pairs - first), base)
    return W


def unit_circle(angles: np.ndarray) -> np.ndarray:
    """(cos phi_i, sin phi_i) interleaved: angles (n, m) -> (n, 2m) float64, RoPE's layout."""
    out = np.empty((angles.shape[0], 2 * angles.shape[1]))
    out[:, 0::2], out[:, 1::2] = np.cos(angles), np.sin(angles)
    return out


# --- where the frames come from -----------------------------------------------------------------


class Journey(nn.Module):
    """The positional side of JoFormer attention: the frame of every position of a sequence or grid."""

    toral = True

    def __init__(self, grid: Grid | None) -> None:
        super().__init__()
        self.grid = grid

    def positions(self, length: int, device: torch.device) -> torch.Tensor:
        """(T, D) coordinates: t for a sequence, (row, column) on the grid; InputError when T does not fit."""
        if self.grid is None:
            return torch.arange(length, device=device)[:, None]  # (T, 1)
        rows, cols = self.grid
        if rows * cols != length:
            raise InputError(
                f"the {rows}x{cols} grid holds {rows * cols} positions but the sequence has {length} tokens; "
                "pass one token per grid cell (no [CLS]) or set the grid to the patch layout"
            )
        return grid_positions(rows, cols, device)  # (T, 2)

    def frames(self, x: torch.Tensor) -> torch.Tensor:
        """Angles (T, hs/2) or (B, nh, T, hs/2); dense frames (T, hs, hs). x: the block's input (B, T, C)."""
        raise NotImplementedError

    def position_angles(self, n: int) -> torch.Tensor:
        """The (n, k) angles of positions 0..n-1 without content (toral kinds)."""
        raise NotImplementedError

    def position_vectors(self, n: int) -> np.ndarray:
        """Unit-circle vectors (cos, sin) of the angles of positions 0..n-1 (row-major on a grid), (n, k) float64."""
        if n < 1:
            raise InputError(f"ask for at least 1 position vector, got {n}")
        with torch.no_grad():
            return unit_circle(self.position_angles(n).detach().cpu().double().numpy())

    def _grid_or_line(self, n: int, device: torch.device) -> torch.Tensor:
        if self.grid is None:
            return torch.arange(n, device=device)[:, None].to(torch.float64)
        cols = self.grid[1]
        index = torch.arange(n, device=device)
        return torch.stack((index // cols, index % cols), dim=1).to(torch.float64)  # row-major, may go past rows


class FixedJourney(Journey):
    r"""\phi_p = p W with W RoPE's (1-D) or 2D-RoPE's (axial) frequencies; nothing trained."""

    W: torch.Tensor

    def __init__(self, head_dim: int, base: float, grid: Grid | None = None) -> None:
        super().__init__(grid)
        # Derived from the config: not saved with the weights.
        self.register_buffer("W", axis_frequencies(head_dim, base, 1 if grid is None else 2), persistent=False)

    def frames(self, x: torch.Tensor) -> torch.Tensor:
        positions = self.positions(x.shape[1], x.device)  # (T, D)
        # float64 products, float32 angles whatever x's dtype: bf16 would lose long positions
        return (positions.to(self.W.dtype) @ self.W).float()  # (T, hs/2)

    def position_angles(self, n: int) -> torch.Tensor:
        return self._grid_or_line(n, self.W.device) @ self.W


class LearnedJourney(Journey):
    r"""\phi_p = \sum_a p_a w_a with trained frequency vectors w_a (D, hs/2), initialised to the fixed W."""

    def __init__(self, head_dim: int, base: float, grid: Grid | None = None) -> None:
        super().__init__(grid)
        W = axis_frequencies(head_dim, base, 1 if grid is None else 2).float()
        # One 1-D parameter per axis: the training loop exempts vectors from weight decay, which
        # would otherwise pull the frequencies towards zero (no rotation).
        self.w = nn.ParameterList(nn.Parameter(row.clone()) for row in W)

    @property
    def frequencies(self) -> torch.Tensor:
        """The (D, hs/2) frequency matrix W."""
        return torch.stack(list(self.w))

    def frames(self, x: torch.Tensor) -> torch.Tensor:
        W = self.frequencies
        return self.positions(x.shape[1], x.device).to(W.dtype) @ W  # (T, hs/2)

    def position_angles(self, n: int) -> torch.Tensor:
        W = self.frequencies
        return self._grid_or_line(n, W.device) @ W.double()


class ProjectedJourney(Journey):
    r"""\phi_t = \sum_{s<=t} (\theta + MLP(x_s)): a journey driven by the content (1-D only).

    ``mean_increment`` (nh, hs/2) is a running mean of the increments seen in training, so a trained
    model's "mean projected angles" t * mean_increment are available without data.
    """

    theta: torch.Tensor
    mean_increment: torch.Tensor

    def __init__(self, d_model: int, n_heads: int, base: float, momentum: float = 0.99) -> None:
        super().__init__(None)
        self.n_heads = n_heads
        self.momentum = momentum
        self.mlp = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.ReLU(), nn.Linear(2 * d_model, d_model // 2))
        theta = rope_frequencies(d_model // n_heads, base).float()
        self.register_buffer("theta", theta, persistent=False)
        self.register_buffer("mean_increment", theta.repeat(n_heads, 1))  # (nh, hs/2), saved

    def increments(self, x: torch.Tensor) -> torch.Tensor:
        """delta_t = theta + MLP(x_t), (B, nh, T, hs/2)."""
        B, T, _ = x.shape
        delta = self.mlp(x).view(B, T, self.n_heads, -1).transpose(1, 2)  # (B, nh, T, hs/2)
        return delta + self.theta.to(delta.dtype)

    def frames(self, x: torch.Tensor) -> torch.Tensor:
        delta = self.increments(x)  # (B, nh, T, hs/2)
        if self.training:
            with torch.no_grad():
                batch_mean = delta.float().mean(dim=(0, 2))  # (nh, hs/2)
                self.mean_increment.lerp_(batch_mean, 1.0 - self.momentum)
        # float32 even under bf16 autocast: angles reach thousands of radians on long sequences
        return delta.float().cumsum(dim=2)  # (B, nh, T, hs/2): phi_t = sum_{s <= t} delta_s

    def position_angles(self, n: int) -> torch.Tensor:
        steps = torch.arange(1, n + 1, dtype=torch.float64, device=self.mean_increment.device)
        return (steps[:, None, None] * self.mean_increment.double()).flatten(1)  # (n, nh hs/2)


class DenseJourney(Journey):
    r"""A_p = exp(\sum_a p_a S_a) with trained skew-symmetric S_a (hs x hs): curved, LieRE-like."""

    toral = False

    def __init__(self, head_dim: int, grid: Grid | None = None, scale: float = 0.1) -> None:
        super().__init__(grid)
        axes = 1 if grid is None else 2
        self.generators = nn.Parameter(torch.randn(axes, head_dim, head_dim) * scale / math.sqrt(head_dim))

    def frames(self, x: torch.Tensor) -> torch.Tensor:
        positions = self.positions(x.shape[1], x.device).to(self.generators.dtype)  # (T, D)
        algebra = torch.einsum("ta,aij->tij", positions, skew(self.generators))  # (T, hs, hs)
        return torch.linalg.matrix_exp(algebra)  # (T, hs, hs), orthogonal

    def position_angles(self, n: int) -> torch.Tensor:
        raise InputError("dense journeys have no angles; use position_vectors, which flattens the frames")

    def position_vectors(self, n: int) -> np.ndarray:
        """The flattened frames A_p applied to e_0... e_{hs-1}: (n, hs^2) float64."""
        if n < 1:
            raise InputError(f"ask for at least 1 position vector, got {n}")
        with torch.no_grad():
            positions = self._grid_or_line(n, self.generators.device)
            algebra = torch.einsum("ta,aij->tij", positions, skew(self.generators.double()))
            return torch.linalg.matrix_exp(algebra).flatten(1).cpu().numpy()


def make_journey(variant: str, config: ModelConfig, grid: Grid | None = None) -> Journey:
    """The positional side ``variant`` names; InputError for an unknown one or a projected grid."""
    if variant not in VARIANTS:
        raise InputError(f"unknown JoFormer variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if variant == "fixed":
        return FixedJourney(config.head_dim, config.rope_base, grid)
    if variant == "learned":
        return LearnedJourney(config.head_dim, config.rope_base, grid)
    if variant == "dense":
        return DenseJourney(config.head_dim, grid)
    if grid is not None:
        raise InputError(
            "the projected journey accumulates angles along a 1-D sequence and has no 2-D form; "
            "use the fixed, learned or dense variant on a grid"
        )
    return ProjectedJourney(config.d_model, config.n_heads, config.rope_base)


# --- the module ---------------------------------------------------------------------------------


class JoFormerAttention(SelfAttention):
    """Multi-head JoFormer attention, with :class:`~geoanalyze.models.attention.SelfAttention`'s forward signature.

    Parameters
    ----------
    config : the model; ``config.attention`` names the variant (joformer-fixed / -learned / -projected)
        unless ``variant`` is given.
    variant : one of :data:`VARIANTS`, overriding the config's.
    grid : (rows, cols) for a 2-D axial grid (image patches, row by row); None for a 1-D sequence.
    transport_values : rotate values by A_j^{-1} and outputs by A_k (JoFormer); False gives RoPE /
        2D-RoPE attention (rotated scores, plain values).
    """

    def __init__(
        self,
        config: ModelConfig,
        *,
        variant: str | None = None,
        grid: Grid | None = None,
        transport_values: bool = True,
    ) -> None:
        if variant is None:
            if config.attention not in ATTENTION_VARIANTS:
                raise InputError(
                    f"attention {config.attention!r} is not a JoFormer attention; choose one of "
                    f"{', '.join(ATTENTION_VARIANTS)}"
                )
            variant = ATTENTION_VARIANTS[config.attention]
        check_even(config.head_dim, "JoFormer attention")
        if grid is not None and (len(grid) != 2 or min(grid) < 1):
            raise InputError(f"grid must be (rows, cols) of positive integers, got {grid}; pass e.g. (4, 4)")
        super().__init__(config)
        self.variant = variant
        self.transport_values = transport_values
        self.journey = make_journey(variant, config, grid)

    def forward(
        self, x: torch.Tensor, rotation: CosSin | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C).

        rotation : must be None: JoFormer carries its own positions (build the model with pe none).
        mask : :func:`~geoanalyze.models.attention.build_attention_mask`'s additive mask, or None
            (plain or causal attention by ``self.causal``).
        """
        if rotation is not None:
            raise InputError("JoFormer attention carries its own positions; build the model with pe none, not rope")
        frames = self.journey.frames(x)  # angles (T | B nh T, hs/2) or dense (T, hs, hs)
        q, k, v = self.heads(x)  # (B, nh, T, hs) each
        y = journey_attention(
            q,
            k,
            v,
            frames,
            mask=mask,
            causal=self.causal,
            dropout_p=self.attn_dropout if self.training else 0.0,
            transport_values=self.transport_values,
        )  # (B, nh, T, hs)
        return self.output(y)

    def position_vectors(self, n: int) -> np.ndarray:
        """The (n, k) float64 position vectors the stress scores use: unit-circle vectors of the angles
        (fixed, learned; mean projected angles for projected), the flattened frames for dense."""
        return self.journey.position_vectors(n)
