"""Options shared by several commands, defined once."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Annotated

import typer
from typer.models import OptionInfo

#: the seeds every command accepts: what numpy's legacy RandomState and torch's generators all take
SEED_MIN, SEED_MAX = 0, 2**32 - 1


def not_blank(value: str | None) -> str | None:
    """An option given as an empty string (an unset shell variable: ``-t "$TOKENIZER"``) is refused,
    not read as "use the default"."""
    if value is not None and not value.strip():
        raise typer.BadParameter("is empty (an unset shell variable?); give a value or leave the option out")
    return value


Sources = Annotated[
    list[str],
    typer.Argument(
        help="Corpus: dataset name (sst2, imdb, wikitext2), file or folder, synthetic[:KIND,...], "
        "a hub dataset id, or a .safetensors file made by geoanalyze. Several are merged.",
        show_default=False,
    ),
]
Split = Annotated[str | None, typer.Option("--split", help="Dataset split (default: train).", callback=not_blank)]
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        envvar="GEOANALYZE_DATA_DIR",
        help="Local folder laid out <name>/<split>.<tsv|jsonl.gz|tokens|txt> that stands in for the hub.",
    ),
]
TextColumn = Annotated[
    str | None,
    typer.Option("--text-column", help="Column or JSON key with the text (default: guessed).", callback=not_blank),
]
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="Read at most this many texts.")]
TokenizerOpt = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        "-t",
        help="HF tokenizer name or folder, or 'whitespace' / 'char' (corpus-built vocabulary). "
        "Default: bert-base-uncased; whitespace for synthetic specs.",
        callback=not_blank,
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


#: text options for which an empty string means something ("--compare ''": compare nothing)
EMPTY_ALLOWED = frozenset({"--compare"})


def harden_options(app: typer.Typer) -> None:
    """The checks every command's options share, applied in one place at start-up:

    * every ``--...seed`` option takes SEED_MIN..SEED_MAX, so a negative or over-large seed is
      refused at option parsing, naming the option (not an internal error deep in numpy);
    * every text option refuses an empty or blank value (``-t "$UNSET"``), which would otherwise
      read as "use the default" (see :func:`not_blank`), except those of :data:`EMPTY_ALLOWED`.
    """
    for callback in _callbacks(app):
        function = inspect.unwrap(callback)
        # Annotations written in the module are strings, evaluated anew (new OptionInfo objects) each
        # time typer reads them: store the evaluated ones, whose OptionInfo typer will then see.
        hints = typing.get_type_hints(function, include_extras=True)
        for name, hint in hints.items():
            for info in getattr(hint, "__metadata__", ()):
                if not isinstance(info, OptionInfo):
                    continue
                declared = [info.default, *(info.param_decls or ())]
                names = [str(decl) for decl in declared if str(decl).startswith("-")]
                if any(decl.lstrip("-").endswith("seed") for decl in names):
                    info.min = SEED_MIN if info.min is None else info.min
                    info.max = SEED_MAX if info.max is None else info.max
                    function.__annotations__[name] = hint
                elif _is_text(hint.__origin__) and info.callback is None and not EMPTY_ALLOWED & set(names):
                    info.callback = not_blank
                    function.__annotations__[name] = hint
                elif _is_path(hint.__origin__) and info.parser is None:
                    info.parser = path_not_blank
                    info.metavar = info.metavar or "<path>"  # as typer shows a Path option
                    function.__annotations__[name] = hint


def path_not_blank(value: str | Path) -> Path:
    """A path option given as an empty string would be the current folder (``-o ''`` writing a run
    into it): refused like an empty text option."""
    if isinstance(value, Path):
        return value
    if not value.strip():
        raise typer.BadParameter("is empty (an unset shell variable?); give a path or leave the option out")
    return Path(value)


def _is_path(annotation: typing.Any) -> bool:
    """Path or Path | None."""
    if annotation is Path:
        return True
    arguments = typing.get_args(annotation)
    return bool(arguments) and set(arguments) == {Path, type(None)}


def _is_text(annotation: typing.Any) -> bool:
    """str or str | None."""
    if annotation is str:
        return True
    arguments = typing.get_args(annotation)
    return bool(arguments) and set(arguments) == {str, type(None)}


def _callbacks(app: typer.Typer) -> list[typing.Any]:
    found = [command.callback for command in app.registered_commands if command.callback is not None]
    for group in app.registered_groups:
        if group.typer_instance is not None:
            found.extend(_callbacks(group.typer_instance))
    return found
