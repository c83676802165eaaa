"""The experiments' shared settings parser: a model's settings (a dict field) reached key by key."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from geoanalyze.errors import InputError
from geoanalyze.experiments.settings import Settings


@dataclass(frozen=True)
class Demo(Settings):
    steps: int = 10
    lr: float = 1e-3
    tasks: str = "a,b"
    fast: bool = False
    model: dict[str, int] = field(default_factory=lambda: {"d_model": 64, "n_layers": 2})


SETTINGS = Demo()


def test_overrides_take_the_type_of_the_setting_and_leave_the_original_alone() -> None:
    items = ["steps=20", "lr=2e-3", "tasks=c", "fast=yes", "model.d_model=32"]
    result = SETTINGS.override(items, "demo")
    assert result == Demo(20, 2e-3, "c", True, {"d_model": 32, "n_layers": 2})
    assert list(result.model) == ["d_model", "n_layers"] and result.to_dict()["model"] == result.model
    assert SETTINGS.model == {"d_model": 64, "n_layers": 2} and SETTINGS.steps == 10


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("epochs=3", "unknown setting 'epochs=3'; valid keys: steps, lr, tasks, fast, model.d_model, model.n_layers"),
        ("steps", "unknown setting 'steps'"),
        ("model=1", "unknown setting 'model=1'"),
        ("model.width=1", "unknown setting 'model.width=1'"),
        ("steps=many", "setting steps must be a int, got 'many'"),
        ("fast=perhaps", "setting fast must be a bool"),
    ],
)
def test_bad_overrides_are_one_clear_input_error(item: str, words: str) -> None:
    with pytest.raises(InputError, match=words.replace("(", r"\(")):
        SETTINGS.override([item], "demo")
