"""An experiment's settings as a frozen dataclass: presets as ``replace(base, ...)``, ``--set key=value`` typed.

A subclass of :class:`Settings` declares its fields with their types; a preset is the base with
only its differences (``replace(CI, steps=2)``), and ``geoanalyze verify NAME --set key=value``
reaches every field through :meth:`Settings.override`, which parses the text by the field's
annotation::

    str      as given              int, float   int(text), float(text)
    bool     true/false, 1/0, yes/no            tuple[str, ...], tuple[int, ...]   comma-separated, "" for ()

The record echoes the settings with :meth:`Settings.to_dict`: the field names, scalars as they
are and tuples as the comma-separated text they are written in on the command line.

Importing this module does not import torch.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import Any, Self

from ..errors import InputError

TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of the settings dataclasses; subclasses add the fields (frozen too)."""

    def override(self, overrides: Sequence[str], experiment: str) -> Self:
        """A copy with ``key=value`` overrides, each parsed by the field's type (InputError names the key or type).

        A field that holds a dict (a model's settings) is reached key by key, ``outer.key=value``, each
        value parsed by the type of the one it replaces. An unknown key or a missing ``=``:
        "<experiment>: unknown setting 'item'; valid keys: ..."; a value of the wrong type:
        "<experiment>: setting key must be a int, got 'text'" (a list of integers: "key must be
        comma-separated integers, got 'text'").
        """
        types = typing.get_type_hints(type(self))
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        known: list[str] = []
        for name, value in fields.items():
            known += [f"{name}.{inner}" for inner in value] if isinstance(value, dict) else [name]
        changes: dict[str, Any] = {}
        for item in overrides:
            key, sep, raw = (part.strip() for part in item.partition("="))
            if not sep or key not in known:
                raise InputError(f"{experiment}: unknown setting {item!r}; valid keys: {', '.join(known)}")
            outer, _, inner = key.partition(".")
            if inner:
                nested = changes.get(outer, fields[outer])
                changes[outer] = {**nested, inner: parse(raw, type(nested[inner]), key, experiment)}
            else:
                changes[key] = parse(raw, types[key], key, experiment)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields in order, as the record echoes them: tuples as comma-separated text."""
        return {
            f.name: ",".join(map(str, value)) if isinstance(value := getattr(self, f.name), tuple) else value
            for f in dataclasses.fields(self)
        }


def parse(raw: str, kind: Any, key: str, experiment: str) -> Any:
    """``raw`` as a value of ``kind`` (a field's type), the errors as :meth:`Settings.override` says."""
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(kind)[0]
        parts = [s.strip() for s in raw.split(",") if s.strip()]
        if item is int:
            try:
                return tuple(int(s) for s in parts)
            except ValueError:
                raise InputError(f"{key} must be comma-separated integers, got {raw!r}") from None
        return tuple(parts)
    try:
        if kind is bool:
            if raw.lower() not in (*TRUE, *FALSE):
                raise ValueError(raw)
            return raw.lower() in TRUE
        return kind(raw)
    except ValueError:
        raise InputError(f"{experiment}: setting {key} must be a {kind.__name__}, got {raw!r}") from None


def choose(values: Sequence[str], choices: Sequence[str], what: str) -> None:
    """InputError "unknown <what> 'x'; choose among a, b" for the first value not among ``choices``."""
    for value in values:
        if value not in choices:
            raise InputError(f"unknown {what} {value!r}; choose among {', '.join(choices)}")
