"""Any checkpoint: every architecture of the zoo is analysed, with the mechanism its config states.

For each tiny random-weight checkpoint (zoo.py): the detected position mechanism and its
parameters equal what the config says; `analyze` runs with --layers all and produces finite
hidden-state rows for every layer, query/key rows for every attention model whose attention
can be captured, and a note (never a refusal) for what it cannot measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoanalyze.analysis import StressOptions, analyze
from geoanalyze.checkpoints import load_checkpoint

from .conftest import CORPUS
from .zoo import BLOCKS, ZOO, Entry

BY_NAME = {entry.name: entry for entry in ZOO}


def options(**overrides: Any) -> StressOptions:
    values: dict[str, Any] = {
        "dataset": str(CORPUS),
        "max_sequences": 48,
        "null_draws": 2,
        "compare": ("sinusoidal",),
        "batch_size": 16,
        "max_positions": 24,
    }
    values.update(overrides)
    return StressOptions(**values)


def test_the_zoo_is_broad() -> None:
    assert len(ZOO) >= 40
    assert {entry.family for entry in ZOO} >= {"encoder", "decoder", "encoder-decoder", "moe", "hybrid", "ssm"}
    assert {entry.kind for entry in ZOO} == {"learned", "fixed", "rope", "alibi", "relative", "none"}


@pytest.mark.parametrize("name", list(BY_NAME))
def test_mechanism_matches_the_config(zoo: dict[str, Path], name: str) -> None:
    entry = BY_NAME[name]
    mechanism = load_checkpoint(str(zoo[name])).mechanism
    assert mechanism.kind == entry.kind, mechanism.summary()
    assert mechanism.layers == BLOCKS
    assert bool(mechanism.relative) == entry.relative, mechanism.relative
    if entry.kind in ("learned", "fixed"):
        assert mechanism.offset == entry.offset
        assert mechanism.max_positions == entry.positions
    if entry.kind == "rope":
        summary = mechanism.summary()["rope"]
        assert len(summary) == entry.rope_sets
        main = summary[mechanism.rope_main]
        assert main["dims"] == entry.rope_dims
        if entry.rope_base is None:
            assert main["base"] is None or main["rope_type"] != "default"
        else:
            assert main["base"] == pytest.approx(entry.rope_base, rel=1e-5)
        nope = tuple(index + 1 for index, layer in enumerate(mechanism.rope_layers) if layer is None)
        assert nope == entry.nope
    if entry.kind == "alibi":
        assert len(mechanism.alibi_slopes) == entry.heads
        # Press et al.'s slopes for a power-of-two head count: 2^(-8h/H)
        expected = 2.0 ** (-8.0 * np.arange(1, entry.heads + 1) / entry.heads)
        np.testing.assert_allclose(sorted(mechanism.alibi_slopes), sorted(expected), rtol=1e-6)


@pytest.mark.parametrize("name", list(BY_NAME))
def test_every_row_is_measured_or_explained(zoo: dict[str, Path], name: str) -> None:
    entry: Entry = BY_NAME[name]
    result = analyze(str(zoo[name]), options())
    info = result.checkpoint
    assert info is not None and info.position_mechanism["kind"] == entry.kind
    rows = info.rows
    has_vectors = entry.kind in ("learned", "fixed", "rope", "alibi")
    assert rows["position"].startswith("measured") == has_vectors, rows
    assert (str(zoo[name]) in result.scores) == has_vectors
    hidden = [row for row in result.layers if row.projection == "hidden"]
    assert [row.layer for row in hidden] == list(range(BLOCKS + 1))
    for row in result.layers:
        assert np.isfinite(row.observed["scaled_stress"]) and np.isfinite(row.observed["monotonicity_violation"]), row
    captured = {row.layer for row in result.layers if row.projection in ("query", "key")}
    if entry.captured:
        assert rows["query_key"].startswith("measured"), rows
        assert captured, rows
        if entry.family != "hybrid":
            assert captured == set(range(1, BLOCKS + 1))
    else:
        assert rows["query_key"].startswith("skipped: "), rows
        assert not captured
