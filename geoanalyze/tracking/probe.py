"""The geometry of a model while it trains: ``geoanalyze train --geometry-every N``.

The target D is the Hellinger geometry of the task's own held-out stream: the per-position token
distributions of its first ``batches`` evaluation batches (positions reached by fewer than
``min_count`` sequences are left out). It is computed once; each probe costs the scores of a few small
tables, their shuffle tests (one family per probe, Holm-corrected) and one no-grad forward pass:

- ``position``: the model's position vectors (its table, RoPE's or ALiBi's vectors);
- ``L<l> query`` / ``L<l> key``: the per-position centroids of layer l's query and key projections
  (before any rotation) on the first held-out batch, captured with forward hooks on ``qkv``.

Each row: the scale-free scores and their categories against the null (docs/scores.md §5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..geometry.distances import hellinger_distances
from ..geometry.null import categories
from ..geometry.scores import all_scores
from ..geometry.shuffle import ShuffleNull, decide
from ..io import FLAT, Record
from .track import TRACKED

#: positions fewer held-out sequences reach are left out of D
MIN_COUNT = 20


@dataclass(frozen=True)
class ProbeRow(Record):
    """One table's row of a metrics line: its scores, their categories, and scaled stress's shuffle range."""

    scores: Mapping[str, float] = field(metadata=FLAT)
    categories: Mapping[str, str | None]
    null: Mapping[str, Mapping[str, float]]


class GeometryProbe:
    """Score a model's position geometry against the held-out stream of ``task`` (see the module docstring)."""

    def __init__(self, task: Any, batches: int = 8, null_draws: int | None = None, seed: int = 0) -> None:
        self.task, self.null_draws, self.seed = task, null_draws, seed
        held_out = [task.eval_batch(index) for index in range(batches)]
        self.batch = held_out[0]
        width = max(batch.input_ids.shape[1] for batch in held_out)
        vocab = int(max(int(batch.input_ids.max()) for batch in held_out)) + 1
        counts = np.zeros((width, vocab))
        reach = np.zeros(width)
        for batch in held_out:
            for row, mask in zip(batch.input_ids, batch.attention_mask, strict=True):
                length = int(mask.sum())
                np.add.at(counts, (np.arange(length), row[:length]), 1.0)
                reach[:length] += 1
        self.positions = np.flatnonzero(reach >= MIN_COUNT)
        marginals = counts[self.positions] / reach[self.positions, None]
        self.distances = hellinger_distances(marginals)

    def rows(self, tables: dict[str, np.ndarray]) -> dict[str, ProbeRow]:
        """Each table's scale-free scores and categories (its shuffle tests: one family for all the tables)."""
        nulls = ShuffleNull(self.distances, self.positions, self.null_draws, self.seed)
        handles = {name: nulls.register(vectors) for name, vectors in tables.items()}
        tests = decide(nulls.run())
        rows: dict[str, ProbeRow] = {}
        for name, vectors in tables.items():
            observed = all_scores(vectors, self.distances, index=self.positions)
            test = tests[handles[name]]
            null = {"scaled_stress": {"low": test["scaled_stress"].low, "high": test["scaled_stress"].high}}
            rows[name] = ProbeRow({key: observed[key] for key in TRACKED}, categories(test), null)
        return rows

    def __call__(self, model: Any) -> dict[str, ProbeRow]:
        """The rows of ``model`` (a :class:`~geoanalyze.models.Transformer`) now; the model is left in training mode."""
        if self.positions.size < 3:
            return {}
        tables: dict[str, np.ndarray] = {}
        # every encoding has vectors (pe none: one point for all positions); the task's positions fit the model's
        table = model.position_vectors(int(self.positions.max()) + 1)[self.positions]
        if np.all(np.isfinite(table)):
            tables["position"] = table
        tables.update(query_key_centroids(model, self.batch, self.positions))
        return self.rows(tables)


def query_key_centroids(model: Any, batch: Any, positions: np.ndarray) -> dict[str, np.ndarray]:
    """Per layer, the centroids at ``positions`` of the query and key projections on ``batch``."""
    import torch

    from ..train.core import evaluating

    layers = [(name, module) for name, module in model.named_modules() if name.endswith(".qkv")]
    captured: dict[int, torch.Tensor] = {}
    handles = [
        module.register_forward_hook(lambda _m, _i, out, at=index: captured.__setitem__(at, out.detach()))
        for index, (_, module) in enumerate(layers)
    ]
    device = next(model.parameters()).device
    ids = torch.from_numpy(batch.input_ids).to(device)
    mask = torch.from_numpy(batch.attention_mask).to(device)
    try:
        with evaluating(model):
            model(ids, mask, logits_at=torch.zeros_like(ids, dtype=torch.bool))
    finally:
        for handle in handles:
            handle.remove()
    weights = mask.double().unsqueeze(-1)[:, : int(positions.max()) + 1]  # (B, T', 1)
    counts = weights.sum(dim=0)  # (T', 1)
    rows: dict[str, np.ndarray] = {}
    for index, output in sorted(captured.items()):
        q, k, _ = output.double().split(output.shape[-1] // 3, dim=-1)  # (B, T, C) each
        for projection, values in (("query", q), ("key", k)):
            sums = (values[:, : weights.shape[1]] * weights).sum(dim=0)  # (T', C)
            centroids = (sums / counts.clamp(min=1)).cpu().numpy()[positions]
            if np.all(np.isfinite(centroids)):
                rows[f"L{index + 1} {projection}"] = centroids
    return rows
