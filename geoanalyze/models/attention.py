r"""Multi-head self-attention through ``torch.nn.functional.scaled_dot_product_attention``.

softmax(q k^T / \sqrt{hs} + M) v per head, where M is one additive mask built once per forward
pass by :func:`build_attention_mask` from ALiBi's bias, causality and padding; queries and keys are
rotated first when the encoding is RoPE.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from ..errors import InputError
from .config import ModelConfig
from .positional import apply_rope

#: RoPE's (cos, sin), each (T, hs/2), that attention applies to queries and keys
CosSin = tuple[torch.Tensor, torch.Tensor]


def build_attention_mask(
    length: int,
    *,
    causal: bool,
    bias: torch.Tensor | None = None,
    padding: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor | None:
    """The additive mask M of all heads, (B or 1, nh or 1, T, T); None when causality alone is needed.

    Parameters
    ----------
    length : sequence length T.
    causal : forbid keys j > i.
    bias : (nh, T, T) scores bias (ALiBi), or None.
    padding : (B, T), nonzero / True at real tokens and 0 / False at padding, or None.
    dtype : the dtype of the scores.

    Forbidden entries get the dtype's most negative finite value rather than -inf, so a query
    whose keys are all padding attends uniformly instead of producing NaN.
    """
    if bias is None and padding is None:
        return None  # the attention uses is_causal, the fast path
    device = bias.device if bias is not None else cast(torch.Tensor, padding).device
    allowed = torch.ones(length, length, dtype=torch.bool, device=device)
    if causal:
        allowed = allowed.tril()
    allowed = allowed[None, None]  # (1, 1, T, T)
    if padding is not None:
        if padding.shape[-1] != length or padding.ndim != 2:
            raise InputError(f"attention_mask has shape {tuple(padding.shape)}; expected (batch, {length})")
        allowed = allowed & padding.bool()[:, None, None, :]  # (B, 1, T, T): keys that are tokens
    scores = torch.zeros(1, 1, length, length, dtype=dtype, device=device) if bias is None else bias[None].to(dtype)
    return scores.masked_fill(~allowed, torch.finfo(dtype).min)  # (B|1, nh|1, T, T)


class SelfAttention(nn.Module):
    """Multi-head self-attention; ``causal`` applies when no explicit mask is passed."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.causal = config.causal
        self.attn_dropout = config.dropout  # on the attention weights, inside SDPA
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, rotation: CosSin | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C).

        rotation : RoPE's (cos, sin), each (T, hs/2), applied to q and k.
        mask : :func:`build_attention_mask`'s additive mask (it already holds causality); None: plain
            or causal attention by ``self.causal``.
        """
        q, k, v = self.heads(x)  # (B, nh, T, hs) each
        if rotation is not None:
            cos, sin = rotation
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.attn_dropout if self.training else 0.0,
            is_causal=self.causal and mask is None,
        )  # (B, nh, T, hs)
        return self.output(y)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of x (B, T, C), each (B, nh, T, hs)."""
        B, T, C = x.shape
        q, k, v = (part.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for part in self.qkv(x).split(C, 2))
        return q, k, v

    def output(self, y: torch.Tensor) -> torch.Tensor:
        """The heads' outputs (B, nh, T, hs) side by side (B, T, C), projected."""
        B, _, T, _ = y.shape
        return cast(torch.Tensor, self.resid_dropout(self.proj(y.transpose(1, 2).contiguous().view(B, T, -1))))
