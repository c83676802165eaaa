"""The pieces the positional-encoding paper's experiments share (arXiv 2604.05217; docs/training.md).

One module per experiment, each with its frozen settings and presets as ``replace(CI, ...)``:
necessity.py (Theorem 1), separation.py (Theorem 4), monotonicity.py (the conjecture) and
mds_training.py (the MDS encoding in training); their docstrings say what each measures.

Their figures are in positional_figures.py. Every training run goes through
:func:`geoanalyze.train.train` (:func:`train_run`) into ``<work_dir>/runs/<name>``, so its
metrics.jsonl and checkpoint stay with the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .record import ExperimentOptions, training_preset

#: the smoke preset's model: one layer of width 16, seconds per run on a CPU
SMOKE_MODEL = ["model.d_model=16", "model.n_heads=2", "model.n_layers=1", "model.d_ff=32", "model.dropout=0"]
#: the smoke preset's corpus: synthetic drift (no download), 16 positions, 400 texts (>= 100 per position)
SMOKE_CORPUS = "synthetic:drift,n=400,length=16,vocab=40,seed=0"
SMOKE_TEXT = [f"dataset={SMOKE_CORPUS}", "max_length=16", "model.n_positions=16", "batch_size=16", *SMOKE_MODEL]

#: random Gaussian tables each trajectory's null holds (the fewest that can call a category at alpha 0.05)
TRAJECTORY_DRAWS = 39


def observed_tables(lines: list[dict[str, Any]], snapshots: list[np.ndarray], key: str) -> list[tuple[int, np.ndarray]]:
    """(step, table) of every evaluation an observer saw: the metrics lines that hold ``key``, in order."""
    steps = [int(line["step"]) for line in lines if key in line]
    if len(steps) != len(snapshots):
        raise AssertionError(f"{len(snapshots)} tables observed for {len(steps)} evaluations")
    return list(zip(steps, snapshots, strict=True))


def table_trajectory(
    tables: list[tuple[int, np.ndarray]], positions: np.ndarray, distances: np.ndarray, seed: int
) -> list[Any]:
    """Each (step, full table)'s rows at the corpus's kept ``positions`` scored against ``distances``, every
    step held against the same random tables (geometry.trajectory: what ``geoanalyze track`` does)."""
    from ..geometry.trajectory import NullCache, trajectory

    nulls = NullCache(distances, positions, TRAJECTORY_DRAWS, seed)
    return trajectory([(step, table[positions]) for step, table in tables], nulls)


def corpus_geometry(config: Any, options: ExperimentOptions, limit: int | None = None) -> Any:
    """Hellinger geometry of the training corpus, tokenized as the MLM task tokenizes it (same positions);
    ``limit``: of its first texts only (as the run reads them)."""
    from ..corpus.sources import default_tokenizer, resolve_source
    from ..corpus.streaming import CountJob, compute_counts
    from ..geometry.distances import position_geometry

    source = resolve_source(config.dataset, split=config.split, data_dir=config.data_dir)
    tokenizer = config.tokenizer or default_tokenizer(config.dataset)
    counts, _ = compute_counts(source, CountJob(tokenizer=tokenizer, max_length=config.max_length, limit=limit))
    return position_geometry(counts, min_count=100)


def resolved(options: ExperimentOptions, train: Sequence[str], extra: Sequence[str] = ()) -> Any:
    """The TrainConfig of one run: training preset, the experiment's ``train`` settings, ``extra``, then the user's."""
    from ..train import resolve_config

    settings = [*train, *extra, f"seed={options.seed}"]
    if options.preset == "smoke":
        settings.append(f"device={'cpu' if options.device == 'auto' else options.device}")
    elif options.device != "auto" or options.preset == "ci":
        settings.append(f"device={options.device}")
    if options.data_dir is not None:
        settings.append(f"data_dir={options.data_dir}")
    return resolve_config(training_preset(options.preset), [*settings, *options.overrides])


def train_run(
    options: ExperimentOptions,
    train: Sequence[str],
    name: str,
    extra: Sequence[str],
    observe: Callable[[Any], dict[str, float]] | None = None,
) -> list[dict[str, Any]]:
    """Train one run into ``work_dir/runs/<name>``; return its metrics lines."""
    from ..train import train as fit

    folder = options.work_dir / "runs" / name
    fit(resolved(options, train, extra), folder, progress=options.progress, observe=observe)
    lines = (folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def in_folder(value: Any, work_dir: Path) -> Any:
    """A setting as the record and the figures name it: a path inside the experiment's folder
    relative to that folder (it is staged under another name, moved into place when the experiment
    ends), in a dict or list at any depth; anything else unchanged."""
    if isinstance(value, dict):
        return {key: in_folder(item, work_dir) for key, item in value.items()}
    if isinstance(value, list):
        return [in_folder(item, work_dir) for item in value]
    if isinstance(value, str | Path) and str(value) and Path(value).absolute().is_relative_to(work_dir.absolute()):
        return Path(value).absolute().relative_to(work_dir.absolute()).as_posix()
    return value


def load_model(options: ExperimentOptions, name: str) -> Any:
    """The trained model of run ``name``."""
    from ..models import Transformer

    return Transformer.load(options.work_dir / "runs" / name / "checkpoint")
