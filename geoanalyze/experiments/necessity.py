"""necessity, Theorem 1 of arXiv 2604.05217 (positional.py): a bidirectional model without PE is
permutation-equivariant, measured at float32 round-off; trained on the order task (train/tasks.py: no
equivariant model can beat chance there), no PE stays at chance while every PE solves it."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .positional import SMOKE_MODEL, in_folder, resolved, train_run
from .positional_figures import curves_figure
from .record import ExperimentOptions, ExperimentResult, Stopwatch, fmt, markdown_table
from .registry import experiment
from .settings import Settings

#: the order-task runs of `necessity`: every PE kind, with the settings a kind needs
ORDER_KINDS: dict[str, list[str]] = {
    "none": [],
    "sinusoidal": [],
    "learned": [],
    "lowrank": ["model.pe_rank=4"],
    "mds": [],  # model.pe_file is added once the file is written
    "rope": [],
    "alibi": [],
}


@dataclass(frozen=True)
class NecessitySettings(Settings):
    """The order-task runs' settings (``key=value`` over the training preset; smoke: over ci's) and the
    thresholds in accuracy points: no PE within ``chance_margin`` of chance (equivalence), every PE above
    ``solved``. At ci dropout is off: the task's data is unlimited, and dropout only slows the frozen
    sinusoidal table."""

    train: tuple[str, ...] = ("task=order", "steps=800", "eval_every=100", "eval_batches=64", "model.dropout=0")
    chance_margin: float = 5.0
    solved: float = 0.95


CI = NecessitySettings()
SMOKE = replace(
    CI,
    train=(
        *("task=order", "order_length=6", "order_vocab=4", "model.n_positions=6", "steps=150", "eval_every=150"),
        *("eval_batches=8", "lr=3e-3", "warmup_steps=10", *SMOKE_MODEL),
    ),
    chance_margin=15.0,
    solved=0.75,
)
PAPER = replace(CI, train=("task=order", "order_length=128", "steps=3000", "eval_every=250", "eval_batches=64"))
PRESETS = {"smoke": SMOKE, "ci": CI, "paper": PAPER}


@experiment(
    "necessity",
    summary="Theorem 1: no PE -> permutation-equivariant, at chance on an order task; every PE solves it",
    paper="arXiv 2604.05217",
    minutes_ci=2.0,
)
def necessity(options: ExperimentOptions) -> ExperimentResult:
    """Theorem 1: equivariance without PE at round-off, chance on the order task; every PE solves it."""
    watch = Stopwatch()
    deviations = equivariance_deviations(seed=options.seed)
    settings = PRESETS[options.preset]
    config = resolved(options, settings.train)
    pe_file = options.work_dir / "order-mds.safetensors"
    write_synthetic_mds_file(pe_file, config.model.n_positions, config.model.d_model, seed=options.seed)
    runs: dict[str, list[dict[str, Any]]] = {}
    for kind, extra in ORDER_KINDS.items():
        pe_settings = [f"model.pe={kind}", *extra] + ([f"model.pe_file={pe_file}"] if kind == "mds" else [])
        runs[kind] = train_run(options, settings.train, kind, pe_settings)
    n_eval = config.eval_batches * config.batch_size
    band = 3.0 * math.sqrt(0.25 / n_eval)  # 3 sd of a fair coin's accuracy on n_eval sequences (the figure)
    final = {kind: lines[-1]["eval_accuracy"] for kind, lines in runs.items()}
    checks = necessity_checks(deviations, final, n_eval, options.seed, settings=settings)
    figure = "necessity-accuracy.png"
    curves_figure(
        options.work_dir / figure,
        runs,
        "eval_accuracy",
        "held-out accuracy",
        chance=(0.5 - band, 0.5 + band),
        title=f"order task ({config.order_length} tokens), one run per positional encoding",
    )
    rows = [[kind, deviations[kind], final[kind], runs[kind][-1]["eval_loss"]] for kind in runs]
    sections = [
        "### Equivariance and accuracy per encoding\n\n"
        + markdown_table(["pe", "equivariance deviation", "held-out accuracy", "held-out loss"], rows)
        + f"\n\nA causal model without PE is not equivariant (its mask orders the tokens): deviation "
        f"{fmt(deviations['none (gpt)'])}.",
    ]
    return ExperimentResult(
        "necessity",
        "Theorem 1: without PE a transformer cannot tell order; with any PE it can",
        checks,
        data={
            "equivariance_deviation": deviations,
            "runs": runs,
            "final_accuracy": final,
            "chance_band": band,
            "config": in_folder(config.to_dict(), options.work_dir),
        },
        sections=sections,
        figures={figure: "Held-out accuracy on the order task during training, per positional encoding"},
        preset=options.preset,
        seconds=watch(),
    )


def necessity_checks(
    deviations: dict[str, float],
    final: dict[str, float],
    n_eval: int,
    seed: int,
    settings: NecessitySettings = CI,
) -> list[Any]:
    """The verdicts of necessity from the equivariance deviations and each PE kind's held-out accuracy.

    Equivariance is an identity at round-off (tolerance). The accuracies are one run per kind, tested
    over the ``n_eval`` held-out sequences (binomial sd): the theorem holds for any weights, so one run
    is the statement's unit for "no PE is at chance"; "every PE solves it" is shown by one run each.
    """
    from . import stat_tests as st

    margin, solved = settings.chance_margin, settings.solved  # the preset's own (smoke loosens them)
    note = " (smoke: 150 steps on 128 sequences, margins loosened)" if settings is SMOKE else ""
    broken = min(v for k, v in deviations.items() if k not in ("none", "none (gpt)"))
    encoded = [kind for kind in final if kind != "none"]
    return [
        st.tolerance(
            deviations["none"],
            1e-5,
            statement="bert, no PE: max |f(x pi) - f(x) pi| / max |f(x)| <= 1e-5 (float32 round-off)",
        ).check("equivariance without PE", paper="0 (Theorem 1)"),
        st.tolerance(broken, 1e-2, below=False, statement="min over PE kinds of the same deviation >= 1e-2").check(
            "every PE breaks it"
        ),
        st.proportion(
            "equivalence",
            final["none"],
            n_eval,
            0.5,
            margin=margin,
            seeds=(seed,),
            statement=f"the no-PE model's held-out accuracy is within {margin:g} points of chance (0.5) on "
            f"{n_eval} held-out sequences{note}",
        ).check("no PE at chance", paper="chance (Theorem 1)", value=final["none"], detail="value: the accuracy"),
        st.all_of(
            "every PE solves the task",
            [
                st.proportion(
                    "superiority",
                    final[kind],
                    n_eval,
                    solved,
                    seeds=(seed,),
                    statement=f"{kind} > {solved:g}",
                )
                for kind in encoded
            ],
            f"every PE kind's held-out accuracy is above {solved:g} on {n_eval} held-out sequences (one run per "
            f"kind shows the task solvable with it){note}",
        ),
    ]


def equivariance_deviations(seed: int = 0, length: int = 24, batch: int = 4) -> dict[str, float]:
    """max |f(x pi) - f(x) pi| / max |f(x)| of untrained bert models per PE kind, and of a gpt without PE.

    f is the final hidden state (B, T, d); pi a random permutation of the positions.
    """
    import torch

    from ..models import ModelConfig

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 100, (batch, length), generator=generator)
    permutation = torch.randperm(length, generator=generator)
    deviations = {}
    kinds = [(kind, "bert") for kind in ORDER_KINDS]
    with tempfile.TemporaryDirectory() as folder:
        pe_file = Path(folder) / "mds.safetensors"
        write_synthetic_mds_file(pe_file, length, 32, seed=seed)
        for kind, arch in [*kinds, ("none", "gpt")]:
            torch.manual_seed(seed)
            config = ModelConfig(
                arch=arch,
                vocab_size=100,
                n_positions=length,
                d_model=32,
                n_layers=2,
                n_heads=4,
                d_ff=64,
                dropout=0.0,
                pe=kind,
                pe_rank=4 if kind == "lowrank" else None,
                pe_file=str(pe_file) if kind == "mds" else None,
            )
            deviations[kind if arch == "bert" else "none (gpt)"] = _deviation(config, ids, permutation, generator)
    return deviations


def _deviation(config: Any, ids: Any, permutation: Any, generator: Any) -> float:
    """max |f(x pi) - f(x) pi| / max |f(x)| of one untrained model with generic weights."""
    import torch

    from ..models import Transformer

    model = Transformer(config).eval()
    # Generic weights, N(0, 1 / fan_in): at the training init (std 0.02) attention is nearly
    # uniform, so RoPE and ALiBi would barely show; the theorem holds for any weights.
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.ndim >= 2:
                parameter.normal_(0.0, parameter.shape[-1] ** -0.5, generator=generator)
        plain = model(ids)["hidden_states"]
        permuted = model(ids[:, permutation])["hidden_states"]
    return float((permuted - plain[:, permutation]).abs().max() / plain.abs().max())


def write_synthetic_mds_file(path: Path, n: int, width: int, seed: int = 0) -> None:
    """The MDS encoding of the true marginals of a drift corpus with ``n`` positions, for a model of width ``width``."""
    from ..corpus.synthetic import drift_marginals
    from ..geometry.distances import hellinger_distances
    from ..geometry.mds import classical_mds, low_rank_encoding

    marginals = drift_marginals(n, 200, np.random.default_rng(seed))
    mds = classical_mds(hellinger_distances(marginals))
    encoding = low_rank_encoding(mds, np.arange(n), dim=width, metadata={"source": "synthetic drift, true marginals"})
    encoding.save(path)
