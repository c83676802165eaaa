"""mds-training, arXiv 2604.05217 (positional.py): MDS PE (frozen and as init) vs learned vs sinusoidal
vs low-rank vs none, equal steps: MLM loss, SST-2 accuracy and PE parameter counts (r (n + d) against n d)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from .positional import SMOKE_CORPUS, SMOKE_TEXT, corpus_geometry, in_folder, load_model, resolved, train_run
from .positional_figures import curves_figure
from .record import Check, ExperimentOptions, ExperimentResult, Stopwatch, markdown_table
from .registry import experiment
from .settings import Settings

MDS_FROZEN = "mds (frozen)"


class VariantRuns(TypedDict, total=False):
    """One encoding's runs (:func:`train_variant`): per seed its final MLM loss and accuracy and its task
    accuracy, their means, and (first seed) its trained PE parameters and both runs' curves."""

    mlm_loss_per_seed: list[float]
    mlm_accuracy_per_seed: list[float]
    sst2_accuracy_per_seed: list[float]
    pe_parameters: int
    mlm_curve: Sequence[Mapping[str, Any]]  #: the runs' metrics lines
    sst2_curve: Sequence[Mapping[str, Any]]
    mlm_loss: float
    mlm_accuracy: float
    sst2_accuracy: float


@dataclass(frozen=True)
class MdsTrainingSettings(Settings):
    """The runs' settings (``key=value`` over the training preset; smoke: over ci's, on a labelled table of
    the smoke corpus written into the work dir, :func:`smoke_table`); ``seeds`` per variant (the comparison
    is a paired test over them: >= 2 to decide); the MDS file's largest rank; the non-inferiority margins
    (MLM loss ratio, accuracy points) and the classification task's name."""

    train: tuple[str, ...] = ("steps=400", "eval_every=200", "eval_batches=32", "max_length=48", "model.n_positions=48")
    seeds: int = 3
    rank_cap: int = 16
    loss_margin: float = 0.01
    accuracy_margin: float = 3.0
    task_name: str = "SST-2"


CI = MdsTrainingSettings()
PRESETS = {
    "smoke": replace(
        CI,
        train=("steps=10", "eval_every=10", "eval_batches=2", "tokenizer=whitespace", *SMOKE_TEXT[1:]),
        seeds=1,
        rank_cap=4,  # n = d = 16, where rank 16 would save nothing
        loss_margin=0.25,
        accuracy_margin=25.0,
        task_name="smoke-corpus label",
    ),
    "ci": CI,
    "paper": replace(CI, train=("dataset=imdb", "eval_split=none", "eval_batches=50")),
}


@experiment(
    "mds-training",
    summary="MDS PE (frozen, as init) vs learned vs sinusoidal vs low-rank at equal steps",
    paper="arXiv 2604.05217",
    minutes_ci=13.0,
)
def mds_training(options: ExperimentOptions) -> ExperimentResult:
    """MDS PE (frozen, as init) vs learned vs sinusoidal vs low-rank vs none at equal steps: MLM and SST-2."""
    from ..geometry.mds import classical_mds, low_rank_encoding

    watch = Stopwatch()
    settings = PRESETS[options.preset]
    if options.preset == "smoke":
        settings = replace(settings, train=(f"dataset={smoke_table(options.work_dir)}", *settings.train))
    config = resolved(options, settings.train, ["task=mlm"])
    geometry = corpus_geometry(config, options)
    n, width = config.max_length, config.model.d_model
    if len(geometry.positions) < n:
        from ..errors import InputError

        raise InputError(
            f"only {len(geometry.positions)} of the {n} positions have 100 sequences in {config.dataset}; "
            "lower max_length"
        )
    mds = classical_mds(geometry.matrix("corrected"))
    encoding = low_rank_encoding(
        mds, geometry.positions, dim=width, rank=min(settings.rank_cap, mds.embedding_.shape[1])
    )
    pe_file = options.work_dir / "sst2-mds.safetensors"
    encoding.save(pe_file)
    rank = encoding.rank
    seeds = [options.seed + k for k in range(settings.seeds)]
    variants = mds_variants(rank, pe_file)
    results = {name: train_variant(options, settings.train, name, pe, seeds) for name, pe in variants.items()}
    saving = encoding.parameter_counts()
    checks = mds_training_checks(results, seeds, settings, rank, n, width, float(saving["saving"]))
    figure = "mds-training.png"
    curves_figure(
        options.work_dir / figure,
        {k: v["mlm_curve"] for k, v in results.items()},
        "eval_loss",
        "MLM held-out loss",
        title=f"MLM on {in_folder(config.dataset, options.work_dir)}, {config.steps} steps per run",
    )
    task_name = settings.task_name
    heading = f"### Equal steps ({config.steps} per run), {task_name}, n = {n} positions, d = {width}"
    return ExperimentResult(
        "mds-training",
        "MDS positional encodings in training, against the usual ones at equal steps",
        checks,
        data={
            "results": results,
            "parameters": saving,
            "rank": rank,
            "config": in_folder(config.to_dict(), options.work_dir),
        },
        sections=[mds_training_section(heading, results, task_name, rank, saving)],
        figures={figure: "MLM held-out loss during training, per positional encoding"},
        preset=options.preset,
        seconds=watch(),
    )


