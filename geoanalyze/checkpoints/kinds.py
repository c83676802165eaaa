"""The kinds of position mechanism: one frozen dataclass per kind, with its own parameters beside the facts
every kind has (:class:`Mechanism`); :func:`~geoanalyze.checkpoints.mechanism.detect` finds which a model has.

``kind`` is the tag (learned | fixed | rope | alibi | relative | none); :meth:`Mechanism.summary`
is the JSON record of ``position_mechanism``, and :meth:`Mechanism.to_record` /
:meth:`Mechanism.from_record` the cache's, so that warm runs import neither torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from ..errors import InputError
from ..io import serialise_fields

KINDS = ("learned", "fixed", "rope", "alibi", "relative", "none")


@dataclass(frozen=True)
class RopeSet:
    """One set of rotary frequencies: angle of frequency k at position i is i * inv_freq[k]."""

    inv_freq: tuple[float, ...]
    scaling: float = 1.0
    rope_type: str = "default"

    def vectors(self, positions: np.ndarray) -> np.ndarray:
        """(n, 2K): interleaved scaling * (cos, sin) of i * inv_freq[k], as GEOMETRY.md orders RoPE."""
        frequencies = np.asarray(self.inv_freq, dtype=np.float32)
        # The model multiplies in float32; so do we, then widen.
        angles = (np.asarray(positions, dtype=np.float32)[:, None] * frequencies[None, :]).astype(np.float64)
        table = np.empty((angles.shape[0], 2 * frequencies.size))
        table[:, 0::2] = np.cos(angles) * self.scaling
        table[:, 1::2] = np.sin(angles) * self.scaling
        return table


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """What a checkpoint's positions are: the facts every kind has (a subclass per kind adds its own).

    kind : the tag, a class attribute: learned | fixed | rope | alibi | relative | none.
    layers : number of blocks whose hidden states the forward pass returns.
    relative : a description of a relative scheme, also when it sits beside another kind.
    attention_layers : the blocks (1-based) that hold an attention module (blocks run by reused modules,
        HRM's stacks over their cycles, as the modules they run).
    qk_weights : per block, (query weight, key weight, layout) tensor names of the separate
        projections that read the table (layout "linear" is (out, in); "fused-conv1d" is GPT-2's
        (in, 3h) [Q | K | V]); empty where the projections are fused otherwise.
    parameters, buffers : sizes in numbers, for the memory estimate.
    notes : what the detection saw that a reader should know.
    """

    kind: ClassVar[str]
    has_table: ClassVar[bool] = False
    has_vectors: ClassVar[bool] = False  # a position row: a table, RoPE or ALiBi (relative and none have none)

    architecture: str
    model_type: str
    layers: int
    hidden_size: int
    relative: str = ""
    attention_layers: tuple[int, ...] = ()
    qk_weights: tuple[tuple[str, str, str], ...] = ()
    parameters: int = 0
    buffers: int = 0
    notes: tuple[str, ...] = ()

    @property
    def max_positions(self) -> int | None:
        """Positions a table holds (None: no table)."""
        return None

    def implied_vectors(self, positions: np.ndarray) -> np.ndarray:
        """Position vectors of a mechanism without a stored table (rope, alibi, a fixed table)."""
        raise InputError(f"{self.architecture} has no position vectors: its positions are {self.describe_kind()}")

    def describe_kind(self) -> str:
        return self.kind

    def details(self) -> dict[str, Any]:
        """This kind's own entries of :meth:`summary`."""
        return {}

    def summary(self) -> dict[str, Any]:
        """The JSON record of ``position_mechanism`` (parameters, not arrays)."""
        out: dict[str, Any] = {"kind": self.kind, **self.details()}
        if self.relative:
            out["relative"] = self.relative
        return out

    def to_record(self) -> dict[str, Any]:
        """Every field, JSON-ready, with the tag (the mechanism cache's record)."""
        return {"kind": self.kind, **serialise_fields(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Mechanism:
        """The mechanism of a :meth:`to_record` record (KeyError: an unknown kind or a missing field)."""
        variant = MECHANISMS[record["kind"]]
        values = {
            item.name: _FROM_JSON[item.name](record[item.name]) if item.name in _FROM_JSON else record[item.name]
            for item in fields(variant)
            if item.name in record
        }
        return variant(**values)


@dataclass(frozen=True, kw_only=True)
class TableMechanism(Mechanism):
    """An absolute table: position i is row i + ``offset`` of the tensor (or buffer) ``table``."""

    has_table: ClassVar[bool] = True
    has_vectors: ClassVar[bool] = True

    table: str
    table_shape: tuple[int, ...]
    offset: int = 0

    @property
    def max_positions(self) -> int | None:
        return int(self.table_shape[0]) - self.offset if self.table_shape else None

    def details(self) -> dict[str, Any]:
        rows = self.table_shape[0] if self.table_shape else None
        width = self.table_shape[1] if len(self.table_shape) > 1 else None
        return {"table": self.table, "rows": rows, "offset": self.offset, "width": width}


@dataclass(frozen=True, kw_only=True)
class LearnedTable(TableMechanism):
    """A learned table: a parameter, read from the checkpoint's files; or, where ``factors`` names them,
    axial factor tables whose broadcast-and-concatenation is the table (:func:`axial_table`: Reformer)."""

    kind: ClassVar[str] = "learned"

    factors: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class FixedTable(TableMechanism):
    """A fixed (sinusoidal) table: a buffer the model computes, which no checkpoint file stores."""

    kind: ClassVar[str] = "fixed"

    table_values: tuple[tuple[float, ...], ...]

    def implied_vectors(self, positions: np.ndarray) -> np.ndarray:
        return table_rows(np.asarray(self.table_values, dtype=np.float64), positions, self.offset, "the fixed table")


def table_rows(table: np.ndarray, positions: Any, offset: int, owner: str) -> np.ndarray:
    """Rows ``positions + offset`` of ``table``; InputError naming ``owner`` for a position past its end."""
    index = np.asarray(positions, dtype=np.int64).reshape(-1)
    rows = index + offset
    if rows.size and rows.max() >= table.shape[0]:
        raise InputError(
            f"{owner} has {table.shape[0] - offset} positions but position {int(index.max())} "
            "was asked for; lower --max-length"
        )
    return table[rows]


@dataclass(frozen=True, kw_only=True)
class RopeMechanism(Mechanism):
    """Rotary: named frequency sets; ``rope_main`` the set of the position row; ``rope_layers``
    the set each block uses (None: a NoPE block, or one without attention)."""

    kind: ClassVar[str] = "rope"
    has_vectors: ClassVar[bool] = True

    rope: Mapping[str, RopeSet]
    rope_main: str
    rope_layers: tuple[str | None, ...]

    def implied_vectors(self, positions: np.ndarray) -> np.ndarray:
        return self.rope[self.rope_main].vectors(np.asarray(positions, dtype=np.int64).reshape(-1))

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rope": {
                name: {
                    "dims": 2 * len(rope.inv_freq),
                    "base": implied_base(rope.inv_freq),
                    "rope_type": rope.rope_type,
                    "attention_scaling": rope.scaling,
                }
                for name, rope in self.rope.items()
            },
            "rope_main": self.rope_main,
            "rope_layers": list(self.rope_layers),
        }
        nope = [index + 1 for index, name in enumerate(self.rope_layers) if name is None]
        if nope:
            out["nope_layers"] = nope
        return out


@dataclass(frozen=True, kw_only=True)
class AlibiMechanism(Mechanism):
    """ALiBi: one slope m_h per head; position i's vector is (i m_h)_h."""

    kind: ClassVar[str] = "alibi"
    has_vectors: ClassVar[bool] = True

    alibi_slopes: tuple[float, ...]

    def implied_vectors(self, positions: np.ndarray) -> np.ndarray:
        index = np.asarray(positions, dtype=np.int64).reshape(-1)
        return index.astype(np.float64)[:, None] * np.asarray(self.alibi_slopes, dtype=np.float64)[None, :]

    def details(self) -> dict[str, Any]:
        return {"alibi_slopes": list(self.alibi_slopes), "heads": len(self.alibi_slopes)}


@dataclass(frozen=True, kw_only=True)
class RelativeMechanism(Mechanism):
    """Only a relative scheme (``relative`` says which): no absolute position vectors."""

    kind: ClassVar[str] = "relative"

    def describe_kind(self) -> str:
        return f"relative ({self.relative})"


@dataclass(frozen=True, kw_only=True)
class NoMechanism(Mechanism):
    """No module encodes positions (Mamba; order comes from the recurrence or the causal mask)."""

    kind: ClassVar[str] = "none"

    def describe_kind(self) -> str:
        return "not encoded by any module (no absolute table, rotary or ALiBi)"


#: kind -> its class (learned and fixed are the two tables)
MECHANISMS: dict[str, type[Mechanism]] = {
    variant.kind: variant
    for variant in (LearnedTable, FixedTable, RopeMechanism, AlibiMechanism, RelativeMechanism, NoMechanism)
}


def _rope_sets_from_json(value: Mapping[str, Any]) -> dict[str, RopeSet]:
    return {
        name: RopeSet(tuple(rope["inv_freq"]), rope.get("scaling", 1.0), rope.get("rope_type", "default"))
        for name, rope in value.items()
    }


#: field -> how a JSON value becomes it (lists become tuples: the dataclasses are frozen)
_FROM_JSON: dict[str, Callable[[Any], Any]] = {
    "attention_layers": tuple,
    "qk_weights": lambda rows: tuple(tuple(row) for row in rows),
    "notes": tuple,
    "table_shape": tuple,
    "table_values": lambda rows: tuple(tuple(row) for row in rows),
    "rope": _rope_sets_from_json,
    "rope_layers": tuple,
    "alibi_slopes": tuple,
    "factors": tuple,
}


def axial_table(factors: Sequence[np.ndarray]) -> np.ndarray:
    """The (n_1 x ... x n_k, d_1 + ... + d_k) table of k axial factor tables, factor a of shape
    (1, .., n_a, .., 1, d_a): each broadcast to (n_1, ..., n_k, d_a), concatenated along the last axis and
    flattened row-major, as Reformer's AxialPositionEmbeddings.forward computes it (position i is
    (i // n_2, i % n_2) for two axes: the first factor's row i // n_2 beside the second's row i % n_2)."""
    arrays = [np.asarray(factor, dtype=np.float64) for factor in factors]
    error = axial_error([a.shape for a in arrays])
    if error is not None:
        raise ValueError(error)
    shape = tuple(int(a.shape[axis]) for axis, a in enumerate(arrays))
    parts = [np.broadcast_to(a, (*shape, a.shape[-1])) for a in arrays]
    return np.concatenate(parts, axis=-1).reshape(int(np.prod(shape)), -1)


def axial_error(shapes: Sequence[tuple[int, ...]]) -> str | None:
    """Why ``shapes`` are not those of k >= 2 axial factors (factor a: (1, .., n_a, .., 1, d_a)); None when they are."""
    k = len(shapes)
    if k < 2 or any(len(shape) != k + 1 for shape in shapes):
        return f"axial factors must be {k} arrays of {k + 1} dimensions, got {list(shapes)}"
    for axis, shape in enumerate(shapes):
        if any(size != 1 for other, size in enumerate(shape[:-1]) if other != axis):
            return f"axial factor {axis} has shape {shape}: 1 expected on every axis but {axis}"
    return None


def implied_base(inv_freq: Sequence[float]) -> float | None:
    """The base b of inv_freq[k] = b^(-2k/d) when the frequencies follow it (unscaled RoPE), else None."""
    frequencies = np.asarray(inv_freq, dtype=np.float64)
    if frequencies.size < 2 or not frequencies[0] > 0 or not frequencies[1] > 0:
        return None
    d = 2 * frequencies.size
    base = float((frequencies[0] / frequencies[1]) ** (d / 2))
    expected = frequencies[0] * base ** (-2.0 * np.arange(frequencies.size) / d)
    if not np.allclose(frequencies, expected, rtol=1e-4):
        return None  # scaled (llama3, yarn): no single base
    return float(f"{base:.6g}")  # float32 frequencies carry ~7 significant digits


def check_rope_matches(rope: RopeSet, cos: np.ndarray, sin: np.ndarray) -> float:
    """Largest gap between our vectors and a model's (cos, sin) tables of the first K columns (tests)."""
    ours = rope.vectors(np.arange(cos.shape[0]))
    k = len(rope.inv_freq)
    return float(max(np.abs(ours[:, 0::2] - cos[:, :k]).max(), np.abs(ours[:, 1::2] - sin[:, :k]).max()))
