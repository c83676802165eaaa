r"""A GPT-style model for continuous sequences whose shortcut is any residual operator of :mod:`.residual`.

    h = W_in x                                        (B, T, d_in) -> (B, T, d)
    h = res_attn(h, ln_1, attn); h = res_mlp(h, ln_2, mlp)   per block (causal attention)
    y = W_out ln_f(h)                                 (B, T, d_out)

With ``residual="plain"`` a block is nanoGPT's (h + attn(ln(h)), then h + mlp(ln(h))); the other
kinds change only what the shortcut does (:mod:`.residual`). ``positions > 0`` adds a learned
position table after the input projection (the reference code's wrapper); 0 (our causal
design) has none: the synthetic tasks are per-step maps that causal attention solves without
positions.

:data:`PRESETS` are our models matched at ~1.78M parameters (n_embd 128, 4 heads, 4 streams):
GPT 9 layers, DDL 8, mHC 9, JPmHC 7, EΔ 6. :data:`REFERENCE_PRESETS` are the reference code's
(commit f51372f): the same layer counts, its baselines (``ddl-ref``, ``mhc-ref``, ``jpmhc-ref`` at
n_embd 512), sequence-pooled (non-causal) EΔ and DDL generators, no biases in attention, MLP and
LayerNorms, a learned position table, and every Linear drawn from N(0, 0.02).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from ..errors import InputError
from ..io import Record
from .attention import SelfAttention
from .config import ModelConfig
from .residual import (
    GATES,
    NARROW_BRANCH,
    POOLINGS,
    RESIDUALS,
    DenseCayleyResidual,
    Generators,
    HybridResidual,
    Residual,
    ResidualSpec,
    make_residual,
)
from .transformer import MLP

#: the paper's five models at ~1.78M parameters (n_embd 128). The paper gives the layer counts;
#: the generator widths of DDL (46) and JPmHC (208, no d x d pre / post maps) are ours, chosen so
#: the counts match GPT's within 1%.
PRESETS: dict[str, dict[str, Any]] = {
    "gpt": {"residual": "plain", "n_layers": 9},
    "ddl": {"residual": "ddl", "n_layers": 8, "hidden": 46},
    "mhc": {"residual": "mhc", "n_layers": 9},
    "jpmhc": {"residual": "jpmhc", "n_layers": 7, "hidden": 208, "branch_maps": False},
    "edelta": {"residual": "hybrid", "n_layers": 6},
}
#: the reference code's five models (train_continuous.py with --match_proposed_params); n_embd_factor
#: multiplies the experiment's width (JPmHC: 512 = 4 x 128, so that F runs at d / n = 128)
REFERENCE_PRESETS: dict[str, dict[str, Any]] = {
    "gpt": {"residual": "plain", "n_layers": 9},
    "ddl": {"residual": "ddl-ref", "n_layers": 8, "pooling": "sequence"},
    "mhc": {"residual": "mhc-ref", "n_layers": 9},
    "jpmhc": {"residual": "jpmhc-ref", "n_layers": 7, "n_embd_factor": 4},
    "edelta": {"residual": "hybrid", "n_layers": 6, "pooling": "sequence"},
}
REFERENCE_COMMON: dict[str, Any] = {"init": "reference", "bias": False}
MODEL_NAMES = tuple(PRESETS)
INITS = ("default", "reference")


@dataclass
class EDeltaConfig(Record):
    """The model: a few enumerated axes, validated on creation.

    Attributes
    ----------
    residual : the shortcut, one of :data:`~.residual.RESIDUALS`.
    d_in, d_out : input and output vector widths (d_out 0: same as d_in).
    n_embd : residual width d.
    n_layers : blocks.
    n_heads : attention heads; must divide n_embd.
    n_streams : n, the residual state read as n x (d / n); must divide n_embd.
    hidden : width of the generator networks (0: n_embd / 4, as the reference).
    pooling : "token" (causal, default) or "sequence" (the reference's mean over positions; not causal).
    gate_bias : initial gate logit of the hybrid (gamma = sigmoid(gate_bias) at init).
    gate_weight : weight of L_gate = 4 gamma (1 - gamma) in the loss (reference 0.1).
    beta_max : DDL's largest beta, in (0, 2].
    branch_maps : the d x d pre / post maps around the branch (jpmhc, cayley, householder, hybrid).
    dropout : dropout on attention and branches.
    positions : length of a learned position table added after the input projection (0: none).
    init : "default" (N(0, 0.02) matrices; generators keep PyTorch's default, pre / post maps the
        identity) or "reference" (every Linear N(0, 0.02), the gate alone kept at weight 0, bias
        gate_bias, as the reference code).
    bias : biases in the attention and MLP Linears and the LayerNorms (the reference has none).
    gate : "plain" (gamma = sigmoid(logit), the paper) or "entropy" (the reference code's
        sigmoid(logit (1 + phi)), :func:`~.residual.entropy_proxy`).
    """

    residual: str = "hybrid"
    d_in: int = 16
    d_out: int = 0
    n_embd: int = 128
    n_layers: int = 6
    n_heads: int = 4
    n_streams: int = 4
    hidden: int = 0
    pooling: str = "token"
    gate_bias: float = 0.0
    gate_weight: float = 0.1
    beta_max: float = 2.0
    branch_maps: bool = True
    dropout: float = 0.0
    positions: int = 0
    init: str = "default"
    bias: bool = True
    gate: str = "plain"

    def __post_init__(self) -> None:
        # a tuple: the choices; a number: the least integer
        checks = [("init", INITS), ("gate", GATES), ("positions", 0), ("residual", RESIDUALS), ("pooling", POOLINGS)]
        checks += [("d_in", 1), ("d_out", 0), ("n_embd", 1), ("n_layers", 1), ("n_heads", 1)]
        for name, rule in [*checks, ("n_streams", 1), ("hidden", 0)]:
            value = getattr(self, name)
            if isinstance(rule, tuple) and value not in rule:
                raise InputError(f"unknown {name} {value!r}; choose one of {', '.join(rule)}")
            if isinstance(rule, int) and (not isinstance(value, int) or isinstance(value, bool) or value < rule):
                raise InputError(f"{name} must be an integer >= {rule}, got {value!r}")
        if self.n_embd % self.n_heads:
            raise InputError(
                f"n_embd {self.n_embd} is not divisible by n_heads {self.n_heads}; choose n_heads dividing it"
            )
        if self.n_embd % self.n_streams:
            raise InputError(
                f"n_embd {self.n_embd} is not divisible by n_streams {self.n_streams}; choose n_streams dividing it"
            )
        if not (isinstance(self.gate_bias, (int, float)) and math.isfinite(self.gate_bias)):
            raise InputError(f"gate_bias must be a finite number, got {self.gate_bias!r}")
        if not (
            isinstance(self.gate_weight, (int, float)) and math.isfinite(self.gate_weight) and self.gate_weight >= 0
        ):
            raise InputError(f"gate_weight must be a finite number >= 0, got {self.gate_weight!r}")
        if not (isinstance(self.beta_max, (int, float)) and 0 < self.beta_max <= 2):
            raise InputError(f"beta_max must lie in (0, 2] (DDL's beta range), got {self.beta_max!r}")
        if not 0 <= self.dropout < 1:
            raise InputError(f"dropout must be within [0, 1), got {self.dropout}")

    @property
    def generator_width(self) -> int:
        return self.hidden or max(1, self.n_embd // 4)

    @property
    def branch_width(self) -> int:
        """Width of the attention and MLP branches: d, or d / n for JPmHC's parallel routing."""
        return self.n_embd // self.n_streams if self.residual in NARROW_BRANCH else self.n_embd

    @property
    def branch_heads(self) -> int:
        """Heads of the branch attention: n_heads, lowered until it divides a narrow branch (the reference's rule)."""
        heads = min(self.n_heads, self.branch_width)
        while self.branch_width % heads:
            heads -= 1
        return heads


def preset_config(name: str, reference: bool = False, **overrides: Any) -> EDeltaConfig:
    """The paper's model ``name`` (one of :data:`MODEL_NAMES`), ours or (``reference``) the reference
    code's, with ``overrides`` applied (``n_embd`` is multiplied by the preset's n_embd_factor)."""
    if name not in PRESETS:
        raise InputError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    fields = {**REFERENCE_COMMON, **REFERENCE_PRESETS[name]} if reference else dict(PRESETS[name])
    factor = fields.pop("n_embd_factor", 1)
    overrides = dict(overrides)
    overrides["n_embd"] = overrides.get("n_embd", EDeltaConfig.n_embd) * factor
    return replace(EDeltaConfig(**fields), **overrides)


class EDeltaBlock(nn.Module):
    """Attention then MLP, each behind its own residual operator."""

    def __init__(self, config: EDeltaConfig) -> None:
        super().__init__()
        width = config.branch_width
        inner = ModelConfig(
            arch="gpt",
            vocab_size=1,
            n_positions=1,
            d_model=width,
            n_heads=config.branch_heads,
            d_ff=4 * width,
            dropout=config.dropout,
            pe="none",
        )
        self.ln_1 = nn.LayerNorm(width, bias=config.bias)
        self.attn = SelfAttention(inner)
        self.ln_2 = nn.LayerNorm(width, bias=config.bias)
        self.mlp = MLP(inner)
        if not config.bias:
            for layer in (self.attn.qkv, self.attn.proj, self.mlp.fc, self.mlp.proj):
                layer.register_parameter("bias", None)
        self.res_attn = _residual(config)
        self.res_mlp = _residual(config)
        # Both branches take their input through their first Linear and give it out through their
        # last, so the EΔ pre / post maps may be folded into those weights (residual.py). Dropout
        # after the last Linear would sit inside the fold, so only without dropout.
        for branch in (self.attn, self.mlp):
            setattr(branch, "folds_maps", config.dropout == 0.0)  # noqa: B010 (a flag on a module we do not own)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.res_attn(x, self.ln_1, self.attn)  # (B, T, d)
        return self.res_mlp(x, self.ln_2, self.mlp)  # (B, T, d)


def _residual(config: EDeltaConfig) -> Residual:
    return ResidualSpec(
        config.residual,
        config.n_embd,
        n_streams=config.n_streams,
        hidden=config.generator_width,
        pooling=config.pooling,
        maps=config.branch_maps,
        gate_bias=config.gate_bias,
        gate_weight=config.gate_weight,
        beta_max=config.beta_max,
        gate=config.gate,
    ).build()


class EDeltaModel(nn.Module):
    """The model :class:`EDeltaConfig` describes: (B, T, d_in) -> (B, T, d_out)."""

    def __init__(self, config: EDeltaConfig) -> None:
        super().__init__()
        self.config = config
        self.w_in = nn.Linear(config.d_in, config.n_embd)
        self.pos = nn.Parameter(torch.zeros(1, config.positions, config.n_embd)) if config.positions else None
        self.blocks = nn.ModuleList(EDeltaBlock(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.w_out = nn.Linear(config.n_embd, config.d_out or config.d_in)
        self._init_weights()

    def _init_weights(self) -> None:
        """nanoGPT's N(0, 0.02) matrices and zero biases, branch output projections scaled by depth;
        then each residual restores what its method fixes (gate logit = gate_bias, identity maps).

        ``init="default"`` leaves the generator networks at PyTorch's default; ``"reference"`` draws
        them (and the pre / post maps) from N(0, 0.02) too, as the reference code."""
        reference = self.config.init == "reference"
        generators = (
            set() if reference else {id(m) for g in self.modules() if isinstance(g, Generators) for m in g.modules()}
        )
        if self.pos is not None:
            nn.init.normal_(self.pos, mean=0.0, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear) and id(module) not in generators:
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for name, parameter in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.proj.weight")):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * self.config.n_layers))
        for residual in self.residuals():
            residual.init_special(reference)

    def residuals(self) -> list[Residual]:
        """Every residual operator, in order (two per block)."""
        return [m for m in self.modules() if isinstance(m, Residual)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != self.config.d_in:
            raise InputError(f"input has shape {tuple(x.shape)}; expected (batch, length, {self.config.d_in})")
        h = self.w_in(x)  # (B, T, d)
        if self.pos is not None:
            if x.shape[1] > self.pos.shape[1]:
                raise InputError(
                    f"sequence of {x.shape[1]} steps is longer than the position table ({self.pos.shape[1]}); "
                    "build the model with positions >= the sequence length"
                )
            h = h + self.pos[:, : x.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.w_out(self.ln_f(h))  # (B, T, d_out)

    def shortcut(self, h: torch.Tensor) -> torch.Tensor:
        """The composed shortcut maps of every block with the branches switched off, (B, T, d) -> (B, T, d)."""
        for residual in self.residuals():
            h = residual.operator(h)
        return h

    def aux_loss(self) -> torch.Tensor | float:
        """Sum of the residuals' regularisers of the last forward pass (L_gate of the hybrids)."""
        return sum((r.aux_loss for r in self.residuals()), start=0.0)

    def gate(self) -> float | None:
        """Mean gamma over the hybrids' last forward pass, or None without a gate."""
        gates = [r.gate.mean() for r in self.residuals() if isinstance(r, HybridResidual) and r.gate is not None]
        return float(torch.stack(gates).mean()) if gates else None


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class BareOperator(nn.Module):
    """One residual operator alone on vectors, (B, d) -> (B, d): n = d streams of width 1 (the negation task).

    Parameters
    ----------
    kind : one of :data:`~.residual.RESIDUALS`.
    d : vector width.
    hidden : width of the generator networks (128 in the paper).
    gate_bias : initial gate logit of the hybrid (-1.5 in the paper).
    gate_weight : weight of L_gate.
    reference : the reference's bare operators (train_reflection.py): u and v of the Cayley
        rotation normalised and orthogonalised (t = beta / 2); JPmHC as a full n x n generator
        (d -> hidden -> d^2) through 2 fixed-point Cayley iterations from the identity, unbounded.
    """

    def __init__(
        self,
        kind: str,
        d: int = 64,
        hidden: int = 128,
        gate_bias: float = -1.5,
        gate_weight: float = 0.1,
        reference: bool = False,
    ):
        super().__init__()
        self.residual: Residual
        if reference and kind == "jpmhc":
            self.residual = DenseCayleyResidual(d, hidden)
            return
        self.residual = make_residual(
            kind,
            d,
            n_streams=d,
            hidden=hidden,
            maps=False,
            gate_bias=gate_bias,
            gate_weight=gate_weight,
            unit=reference and kind in ("cayley", "hybrid"),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.residual.operator(x[:, None, :])[:, 0]  # (B, 1, d) -> (B, d)

    def aux_loss(self) -> torch.Tensor | float:
        return self.residual.aux_loss

    def gate(self) -> float | None:
        return None if self.residual.gate is None else float(self.residual.gate.mean())
