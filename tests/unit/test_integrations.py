"""geoanalyze.integrations.GeometryCallback through examples/trainer_callback.py: the shipped MiniLM
fine-tuned two steps with transformers' Trainer, its position geometry logged on each evaluation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers import REPO_ROOT


def test_the_trainer_example_logs_the_geometry_on_each_evaluation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], minilm_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("trainer_callback", REPO_ROOT / "examples" / "trainer_callback.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(tmp_path / "out", 2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert [line.split(":")[0] for line in lines] == ["step 1", "step 2"]
    # two steps of fine-tuning leave the shipped table's order better than random (violation near 0.273)
    for line in lines:
        violation = float(line.split("violation ")[1].split(",")[0])
        assert 0.25 < violation < 0.30 and line.endswith("order category +1")


def test_every_must_be_positive() -> None:
    from geoanalyze.integrations import GeometryCallback

    with pytest.raises(ValueError, match="every"):
        GeometryCallback(corpus="x", every=0)
