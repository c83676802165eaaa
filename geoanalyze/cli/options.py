"""Options shared by several commands, defined once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Sources = Annotated[
    list[str],
    typer.Argument(
        help="Corpus: dataset name (sst2, imdb, wikitext2), file or folder, synthetic[:KIND,...], "
        "a hub dataset id, or a .safetensors file made by geoanalyze. Several are merged.",
        show_default=False,
    ),
]
Split = Annotated[str | None, typer.Option("--split", help="Dataset split (default: train).")]
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        envvar="GEOANALYZE_DATA_DIR",
        help="Local folder laid out <name>/<split>.<tsv|jsonl.gz|tokens|txt> that stands in for the hub.",
    ),
]
TextColumn = Annotated[
    str | None, typer.Option("--text-column", help="Column or JSON key with the text (default: guessed).")
]
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="Read at most this many texts.")]
TokenizerOpt = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        "-t",
        help="HF tokenizer name or folder, or 'whitespace' / 'char' (corpus-built vocabulary). "
        "Default: bert-base-uncased; whitespace for synthetic specs.",
    ),
]
MaxLength = Annotated[
    int | None, typer.Option("--max-length", min=1, help="Truncate sequences (default: the tokenizer's maximum, 512).")
]
ExcludeSpecial = Annotated[
    bool, typer.Option("--exclude-special", help="Leave special tokens ([CLS], [SEP], ...) out of the counts.")
]
NoSpecialTokens = Annotated[
    bool, typer.Option("--no-special-tokens", help="Tokenize without adding [CLS]/[SEP] (positions shift by one).")
]
SplitSeed = Annotated[int, typer.Option("--split-seed", help="Seed of the split-half assignment of sequences.")]
NoCache = Annotated[
    bool,
    typer.Option("--no-cache", help="Recompute instead of reading the caches (counts; for stress also centroids)."),
]
Workers = Annotated[
    int | None,
    typer.Option("--workers", min=1, help="Processes counting shards in parallel (default: every core)."),
]
Cluster = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="Count the shards on the Dask scheduler at this address (tcp://host:8786), or 'local' "
        "for a local Dask cluster of --workers processes.",
    ),
]
WorkDir = Annotated[
    Path | None,
    typer.Option(
        "--work-dir",
        help="Keep per-shard partial counts here; a re-run of a killed job counts only the missing shards.",
    ),
]
Sample = Annotated[
    float | None,
    typer.Option("--sample", min=0.0, max=1.0, help="Count a seeded random FRACTION of the texts, while streaming."),
]
SampleSeed = Annotated[int, typer.Option("--sample-seed", help="Seed of --sample.")]
MinCount = Annotated[int, typer.Option("--min-count", min=1, help="Leave out positions seen in fewer sequences (N_i).")]
Metric = Annotated[str, typer.Option("--metric", help="hellinger or fisher-rao.")]
Format = Annotated[
    str, typer.Option("--format", "-f", help="table, json or markdown (GitHub tables; all say the same).")
]
