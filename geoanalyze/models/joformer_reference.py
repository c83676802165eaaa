r"""JoFormer as published: the three character-level scripts of github.com/mahesh-godavarti/joformer.

The public reference (``journey_transformer_per_token_angles.py``, ``journey_transformer_fixed_angles.py``,
``roformer.py``) differs from this project's design (models/joformer.py) in four ways, all kept here
and tabled in docs/joformer.md: softplus weights without row normalisation (``normalisation``
switches it), one head over the full width C, per-token angles a_t = E_angle[token_t] accumulated as
a *suffix* sum \Phi_t = \sum_{s >= t} a_s, and fixed angles \Phi_t = (T - 1 - t) k of integer
frequencies; ``roformer`` puts the fixed angles on q and k only.

In every variant q, k and v are rotated by +\Phi_t, the scores are wei[t, s] = <k_t, q_s> C^{-1/2}
(the script's ``k @ q^T``: rows index the attending position), and the output of position t is
rotated back by -\Phi_t: c_t = \sum_{s <= t} w_{ts} R(\Phi_s - \Phi_t) v_s.

The model around it is the scripts': per-token: a token embedding of width C/2 expanded by a
Linear(C/2, C); fixed and roformer: a token embedding of width C (the scripts also define a position
embedding and a feed-forward block that their forward never uses: left out, so parameter counts are
the used ones); pre-LayerNorm blocks x + attn(ln1 x), x + ffn(ln2 x), ffn Linear(C, 4C)-ReLU-
Linear(4C, C)-Dropout; an untied Linear(C, V) head; no final LayerNorm. Defaults are the per-token
script's hyperparameters (C = 90, 3 layers, block 20, dropout 0.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from ..errors import InputError
from ..io import Record
from .journey import rotate_by, rotate_pairs, rotor

REFERENCE_VARIANTS = ("per-token", "fixed", "roformer")
NORMALISATIONS = ("softplus", "softmax")


@dataclass(frozen=True)
class ReferenceConfig(Record):
    """The reference scripts' model; defaults are ``journey_transformer_per_token_angles.py``'s."""

    vocab_size: int
    n_embed: int = 90
    n_layers: int = 3
    block_size: int = 20
    dropout: float = 0.2
    variant: str = "per-token"
    normalisation: str = "softplus"

    def __post_init__(self) -> None:
        if self.variant not in REFERENCE_VARIANTS:
            raise InputError(
                f"unknown reference variant {self.variant!r}; choose one of {', '.join(REFERENCE_VARIANTS)}"
            )
        if self.normalisation not in NORMALISATIONS:
            raise InputError(f"unknown normalisation {self.normalisation!r}; choose softplus or softmax")
        if self.n_embed < 2 or self.n_embed % 2:
            raise InputError(f"the reference rotates pairs: n_embed must be even and >= 2, got {self.n_embed}")
        if self.vocab_size < 1 or self.n_layers < 1 or self.block_size < 1:
            raise InputError("vocab_size, n_layers and block_size must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise InputError(f"dropout must be in [0, 1), got {self.dropout}")


def suffix_sum(angles: torch.Tensor) -> torch.Tensor:
    r"""\Phi_t = \sum_{s >= t} a_s along dim 1: the script's flip - cumsum - flip. (B, T, C/2) -> same."""
    return torch.flip(torch.cumsum(torch.flip(angles, dims=(1,)), dim=1), dims=(1,))


def reversed_integer_angles(length: int, pairs: int, device: torch.device | None = None) -> torch.Tensor:
    r"""\Phi_t = (T - 1 - t) k, k = 0..pairs - 1: the fixed script's angles, (1, T, pairs) float32."""
    t = torch.arange(length, device=device, dtype=torch.float32)
    k = torch.arange(pairs, device=device, dtype=torch.float32)
    return torch.flip(torch.outer(t, k), dims=(0,))[None]