def mds_variants(rank: int, pe_file: Path) -> dict[str, list[str]]:
    """The positional encodings mds-training compares, each as its model settings."""
    return {
        "none": ["model.pe=none"],
        "sinusoidal": ["model.pe=sinusoidal"],
        "learned": ["model.pe=learned"],
        f"lowrank r={rank}": ["model.pe=lowrank", f"model.pe_rank={rank}"],
        MDS_FROZEN: ["model.pe=mds", f"model.pe_file={pe_file}"],
        "mds (init, trained)": ["model.pe=mds", f"model.pe_file={pe_file}", "model.pe_trainable=true"],
    }


def train_variant(
    options: ExperimentOptions, train: Sequence[str], name: str, pe: list[str], seeds: list[int]
) -> VariantRuns:
    """One encoding's MLM and classification runs per seed: final losses and accuracies, their means, and (first
    seed) its trained PE parameters and curves."""
    slug = name.replace(" ", "-").replace("(", "").replace(")", "").replace(",", "").replace("=", "")
    entry: VariantRuns = {"mlm_loss_per_seed": [], "mlm_accuracy_per_seed": [], "sst2_accuracy_per_seed": []}
    for seed in seeds:
        seeded = replace(options, seed=seed)
        suffix = "" if seed == options.seed else f"-seed{seed}"
        mlm = train_run(seeded, train, f"mlm-{slug}{suffix}", ["task=mlm", *pe])
        sst2 = train_run(seeded, train, f"sst2-{slug}{suffix}", ["task=classification", *pe])
        entry["mlm_loss_per_seed"].append(mlm[-1]["eval_loss"])
        entry["mlm_accuracy_per_seed"].append(mlm[-1]["eval_accuracy"])
        entry["sst2_accuracy_per_seed"].append(sst2[-1]["eval_accuracy"])
        if seed == options.seed:
            model = load_model(options, f"mlm-{slug}")
            entry["pe_parameters"] = sum(p.numel() for p in model.pe.parameters() if p.requires_grad)
            entry["mlm_curve"], entry["sst2_curve"] = mlm, sst2
    entry["mlm_loss"] = float(np.mean(entry["mlm_loss_per_seed"]))
    entry["mlm_accuracy"] = float(np.mean(entry["mlm_accuracy_per_seed"]))
    entry["sst2_accuracy"] = float(np.mean(entry["sst2_accuracy_per_seed"]))
    return entry


def mds_training_section(
    heading: str, results: dict[str, VariantRuns], task_name: str, rank: int, saving: dict[str, int | float]
) -> str:
    """The table of the variants at equal steps and what the MDS file's factorisation saves."""
    rows = [
        [name, r["pe_parameters"], r["mlm_loss"], r["mlm_accuracy"], r["sst2_accuracy"]] for name, r in results.items()
    ]
    return (
        f"{heading}\n\n"
        + markdown_table(["pe", "trained PE parameters", "MLM loss", "MLM accuracy", f"{task_name} accuracy"], rows)
        + f"\n\nThe MDS file factorises as P = A W with r = {rank}: {saving['factored']} numbers against "
        f"{saving['dense']} for the dense table ({100 * saving['saving']:.1f}% fewer). The trained low-rank "
        "table has the same r (n + d) parameters. The MLM losses at ci scale differ by less than their "
        "noise: a width-64 model learns little beyond token frequencies in a few hundred steps; the paper "
        "preset is the comparison that separates the encodings."
    )


