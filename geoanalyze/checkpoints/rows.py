"""``geoanalyze.capture``: the per-layer query, key and hidden rows of a checkpoint on texts of your own.

What TransformerLens' ``run_with_cache`` and nnsight's ``.save()`` give per token, this gives per
position: row i of a layer is the centroid, over the texts that reach position i, of what the layer
computes there (the hidden state after it; the queries and keys its attention sees, after the
model's own position transform), the rows ``geoanalyze stress`` scores. It is the forward pass of
``stress`` (:func:`~geoanalyze.checkpoints.hidden.forward_pass`), returned as frozen types.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .hidden import forward_pass
from .load import Checkpoint, load_checkpoint


@dataclass(frozen=True)
class LayerRows:
    """One layer's rows, position i in row i.

    layer : 0 the embedding output, l >= 1 block l.
    hidden : (n, width) hidden-state centroids after the layer; NaN where no text reaches the position.
    query, key : (n, H * d) centroids of the queries and keys its attention sees, every head side by
        side; None where the layer has none that could be captured (``CaptureResult.notes`` says why).
    """

    layer: int
    hidden: np.ndarray
    query: np.ndarray | None = None
    key: np.ndarray | None = None


@dataclass(frozen=True)
class CaptureResult:
    """What :func:`capture` measured.

    checkpoint : the checkpoint's name. reach : (n,) how many texts reach each position.
    layers : the rows of each layer asked for, in order. method : how queries and keys were captured
    ("attention interface", "projections" or "none"). notes : what could not be measured, and why.
    """

    checkpoint: str
    reach: np.ndarray
    layers: tuple[LayerRows, ...]
    method: str
    notes: tuple[str, ...] = ()

    def layer(self, number: int) -> LayerRows:
        """The rows of layer ``number`` (KeyError: a layer not captured)."""
        for rows in self.layers:
            if rows.layer == number:
                return rows
        raise KeyError(f"layer {number} was not captured; captured: {[rows.layer for rows in self.layers]}")


def capture(
    model_or_name: str | os.PathLike[str] | Checkpoint,
    texts: Sequence[str],
    layers: Sequence[int] | None = None,
    max_length: int = 128,
    batch_size: int = 32,
    device: str | None = None,
    dtype: str | None = None,
) -> CaptureResult:
    """Per-position query, key and hidden rows of ``layers`` (None: every layer, 0 the embeddings) of a
    checkpoint (a hub name, a folder, or a loaded :class:`~geoanalyze.checkpoints.Checkpoint`) on ``texts``,
    each truncated to ``max_length`` tokens by the checkpoint's own tokenizer."""
    checkpoint = model_or_name if isinstance(model_or_name, Checkpoint) else load_checkpoint(os.fspath(model_or_name))
    result = forward_pass(checkpoint, list(texts), max_length, batch_size, device=device, dtype=dtype)
    chosen = range(result.centroids.shape[0]) if layers is None else layers
    rows = []
    for number in chosen:
        if not 0 <= number < result.centroids.shape[0]:
            raise InputError(f"{checkpoint.name} has layers 0..{result.centroids.shape[0] - 1}, not {number}")
        rows.append(LayerRows(number, result.centroids[number], result.queries.get(number), result.keys.get(number)))
    return CaptureResult(checkpoint.name, result.reach, tuple(rows), result.capture, tuple(result.notes))
