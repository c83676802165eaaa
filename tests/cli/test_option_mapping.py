"""The options of stress, report and track reach StressOptions through one declared mapping.

Every parameter of the three commands is either mapped to a StressOptions field (cli.stress.TO_OPTIONS)
or declared the command's own (COMMAND_ONLY): a renamed parameter is neither, and fails here instead of
being dropped silently on its way to the analysis.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest
import typer

from geoanalyze.analysis import StressOptions
from geoanalyze.cli.app import app
from geoanalyze.cli.stress import COMMAND_ONLY, TO_OPTIONS, stress_options


def unmapped(names: list[str]) -> list[str]:
    return [name for name in names if name not in TO_OPTIONS and name not in COMMAND_ONLY]


@pytest.mark.parametrize("command", ["stress", "report", "track"])
def test_every_parameter_is_mapped_or_declared_the_commands_own(command: str) -> None:
    names = [param.name for param in typer.main.get_command(app).commands[command].params]  # type: ignore[attr-defined]
    assert names and unmapped(names) == []


def test_a_renamed_parameter_fails_the_check() -> None:
    assert unmapped(["max_positions", "max_length"]) == ["max_length"]


def test_the_mapping_fills_only_fields_of_stress_options() -> None:
    known = {field.name for field in fields(StressOptions)}
    assert {field for field, _ in TO_OPTIONS.values()} <= known
    # every field but the one report sets itself is filled from the command line
    assert known - {field for field, _ in TO_OPTIONS.values()} == {"default_width"}


def test_options_are_frozen_and_read_by_the_mapping() -> None:
    params = {"dataset": "sst2", "data_dir": None, "compare": "rope,'a,b.npy'", "no_cache": False, "format": "json"}
    options = stress_options(params, default_width=64)
    assert (options.dataset, options.compare, options.cache, options.default_width) == (
        "sst2",
        ("rope", "a,b.npy"),
        True,
        64,
    )
    with pytest.raises(FrozenInstanceError):
        options.dataset = "imdb"  # type: ignore[misc]
