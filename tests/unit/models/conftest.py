"""Fixtures of the model tests: tiny configurations and an MDS PE file written by geoanalyze itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from geoanalyze.geometry.mds import LowRankEncoding, orthonormal_rows
from geoanalyze.models import ModelConfig

TINY = {"vocab_size": 50, "n_positions": 16, "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 64, "dropout": 0.0}

MakeConfig = Callable[..., ModelConfig]
WritePE = Callable[..., LowRankEncoding]


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


def write_pe_file(path: Path, n: int, d: int, rank: int = 3, positions: np.ndarray | None = None) -> LowRankEncoding:
    """A LowRankEncoding of n points (random A, orthonormal W), saved as `geoanalyze mds` does."""
    rng = np.random.default_rng(1)
    encoding = LowRankEncoding(
        A=rng.standard_normal((n, rank)),
        W=orthonormal_rows(rank, d, seed=2),
        positions=np.arange(n) if positions is None else positions,
        metadata={"source": "test"},
    )
    encoding.save(path)
    return encoding


@pytest.fixture
def write_pe() -> WritePE:
    """The function writing a PE file: write_pe(path, n, d, rank=3, positions=None)."""
    return write_pe_file


@pytest.fixture
def pe_file(tmp_path: Path) -> Path:
    """A PE file covering positions 0..15 at width 32 (TINY's n_positions and d_model)."""
    path = tmp_path / "pe.safetensors"
    write_pe_file(path, TINY["n_positions"], TINY["d_model"])
    return path


@pytest.fixture
def tiny() -> MakeConfig:
    """ModelConfig with TINY's sizes; keyword arguments override them."""

    def make(**overrides: Any) -> ModelConfig:
        if overrides.get("pe") == "lowrank":
            overrides.setdefault("pe_rank", 4)
        return ModelConfig(**{**TINY, **overrides})

    return make
