"""The positional paper's experiments are one module each, with a frozen settings dataclass whose presets
are ``replace(CI, ...)`` (issue 33); their figures are in one module. What a preset changes is read
from the settings, and the re-judging of docs/claims.md uses mds-training's own ci thresholds."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from geoanalyze.experiments import get_experiment
from geoanalyze.experiments.record import PRESET_NAMES
from geoanalyze.experiments.settings import Settings

MODULES = {"necessity": "necessity", "separation": "separation", "monotonicity": "monotonicity"}
MODULES["mds-training"] = "mds_training"


@pytest.mark.parametrize("name", list(MODULES))
def test_each_experiment_is_its_own_module_with_frozen_presets(name: str) -> None:
    module = importlib.import_module(f"geoanalyze.experiments.{MODULES[name]}")
    assert get_experiment(name).target.split(":")[0] == MODULES[name]
    assert set(module.PRESETS) == set(PRESET_NAMES) and module.PRESETS["ci"] is module.CI
    for preset in module.PRESETS.values():
        assert isinstance(preset, Settings) and type(preset) is type(module.CI)
        assert all(isinstance(item, str) and "=" in item for item in preset.train)
        with pytest.raises(dataclasses.FrozenInstanceError):
            preset.train = ()  # type: ignore[misc]
    assert module.PRESETS["smoke"] != module.CI


def test_the_smoke_preset_loosens_thresholds_only_at_smoke() -> None:
    from geoanalyze.experiments import mds_training, monotonicity, necessity

    assert (necessity.PRESETS["paper"].chance_margin, necessity.PRESETS["paper"].solved) == (5.0, 0.95)
    assert (necessity.PRESETS["smoke"].chance_margin, necessity.PRESETS["smoke"].solved) == (15.0, 0.75)
    assert [monotonicity.PRESETS[p].paper_rate for p in PRESET_NAMES] == [False, True, True]
    smoke, paper = mds_training.PRESETS["smoke"], mds_training.PRESETS["paper"]
    assert (smoke.seeds, smoke.rank_cap, smoke.loss_margin, smoke.accuracy_margin) == (1, 4, 0.25, 25.0)
    assert (paper.seeds, paper.loss_margin, paper.accuracy_margin, paper.task_name) == (3, 0.01, 3.0, "SST-2")
