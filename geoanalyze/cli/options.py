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
list flags in --help without a value type, end it with the command's examples (examples.py),
leave out the old names of an option (:data:`HIDDEN_ALIASES`: still accepted, no longer shown),
and answer a bare group with its help and exit 2.

One name per idea in every command: ``--dataset`` the corpus, ``--metric`` hellinger or
fisher-rao, ``--estimate`` the naive or bias-corrected distance, ``--width`` the model width d,
``--plot-dir`` the folder figures go to, ``--output``/``-o`` the one file a command writes and
``--output-dir`` the folder it writes (a training run, experiment results, a corpus).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from .examples import epilog

F = TypeVar("F", bound=Callable[..., Any])
#: options several commands take, declared once: (parameter name, its Annotated type, its default)
Options = tuple[tuple[str, Any, Any], ...]


def takes(*groups: tuple[Options, str | None]) -> Callable[[F], F]:
    """Declare each group of shared options in the command's signature, before the parameter named
    beside it (None: at the end), as typer reads it; the command receives them in its ``**options``."""

    def declare(command: F) -> F:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.kind != p.VAR_KEYWORD]
        for options, before in groups:
            at = next((k for k, p in enumerate(own) if p.name == before), len(own))
            own[at:at] = [
                inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind, default=default)
                for name, kind, default in options
            ]
        command.__signature__ = inspect.Signature(own)  # type: ignore[attr-defined]
        return command

    return declare


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
    into it): refused like an empty text option. ``./~/x`` stays the folder ``~`` here
    (:func:`literal_path`)."""
    if isinstance(value, Path):
        return value
    if not value.strip():
        raise typer.BadParameter("is empty (an unset shell variable?); give a path or leave the option out")
    return literal_path(value)


def literal_path(text: str) -> Path:
    """The path ``text`` names, with ``./~/x`` kept as the folder ``~`` in the working folder.

    pathlib drops the ``./`` (``Path("./~/x")`` is ``~/x``), which any later ``expanduser`` reads as
    $HOME/x: such a path is made absolute (no link resolved), so it names ``<cwd>/~/x`` wherever it
    goes. A bare ``~/x`` (quoted, so the shell left it) is returned as ``Path("~/x")``, as before.
    """
    path = Path(text)
    if not text.startswith("~") and path.parts[:1] and path.parts[0].startswith("~"):
        return path.absolute()
    return path


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


#: an option's old names, still accepted but no longer shown in --help or docs/cli.md -> the name
#: that is shown (an alias is left out only of an option that has that name too)
HIDDEN_ALIASES: dict[str, str] = {
    "--max-positions": "--max-length",
    "--dim": "--width",
    "-d": "--width",
    "--distance": "--estimate",
    "-o": "--output-dir",
    "--output": "--output-dir",
}


def shown_names(names: list[str]) -> list[str]:
    """An option's names as --help shows them: without the old names of :data:`HIDDEN_ALIASES`."""
    return [name for name in names if HIDDEN_ALIASES.get(name) not in names]


@contextmanager
def aliases_hidden(params: list[Any]) -> Iterator[None]:
    """While help is rendered, each option's ``opts`` are its :func:`shown_names` (parsing, before
    and after, sees every name)."""
    options = [param for param in params if isinstance(param, TyperOption)]
    saved = [param.opts for param in options]
    for param in options:
        param.opts = shown_names(param.opts)
    try:
        yield
    finally:
        for param, opts in zip(options, saved, strict=True):
            param.opts = opts


def _format_help(command: Any, ctx: Any, formatter: Any, render: Any) -> None:
    """--help of ``command``: its examples as the epilog, its options without their old names."""
    command.epilog = command.epilog or epilog(ctx.command_path)
    with aliases_hidden(command.get_params(ctx)):
        render(ctx, formatter)


#: option name (every name of it: ``--output`` and ``-o``) -> the text given for it on the command
#: line of the command being run, as typed (before a Path drops a trailing slash or a ``./``)
_given: dict[str, str] = {}