def reference_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    frames: torch.Tensor,
    *,
    normalisation: str = "softplus",
    transport_values: bool = True,
    dropout: nn.Module | None = None,
) -> torch.Tensor:
    r"""c_t = R(-\Phi_t) \sum_{s <= t} w_{ts} R(\Phi_s) v_s with w from <R(\Phi_t) k_t, R(\Phi_s) q_s> C^{-1/2}.

    q, k, v: (B, T, C); frames \Phi: (B|1, T, C/2). softplus: w = log(1 + e^score) below the diagonal,
    0 above; softmax: the usual causal softmax. ``transport_values=False`` (RoFormer): values and output
    are not rotated. Returns (B, T, C). O(T^2 C): the scores are materialised, as in the scripts.
    """
    T, C = q.shape[1], q.shape[2]
    turn = rotor(frames)
    q, k = rotate_pairs(q, frames), rotate_pairs(k, frames)
    scores = k @ q.transpose(-1, -2) * C**-0.5  # (B, T, T): rows attend
    above = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(above, float("-inf"))
    # softplus(-inf) = 0: the masked entries carry no weight; nothing normalises the rows
    weights = F.softplus(scores) if normalisation == "softplus" else scores.softmax(dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    if not transport_values:
        return weights @ v
    return rotate_by(weights @ rotate_by(v, turn), turn.conj())  # (B, T, C)


class ReferenceAttention(nn.Module):
    """One head over the full width, the scripts' ``Attention``."""

    def __init__(self, config: ReferenceConfig) -> None:
        super().__init__()
        C = config.n_embed
        self.keys, self.queries, self.values = nn.Linear(C, C), nn.Linear(C, C), nn.Linear(C, C)
        self.proj = nn.Linear(C, C)
        self.attn_dropout, self.resid_dropout = nn.Dropout(config.dropout), nn.Dropout(config.dropout)
        self.normalisation = config.normalisation
        self.transport_values = config.variant != "roformer"

    def forward(self, x: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        y = reference_attention(
            self.queries(x),
            self.keys(x),
            self.values(x),
            frames,
            normalisation=self.normalisation,
            transport_values=self.transport_values,
            dropout=self.attn_dropout,
        )
        return self.resid_dropout(self.proj(y))  # type: ignore[no-any-return]


class ReferenceBlock(nn.Module):
    def __init__(self, config: ReferenceConfig) -> None:
        super().__init__()
        C = config.n_embed
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = ReferenceAttention(config)
        self.ffn = nn.Sequential(nn.Linear(C, 4 * C), nn.ReLU(), nn.Linear(4 * C, C), nn.Dropout(config.dropout))

    def forward(self, x: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), frames)
        return x + self.ffn(self.ln2(x))  # type: ignore[no-any-return]


class ReferenceJoFormer(nn.Module):
    """The reference character LM; ``model(ids)["logits"]`` (B, T, V), as :class:`~.transformer.Transformer`."""

    def __init__(self, config: ReferenceConfig) -> None:
        super().__init__()
        self.config = config
        C, V = config.n_embed, config.vocab_size
        if config.variant == "per-token":
            self.tok_emb: nn.Module = nn.Sequential(nn.Embedding(V, C // 2), nn.Linear(C // 2, C))
            self.angle_emb: nn.Embedding | None = nn.Embedding(V, C // 2)
        else:
            self.tok_emb, self.angle_emb = nn.Embedding(V, C), None
        self.blocks = nn.ModuleList(ReferenceBlock(config) for _ in range(config.n_layers))
        self.lm_head = nn.Linear(C, V)

    def frames(self, ids: torch.Tensor) -> torch.Tensor:
        r"""\Phi: (B, T, C/2) (per-token: suffix sums of the token angles) or (1, T, C/2) (fixed angles)."""
        if self.angle_emb is not None:
            return suffix_sum(self.angle_emb(ids))
        return reversed_integer_angles(ids.shape[1], self.config.n_embed // 2, ids.device)

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        frames = self.frames(input_ids)
        x = self.tok_emb(input_ids)  # (B, T, C)
        for block in self.blocks:
            x = block(x, frames)
        return {"logits": self.lm_head(x)}  # (B, T, V)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
