"""The experiment registry: each run function carries its metadata in an :func:`experiment` decorator.

::

    @experiment("journey", summary="JoFormer algebra: ...", paper="arXiv 2505.15507", minutes_ci=0.5)
    def journey_checks(options: ExperimentOptions) -> ExperimentResult: ...

Decorating registers an :class:`Experiment` under its name in :data:`EXPERIMENTS`, in the order the
modules are imported (the package imports them in the order ``geoanalyze verify list`` shows).
An experiment module imports torch and other heavy libraries inside its functions, so listing
the experiments imports none of them. An entry may also be registered by ``target``
("module:function" inside this package), loaded only when it runs.

Importing this module does not import torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ..errors import InputError
from .record import PRESET_NAMES

if TYPE_CHECKING:
    from .record import ExperimentOptions, ExperimentResult

    Run = Callable[[ExperimentOptions], ExperimentResult]

R = TypeVar("R", bound=Callable[..., object])


@dataclass(frozen=True)
class Experiment:
    """A registry entry: ``target`` is "module:function" inside this package.

    ``presets``: the presets it runs at; every experiment has ``smoke`` (seconds on a CPU, looser
    thresholds: it checks that the experiment runs), ``ci`` (CPU minutes) and ``paper`` (GPU scale).
    """

    name: str
    summary: str
    paper: str
    target: str
    #: wall minutes at --preset ci on a 2-core CPU at the pinned thread count, the comparisons of trained models
    #: over 3 seeds: measured for mds-training (13.2), length-generalization (5.0), vision-2d (1.7) and joformer-reference
    #: (8.6); lm-vocab and edelta-benchmarks, which also run 3 seeds, are 3x their one-seed times
    minutes_ci: float
    presets: tuple[str, ...] = PRESET_NAMES

    def load(self) -> Run:
        """The run function (importing its module, if it was registered by target)."""
        module, function = self.target.split(":")
        run: Run = getattr(importlib.import_module(f"{__package__}.{module}"), function)
        return run


#: every experiment by name, in the order ``verify list`` and ``verify all`` take them
EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> None:
    """Add an experiment (a name already taken is replaced)."""
    EXPERIMENTS[experiment.name] = experiment


def experiment(
    name: str, *, summary: str, paper: str, minutes_ci: float, presets: tuple[str, ...] = PRESET_NAMES
) -> Callable[[R], R]:
    """Register the decorated function ``run(options) -> ExperimentResult`` as experiment ``name``."""

    def register_run(run: R) -> R:
        module = run.__module__.removeprefix(f"{__package__}.")
        register(Experiment(name, summary, paper, f"{module}:{run.__name__}", minutes_ci, presets))
        return run

    return register_run


def get_experiment(name: str) -> Experiment:
    """The registry entry of ``name``; InputError listing the choices when unknown."""
    if name not in EXPERIMENTS:
        raise InputError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]