def _record_given(values: Mapping[str, Any], order: list[Any]) -> None:
    """Keep the text each single-valued option was given (:func:`given_text`)."""
    for param in order:
        value = values.get(param.name) if isinstance(param, TyperOption) else None
        if isinstance(value, str) and not (param.multiple or param.is_flag or param.count):
            _given.update(dict.fromkeys(param.opts + param.secondary_opts, value))


def given_text(option: str) -> str | None:
    """The text ``option`` (any of its names) was given on the command line of the command being
    run, as typed; None when it was not given. Recorded while :class:`Command` parses its arguments,
    so an in-process run (typer's CliRunner, tests) sees its own arguments, not ``sys.argv``."""
    return _given.get(option)


def refuse_repeated(command: Any, ctx: Any, args: list[str]) -> None:
    """An option that takes one value, given twice (``--limit 1 --limit 2``, ``-o a -o b``, an option
    and its old name), is a usage error naming it: the parser would keep the last one silently.
    Repeatable options (``--set``, ``--compare``) and flags are left to their own checks."""
    _given.clear()
    try:
        values, _, order = command.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # an unknown option, a missing value: the real parse reports it
        return
    _record_given(values, order)
    seen: set[str] = set()
    for param in order:
        if not isinstance(param, TyperOption) or param.multiple or param.is_flag or param.count:
            continue
        if param.name in seen:
            names = " / ".join(param.opts + param.secondary_opts)
            raise typer.BadParameter(
                "given more than once; give it once (the last value would silently win)",
                ctx=ctx,
                param=param,
                param_hint=names,
            )
        seen.add(param.name)


