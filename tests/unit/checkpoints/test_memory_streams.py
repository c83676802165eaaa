"""The memory estimate counts every residual stream a layer keeps per position: hyper-connection models
(DeepSeek-V4, HY-V4) pass hc_mult streams of the full width between layers, Gemma 3n altup_num_inputs."""

from __future__ import annotations

from geoanalyze.checkpoints.hidden import residual_streams


def test_streams_are_read_from_the_config_or_its_text_config() -> None:
    assert residual_streams({"model_type": "deepseek_v4", "hc_mult": 4}) == 4
    assert residual_streams({"model_type": "gemma3n", "text_config": {"altup_num_inputs": 4}}) == 4
    assert residual_streams({"model_type": "llama", "hidden_size": 64}) == 1
    assert residual_streams({"hc_mult": 1}) == 1
    assert residual_streams({"hc_mult": True, "text_config": "not a dict"}) == 1  # a bool is not a count
