"""Options shared by several commands, defined once, and the checks every option declares.

Every option states its own check where it is declared (typer's ``callback=``, ``parser=``,
``min=``/``max=``), through the three declarations below; tests/cli/test_option_checks.py walks
every command and holds each option to them:

* a text option refuses an empty or blank value (``-t "$UNSET"``), which would otherwise read
  as "use the default": :func:`text_option` (``--compare ''``, "compare nothing", is the one
  text option where the empty string means something, declared with plain ``typer.Option``);
* a path option refuses an empty value, which would be the current folder: :func:`path_option`;
* a ``--...seed`` option takes SEED_MIN..SEED_MAX, so a negative or over-large seed is refused
  at option parsing, naming the option (not an internal error deep in numpy): :func:`seed_option`.

The command classes :class:`Command` and :class:`Group` (``cls=`` of every command and group)
list flags in --help without a value type, and answer a bare group with its help and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

#: the seeds every command accepts: what numpy's legacy RandomState and torch's generators all take
SEED_MIN, SEED_MAX = 0, 2**32 - 1

#: typer's help shows a path option's value as <path>; a path option with a parser shows this too
PATH_METAVAR = "<path>"


def not_blank(value: str | None) -> str | None:
    """An option given as an empty string (an unset shell variable: ``-t "$TOKENIZER"``) is refused,
    not read as "use the default"."""
    if value is not None and not value.strip():
        raise typer.BadParameter("is empty (an unset shell variable?); give a value or leave the option out")
    return value


def path_not_blank(value: str | Path) -> Path:
    """A path option given as an empty string would be the current folder (``-o ''`` writing a run
    into it): refused like an empty text option."""
    if isinstance(value, Path):
        return value
    if not value.strip():
        raise typer.BadParameter("is empty (an unset shell variable?); give a path or leave the option out")
    return Path(value)


def text_option(*declarations: str, **settings: Any) -> Any:
    """``typer.Option`` for a text (``str`` or ``str | None``) value, refusing an empty one."""
    return typer.Option(*declarations, callback=not_blank, **settings)


def path_option(*declarations: str, **settings: Any) -> Any:
    """``typer.Option`` for a ``Path`` (or ``Path | None``) value, refusing an empty one."""
    return typer.Option(*declarations, parser=path_not_blank, metavar=PATH_METAVAR, **settings)


def seed_option(*declarations: str, **settings: Any) -> Any:
    """``typer.Option`` for a seed: SEED_MIN..SEED_MAX."""
    return typer.Option(*declarations, min=SEED_MIN, max=SEED_MAX, **settings)


def untyped_flags(params: list[Any]) -> list[Any]:
    """typer's rich help shows a flag's value type (``--no-cache <bool>``), which reads as if the flag
    took a value: a flag is given an empty metavar, which the help shows in place of the type."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class Command(TyperCommand):
    """A command whose --help lists its flags (``--help`` too) without a value type."""

    def get_params(self, ctx: Any) -> list[Any]:  # ctx: the vendored click's Context
        return untyped_flags(super().get_params(ctx))


class Group(TyperGroup):
    """A group whose --help lists its flags without a value type, and which answers no arguments
    at all (``no_args_is_help``) with its help on stdout and exit 2, a usage error's code.

    typer's own answer is an exception it exports under no public name; this one is typer.Exit.
    """

    def get_params(self, ctx: Any) -> list[Any]:  # ctx: the vendored click's Context
        return untyped_flags(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            # The rich help prints itself (stdout) as it renders; what get_help returns (nothing
            # then, the whole text without rich) goes to stderr, as typer's own answer does.
            typer.echo(ctx.get_help(), err=True, color=ctx.color)
            raise typer.Exit(2)
        return super().parse_args(ctx, args)


Sources = Annotated[
    list[str],
    typer.Argument(
        help="Corpus: dataset name (sst2, imdb, wikitext2), file or folder, synthetic[:KIND,...], "
        "a hub dataset id, or a .safetensors file made by geoanalyze. Several are merged.",
        show_default=False,
    ),
]
Split = Annotated[str | None, text_option("--split", help="Dataset split (default: train).")]
DataDir = Annotated[
    Path | None,
    path_option(
        "--data-dir",
        envvar="GEOANALYZE_DATA_DIR",
        help="Local folder laid out <name>/<split>.<tsv|jsonl.gz|tokens|txt> that stands in for the hub.",
    ),
]
TextColumn = Annotated[
    str | None,
    text_option("--text-column", help="Column or JSON key with the text (default: guessed)."),
]
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="Read at most this many texts.")]
TokenizerOpt = Annotated[
    str | None,
    text_option(
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
SplitSeed = Annotated[int, seed_option("--split-seed", help="Seed of the split-half assignment of sequences.")]
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
    text_option(
        "--cluster",
        help="Count the shards on the Dask scheduler at this address (tcp://host:8786), or 'local' "
        "for a local Dask cluster of --workers processes.",
    ),
]
WorkDir = Annotated[
    Path | None,
    path_option(
        "--work-dir",
        help="Keep per-shard partial counts here; a re-run of a killed job counts only the missing shards.",
    ),
]
Sample = Annotated[
    float | None,
    typer.Option("--sample", min=0.0, max=1.0, help="Count a seeded random FRACTION of the texts, while streaming."),
]
SampleSeed = Annotated[int, seed_option("--sample-seed", help="Seed of --sample.")]
MinCount = Annotated[int, typer.Option("--min-count", min=1, help="Leave out positions seen in fewer sequences (N_i).")]
Metric = Annotated[str, text_option("--metric", help="hellinger or fisher-rao.")]
Format = Annotated[
    str, text_option("--format", "-f", help="table, json or markdown (GitHub tables; all say the same).")
]