def mds_training_checks(
    results: dict[str, VariantRuns],
    seeds: list[int],
    settings: MdsTrainingSettings,
    rank: int,
    n: int,
    width: int,
    saving: float,
) -> list[Any]:
    """The verdicts of mds-training from each variant's per-seed MLM losses and task accuracies.

    "MDS as good as learned" is two non-inferiority tests paired over ``seeds``: the frozen MDS's MLM
    loss over learned's, per seed, not above 1 + the settings' ``loss_margin``; its accuracy not below
    learned's by more than ``accuracy_margin`` points.
    """
    from . import stat_tests as st

    finite = all(
        math.isfinite(v) for r in results.values() for v in [*r["mlm_loss_per_seed"], *r["sst2_accuracy_per_seed"]]
    )
    task_name, loss_margin, accuracy_margin = settings.task_name, settings.loss_margin, settings.accuracy_margin
    checks = [
        st.tolerance_check("all runs finite", "every run ends with a finite loss and accuracy", float(finite), finite),
        st.all_of(
            "MDS as good as learned",
            _against_learned(results, MDS_FROZEN, seeds, settings),
            f"mds (frozen, 0 trained PE parameters) vs learned at equal steps, paired over {len(seeds)} seeds: "
            f"MLM loss not above learned's by more than {100 * loss_margin:g}%, {task_name} accuracy not below "
            f"learned's by more than {accuracy_margin:g} points",
        ),
    ]
    if "none" in results:
        checks.append(_no_pe_control(st.all_of("none", _against_learned(results, "none", seeds, settings), "")))
    checks.append(
        st.tolerance(
            saving,
            0.0,
            below=False,
            strict=True,
            statement=f"1 - r (n + d) / (n d) > 0 at r = {rank}, n = {n}, d = {width} (arithmetic)",
        ).check("low-rank saving", paper="up to 88% fewer parameters")
    )
    return checks


def _against_learned(
    results: dict[str, VariantRuns],
    arm: str,
    seeds: list[int],
    settings: MdsTrainingSettings,
) -> list[Any]:
    """The two non-inferiority tests of ``arm`` against learned: MLM loss ratio and task accuracy."""
    from . import stat_tests as st

    task_name, loss_margin, accuracy_margin = settings.task_name, settings.loss_margin, settings.accuracy_margin
    a, learned = results[arm], results["learned"]
    ratios = [x / y for x, y in zip(a["mlm_loss_per_seed"], learned["mlm_loss_per_seed"], strict=True)]
    return [
        st.non_inferiority(
            ratios,
            1.0,
            loss_margin,
            higher_is_better=False,
            seeds=seeds,
            unit="x",
            statement=f"MLM loss of {arm} / learned's <= 1 + {loss_margin:g}",
        ),
        st.non_inferiority(
            [100 * x for x in a["sst2_accuracy_per_seed"]],
            [100 * x for x in learned["sst2_accuracy_per_seed"]],
            accuracy_margin,
            seeds=seeds,
            unit="points",
            statement=f"{task_name} accuracy of {arm} >= learned's - {accuracy_margin:g} points",
        ),
    ]


def _no_pe_control(control: Any) -> Check:
    """The negative control: the same tests with no PE must fail (``control``: their all_of)."""
    return Check(
        "control: no PE fails the same test",
        "negative control: the same two non-inferiority tests with no PE in place of mds (frozen) fail; "
        "when no PE passes them too, the comparison cannot tell an encoding from none at this scale "
        "(inconclusive)",
        control.value,
        not control.passed and control.decided,
        detail=control.detail,
        test="control",
        decided=control.decided,
        statistics=control.statistics,
    )


def smoke_table(work_dir: Path) -> Path:
    """The smoke corpus as a labelled table (sentence, label: the parity of the first token's id), written once."""
    from ..corpus.sources import resolve_source

    path = work_dir / "smoke-corpus.tsv"
    if not path.is_file():
        texts = resolve_source(SMOKE_CORPUS).read()
        rows = [f"{text}\t{int(text.split()[0][1:]) % 2}" for text in texts]
        path.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path