class Command(TyperCommand):
    """A command whose --help lists its flags (``--help`` too) without a value type, its options
    without their old names, and ends with its examples; a single-valued option given twice is
    refused (:func:`refuse_repeated`)."""

    def get_params(self, ctx: Any) -> list[Any]:  # ctx: the vendored click's Context
        return untyped_flags(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        refuse_repeated(self, ctx, args)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _format_help(self, ctx, formatter, super().format_help)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line without hidden arguments (the old way to name a corpus)."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if not getattr(param, "hidden", False):
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class Group(TyperGroup):
    """A group whose --help lists its flags without a value type, and which answers no arguments
    at all (``no_args_is_help``) with its help on stdout and exit 2, a usage error's code.

    typer's own answer is an exception it exports under no public name; this one is typer.Exit.
    """

    def get_params(self, ctx: Any) -> list[Any]:  # ctx: the vendored click's Context
        return untyped_flags(super().get_params(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _format_help(self, ctx, formatter, super().format_help)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            # The rich help prints itself (stdout) as it renders; what get_help returns (nothing
            # then, the whole text without rich) goes to stderr, as typer's own answer does.
            typer.echo(ctx.get_help(), err=True, color=ctx.color)
            raise typer.Exit(2)
        return super().parse_args(ctx, args)


def distinct_settings(values: list[str] | None) -> list[str] | None:
    """``--set KEY=VALUE`` repeatable, each KEY once: ``--set steps=1 --set steps=2`` is refused, not
    read as the last one."""
    seen: set[str] = set()
    for value in values or []:
        key = value.partition("=")[0].strip()
        if key in seen:
            raise typer.BadParameter(f"{key} is set twice ({value!r} again); set each key once")
        seen.add(key)
    return values


def none_blank(values: list[str] | None) -> list[str] | None:
    """A repeatable text option refuses an empty value, as :func:`not_blank` does."""
    for value in values or []:
        not_blank(value)
    return values


#: the corpus of the pipeline commands given as arguments (``marginals sst2``): the old way, still
#: accepted; --dataset names the corpus in every command
Sources = Annotated[
    list[str] | None,
    typer.Argument(
        help="Corpus, as --dataset (the old way to name it, still accepted).", show_default=False, hidden=True
    ),
]
Datasets = Annotated[
    list[str] | None,
    typer.Option(
        "--dataset",
        callback=none_blank,
        help="Corpus: a dataset name (sst2, imdb, wikitext2), a file or folder, synthetic[:KIND,...], "
        "a hub dataset id, or a .safetensors file made by geoanalyze (repeatable: several are merged).",
        show_default=False,
    ),
]
Split = Annotated[str | None, text_option("--split", help="Dataset split (default: train).")]
DataDir = Annotated[
    Path | None,
    path_option(
        "--data-dir",
        envvar="GEOANALYZE_DATA_DIR",
        help="Local folder laid out <name>/<split>.<ext> (ext: tsv, jsonl.gz, tokens or txt) that stands in "
        "for the hub.",
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
    typer.Option("--no-cache", help="Neither read nor write the caches (counts, centroids): recompute."),
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
Windows = Annotated[
    str,
    text_option(
        "--windows",
        help="Scores against position in N log-spaced windows of the scored positions, each against its own "
        "position shuffles (Holm over the windows): N (2-64), auto (12 past 1024 positions) or none.",
    ),
]
MinCount = Annotated[int, typer.Option("--min-count", min=1, help="Leave out positions seen in fewer sequences (N_i).")]
Positions = Annotated[
    str,
    text_option(
        "--positions",
        help="Which positions are scored: all, stride:K (0, K, 2K, ...), log:N (N log-spaced buckets, each "
        "pooling its positions' counts) or range:A-B (positions A to B-1).",
    ),
]
Metric = Annotated[str, text_option("--metric", help="hellinger or fisher-rao.")]


def position_spec(text: str) -> Any:
    """``--positions`` parsed (:class:`~geoanalyze.corpus.positions.PositionSpec`; InputError when malformed)."""
    from ..api import PositionSpec

    return PositionSpec.parse(text)


Format = Annotated[
    str, text_option("--format", "-f", help="table, json or markdown (GitHub tables; all say the same).")
]
IncludeHidden = Annotated[
    bool,
    typer.Option(
        "--include-hidden",
        help="Read hidden files and folders (.git/, .ipynb_checkpoints/, .notes.txt) of a folder corpus or glob too.",
    ),
]

#: how --read reads a corpus (corpus.sources.READ_MODES)
READ_MODES = ("rows", "document", "packed")


def read_mode(value: str) -> str:
    """--read is rows, document or packed."""
    if value not in READ_MODES:
        raise typer.BadParameter(f"{value!r} is not a way to read a corpus; choose one of {', '.join(READ_MODES)}")
    return value


ReadMode = Annotated[
    str,
    typer.Option(
        "--read",
        callback=read_mode,
        help="rows (each text one sequence, cut at --max-length), document (each WikiText article or "
        "file whole) or packed (texts joined by EOS, or SEP, cut into --max-length sequences).",
    ),
]

#: the corpus of a pipeline command: the old way (arguments) and --dataset
INPUTS: Options = (("sources", Sources, None), ("dataset", Datasets, None))
#: how a pipeline command reads and counts its corpus (common.CorpusOptions)
READING: Options = (
    ("split", Split, None),
    ("data_dir", DataDir, None),
    ("text_column", TextColumn, None),
    ("include_hidden", IncludeHidden, False),
    ("read", ReadMode, "rows"),
    ("limit", Limit, None),
    ("tokenizer", TokenizerOpt, None),
    ("max_length", MaxLength, None),
    ("exclude_special", ExcludeSpecial, False),
    ("no_special_tokens", NoSpecialTokens, False),
    ("split_seed", SplitSeed, 0),
    ("no_cache", NoCache, False),
)
#: how marginals and distances stream a large corpus
STREAMING: Options = (
    ("sample_fraction", Sample, None),
    ("sample_seed", SampleSeed, 0),
    ("workers", Workers, None),
    ("cluster", Cluster, None),
    ("work_dir", WorkDir, None),
)
