"""The papers' claims as experiments with a verdict: ``geoanalyze verify NAME``.

Each experiment is a function ``run(options) -> ExperimentResult`` in a module of this package,
decorated with :func:`~.registry.experiment`, which registers it by name with its summary, paper,
presets and CI minutes beside it::

    from geoanalyze.experiments import run_experiment, ExperimentOptions
    result = run_experiment("necessity", ExperimentOptions(preset="ci", work_dir=Path("out")))
    result.passed, result.checks

Every experiment runs at the presets ``smoke`` (seconds on a CPU, with its own looser thresholds),
``ci`` (CPU minutes) and ``paper`` (GPU scale).

Importing this package imports the experiment modules (their decorators fill :data:`EXPERIMENTS`)
but not torch: an experiment module imports torch and other heavy libraries inside its functions.
"""

from __future__ import annotations

import importlib

from ..errors import InputError
from .record import PRESET_NAMES, Check, ExperimentOptions, ExperimentResult, check, markdown, write_result
from .registry import EXPERIMENTS, Experiment, experiment, get_experiment, register

#: what the registry holds, in the order ``verify list`` and ``verify all`` show it: a module whose run
#: functions carry @experiment, or an entry registered by its "module:function" target (loaded when it runs)
CONTENTS: tuple[str | Experiment, ...] = (
    "necessity",
    "separation",
    "monotonicity",
    "mds_training",
    "optimality",
    "journey",
    "length_generalization",
    "joformer_reference",
    "lm_vocab",
    "vision_2d",
    "edelta",
    "edelta_benchmarks",
)
for _item in CONTENTS:
    if isinstance(_item, Experiment):
        register(_item)
    else:
        importlib.import_module(f"{__name__}.{_item}")
del _item


def run_experiment(name: str, options: ExperimentOptions) -> ExperimentResult:
    """Run experiment ``name`` with ``options``; the result's ``checks`` carry the verdict."""
    entry = get_experiment(name)
    if options.preset not in entry.presets:
        raise InputError(f"unknown preset {options.preset!r}; choose one of {', '.join(entry.presets)}")
    run = entry.load()
    import torch

    from ..train.determinism import fixed_threads

    if options.device == "cuda" or (
        options.device == "auto" and options.preset == "paper" and torch.cuda.is_available()
    ):
        return run(options)
    # On CPU the whole experiment, training and evaluation, runs at one fixed thread count
    # (GEOANALYZE_CPU_THREADS, default 1): its numbers are bit-identical per seed whatever the
    # machine's thread count (docs/determinism.md). The models are small: a second thread rarely
    # halves a step, and on a loaded 2-core machine one thread is many times faster.
    with fixed_threads():
        return run(options)


__all__ = [
    "CONTENTS",
    "EXPERIMENTS",
    "PRESET_NAMES",
    "Check",
    "Experiment",
    "ExperimentOptions",
    "ExperimentResult",
    "check",
    "experiment",
    "get_experiment",
    "markdown",
    "register",
    "run_experiment",
    "write_result",
]
