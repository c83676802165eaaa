"""The one configuration of a model: a dataclass with a few enumerated axes.

``arch`` picks the attention pattern and the token head (bert: bidirectional + masked-LM head;
gpt: causal + next-token head); ``pe`` picks how positions enter the model:

none        no positional signal (the model is permutation-equivariant: Theorem 1)
sinusoidal  Vaswani et al.'s fixed table, added to the token embeddings
learned     a trained n x d table, added
lowrank     P = A W with A (n x r) and W (r x d) both trained: r (n + d) parameters instead of n d
mds         the rows of a PE file written by ``geoanalyze mds``, added (frozen by default)
rope        rotary: queries and keys rotated by position (no table)
alibi       a linear distance bias -m_h |i - j| on the attention scores (no table)

Importing this module does not import torch, so configurations can be read and checked cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..errors import InputError
from ..io import Record

ARCHS = ("bert", "gpt")
PE_KINDS = ("none", "sinusoidal", "learned", "lowrank", "mds", "rope", "alibi")
#: kinds whose positions are an (n, d) table added to the token embeddings
TABLE_KINDS = ("sinusoidal", "learned", "lowrank", "mds")
#: whether a table is trained when ``pe_trainable`` is left unset
TRAINED_BY_DEFAULT = {"sinusoidal": False, "learned": True, "lowrank": True, "mds": False}
#: how a block attends: standard multi-head attention, or one of JoFormer's variants (models/joformer.py)
ATTENTIONS = ("standard", "joformer-fixed", "joformer-learned", "joformer-projected")


@dataclass
class ModelConfig(Record):
    """Everything needed to rebuild a model; JSON-safe through :meth:`to_dict` / :meth:`from_dict`.

    Attributes
    ----------
    arch : "bert" (bidirectional, masked-LM head) or "gpt" (causal, next-token head).
    vocab_size : number of token ids.
    n_positions : longest sequence a table encoding covers (rope, alibi and none extrapolate).
    d_model : residual width d.
    n_layers : number of blocks.
    n_heads : attention heads; must divide ``d_model``.
    d_ff : hidden width of the MLP.
    dropout : dropout probability on embeddings, attention weights and residual branches.
    pe : positional encoding, one of :data:`PE_KINDS`.
    pe_rank : rank r of ``lowrank`` (1 <= r <= min(n_positions, d_model)); only for lowrank.
    pe_trainable : train the table (sinusoidal, learned, lowrank, mds); None takes the kind's default
        (learned and lowrank trained, sinusoidal and mds frozen). rope, alibi and none have nothing to train.
    pe_file : PE file of ``geoanalyze mds`` (safetensors with ``position_embeddings``); only for mds.
    rope_base : base b of the RoPE frequencies theta_k = b^(-2k/head_dim).
    n_classes : classes of the sequence-classification head; 0 = no such head.
    attention : how blocks attend, one of :data:`ATTENTIONS` (JoFormer variants: models/joformer.py).
    """

    arch: str = "bert"
    vocab_size: int = 30522
    n_positions: int = 512
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 1024
    dropout: float = 0.1
    pe: str = "learned"
    pe_rank: int | None = None
    pe_trainable: bool | None = None
    pe_file: str | None = None
    rope_base: float = 10000.0
    n_classes: int = 0
    attention: str = "standard"

    def __post_init__(self) -> None:
        check_choice("arch", self.arch, ARCHS)
        check_choice("pe", self.pe, PE_KINDS)
        check_choice("attention", self.attention, ATTENTIONS)
        for name in ("vocab_size", "n_positions", "d_model", "n_layers", "n_heads", "d_ff"):
            check_integer(name, getattr(self, name), minimum=1)
        check_integer("n_classes", self.n_classes, minimum=0)
        _number("dropout", self.dropout)
        _number("rope_base", self.rope_base)
        if not 0.0 <= self.dropout < 1.0:
            raise InputError(f"dropout must be within [0, 1), got {self.dropout}")
        if self.d_model % self.n_heads:
            raise InputError(
                f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}; choose n_heads dividing d_model"
            )
        if self.pe == "rope" and self.head_dim % 2:
            raise InputError(
                f"rope needs an even head dimension, got d_model / n_heads = {self.head_dim}; change d_model or n_heads"
            )
        if self.pe == "rope" and self.rope_base <= 1:
            raise InputError(f"rope_base must exceed 1, got {self.rope_base}")
        if self.attention != "standard":
            if self.pe != "none":
                raise InputError(
                    f"attention {self.attention!r} carries its own positions (journeys); set pe to none, not {self.pe!r}"
                )
            if self.head_dim % 2:
                raise InputError(
                    f"{self.attention} rotates pairs and needs an even head dimension, got d_model / n_heads = "
                    f"{self.head_dim}; change d_model or n_heads"
                )
        if self.pe == "sinusoidal" and self.d_model % 2:
            raise InputError(f"sinusoidal needs an even d_model, got {self.d_model}")
        self._check_pe_options()

    def _check_pe_options(self) -> None:
        if self.pe == "lowrank":
            if self.pe_rank is None:
                raise InputError("pe 'lowrank' needs pe_rank; set pe_rank to the rank r of P = A W")
            check_integer("pe_rank", self.pe_rank, minimum=1)
            limit = min(self.n_positions, self.d_model)
            if self.pe_rank > limit:
                raise InputError(
                    f"pe_rank {self.pe_rank} exceeds min(n_positions, d_model) = {limit}; choose pe_rank <= {limit}"
                )
        elif self.pe_rank is not None:
            raise InputError(f"pe_rank applies to pe 'lowrank' only; remove it for pe {self.pe!r}")
        if self.pe == "mds":
            if not isinstance(self.pe_file, str) or not self.pe_file:
                raise InputError(
                    "pe 'mds' needs its PE file: pass --set model.pe_file=PATH (a file written by `geoanalyze mds`)"
                )
        elif self.pe_file is not None:
            raise InputError(f"pe_file applies to pe 'mds' only; remove it for pe {self.pe!r}")
        if self.pe_trainable is not None:
            if not isinstance(self.pe_trainable, bool):
                raise InputError(f"pe_trainable must be true, false or null, got {self.pe_trainable!r}")
            if self.pe_trainable and self.pe not in TABLE_KINDS:
                raise InputError(
                    f"pe {self.pe!r} has no parameters to train; set pe_trainable to null or false "
                    f"(tables: {', '.join(TABLE_KINDS)})"
                )

    @property
    def head_dim(self) -> int:
        """Width of one attention head, d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def causal(self) -> bool:
        """Whether attention is causal (gpt)."""
        return self.arch == "gpt"

    @property
    def pe_is_trained(self) -> bool:
        """Whether the positional table is trained (False for kinds without one)."""
        if self.pe not in TABLE_KINDS:
            return False
        return TRAINED_BY_DEFAULT[self.pe] if self.pe_trainable is None else self.pe_trainable

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> ModelConfig:
        """Rebuild a configuration from :meth:`to_dict`'s output; missing keys take the defaults."""
        if not isinstance(document, dict):
            raise InputError(f"a model configuration must be a JSON object, got {type(document).__name__}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(document) - set(known))
        if unknown:
            raise InputError(f"unknown model configuration key {unknown[0]!r}; known keys: {', '.join(known)}")
        return cls(**document)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"unknown {name} {value!r}; choose one of {', '.join(choices)}")


def check_integer(name: str, value: Any, minimum: int) -> None:
    # bool is an int subclass: True must not pass as 1
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise InputError(f"{name} must be at least {minimum}, got {value}")


def _number(name: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"{name} must be a number, got {value!r}")
