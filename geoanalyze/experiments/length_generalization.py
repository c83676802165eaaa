"""length-generalization: JoFormer's LMs trained at block length L and scored at 2L, 4L and 8L.

Four causal LMs, identical but for how positions enter attention (RoPE; JoFormer-fixed: RoPE's
frequencies plus value transport; JoFormer-learned: per-layer trained frequencies plus value
transport; JoFormer-projected: content-driven angles), trained by the
project's one loop on the ``lm`` task at block length L, then scored on the held-out stream in
blocks of L, 2L, 4L and 8L covering the same tokens. The perplexity ratio ppl(kL) / ppl(L)
measures extrapolation (1 = none lost; below 1 = the longer context helps). ci: WikiText-2
(../shared/data, the validation file: 90% trained on, the last 10% held out), characters,
L = 64 -> 512, a 2-layer width-64 model. paper: the train / validation splits, bert-base-uncased
WordPiece, L = 512 -> 4096, an 8-layer width-512 model on CUDA.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .joformer_shared import CI_LM, SMOKE_CORPUS, SMOKE_LM, block_perplexity
from .record import (
    ExperimentOptions,
    ExperimentResult,
    Stopwatch,
    markdown_table,
    training_preset,
)
from .registry import experiment
from .settings import Settings

LM_VARIANTS: dict[str, list[str]] = {
    "rope": ["model.pe=rope", "model.attention=standard"],
    "joformer-fixed": ["model.pe=none", "model.attention=joformer-fixed"],
    "joformer-learned": ["model.pe=none", "model.attention=joformer-learned"],
    "joformer-projected": ["model.pe=none", "model.attention=joformer-projected"],
}
MULTIPLIERS = (1, 2, 4, 8)
#: the paper's perplexity ratios, train 512 -> test 4096 (8L)
PAPER_RATIOS = {"joformer-projected": 1.02, "joformer-fixed": 4.41, "rope": 6.29}

LM_PRESETS: dict[str, list[str]] = {
    "smoke": [
        "task=lm",
        f"dataset={SMOKE_CORPUS}",
        "eval_split=none",
        "tokenizer=char",
        "model.arch=gpt",
        "model.n_positions=8",
        *SMOKE_LM,
        "max_length=8",
        "limit=none",
        "steps=20",
        "batch_size=16",
        "lr=3e-3",
        "warmup_steps=5",
        "eval_every=20",
        "eval_batches=2",
        "device=cpu",
    ],
    "ci": [
        "task=lm",
        "dataset=wikitext2",
        "split=validation",
        "eval_split=none",
        "tokenizer=char",
        "model.arch=gpt",
        *CI_LM,
        "max_length=64",
        "limit=none",
        "steps=600",
        "batch_size=32",
        "lr=3e-3",
        "warmup_steps=50",
        "eval_every=600",
        "eval_batches=8",
        "device=cpu",
    ],
    "paper": [
        "task=lm",
        "dataset=wikitext2",
        "split=train",
        "eval_split=validation",
        "tokenizer=bert-base-uncased",
        "model.arch=gpt",
        "model.n_positions=512",
        "model.d_model=512",
        "model.n_layers=8",
        "model.n_heads=8",
        "model.d_ff=2048",
        "model.dropout=0.1",
        "max_length=512",
        "limit=none",
        "steps=20000",
        "batch_size=32",
        "lr=3e-4",
        "warmup_steps=1000",
        "eval_every=2000",
        "eval_batches=20",
        "device=cuda",
    ],
}


@dataclass(frozen=True)
class LengthSettings(Settings):
    """``seeds`` per variant (``--set seeds=N``): the comparisons are paired t-tests over them, which need at
    least 2 (ci: 3, a one-sided bound with 2 dof); smoke's one seed leaves them undecided."""

    seeds: int = 3


LM_SETTINGS = {"smoke": LengthSettings(seeds=1), "ci": LengthSettings(), "paper": LengthSettings()}
#: blocks of the longest length scored per length (ci, paper): the same tokens at every length
EVAL_BLOCKS = {"smoke": 4, "ci": 24, "paper": 16}


