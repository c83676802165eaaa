"""The experiment registry: run functions carry their metadata in @experiment; listing imports no torch."""

from __future__ import annotations

import pytest
from helpers import assert_python_runs

from geoanalyze.errors import InputError
from geoanalyze.experiments import EXPERIMENTS, Experiment, get_experiment
from geoanalyze.experiments.registry import experiment

ORDER = [  # verify list's order
    "necessity", "separation", "monotonicity", "mds-training", "sinusoidal-optimality", "alibi-rank1",
    "mds-parameters", "journey", "length-generalization", "joformer-reference", "lm-vocab", "vision-2d",
    "edelta", "edelta-benchmarks",
]


def test_the_registry_lists_every_experiment_in_the_order_verify_list_shows() -> None:
    assert list(EXPERIMENTS) == ORDER


def test_listing_the_experiments_imports_neither_torch_nor_scipy() -> None:
    """Start-up cost: `verify list` reads the registry; every experiment module imports heavy libraries lazily."""
    code = (
        "import sys, geoanalyze.experiments as e; assert len(e.EXPERIMENTS) == 14; "
        "heavy = [m for m in ('torch', 'scipy', 'transformers', 'matplotlib') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    assert_python_runs(code)


def test_a_decorated_run_function_is_its_entry_s_target() -> None:
    from geoanalyze.experiments import edelta, journey, optimality

    assert get_experiment("journey").load() is journey.journey_checks
    assert get_experiment("edelta").target == "edelta:edelta_checks"
    assert get_experiment("alibi-rank1").load() is optimality.alibi_rank1
    assert get_experiment("edelta").load() is edelta.edelta_checks
    entry = get_experiment("edelta-benchmarks")
    assert (entry.paper, entry.minutes_ci, entry.presets) == ("arXiv 2605.06729", 90.0, ("smoke", "ci", "paper"))


def test_the_decorator_registers_and_returns_the_function(monkeypatch: pytest.MonkeyPatch) -> None:
    from geoanalyze.experiments import registry

    monkeypatch.setattr(registry, "EXPERIMENTS", {})

    @experiment("toy", summary="a toy", paper="none", minutes_ci=0.1, presets=("smoke",))
    def toy(options: object) -> object:
        return options

    assert toy(1) == 1
    (entry,) = registry.EXPERIMENTS.values()
    assert entry == Experiment("toy", "a toy", "none", f"{__name__}:toy", 0.1, ("smoke",))


def test_an_unknown_experiment_lists_the_choices() -> None:
    with pytest.raises(InputError, match="unknown experiment 'nope'; choose one of necessity, separation"):
        get_experiment("nope")
