"""lm-vocab: JoFormer-projected / -learned vs RoFormer language models at several BPE vocabularies.

Byte-level BPE tokenizers of 8k, 16k and 32k symbols trained on IMDB train; each model trained by
the project's runner (``geoanalyze train``'s) on IMDB reviews in blocks of 64 tokens and scored
on WikiText-2 validation in consecutive blocks of 64 (the smoke preset: synthetic drift texts).
The claim (the paper's table): projected below RoFormer at every size, paired over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .joformer_shared import CI_LM, SMOKE_CORPUS, SMOKE_EVAL_CORPUS, SMOKE_LM, block_perplexity
from .record import (
    ExperimentOptions,
    ExperimentResult,
    Stopwatch,
    markdown_table,
    training_preset,
)
from .registry import experiment
from .settings import Settings

#: the paper's best validation perplexities (Wikipedia, block 64): vocabulary -> (projected, RoFormer)
PAPER_VOCAB_TABLE = {8000: (4.32, 4.67), 16000: (26.30, 27.30), 32000: (69.12, 69.76)}
VOCAB_MODELS: dict[str, list[str]] = {
    "roformer": ["model.pe=rope", "model.attention=standard"],
    "joformer-learned": ["model.pe=none", "model.attention=joformer-learned"],
    "joformer-projected": ["model.pe=none", "model.attention=joformer-projected"],
}


@dataclass(frozen=True)
class VocabSettings(Settings):
    """The BPE vocabularies (comma-separated), the texts the tokenizers and the runs read, the blocks scored,
    and the seeds per model and vocabulary (the claim is a paired t-test over them: >= 2 to decide, 3 at ci)."""

    vocabs: str = "8000,16000,32000"
    tokenizer_texts: int = 4000
    train_texts: int = 4000
    eval_blocks: int = 160
    seeds: int = 3


CI = VocabSettings()
VOCAB_SETTINGS = {
    "smoke": replace(CI, vocabs="300,400", tokenizer_texts=200, train_texts=200, eval_blocks=4, seeds=1),
    "ci": CI,
    "paper": replace(CI, tokenizer_texts=25000, train_texts=25000, eval_blocks=1000),
}
VOCAB_TRAINING: dict[str, list[str]] = {
    "smoke": [
        "model.n_positions=64",
        *SMOKE_LM,
        "steps=5",
        "batch_size=4",
        "lr=3e-3",
        "warmup_steps=1",
        "eval_every=5",
        "eval_batches=1",
        "device=cpu",
    ],
    "ci": [
        *CI_LM,
        "steps=300",
        "batch_size=16",
        "lr=3e-3",
        "warmup_steps=30",
        "eval_every=300",
        "eval_batches=4",
        "device=cpu",
    ],
    "paper": [
        "model.n_positions=64",
        "model.d_model=512",
        "model.n_layers=6",
        "model.n_heads=8",
        "model.d_ff=2048",
        "model.dropout=0.1",
        "steps=2000",
        "batch_size=64",
        "lr=6e-4",
        "warmup_steps=200",
        "eval_every=2000",
        "eval_batches=20",
        "device=cuda",
    ],
}


def vocab_checks(perplexity: dict[int, dict[str, list[float]]], seeds: Sequence[int]) -> list[Any]:
    """The verdicts of lm-vocab from the per-seed WikiText-2 perplexities per vocabulary size and model:
    at every size, a superiority test of JoFormer-projected over RoFormer paired over ``seeds``."""
    from . import stat_tests as st

    finite = all(math.isfinite(p) for row in perplexity.values() for values in row.values() for p in values)
    tests = [
        st.superiority(
            row["joformer-projected"],
            row["roformer"],
            higher_is_better=False,
            seeds=seeds,
            unit="perplexity",
            statement=f"{size}",
        )
        for size, row in perplexity.items()
    ]
    return [
        st.tolerance_check("finite", "every WikiText-2 perplexity is finite", float(finite), finite),
        st.all_of(
            "projected below RoFormer",
            tests,
            "JoFormer-projected's WikiText-2 validation perplexity is below RoFormer's at every vocabulary size, "
            f"paired over {len(seeds)} seeds",
            paper="4.32 vs 4.67 (8k), 26.30 vs 27.30 (16k), 69.12 vs 69.76 (32k)",
            detail="per vocabulary size: RoFormer's minus projected's mean perplexity",
        ),
    ]


def train_bpe(texts: Sequence[str], vocab_size: int, folder: Path) -> Path:
    """A byte-level BPE of ``vocab_size`` trained with `tokenizers`, saved as a transformers tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["[UNK]", "[PAD]"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]").save_pretrained(
        str(folder)
    )
    return folder


def training_base(options: ExperimentOptions, settings: VocabSettings) -> list[str]:
    """The training settings every run shares (seed, tokenizer and model follow per run)."""
    base = [
        "task=lm",
        f"dataset={SMOKE_CORPUS}" if options.preset == "smoke" else "dataset=imdb",
        "split=train",
        "eval_split=none",
        "model.arch=gpt",
        "max_length=64",
        f"limit={settings.train_texts}",
        f"seed={options.seed}",
        *VOCAB_TRAINING[options.preset],
    ]
    if options.device != "auto":
        base.append(f"device={options.device}")
    if options.data_dir is not None:
        base.append(f"data_dir={options.data_dir}")
    return base