@experiment(
    "length-generalization",
    summary="LMs with RoPE / JoFormer-fixed / JoFormer-projected trained at L, evaluated at 2L, 4L, 8L",
    paper="arXiv 2505.15507",
    minutes_ci=5.0,
)
def length_generalization(options: ExperimentOptions) -> ExperimentResult:
    """Train RoPE / JoFormer-fixed / -learned / -projected LMs at L and score them at L, 2L, 4L, 8L."""
    from ..models import Transformer
    from ..train import resolve_config, train
    from ..train.loop import select_device
    from ..train.tasks import build_task

    watch = Stopwatch()
    preset = options.preset
    own = [item for item in options.overrides if item.partition("=")[0].strip() == "seeds"]
    overrides = [item for item in options.overrides if item not in own]
    count = LM_SETTINGS[preset].override(own, "length-generalization").seeds
    seeds = [options.seed + k for k in range(max(1, count))]
    base = [*LM_PRESETS[preset]]
    if options.device != "auto" or preset in ("smoke", "ci"):
        base.append(f"device={'cpu' if options.device == 'auto' else options.device}")
    if options.data_dir is not None:
        base.append(f"data_dir={options.data_dir}")
    per_seed: dict[str, list[list[float]]] = {name: [] for name in LM_VARIANTS}
    per_seed_ppl: dict[str, list[list[float]]] = {name: [] for name in LM_VARIANTS}
    runs: dict[str, Any] = {}
    held_out: np.ndarray | None = None
    for seed in seeds:
        for name, settings in LM_VARIANTS.items():
            config = resolve_config(training_preset(preset), [*base, f"seed={seed}", *settings, *overrides])
            out = Path(options.work_dir) / f"lm-{name}" / f"seed-{seed}"
            metrics = train(config, out, progress=options.progress).metrics
            if held_out is None:  # the same stream the runs held out (the tokenization is deterministic)
                held_out = build_task(config).held_out  # type: ignore[attr-defined]
            device = select_device(config.device)
            model = Transformer.load(out / "checkpoint", device=device)
            L = config.max_length
            n_tokens = eval_tokens(held_out, L, preset)
            ppl = [block_perplexity(model, held_out, m * L, n_tokens, device) for m in MULTIPLIERS]
            per_seed_ppl[name].append(ppl)
            per_seed[name].append([p / ppl[0] for p in ppl])
            runs.setdefault(name, {"config": config.to_dict(), "eval_tokens": n_tokens, "train": {}})
            runs[name]["train"][str(seed)] = metrics
    perplexities = {name: np.mean(values, axis=0).tolist() for name, values in per_seed_ppl.items()}
    ratios = {name: np.mean(values, axis=0).tolist() for name, values in per_seed.items()}
    L = int(runs["rope"]["config"]["max_length"])
    checks = length_checks(
        {name: [r[-1] for r in values] for name, values in per_seed.items()},
        [p for values in per_seed_ppl.values() for row in values for p in row],
        seeds,
        f"{MULTIPLIERS[-1]}L",
    )
    section = perplexity_section(perplexities, ratios, L, seeds)
    figure = "length_generalization.png"
    _ratio_figure(ratios, L, Path(options.work_dir) / figure)
    return ExperimentResult(
        name="length-generalization",
        title="LMs with RoPE and JoFormer-fixed, -learned and -projected trained at L and evaluated at 2L, 4L, 8L",
        checks=checks,
        data={
            "L": L,
            "multipliers": list(MULTIPLIERS),
            "seeds": seeds,
            "perplexity": perplexities,
            "ratio": ratios,
            "ratio_per_seed": per_seed,
            "runs": runs,
        },
        sections=[section],
        figures={figure: f"perplexity ratio ppl(kL) / ppl(L), trained at L = {L}"},
        preset=preset,
        seconds=watch(),
    )


