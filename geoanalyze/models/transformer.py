"""A small BERT / GPT: token embedding, positional encoding, pre-LN blocks, final LayerNorm, heads.

    x = E[ids] (+ P[:T])                       (B, T, d)
    x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))  per block
    h = ln_f(x)                                (B, T, d)
    logits = head(h) @ E^T                     (B, T, V)   tied to the token embedding
    cls_logits = linear(h[pooled])             (B, n_classes)

bert: bidirectional attention, a masked-LM head (dense, GELU, LayerNorm, tied decoder plus bias);
the classification head reads position 0 ([CLS]). gpt: causal attention, a tied next-token head;
the classification head reads the last real token, the only one that sees the whole sequence.

A saved model is a folder: ``model.safetensors`` (the state dict; its header names the kind) and
``config.json`` (:meth:`ModelConfig.to_dict`). Loading rebuilds the model from the config and fills
it from the weights: no pickle, no code from the file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (PyTorch's own convention)

from ..errors import FormatError, InputError
from ..io import FORMAT_VERSION, METADATA_KEY, atomic_path, read_metadata, write_text
from .attention import CosSin, SelfAttention, build_attention_mask
from .config import ModelConfig
from .positional import positional_encoding

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
MODEL_KIND = "model"


def make_attention(config: ModelConfig) -> nn.Module:
    """The attention module of one block, by ``config.attention``; each has SelfAttention's forward signature."""
    if config.attention == "standard":
        return SelfAttention(config)
    from .joformer import JoFormerAttention  # only JoFormer models pay for its import

    return JoFormerAttention(config)