def train_and_score(
    options: ExperimentOptions,
    size: int,
    tokenizer: Path,
    base: list[str],
    training: list[str],
    seeds: Sequence[int],
    stream: np.ndarray,
    n_tokens: int,
) -> dict[str, list[float]]:
    """Train every model of VOCAB_MODELS per seed with the runner; its perplexity on ``stream`` in blocks of 64."""
    from ..models import Transformer
    from ..train import resolve_config, train
    from ..train.loop import select_device

    per_seed: dict[str, list[float]] = {name: [] for name in VOCAB_MODELS}
    for seed in seeds:
        for name, model_settings in VOCAB_MODELS.items():
            config = resolve_config(
                training_preset(options.preset),
                [*base, f"seed={seed}", f"tokenizer={tokenizer}", *model_settings, *training],
            )
            out = Path(options.work_dir) / f"lm-{size}-{name}" / f"seed-{seed}"
            train(config, out, progress=options.progress)
            device = select_device(config.device)
            model = Transformer.load(out / "checkpoint", device=device)
            per_seed[name].append(block_perplexity(model, stream, 64, n_tokens, device))
    return per_seed


def vocab_section(
    vocabs: Sequence[int],
    actual_vocab: dict[int, int],
    perplexity: dict[int, dict[str, float]],
    smoke: bool,
    n_tokenizer_texts: int,
    train_texts: int,
) -> str:
    """The Markdown table of perplexities per vocabulary size and model, beside the paper's."""
    rows = []
    for size in vocabs:
        paper = PAPER_VOCAB_TABLE.get(size)
        rows.append(
            [
                size,
                actual_vocab[size],
                perplexity[size]["joformer-projected"],
                perplexity[size]["joformer-learned"],
                perplexity[size]["roformer"],
                f"{paper[0]} vs {paper[1]}" if paper else None,
            ]
        )
    return (
        (
            "### Perplexity on synthetic drift (seed 1) (block 64), trained on synthetic drift (seed 0) (smoke)\n\n"
            if smoke
            else "### WikiText-2 validation perplexity (block 64), trained on IMDB train\n\n"
        )
        + markdown_table(
            ["BPE vocabulary", "tokens", "projected", "learned", "RoFormer", "paper (projected vs RoFormer)"], rows
        )
        + f"\n\nByte-level BPE tokenizers trained with `tokenizers` on {n_tokenizer_texts} IMDB train reviews; each "
        f"model trained by the project's loop on {train_texts} reviews (blocks of 64 tokens); scored on "
        "WikiText-2 validation in consecutive blocks of 64. The paper trains and evaluates on Wikipedia; "
        "perplexities of different vocabularies are not comparable with each other (a token is a different unit)."
    )


@experiment(
    "lm-vocab",
    summary="JoFormer-projected / -learned vs RoFormer LMs at 8k/16k/32k BPE (IMDB train -> WikiText-2 validation)",
    paper="arXiv 2505.15507",
    minutes_ci=30.0,
)
def lm_vocab(options: ExperimentOptions) -> ExperimentResult:
    """Projected / learned JoFormer vs RoFormer LMs at several BPE vocabularies: IMDB train -> WikiText-2 validation."""
    from ..corpus.sources import resolve_source
    from ..corpus.tokenize import get_tokenizer
    from ..train import resolve_config

    watch = Stopwatch()
    # the experiment's own keys here; every other key=value goes to the training runs
    names = [f.name for f in fields(VocabSettings)]
    own = [item for item in options.overrides if item.partition("=")[0].strip() in names]
    training = [item for item in options.overrides if item not in own]
    settings = VOCAB_SETTINGS[options.preset].override(own, "lm-vocab")
    try:
        vocabs = [int(v) for v in settings.vocabs.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"lm-vocab: vocabs must be comma-separated integers, got {settings.vocabs!r}") from None
    smoke = options.preset == "smoke"  # synthetic texts stand in for IMDB and WikiText-2
    base = training_base(options, settings)
    # every training override is checked now, before minutes of reading corpora and training tokenizers
    resolve_config(training_preset(options.preset), [*base, *training])
    imdb = resolve_source(SMOKE_CORPUS) if smoke else resolve_source("imdb", split="train", data_dir=options.data_dir)
    wiki = (
        resolve_source(SMOKE_EVAL_CORPUS)
        if smoke
        else resolve_source("wikitext2", split="validation", data_dir=options.data_dir)
    )
    tokenizer_texts = imdb.read(settings.tokenizer_texts)
    wiki_text = "\n".join(wiki.read())
    seeds = [options.seed + k for k in range(max(1, settings.seeds))]
    base = [item for item in base if not item.startswith("seed=")]
    per_seed: dict[int, dict[str, list[float]]] = {}
    actual_vocab: dict[int, int] = {}
    for size in vocabs:
        folder = train_bpe(tokenizer_texts, size, Path(options.work_dir) / "tokenizers" / f"bpe-{size}")
        tok = get_tokenizer(str(folder), max_length=1 << 30, add_special_tokens=False)
        actual_vocab[size] = tok.vocab_size
        stream = tok.encode_batch([wiki_text])[0].astype(np.int64)
        n_tokens = min(settings.eval_blocks * 64, (len(stream) - 1) // 64 * 64)
        per_seed[size] = train_and_score(options, size, folder, base, training, seeds, stream, n_tokens)
    perplexity = {size: {name: float(np.mean(v)) for name, v in row.items()} for size, row in per_seed.items()}
    checks = vocab_checks(per_seed, seeds)
    section = vocab_section(vocabs, actual_vocab, perplexity, smoke, len(tokenizer_texts), settings.train_texts)
    return ExperimentResult(
        "lm-vocab",
        "JoFormer-projected vs RoFormer language models at 8k / 16k / 32k BPE vocabularies",
        checks,
        data={"perplexity": perplexity, "vocab": actual_vocab, "settings": settings.to_dict()},
        sections=[section],
        preset=options.preset,
        seconds=watch(),
    )
