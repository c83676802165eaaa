"""The experiments' shared settings parser."""

from __future__ import annotations

import pytest

from geoanalyze.errors import InputError
from geoanalyze.experiments.record import apply_overrides

SETTINGS = {"steps": 10, "lr": 1e-3, "tasks": "a,b", "fast": False, "model": {"d_model": 64}}


def test_overrides_take_the_type_of_the_setting_and_leave_the_original_alone() -> None:
    result = apply_overrides(SETTINGS, ["steps=20", "lr=2e-3", "tasks=c", "fast=yes", "model.d_model=32"], "demo")
    assert result == {"steps": 20, "lr": 2e-3, "tasks": "c", "fast": True, "model": {"d_model": 32}}
    assert SETTINGS["model"] == {"d_model": 64} and SETTINGS["steps"] == 10


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("epochs=3", "unknown setting 'epochs=3'; valid keys: steps, lr, tasks, fast, model.d_model"),
        ("steps", "unknown setting 'steps'"),
        ("model=1", "unknown setting 'model=1'"),
        ("model.width=1", "unknown setting 'model.width=1'"),
        ("steps=many", "setting steps must be a int, got 'many'"),
        ("fast=perhaps", "setting fast must be a bool"),
    ],
)
def test_bad_overrides_are_one_clear_input_error(item: str, words: str) -> None:
    with pytest.raises(InputError, match=words.replace("(", r"\(")):
        apply_overrides(SETTINGS, [item], "demo")
