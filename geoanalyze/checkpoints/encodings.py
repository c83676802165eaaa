"""The encodings read from a model: ``learned:<checkpoint>`` and ``model:<run>``.

learned:<checkpoint>   row i of the checkpoint's absolute position table is position i's vector
model:<run>            the position vectors of a model trained by ``geoanalyze train`` (its run
                       folder or its ``checkpoint/``), as the model computes them

They load checkpoints and models, which sit above the encodings layer, so they register here
(with the encodings registry's decorator) and the registry finds this module through the entry
point group ``geoanalyze.encodings`` of pyproject.toml, never by importing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..encodings.registry import Encoding, EncodingContext, encoding, require_path
from ..errors import IncompatibleError, InputError
from .load import Checkpoint, check_trained_config, load_checkpoint


@encoding("learned", "a checkpoint's absolute position table: learned:<checkpoint>", takes_path=True, order=60)
def learned_encoding(spec: str, name: str) -> Encoding:
    """``learned:<checkpoint>``: the checkpoint's table, once its positions are the counts' positions."""
    require_path("learned", name)

    def learned(positions: np.ndarray, context: EncodingContext) -> np.ndarray:
        checkpoint = load_checkpoint(name)
        if not checkpoint.mechanism.has_table:
            raise InputError(
                f"{name} has no position table (its positions are {checkpoint.mechanism.describe_kind()}); "
                "pass it as the stress target instead"
            )
        check_counted_with_own_tokens(spec, checkpoint, context.counts)
        return checkpoint.position_vectors(positions)

    return Encoding(spec, learned)


@encoding(
    "model",
    "the positions of a model trained by `geoanalyze train`: model:<run folder or its checkpoint/>",
    takes_path=True,
    order=80,
)
def model_encoding(spec: str, folder: str) -> Encoding:
    """``model:<run>``: the trained model's position vectors."""
    require_path("model", folder)
    return Encoding(spec, lambda positions, _: trained_model_vectors(folder, positions))


def check_counted_with_own_tokens(spec: str, checkpoint: Checkpoint, counts: dict[str, Any] | None) -> None:
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


def trained_model_vectors(folder: str, positions: np.ndarray) -> np.ndarray:
    """Position vectors of a model written by ``geoanalyze train`` (its run folder or ``checkpoint/``)."""
    from ..models import Transformer  # torch: only when a trained model is read

    path = Path(folder).expanduser()
    if (path / "checkpoint").is_dir():
        path = path / "checkpoint"
    if not (path / "config.json").is_file():
        raise InputError(f"{folder} is not a run of `geoanalyze train`; pass its --output-dir or checkpoint/ folder")
    check_trained_config(path)
    try:
        model = Transformer.load(path)
    except InputError as exc:
        if str(path) in str(exc):
            raise
        raise type(exc)(f"{path / 'config.json'}: {exc}") from None
    positions = np.asarray(positions, dtype=np.int64)
    return model.position_vectors(int(positions.max(initial=0)) + 1)[positions]
