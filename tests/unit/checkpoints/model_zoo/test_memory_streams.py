"""The memory estimate of a real hyper-connection checkpoint (the zoo's tiny DeepSeek-V4, hc_mult 4)
counts its 4 residual streams: its activations are 4 times those of the same checkpoint read as 1 stream."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import memory_estimate, residual_streams


@pytest.mark.slow
def test_a_hyper_connection_checkpoint_is_estimated_with_its_streams(zoo: dict[str, Path]) -> None:
    import torch

    checkpoint = load_checkpoint(str(zoo["deepseek_v4"]))
    assert residual_streams(checkpoint.config) == checkpoint.config["hc_mult"] == 4
    one = dataclasses.replace(checkpoint, config={**checkpoint.config, "hc_mult": 1})
    weights = 1.2 * (checkpoint.mechanism.parameters + checkpoint.mechanism.buffers) * 4
    four_streams = memory_estimate(checkpoint, torch.float32, 8, 32) - weights
    one_stream = memory_estimate(one, torch.float32, 8, 32) - weights
    assert four_streams == pytest.approx(4 * one_stream, abs=2)
    mechanism = checkpoint.mechanism
    assert one_stream == pytest.approx((mechanism.layers + 1) * 8 * 32 * mechanism.hidden_size * 4 * 3, abs=1)
