"""monotonicity, the conjecture of arXiv 2604.05217 (positional.py): after MLM on SST-2, the violation rate
of the learned table against the corpus's Hellinger geometry, beside the MDS encoding of the same corpus
and a random null (~50%), in two readings (Hellinger discordance, lag violation); the paper's 22% (MDS)
and 25.4% (BERT) quoted. The trajectory: the table at initialisation and every evaluation against the
corrected geometry, one null for all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np

from .positional import (
    SMOKE_TEXT,
    TRAJECTORY_DRAWS,
    corpus_geometry,
    in_folder,
    load_model,
    observed_tables,
    resolved,
    table_trajectory,
    train_run,
)
from .positional_figures import monotonicity_trajectory_figure, shepard_figure
from .record import ExperimentOptions, ExperimentResult, Stopwatch, fmt, markdown_table
from .registry import experiment
from .settings import Settings

if TYPE_CHECKING:
    from ..geometry.null import RankTest

PAPER_MDS_VIOLATION, PAPER_BERT_VIOLATION = "22%", "25.4%"


@dataclass(frozen=True)
class MonotonicitySettings(Settings):
    """The MLM run's settings (``key=value`` over the training preset; smoke: over ci's), the corpus's name
    on the page, and whether the MDS is held against the paper's 22% (its own data point, SST-2; the
    smoke preset reads a synthetic corpus)."""

    train: tuple[str, ...] = (
        *("task=mlm", "model.pe=learned", "steps=1500", "eval_every=500", "max_length=48", "model.n_positions=48"),
    )
    corpus: str = "SST-2"
    paper_rate: bool = True


CI = MonotonicitySettings()
PRESETS = {
    "smoke": replace(
        CI,
        train=("task=mlm", "model.pe=learned", "steps=40", "eval_every=20", "lr=3e-3", *SMOKE_TEXT),
        corpus="the smoke corpus",
        paper_rate=False,
    ),
    "ci": CI,
    "paper": replace(CI, train=("task=mlm", "model.pe=learned")),
}


@experiment(
    "monotonicity",
    summary="Conjecture: after MLM, statistically close positions get close vectors (violation rate < 50%)",
    paper="arXiv 2604.05217",
    minutes_ci=4.0,
)
def monotonicity(options: ExperimentOptions) -> ExperimentResult:
    """Violation rates of a learned table after MLM on SST-2, against MDS of the same corpus and random.

    Two readings of the paper's unstated "violation rate": ours (Kendall discordance between E and
    the Hellinger distances D, docs/definitions.md) and the lag reading (monotonicity of E in |i - j|,
    which needs no D), each with its own random null.
    """
    watch = Stopwatch()
    settings = PRESETS[options.preset]
    config = resolved(options, settings.train)
    snapshots: list[np.ndarray] = []
    lines = train_run(options, settings.train, "mlm", [], observe=_table_observer(config.max_length, snapshots))
    model = load_model(options, "mlm")
    geometry = corpus_geometry(config, options)
    positions = geometry.positions
    initial = _initial_table(model, config.seed, np.arange(config.max_length))  # rows 0..max_length-1
    encodings = {
        "learned (trained)": model.pe.position_vectors(int(positions.max()) + 1)[positions],
        "learned (initial)": initial[positions],
    }
    rows, scores, tables = monotonicity_scores(encodings, geometry, options.seed)
    series = [(0, initial), *observed_tables(lines, snapshots, "eval_loss")]
    points = table_trajectory(series, positions, geometry.matrix("corrected"), options.seed)
    trajectory_png = "monotonicity-trajectory.png"
    monotonicity_trajectory_figure(
        points, options.work_dir / trajectory_png, f"{config.dataset}, learned table during MLM (corrected Hellinger)"
    )
    figure = "monotonicity-shepard.png"
    shepard_figure(
        tables["corrected"],
        geometry.matrix("corrected"),
        options.work_dir / figure,
        subtitle=f"{config.dataset} after {config.steps} MLM steps (corrected Hellinger)",
    )
    return ExperimentResult(
        "monotonicity",
        "After MLM, statistically close positions get geometrically close vectors",
        monotonicity_checks(scores, settings.paper_rate),
        data={
            "scores": scores,
            "run": lines,
            "trajectory": [point.to_dict() for point in points],
            "positions": positions,
            "config": in_folder(config.to_dict(), options.work_dir),
        },
        sections=[monotonicity_section(rows, settings.corpus, len(positions), config.steps, lines[-1]["eval_loss"])],
        figures={
            figure: "Pairwise distances of each encoding against the corpus's corrected Hellinger distances",
            trajectory_png: "Violation rates of the learned table at initialisation and every evaluation; shaded: "
            f"the range of {TRAJECTORY_DRAWS} random Gaussian tables of its shape (one null for every step)",
        },
        preset=options.preset,
        seconds=watch(),
    )


def monotonicity_scores(
    encodings: dict[str, np.ndarray], geometry: Any, seed: int
) -> tuple[list[list[Any]], dict[str, Readings], dict[str, dict[str, np.ndarray]]]:
    """Both readings per encoding (and the corpus's MDS) against the corrected and the naive Hellinger distances.

    Returns the table rows, the readings by "<encoding>, <distance>", and the tables scored per distance.
    """
    from ..geometry.mds import classical_mds

    rows: list[list[Any]] = []
    scores: dict[str, Readings] = {}
    tables: dict[str, dict[str, np.ndarray]] = {}
    for which in ("corrected", "naive"):
        distances = geometry.matrix(which)
        tables[which] = dict(encodings, mds=classical_mds(distances).embedding_)
        for name, readings in monotonicity_readings(tables[which], distances, geometry.positions, seed).items():
            scores[f"{name}, {which}"] = readings
            null, lag_null = readings["null"], readings["lag_null"]
            rows.append(
                [
                    *(name, which, readings["violation"], readings["anchored"], null.mean, null.z),
                    *(readings["lag_violation"], lag_null.mean, lag_null.z),
                ]
            )
    return rows, scores, tables


def monotonicity_checks(scores: dict[str, Readings], paper_rate: bool = True) -> list[Any]:
    """The trained table and the MDS each beat their random null, in both readings; with ``paper_rate``
    the MDS's lag violation against the paper's 22% (the paper's own data point, SST-2)."""
    learned = scores["learned (trained), corrected"]
    mds = scores["mds, corrected"]
    checks = [
        _beats_null(
            "learned beats random",
            "the trained table (corrected Hellinger)",
            learned,
            "violation",
            "null",
            f"{PAPER_BERT_VIOLATION} (BERT-base)",
        ),
        _beats_null("MDS beats random", "the MDS encoding", mds, "violation", "null", PAPER_MDS_VIOLATION),
        _beats_null(
            "learned beats random by lag",
            "the trained table",
            learned,
            "lag_violation",
            "lag_null",
            f"{PAPER_BERT_VIOLATION} (BERT-base; lag reading inferred)",
        ),
        _beats_null(
            "MDS beats random by lag",
            "the MDS encoding (corrected Hellinger)",
            mds,
            "lag_violation",
            "lag_null",
            f"{PAPER_MDS_VIOLATION} (lag reading inferred)",
        ),
    ]
    if paper_rate:
        checks.append(paper_rate_check(mds["lag_violation"], mds["violation"]))
    return checks


def monotonicity_section(rows: list[list[Any]], corpus: str, n_positions: int, steps: int, loss: float) -> str:
    """The violation rates table of ``corpus`` and what the two readings mean."""
    header = ["encoding", "distance", "violation", "anchored", "null mean", "z", "lag violation", "lag null", "lag z"]
    return (
        f"### Violation rates on {corpus} ({n_positions} positions, {steps} MLM steps)\n\n"
        + markdown_table(header, rows)
        + f"\n\nThe paper reports {PAPER_MDS_VIOLATION} for its MDS encoding and {PAPER_BERT_VIOLATION} for "
        "pretrained BERT-base (random: 50%) without defining the rate. Two readings are measured. "
        "**violation** (ours, docs/definitions.md): the share of pairs of position-pairs ordered differently by "
        "the vectors' distances E and the Hellinger distances D. Our MDS encoding is the full-rank "
        "classical MDS of the very distances it is scored against; a Hellinger matrix is Euclidean, so "
        "that MDS orders every pair as D does (violation ~0): this reading cannot give the paper's 22%. "
        "**lag violation**: from each anchor i, the share of pairs (j, l) with |i - j| < |i - l| whose "
        "vectors sit in the other order (E_ij > E_il); it asks whether vectors drift monotonically with "
        "position distance, and the MDS of a corpus inherits the corpus's own departures from that "
        "(the paper's 22% fits it). Which one the paper used is inferred, not known. Final MLM held-out "
        f"loss {fmt(loss)}."
    )


def _beats_null(
    name: str,
    what: str,
    readings: Readings,
    key: Literal["violation", "lag_violation"],
    null_key: Literal["null", "lag_null"],
    paper: str,
) -> Any:
    """The check "``what``'s rate ``key`` < its random null's mean - 3 sd": superiority over the null's draws."""
    from . import stat_tests as st

    null = readings[null_key]
    rate = "lag violation" if key == "lag_violation" else "violation rate"
    return st.beats_null(
        readings[key],
        null.mean,
        null.sd,
        MONOTONICITY_DRAWS,
        statement=f"{rate} of {what} < random null mean - 3 null sds (Gaussian tables of the same shape)",
    ).check(name, paper=paper, value=readings[key], detail=f"null {fmt(null.mean)} ± {fmt(null.sd)}")


def paper_rate_check(mds_lag: float, mds_discordance: float, margin: float = 0.03) -> Any:
    """The paper's own figure, 22% for its MDS encoding, against ours: a tolerance on a deterministic
    measurement (the MDS of the corpus), under the lag reading (inferred: the paper does not define its rate)."""
    from . import stat_tests as st

    return st.tolerance(
        abs(mds_lag - 0.22),
        margin,
        statement=f"|lag violation of the MDS encoding - the paper's 22%| <= {100 * margin:g} points (lag reading, "
        "inferred: the paper does not define its rate)",
    ).check(
        "MDS at the paper's 22%",
        paper=PAPER_MDS_VIOLATION,
        value=mds_lag,
        detail=f"value: the MDS's lag violation; under our discordance reading the MDS scores "
        f"{fmt(mds_discordance)} (a full-rank MDS orders pairs as D does), so that reading cannot give 22%",
    )


class Readings(TypedDict):
    """Both readings of one table's violation rate (:func:`monotonicity_readings`), each with its null's
    :class:`~geoanalyze.geometry.null.RankTest`."""

    violation: float
    anchored: float
    null: RankTest
    lag_violation: float
    lag_null: RankTest


#: random null draws of the monotonicity readings
MONOTONICITY_DRAWS = 16


def monotonicity_readings(
    tables: dict[str, np.ndarray],
    distances: np.ndarray,
    positions: np.ndarray,
    seed: int,
    draws: int = MONOTONICITY_DRAWS,
) -> dict[str, Readings]:
    """Both readings of the violation rate per encoding, each with its random null (``draws`` Gaussian tables).

    ``violation`` / ``anchored``: Kendall discordance between E and D (all pairs of pairs / shared
    anchor); ``lag_violation``: monotonicity of E in the position lag, over the indices ``positions``.
    """
    from ..geometry.null import null_calibration
    from ..geometry.scores import all_scores

    readings: dict[str, Readings] = {}
    for name, vectors in tables.items():
        observed = all_scores(vectors, distances, anchored=True, index=positions)
        null = null_calibration(vectors, distances, draws=draws, seed=seed, scores=observed, index=positions)
        readings[name] = {
            "violation": observed["monotonicity_violation"],
            "anchored": observed["anchored_monotonicity_violation"],
            "null": null["monotonicity_violation"],
            "lag_violation": observed["lag_violation"],
            "lag_null": null["lag_violation"],
        }
    return readings


def _initial_table(model: Any, seed: int, positions: np.ndarray) -> np.ndarray:
    """The trained model's table as it was initialised: the same config and seed as the run (train.seed_everything)."""
    from ..models import Transformer
    from ..train import loop

    loop.seed_everything(seed)
    initial = Transformer(model.config)
    return np.asarray(initial.pe.position_vectors(int(positions.max()) + 1)[positions])


def _table_observer(n: int, snapshots: list[np.ndarray]) -> Callable[[Any], dict[str, float]]:
    """Appends rows 0..n-1 of the model's position table to ``snapshots`` at every evaluation."""

    def observe(model: Any) -> dict[str, float]:
        snapshots.append(np.array(model.pe.position_vectors(n), dtype=np.float64))
        return {}

    return observe