def eval_tokens(held_out: np.ndarray, L: int, preset: str) -> int:
    """How many held-out tokens every length scores: EVAL_BLOCKS blocks of 8L, or as many as the stream holds."""
    longest = MULTIPLIERS[-1] * L
    n_tokens = min(EVAL_BLOCKS[preset] * longest, (len(held_out) - 1) // longest * longest)
    if n_tokens < longest:
        raise InputError(
            f"the held-out stream has {len(held_out)} tokens, fewer than one block of "
            f"{longest}; lower max_length or use a larger corpus"
        )
    return n_tokens


def perplexity_section(
    perplexities: dict[str, list[float]], ratios: dict[str, list[float]], L: int, seeds: Sequence[int]
) -> str:
    """The Markdown table of perplexities and ratios per variant, beside the paper's 8L ratio."""
    header = ["model", *(f"ppl {m}L" for m in MULTIPLIERS), *(f"ratio {m}L" for m in MULTIPLIERS[1:]), "paper 8L"]
    rows = [
        [name, *perplexities[name], *ratios[name][1:], f"{PAPER_RATIOS[name]}x" if name in PAPER_RATIOS else None]
        for name in LM_VARIANTS
    ]
    return (
        f"### Perplexity by evaluation length (trained at L = {L})\n\n"
        + markdown_table(header, rows)
        + f"\n\nratio = ppl(kL) / ppl(L) on the same held-out tokens, mean over seeds {', '.join(map(str, seeds))}; "
        "paper: train 512, test 4096."
    )


def length_checks(
    longest: dict[str, list[float]], perplexities: Sequence[float], seeds: Sequence[int], at: str = "8L"
) -> list[Any]:
    """The verdicts of length-generalization from each variant's per-seed ratio ppl(8L) / ppl(L).

    Paired over the seeds (every variant trained with the same seed, data and schedule); a lower
    ratio is better. One seed leaves the comparisons undecided.
    """
    from . import stat_tests as st

    finite = all(math.isfinite(p) for p in perplexities)
    worst = max((max(v) for v in longest.values()), default=math.nan)
    n = len(seeds)
    checks = [
        st.tolerance_check(
            "finite",
            "every perplexity at L, 2L, 4L, 8L is finite (the model runs past its training length)",
            worst if finite else math.nan,
            finite,
            detail=f"value: the largest {at} ratio, over {n} seeds",
        )
    ]
    for name, variant, paper in (
        ("projected-vs-rope", "joformer-projected", "1.02x vs 6.29x (512 -> 4096)"),
        ("fixed-vs-rope", "joformer-fixed", "4.41x vs 6.29x (512 -> 4096)"),
    ):
        test = st.superiority(
            longest[variant],
            longest["rope"],
            higher_is_better=False,
            seeds=seeds,
            unit="x",
            statement=f"{variant.replace('joformer', 'JoFormer')}'s perplexity ratio at {at} is below RoPE's, "
            f"paired over {n} seeds",
        )
        checks.append(
            test.check(
                name,
                paper=paper,
                value=float(np.mean(longest[variant])),
                detail=f"value: {variant}'s mean ratio; RoPE's {np.mean(longest['rope']):.3f}x",
            )
        )
    return checks


def _ratio_figure(ratios: dict[str, list[float]], L: int, path: Path) -> None:
    from ..plotting import Looks, series
    from ..plotting import pyplot as _pyplot
    from ..plotting import save as _save

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    looks = Looks()
    for name, values in ratios.items():
        series(axis, [m * L for m in MULTIPLIERS], values, looks(name), label=name)
    axis.set_xscale("log", base=2)
    axis.axhline(1.0, color="grey", lw=0.8, ls="--")
    axis.set_xlabel("evaluation block length (tokens)")
    axis.set_ylabel("ppl(length) / ppl(L)")
    axis.set_title(f"length generalization, trained at L = {L}")
    axis.legend(fontsize=8)
    _save(figure, path)
