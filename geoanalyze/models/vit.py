"""A small vision transformer over a grid of patches, with the positional rotation as its one axis.

    x = Linear(patches)                          (B, T, d)   T = (H / p) (W / p), row by row; no [CLS]
    x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))    per block; attention knows the (H/p, W/p) grid
    logits = head(ln_f(x).mean over T)           (B, n_classes)

``rotation`` picks how the grid enters attention:

none              plain attention: with mean pooling the model is blind to the patch layout
rope2d            2D-RoPE: axial rotations of queries and keys (rows on half the pairs, columns on the other)
rope2d-learned    2D-RoPE with learned axial frequency vectors per layer, values not transported
joformer-fixed    the same rotations, and values transported (rotate by -phi_j, attend, rotate by +phi_k)
joformer-learned  learned axial frequency vectors per layer, values transported (the paper's ViT variant)
dense             curved: dense frames exp(r S_1 + c S_2) with learned non-commuting S_a, values transported
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import InputError
from ..io import Record
from .attention import SelfAttention
from .config import ModelConfig
from .joformer import JoFormerAttention
from .transformer import Block, init_weights

ROTATIONS = ("none", "rope2d", "rope2d-learned", "joformer-fixed", "joformer-learned", "dense")
#: rotation -> (JoFormer variant, values transported)
_ATTENTION = {
    "rope2d": ("fixed", False),
    "rope2d-learned": ("learned", False),
    "joformer-fixed": ("fixed", True),
    "joformer-learned": ("learned", True),
    "dense": ("dense", True),
}


@dataclass
class ViTConfig(Record):
    """A small ViT; image_size must be a multiple of patch. ``rotation`` is one of :data:`ROTATIONS`."""

    image_size: int = 8
    patch: int = 2
    channels: int = 1
    n_classes: int = 10
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 128
    dropout: float = 0.0
    rotation: str = "rope2d"
    rope_base: float = 100.0

    def __post_init__(self) -> None:
        if self.rotation not in ROTATIONS:
            raise InputError(f"unknown rotation {self.rotation!r}; choose one of {', '.join(ROTATIONS)}")
        if self.image_size % self.patch:
            raise InputError(
                f"image_size {self.image_size} is not a multiple of patch {self.patch}; choose a patch dividing it"
            )
        # The attention checks the head width (even, dividing d_model) through ModelConfig.
        self.model_config()

    @property
    def grid(self) -> tuple[int, int]:
        side = self.image_size // self.patch
        return side, side

    def model_config(self) -> ModelConfig:
        """The attention's view of the model (a bidirectional, table-free ModelConfig)."""
        rows, cols = self.grid
        return ModelConfig(
            arch="bert",
            vocab_size=1,
            n_positions=rows * cols,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            pe="none",
            rope_base=self.rope_base,
            attention="standard" if self.rotation == "none" else "joformer-fixed",
        )

def vit_block(config: ViTConfig) -> Block:
    """A pre-LN block whose attention knows the patch grid."""
    model = config.model_config()
    if config.rotation == "none":
        return Block(model, SelfAttention(model))
    variant, transport = _ATTENTION[config.rotation]
    return Block(model, JoFormerAttention(model, variant=variant, grid=config.grid, transport_values=transport))


class ViT(nn.Module):
    """Images (B, C, H, W) -> class logits (B, n_classes)."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Linear(config.channels * config.patch**2, config.d_model)
        self.blocks = nn.ModuleList(vit_block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.n_classes)
        self.apply(init_weights)

    def patches(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, T, C p^2), patches row by row."""
        c = self.config
        if images.ndim != 4 or images.shape[1:] != (c.channels, c.image_size, c.image_size):
            raise InputError(
                f"images have shape {tuple(images.shape)}; expected (batch, {c.channels}, {c.image_size}, {c.image_size})"
            )
        B, p = images.shape[0], c.patch
        x = images.unfold(2, p, p).unfold(3, p, p)  # (B, C, H/p, W/p, p, p)
        return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, c.channels * p * p)  # (B, T, C p^2)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.embed(self.patches(images))  # (B, T, d)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x).mean(dim=1))  # (B, n_classes)
