"""separation, Theorem 4 of arXiv 2604.05217 (positional.py): the minimum and relative pairwise distance
of a learned position table, logged at every evaluation of an MLM run and an order run, stay strictly
positive; the trajectory against random tables of each run's shape and against the corpus's geometry."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .positional import (
    SMOKE_TEXT,
    TRAJECTORY_DRAWS,
    corpus_geometry,
    observed_tables,
    resolved,
    table_trajectory,
    train_run,
)
from .positional_figures import separation_figure
from .record import ExperimentOptions, ExperimentResult, Stopwatch, markdown_table
from .registry import experiment
from .settings import Settings


@dataclass(frozen=True)
class SeparationSettings(Settings):
    """The learned table's runs' settings (``key=value`` over the training preset; smoke: over ci's); each
    run adds its task (mlm, order)."""

    train: tuple[str, ...] = ("model.pe=learned", "steps=300", "eval_every=20", "max_length=48", "model.n_positions=48")


CI = SeparationSettings()
PRESETS = {
    "smoke": replace(CI, train=("model.pe=learned", "steps=8", "eval_every=4", "order_length=8", *SMOKE_TEXT)),
    "ci": CI,
    "paper": replace(CI, train=("model.pe=learned", "steps=5000", "eval_every=250")),
}


@experiment(
    "separation",
    summary="Theorem 4: a learned PE keeps distinct positions apart throughout training",
    paper="arXiv 2604.05217",
    minutes_ci=1.0,
)
def separation(options: ExperimentOptions) -> ExperimentResult:
    """Theorem 4: a learned table's min and relative pairwise distances stay > 0 through training."""
    from ..geometry.scores import separation as separation_score

    watch = Stopwatch()
    settings = PRESETS[options.preset]
    runs: dict[str, list[dict[str, Any]]] = {}
    tables: dict[str, list[tuple[int, np.ndarray]]] = {}
    configs = {task: resolved(options, settings.train, [f"task={task}"]) for task in ("mlm", "order")}
    for task, config in configs.items():
        n = config.order_length if task == "order" else config.max_length
        snapshots: list[np.ndarray] = []
        runs[task] = train_run(
            options, settings.train, task, [f"task={task}"], observe=_separation_observer(n, snapshots)
        )
        tables[task] = observed_tables(runs[task], snapshots, "separation")
    minimum = min(line["separation"] for lines in runs.values() for line in lines)
    relative = min(line["relative_separation"] for lines in runs.values() for line in lines)
    kept = min(
        min(x["relative_separation"] for x in lines) / lines[0]["relative_separation"] for lines in runs.values()
    )
    merged = tables["mlm"][-1][1].copy()
    merged[1] = merged[0]
    checks = separation_checks(minimum, relative, kept, separation_score(merged, relative=True))
    trajectories = separation_trajectories(tables, options.seed)
    mlm = configs["mlm"]
    corpus = corpus_geometry(mlm, options, limit=mlm.limit)
    against_corpus = table_trajectory(tables["mlm"], corpus.positions, corpus.matrix("corrected"), options.seed)
    figure = "separation.png"
    separation_figure(options.work_dir / figure, runs, trajectories)
    rows = [
        [
            task,
            len(lines),
            min(x["separation"] for x in lines),
            lines[-1]["separation"],
            min(x["relative_separation"] for x in lines),
            lines[-1]["relative_separation"],
        ]
        for task, lines in runs.items()
    ]
    sections = [
        "### Separation of the learned table\n\n"
        + markdown_table(
            ["run", "evaluations", "min separation", "final separation", "min relative", "final relative"], rows
        )
    ]
    return ExperimentResult(
        "separation",
        "Theorem 4: a learned position table keeps distinct positions apart",
        checks,
        data={
            "runs": runs,
            "trajectory": {task: [point.to_dict() for point in points] for task, points in trajectories.items()},
            "corpus_trajectory": {"mlm": [point.to_dict() for point in against_corpus]},
        },
        sections=sections,
        figures={
            figure: "Minimum and relative pairwise distance of the learned table at every evaluation; "
            f"shaded: the range of the relative separation of {TRAJECTORY_DRAWS} random Gaussian tables of each "
            "run's shape"
        },
        preset=options.preset,
        seconds=watch(),
    )


#: separation's margin: no two positions closer than this share of the median pairwise distance
SEPARATION_MARGIN = 0.1


def separation_checks(minimum: float, relative: float, kept: float = math.nan, control: float = math.nan) -> list[Any]:
    """Theorem 4's verdicts: the smallest min and relative pairwise distances seen (a bound on measured
    distances, no sampling: tolerance), the relative one above :data:`SEPARATION_MARGIN`, and ``kept``
    (the least over runs of a run's min relative separation / its value at the run's first
    evaluation) at least 0.5 (training does not collapse positions).

    ``control``: the relative separation of the final table with two positions merged (the theorem's
    condition, distinct positions, fails): the margin must fail there. An untrained N(0, 1) table
    passes the margin too, so these checks say that training keeps positions apart, not that it
    separates them.
    """
    from . import stat_tests as st

    checks = [
        st.tolerance(
            minimum,
            0.0,
            below=False,
            strict=True,
            statement="min over runs and evaluations of min_{i != j} ||p_i - p_j|| > 0",
        ).check("min distance > 0", paper="strictly positive"),
        st.tolerance(
            relative,
            SEPARATION_MARGIN,
            below=False,
            strict=True,
            statement=f"min over runs and evaluations of min / median pairwise distance > {SEPARATION_MARGIN:g} "
            "(a margin, not merely > 0)",
        ).check("relative separation above the margin", paper="strictly positive"),
    ]
    if math.isfinite(kept):
        checks.append(
            st.tolerance(
                kept,
                0.5,
                below=False,
                statement="min over runs of the run's min relative separation / its value at the run's first "
                "evaluation >= 0.5 (training does not collapse positions)",
            ).check("kept through training", paper="throughout training")
        )
    if math.isfinite(control):
        checks.append(
            st.tolerance(
                control,
                SEPARATION_MARGIN,
                below=True,
                strict=True,
                statement=f"negative control: the final MLM table with positions 0 and 1 merged (not distinct: the "
                f"theorem's condition fails) has relative separation < {SEPARATION_MARGIN:g}",
            ).check("control: merged positions fail")
        )
    return checks


def separation_trajectories(tables: dict[str, list[tuple[int, np.ndarray]]], seed: int) -> dict[str, Any]:
    """Per run, its tables' relative separation at every evaluation against the null of the run's shape
    (a score that needs no D: geometry.trajectory.shape_trajectory)."""
    from functools import partial

    from ..geometry.scores import separation as separation_score
    from ..geometry.trajectory import shape_trajectory

    relative = partial(separation_score, relative=True)
    return {
        run: shape_trajectory(series, "relative_separation", relative, TRAJECTORY_DRAWS, seed)
        for run, series in tables.items()
    }


def _separation_observer(n: int, snapshots: list[np.ndarray]) -> Callable[[Any], dict[str, float]]:
    """Min and relative pairwise distance of rows 0..n-1 of the model's position table (each table
    appended to ``snapshots``: the run's trajectory is scored from them)."""
    from ..geometry.scores import separation as separation_score

    def observe(model: Any) -> dict[str, float]:
        vectors = model.pe.position_vectors(n)
        snapshots.append(np.array(vectors, dtype=np.float64))
        return {
            "separation": separation_score(vectors),
            "relative_separation": separation_score(vectors, relative=True),
        }

    return observe
