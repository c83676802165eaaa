"""Encodings by name: spec strings (``"rope:d=64,base=500000"``, ``"mds:pe.safetensors"``) or callables.

A spec is ``NAME`` or ``NAME:ARGS``. For sinusoidal, rope, alibi and random, ARGS are
``key=value`` pairs; for ``learned``, ``mds`` and ``file`` ARGS is a checkpoint or a path.
Unknown names and keys fail with the list of choices. A callable ``f(positions) -> (n, k)``
is accepted wherever a spec is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IncompatibleError, InputError
from . import standard


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


@dataclass(frozen=True)
class EncodingInfo:
    """One registry entry."""

    name: str
    summary: str
    parameters: dict[str, str] = field(default_factory=dict)
    takes_path: bool = False


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


REGISTRY: dict[str, EncodingInfo] = {
    info.name: info
    for info in (
        EncodingInfo(
            "sinusoidal", "sin/cos table of Vaswani et al.", {"d": "width (default: model width)", "base": "10000"}
        ),
        EncodingInfo("rope", "RoPE's unit-circle vectors (cos, sin)(i theta_k)", {"d": "width", "base": "10000"}),
        EncodingInfo(
            "alibi", "ALiBi's implied vectors m_h i (all heads, or one head)", {"heads": "12", "head": "all (1..H)"}
        ),
        EncodingInfo("random", "i.i.d. Gaussian vectors (a null)", {"d": "width", "seed": "0"}),
        EncodingInfo(
            "mds",
            "classical MDS of the target distances (mds, mds:rank=R), or rows of a PE file: mds:<file>",
            takes_path=True,
        ),
        EncodingInfo("learned", "a checkpoint's absolute position table: learned:<checkpoint>", takes_path=True),
        EncodingInfo("file", "rows of an .npy or .safetensors array: file:<path>", takes_path=True),
        EncodingInfo(
            "model",
            "the positions of a model trained by `geoanalyze train`: model:<run folder or its checkpoint/>",
            takes_path=True,
        ),
    )
}


def list_encodings() -> list[dict[str, Any]]:
    """The registry as plain records (for ``geoanalyze encodings list``)."""
    return [
        {"name": i.name, "summary": i.summary, "parameters": i.parameters, "takes_path": i.takes_path}
        for i in REGISTRY.values()
    ]


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
    info = REGISTRY.get(name)
    if info is None:
        hint = suggest_spec(spec)
        guess = f"did you mean {hint}? " if hint else ""
        raise InputError(
            f"unknown encoding {name!r}; {guess}choose one of {', '.join(REGISTRY)} (or pass a checkpoint)"
        )
    compare_spec_note(spec)
    if info.takes_path:
        return _path_encoding(spec, name, args)
    params = _parse_params(args, spec)
    allowed = set(info.parameters)
    unknown = set(params) - allowed
    if unknown:
        raise InputError(f"unknown parameter {sorted(unknown)[0]!r} for {name}; it takes {', '.join(sorted(allowed))}")
    return Encoding(spec, _standard_builder(name, params, spec))


def _check_counted_with_own_tokens(spec: str, checkpoint: Any, counts: dict[str, Any] | None) -> None:
    """Row i of a checkpoint's table is the model's position i, counted in its own tokens with its
    special tokens: counts of another tokenizer would misalign every row (the same check as for a
    checkpoint target and for mds:<file>)."""

    if not counts:
        return
    fix = f"count the corpus with the checkpoint's tokenizer (--tokenizer {checkpoint.tokenizer_spec()})"
    ours = counts.get("tokenizer") or {}
    if ours.get("kind") != "hf":
        raise IncompatibleError(
            f"{spec}: its positions are {checkpoint.name}'s tokens, but the counts were made with the "
            f"{ours.get('name', 'unknown')} tokenizer, so its rows would not line up; {fix}"
        )
    if counts.get("add_special_tokens") is False:
        raise IncompatibleError(
            f"{spec}: the counts were made without special tokens, so position 0 is not the model's; {fix}"
        )

    from ..corpus.tokenize import HFTokenizer

    theirs = HFTokenizer(checkpoint.tokenizer_spec()).identity()
    if ours.get("vocab_sha256") != theirs.get("vocab_sha256"):
        raise IncompatibleError(
            f"{spec}: its positions are {checkpoint.name}'s tokens, but the counts were made with "
            f"{ours.get('name')}, another vocabulary, so its rows would not line up; {fix}"
        )


def _parse_params(args: str, spec: str) -> dict[str, float]:
    params: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in args.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise InputError(f"bad parameter {part!r} in {spec!r}; write key=value")
        key = key.strip()
        if key in params:
            raise InputError(f"parameter {key} is given twice in {spec!r}; keep one")
        try:
            params[key] = float(value)
        except ValueError as exc:
            raise InputError(f"parameter {key}={value!r} in {spec!r} is not a number") from exc
        if not np.isfinite(params[key]):
            raise InputError(f"parameter {key}={value.strip()} in {spec!r} must be a finite number")
    return params


def _as_int(params: dict[str, float], key: str, default: int | None) -> int | None:
    value = params.get(key)
    if value is None:
        return default
    if not float(value).is_integer():
        raise InputError(f"{key} must be an integer, got {value}")
    return int(value)


def _int_param(params: dict[str, float], key: str, default: int) -> int:
    # Only an absent key takes the default: an explicit 0 must reach the encoding's own check.
    value = _as_int(params, key, None)
    return default if value is None else value


def _standard_builder(name: str, params: dict[str, float], spec: str) -> Builder:
    def build(positions: np.ndarray, context: EncodingContext) -> np.ndarray:
        d = _int_param(params, "d", context.width)
        if name == "sinusoidal":
            return standard.sinusoidal(positions, d=d, base=params.get("base", 10000.0))
        if name == "rope":
            return standard.rope(positions, d=d, base=params.get("base", 10000.0))
        if name == "alibi":
            return standard.alibi(positions, heads=_int_param(params, "heads", 12), head=_as_int(params, "head", None))
        return standard.random(positions, d=d, seed=_int_param(params, "seed", 0))

    return build


def _path_encoding(spec: str, name: str, arg: str) -> Encoding:
    if name == "mds" and (not arg or arg.startswith("rank=")):
        params = _parse_params(arg, spec)
        if set(params) - {"rank"}:
            raise InputError(f"unknown parameter {sorted(set(params) - {'rank'})[0]!r} for mds; it takes rank")
        rank = _as_int(params, "rank", None)
        if rank is not None and rank < 1:
            raise InputError(f"mds:rank must be at least 1, got {rank}")
        return Encoding(spec, lambda positions, context: _optimal_mds(positions, context, rank), needs_distances=True)
    if not arg:
        raise InputError(f"{name} needs a path: write {name}:<path>")
    if name == "learned":
        from ..checkpoints import load_checkpoint

        def learned(positions: np.ndarray, context: EncodingContext) -> np.ndarray:
            checkpoint = load_checkpoint(arg)
            if not checkpoint.mechanism.has_table:
                raise InputError(
                    f"{arg} has no position table (its positions are {checkpoint.mechanism.describe_kind()}); "
                    "pass it as the stress target instead"
                )
            _check_counted_with_own_tokens(spec, checkpoint, context.counts)
            return checkpoint.position_vectors(positions)

        return Encoding(spec, learned)
    if name == "model":
        return Encoding(spec, lambda positions, _: trained_model_vectors(arg, positions))
    from .files import load_table

    def from_file(positions: np.ndarray, context: EncodingContext) -> np.ndarray:
        return load_table(arg, positions, counts=context.counts)

    return Encoding(spec, from_file)


def _optimal_mds(positions: np.ndarray, context: EncodingContext, rank: int | None = None) -> np.ndarray:
    """Classical MDS of the target distances: all positive dimensions, or the top ``rank``."""
    if context.distances is None:
        raise InputError("mds without a file needs the target distances; write mds:<file.safetensors>")
    from ..geometry.mds import classical_mds

    return classical_mds(context.distances).coordinates(rank)


def trained_model_vectors(folder: str, positions: np.ndarray) -> np.ndarray:
    """Position vectors of a model written by ``geoanalyze train`` (its run folder or ``checkpoint/``)."""
    from pathlib import Path

    from ..models import Transformer

    path = Path(folder).expanduser()
    if (path / "checkpoint").is_dir():
        path = path / "checkpoint"
    if not (path / "config.json").is_file():
        raise InputError(f"{folder} is not a run of `geoanalyze train`; pass its --output-dir or checkpoint/ folder")
    from ..checkpoints.load import check_trained_config

    check_trained_config(path)
    try:
        model = Transformer.load(path)
    except InputError as exc:
        if str(path) in str(exc):
            raise
        raise type(exc)(f"{path / 'config.json'}: {exc}") from None
    positions = np.asarray(positions, dtype=np.int64)
    return model.position_vectors(int(positions.max(initial=0)) + 1)[positions]