class MLP(nn.Module):
    """d -> d_ff -> d with a GELU in between."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff)
        self.proj = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))  # (B, T, d) -> (B, T, d_ff) -> (B, T, d)


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: ModelConfig, attention: nn.Module | None = None) -> None:
        """``attention``: the block's attention, made by the caller (a ViT's knows the patch grid), else by
        :func:`make_attention`."""
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = make_attention(config) if attention is None else attention
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(
        self, x: torch.Tensor, rotation: CosSin | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), rotation, mask)  # (B, T, d)
        return x + self.mlp(self.ln_2(x))  # (B, T, d)


class Transformer(nn.Module):
    """The model :class:`ModelConfig` describes.

    Parameters
    ----------
    config : the configuration.
    read_pe_file : read ``config.pe_file`` for an mds table; :meth:`load` passes False and fills
        the table from the saved weights instead.
    """

    def __init__(self, config: ModelConfig, *, read_pe_file: bool = True) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pe = positional_encoding(config, read_file=read_pe_file)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.mlm_transform: nn.Module | None = None
        self.mlm_bias: nn.Parameter | None = None
        if config.arch == "bert":
            self.mlm_transform = nn.Sequential(
                nn.Linear(config.d_model, config.d_model), nn.GELU(), nn.LayerNorm(config.d_model)
            )
            self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.classifier = nn.Linear(config.d_model, config.n_classes) if config.n_classes else None
        self.apply(init_weights)
        # GPT-2's scaling: each residual branch's output projection shrinks with depth.
        for name, parameter in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.proj.weight")):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layers))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        logits_at: torch.Tensor | None = None,
        all_hidden_states: bool = False,
    ) -> dict[str, torch.Tensor]:
        """Run the model.

        Parameters
        ----------
        input_ids : (B, T) token ids.
        attention_mask : (B, T), 1 at real tokens and 0 at padding (keys at padding are ignored).
        logits_at : (B, T) bool; when given, token logits are computed at these positions only and
            returned as (N, V), N = logits_at.sum(). The (B T, d) x (d, V) head dominates a step
            on a 30k vocabulary, and MLM labels 15% of the tokens.
        all_hidden_states : also return ``layers``: (L + 1, B, T, d), the embeddings (positional
            signal added) and every block's output, before the final LayerNorm (as transformers'
            ``output_hidden_states``).

        Returns
        -------
        dict with ``hidden_states`` (B, T, d) after the final LayerNorm, ``logits`` (B, T, V), or
        (N, V) with ``logits_at`` (masked-LM for bert, next-token for gpt), ``cls_logits``
        (B, n_classes) when n_classes > 0, and ``layers`` when asked for.
        """
        if input_ids.ndim != 2:
            raise InputError(f"input_ids has shape {tuple(input_ids.shape)}; expected (batch, length)")
        if attention_mask is not None and attention_mask.shape != input_ids.shape:
            raise InputError(
                f"attention_mask has shape {tuple(attention_mask.shape)} but input_ids {tuple(input_ids.shape)}; "
                "pass one mask entry per token"
            )
        T = input_ids.shape[1]
        causal = self.config.causal
        x = self.drop(self.pe.add_to(self.tok_emb(input_ids)))  # (B, T, d)
        rotation = self.pe.rotation(T)  # (T, hs/2) cos and sin, or None
        mask = build_attention_mask(
            T, causal=causal, bias=self.pe.attention_bias(T, causal), padding=attention_mask, dtype=x.dtype
        )  # (B|1, nh|1, T, T) or None
        layers = [x]
        for block in self.blocks:
            x = block(x, rotation, mask)
            layers.append(x)
        h = self.ln_f(x)  # (B, T, d)
        selected = h if logits_at is None else h[logits_at]  # (B, T, d) or (N, d)
        if self.mlm_transform is not None:
            logits = F.linear(self.mlm_transform(selected), self.tok_emb.weight, self.mlm_bias)  # (..., V)
        else:
            logits = F.linear(selected, self.tok_emb.weight)  # (..., V)
        outputs = {"hidden_states": h, "logits": logits}
        if all_hidden_states:
            outputs["layers"] = torch.stack(layers)  # (L + 1, B, T, d)
        if self.classifier is not None:
            outputs["cls_logits"] = self.classifier(self._pooled(h, attention_mask))  # (B, n_classes)
        return outputs

    def position_vectors(self, n: int) -> np.ndarray:
        """The (n, k) float64 vectors of positions 0..n-1 the stress scores use (see positional.py).

        The table, RoPE's or ALiBi's vectors from the encoding; a JoFormer model's from its first
        block's attention, which carries the positions there.
        """
        if self.config.attention != "standard":
            vectors = getattr(self.blocks[0].attn, "position_vectors", None)
            if callable(vectors):
                return np.asarray(vectors(n), dtype=np.float64)
        return self.pe.position_vectors(n)

    def _pooled(self, h: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """The hidden state that summarises each sequence, (B, d): [CLS] for bert, the last real token for gpt."""
        if not self.config.causal:
            return h[:, 0]
        if attention_mask is None:
            return h[:, -1]
        index = torch.arange(h.shape[1], device=h.device)
        last = (attention_mask.bool() * index).argmax(dim=1)  # (B,): works for left and right padding
        return h[torch.arange(h.shape[0], device=h.device), last]

    # --- saving and loading ---------------------------------------------------------------------

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write ``model.safetensors`` and ``config.json`` into ``folder`` (created if needed), each atomically."""
        from safetensors.torch import save_file

        target = Path(folder).expanduser()
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create folder {target}: {exc.strerror}; choose another output folder") from exc
        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in self.state_dict().items()}
        header = {METADATA_KEY: json.dumps({"kind": MODEL_KIND, "format_version": FORMAT_VERSION})}
        with atomic_path(target / WEIGHTS_FILE) as tmp:
            save_file(tensors, str(tmp), metadata=header)
        write_text(target / CONFIG_FILE, json.dumps(self.config.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, folder: str | os.PathLike[str], device: str | torch.device = "cpu") -> Transformer:
        """Rebuild a model written by :meth:`save`, in eval mode on ``device``."""
        from safetensors.torch import load_file

        source = Path(folder).expanduser()
        weights, config_file = source / WEIGHTS_FILE, source / CONFIG_FILE
        if not weights.is_file() or not config_file.is_file():
            raise InputError(
                f"{source} lacks {WEIGHTS_FILE} or {CONFIG_FILE}; pass a folder written by Transformer.save"
            )
        document = read_metadata(weights)
        if document is None or document.get("kind") != MODEL_KIND:
            raise FormatError(f"{weights} is not a geoanalyze model; pass a folder written by Transformer.save")
        if document.get("format_version") != FORMAT_VERSION:
            raise FormatError(
                f"{weights} has format version {document.get('format_version')}, this geoanalyze reads "
                f"{FORMAT_VERSION}; save the model again with this version"
            )
        try:
            config_document = json.loads(config_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FormatError(f"{config_file} is not valid JSON ({exc}); save the model again") from exc
        model = cls(ModelConfig.from_dict(config_document), read_pe_file=False)
        try:
            model.load_state_dict(load_file(str(weights)), strict=True)
        except RuntimeError as exc:
            reason = str(exc).strip().splitlines()[-1].strip()
            raise FormatError(f"{weights} does not fit {config_file} ({reason}); save the model again") from exc
        return model.to(device).eval()


def init_weights(module: nn.Module) -> None:
    """nanoGPT's initialisation: N(0, 0.02) weights, zero biases; LayerNorms keep (1, 0)."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
