"""Encodings by name: spec strings (``"rope:d=64,base=500000"``, ``"mds:pe.safetensors"``) or callables.

A spec is ``NAME`` or ``NAME:ARGS``. For sinusoidal, rope, alibi and random, ARGS are
``key=value`` pairs; for ``learned``, ``mds`` and ``file`` ARGS is a checkpoint or a path.
Unknown names and keys fail with the list of choices. A callable ``f(positions) -> (n, k)``
is accepted wherever a spec is.

Each family of encodings is one :class:`EncodingFamily` in :data:`REGISTRY`, registered where
its builder is defined with the :func:`encoding` decorator, which carries its parameters (name,
type, default: they parse the spec), its width rule (the parameter that sets the table's width,
read by :func:`spec_width`) and its place in listings::

    @encoding("rope", "RoPE's unit-circle vectors", params=(Parameter("d", int, ...), ...), width="d")
    def rope(positions, d, base): ...          # (n, d)

The built-in families live in this package (standard.py, mds.py, files.py). Families that need
a higher layer (``learned:`` loads a checkpoint, ``model:`` a trained model) register from that
layer, in a module named by the entry point group ``geoanalyze.encodings`` (pyproject.toml):
the registry loads them on its first use and never imports them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..errors import InputError

#: the entry point group whose modules register encoding families from above this layer
PLUGIN_GROUP = "geoanalyze.encodings"


@dataclass
class EncodingContext:
    """What an encoding may need beyond the positions.

    width : default vector width for sinusoidal / rope / random when the spec gives no d
        (the checkpoint's hidden size when one is analysed, else 768).
    distances : the target distances, for ``mds`` without a file (the optimal encoding).
    counts : metadata of the counts behind the distances, so a PE file made from other
        counts (another tokenizer, no [CLS]) is refused instead of scored at shifted positions.
    """

    width: int = 768
    distances: np.ndarray | None = None
    counts: dict[str, Any] | None = None


Builder = Callable[[np.ndarray, EncodingContext], np.ndarray]


@dataclass
class Encoding:
    """A resolved encoding: a display name and a function of the positions."""

    name: str
    build: Builder
    #: built from the target distances (``mds``), so it cannot be tried before they exist
    needs_distances: bool = False

    def check(self, width: int = 768) -> None:
        """Raise InputError now for a bad spec (``rope:d=63``), before any corpus work.

        Builds the vectors of no position at all, which still validates every parameter and
        reads any file; position coverage and encodings made from the target distances are
        checked once the kept positions and the distances exist.
        """
        if not self.needs_distances:  # no positions yet: parameters, files and shapes only
            self.vectors(np.arange(0), EncodingContext(width=width))

    def vectors(self, positions: Any, context: EncodingContext | None = None) -> np.ndarray:
        """Position vectors for ``positions`` (an index array), shape (n, k), float64, finite."""
        index = np.asarray(positions, dtype=np.int64).reshape(-1)
        built = np.asarray(self.build(index, context or EncodingContext()))
        if built.dtype.kind not in "iuf":
            # Never a silent cast: complex would lose its imaginary part, strings and objects are no numbers.
            raise InputError(
                f"encoding {self.name} gave {built.dtype} values; position vectors must be real numbers "
                "(integers or floats)"
            )
        table = built.astype(np.float64, copy=False)
        if table.ndim == 1:
            table = table[:, None]
        if table.ndim != 2 or table.shape[0] != index.shape[0]:
            raise InputError(
                f"encoding {self.name} gave shape {table.shape} for {index.shape[0]} positions; expected (n, k)"
            )
        if not np.all(np.isfinite(table)):
            raise InputError(f"encoding {self.name} has NaN or infinite entries; fix the file or checkpoint")
        return table


@dataclass(frozen=True)
class Parameter:
    """One ``key=value`` parameter of a spec: its name, its type, its default and its listing text.

    Every value is read as a finite number (:func:`parse_parameters`); an ``int`` parameter must be
    integral (``d=64.5`` is refused when the vectors are built); a ``str`` parameter keeps its text
    (a name, ``scaling=yarn``: the builder checks it).
    """

    name: str
    type: type[int] | type[float] | type[str] = float
    #: the value when the spec leaves the key out; None: absent (the builder's own meaning, e.g. all heads)
    default: int | float | None = None
    #: what ``encodings list`` shows for it (its default, or what the default means)
    shown: str = ""
    #: the default is the context's width instead (the checkpoint's hidden size, else 768)
    default_width: bool = False

    def value(self, given: Mapping[str, float | str], width: int | None = None) -> int | float | str | None:
        """The spec's value (an int for an int parameter), else the default (``width`` for a width default)."""
        raw = given.get(self.name)
        if raw is None:
            # Only an absent key takes the default: an explicit 0 must reach the encoding's own check.
            return width if self.default_width else self.default
        if isinstance(raw, str):
            return raw
        if self.type is int:
            if not float(raw).is_integer():
                raise InputError(f"{self.name} must be an integer, got {raw}")
            return int(raw)
        return raw


#: a family's spec resolver: (the whole spec, its ARGS) -> the encoding
Resolver = Callable[[str, str], Encoding]


@dataclass(frozen=True)
class EncodingFamily:
    """One registry entry: a name, what it is, how a spec of it becomes an :class:`Encoding`."""

    name: str
    summary: str
    resolve: Resolver
    parameters: tuple[Parameter, ...] = ()
    #: ARGS is a path or a checkpoint, read by the family itself, not ``key=value`` pairs
    takes_path: bool = False
    #: the parameter that sets the table's width (``d``), or None when a spec names no width
    width: str | None = None
    #: where the family stands in listings and in the choices of an error (lowest first)
    order: int = 100
    #: a target's table is as wide as a model's (its width is the one compared encodings take);
    #: False where the width is the family's own dimension (an MDS rank, ALiBi's heads)
    model_width: bool = True

    def named_width(self, args: str) -> int | None:
        """The width ARGS give (``d=64`` -> 64), or None; a bad value is get_encoding's to report."""
        if self.width is None:
            return None
        for part in args.split(","):
            key, _, value = part.partition("=")
            if key.strip() == self.width:
                try:
                    return int(float(value))
                except (ValueError, OverflowError):
                    return None
        return None

    def record(self) -> dict[str, Any]:
        """The entry as a plain record (``geoanalyze encodings list -f json``)."""
        return {
            "name": self.name,
            "summary": self.summary,
            "parameters": {parameter.name: parameter.shown for parameter in self.parameters},
            "takes_path": self.takes_path,
        }


class Registry(Mapping[str, EncodingFamily]):
    """The encoding families by name, in listing order; complete on first use.

    The built-in families register as the package is imported; the first lookup imports every
    module of the entry point group :data:`PLUGIN_GROUP` (each registers its families with
    :func:`encoding` as it is imported).
    """

    def __init__(self) -> None:
        self.families: dict[str, EncodingFamily] = {}
        self.loaded = False

    def add(self, family: EncodingFamily) -> None:
        """Register ``family``; a name registered twice is a programming error."""
        if family.name in self.families:
            raise ValueError(f"encoding {family.name!r} is registered twice")
        self.families[family.name] = family

    def load(self) -> None:
        """Import the modules of the entry point group (once): each registers its families."""
        if self.loaded:
            return
        self.loaded = True
        from importlib.metadata import entry_points

        for entry in entry_points(group=PLUGIN_GROUP):
            entry.load()

    def __getitem__(self, name: str) -> EncodingFamily:
        self.load()
        return self.families[name]

    def __iter__(self) -> Iterator[str]:
        self.load()
        ranked = sorted(enumerate(self.families.values()), key=lambda item: (item[1].order, item[0]))
        return iter([family.name for _, family in ranked])

    def __len__(self) -> int:
        self.load()
        return len(self.families)


REGISTRY = Registry()

Function = TypeVar("Function", bound=Callable[..., Any])


def encoding(
    name: str,
    summary: str,
    *,
    params: tuple[Parameter, ...] = (),
    width: str | None = None,
    takes_path: bool = False,
    order: int = 100,
    model_width: bool = True,
) -> Callable[[Function], Function]:
    """Register the decorated function as the encoding family ``name`` (returned unchanged).

    For a ``key=value`` family the function is the table, ``f(positions, **values) -> (n, k)``,
    called with every parameter of ``params`` (the spec's value, else its default). With
    ``takes_path`` the function reads ARGS itself, ``f(spec, args) -> Encoding``. ``width``
    names the parameter that sets the table's width (:func:`spec_width`); ``model_width=False``
    says the table's width is not a model's (:func:`takes_model_width`).
    """

    def register(function: Function) -> Function:
        resolve = function if takes_path else parameter_resolver(name, params, function)
        REGISTRY.add(EncodingFamily(name, summary, resolve, params, takes_path, width, order, model_width))
        return function

    return register


def parameter_resolver(name: str, params: tuple[Parameter, ...], table: Callable[..., np.ndarray]) -> Resolver:
    """The resolver of a ``key=value`` family: the keys are parsed and checked now, typed when built."""

    def resolve(spec: str, args: str) -> Encoding:
        given = parse_parameters(args, spec, {parameter.name for parameter in params if parameter.type is str})
        reject_unknown(given, params, name)

        def build(positions: np.ndarray, context: EncodingContext) -> np.ndarray:
            values = {parameter.name: parameter.value(given, context.width) for parameter in params}
            return table(positions, **values)

        return Encoding(spec, build)

    return resolve


def parse_parameters(args: str, spec: str, text: Collection[str] = ()) -> dict[str, float | str]:
    """``"d=64, base=500000"`` -> {"d": 64.0, "base": 500000.0}: finite numbers, each key once; the keys
    ``text`` keep their value as written (stripped; ``scaling=yarn`` -> "yarn")."""
    given: dict[str, float | str] = {}
    for part in filter(None, (p.strip() for p in args.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise InputError(f"bad parameter {part!r} in {spec!r}; write key=value")
        key = key.strip()
        if key in given:
            raise InputError(f"parameter {key} is given twice in {spec!r}; keep one")
        if key in text:
            given[key] = value.strip()
            continue
        try:
            given[key] = float(value)
        except ValueError as exc:
            raise InputError(f"parameter {key}={value!r} in {spec!r} is not a number") from exc
        if not np.isfinite(float(given[key])):
            raise InputError(f"parameter {key}={value.strip()} in {spec!r} must be a finite number")
    return given


def reject_unknown(given: Mapping[str, float | str], params: tuple[Parameter, ...], name: str) -> None:
    """InputError naming the first key ``name`` does not take, and the keys it does."""
    allowed = {parameter.name for parameter in params}
    unknown = set(given) - allowed
    if unknown:
        raise InputError(f"unknown parameter {sorted(unknown)[0]!r} for {name}; it takes {', '.join(sorted(allowed))}")


def require_path(name: str, args: str) -> None:
    """InputError for a path family given no path (``file``, ``learned:``)."""
    if not args:
        raise InputError(f"{name} needs a path: write {name}:<path>")


def list_encodings() -> list[dict[str, Any]]:
    """The registry as plain records (for ``geoanalyze encodings list``)."""
    return [family.record() for family in REGISTRY.values()]


def spec_width(spec: str) -> int | None:
    """The width a spec names (``rope:d=64`` -> 64), or None (its family names no width, or the spec none)."""
    name, _, args = spec.partition(":")
    family = REGISTRY.get(name)
    return None if family is None else family.named_width(args)


def takes_model_width(spec: str) -> bool:
    """Whether a target's table width is a model width, the one its compared encodings take (a
    callable or another table of no registered family: yes; a file a path-taking family reads,
    ``mds:pe.safetensors`` written by ``geoanalyze mds --width 64``: yes, though ``mds`` and
    ``mds:rank=R`` are as wide as their rank)."""
    name, _, args = spec.partition(":")
    family = REGISTRY.get(name)
    if family is None or family.model_width:
        return True
    return family.takes_path and bool(args) and "=" not in args.split(",", 1)[0]


def is_encoding_spec(text: str) -> bool:
    """Whether a stress / report target names a registered encoding (as opposed to a checkpoint).

    A bare name (``mds``, ``rope``) that is also a local checkpoint folder (``mds --checkpoint-output
    mds`` writes one) is the checkpoint, with a note; ``name:`` is always the encoding and ``./name``
    always the path. A local path of that name that is no checkpoint leaves the encoding, also noted.
    """
    name = text.split(":", 1)[0]
    if name not in REGISTRY:
        return False
    if ":" in text or not Path(text).expanduser().exists():
        return True
    from .. import notes

    if looks_like_checkpoint(Path(text)):
        notes.note(
            f"{text!r} is the local checkpoint ./{text}, not the built-in encoding {text}; "
            f"write {text}: for the encoding"
        )
        return False
    notes.note(f"{text!r} is the built-in encoding; the local ./{text} is no checkpoint (write ./{text} for a path)")
    return True


def compare_spec_note(spec: str) -> None:
    """An encoding resolved by name (a --compare entry: encodings only) while a local checkpoint has
    that name: it stays the encoding (the --compare defaults are bare names), and a note says how to
    compare the checkpoint's table instead."""
    if ":" not in spec and spec in REGISTRY and looks_like_checkpoint(Path(spec)):
        from .. import notes

        notes.note(
            f"--compare {spec} is the built-in encoding {spec}, not the local checkpoint ./{spec}; "
            f"write learned:./{spec} to compare its position table"
        )


def looks_like_checkpoint(path: Path) -> bool:
    """A folder a stress target can be: a checkpoint, with its config.json (a ``geoanalyze train`` run
    is no target; ``model:<run>`` reads its positions)."""
    try:
        return (path.expanduser() / "config.json").is_file()
    except OSError:
        return False


def suggest_spec(text: str) -> str | None:
    """The registered spec nearest a mistyped one (``ropee:d=64`` -> ``rope:d=64``), or None."""
    import difflib

    name, sep, args = text.partition(":")
    match = difflib.get_close_matches(name.lower(), list(REGISTRY), n=1, cutoff=0.75)
    return f"{match[0]}{sep}{args}" if match else None


def get_encoding(spec: str | Callable[..., Any]) -> Encoding:
    """Resolve a spec string or a callable to an :class:`Encoding`."""
    if callable(spec):
        function = spec
        return Encoding(getattr(function, "__name__", "callable"), lambda positions, _: function(positions))
    name, _, args = spec.partition(":")
    family = REGISTRY.get(name)
    if family is None:
        hint = suggest_spec(spec)
        guess = f"did you mean {hint}? " if hint else ""
        raise InputError(
            f"unknown encoding {name!r}; {guess}choose one of {', '.join(REGISTRY)} (or pass a checkpoint)"
        )
    compare_spec_note(spec)
    return family.resolve(spec, args)
