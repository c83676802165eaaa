"""What every command shares: error handling, the corpus options, loading inputs."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import typer

from .. import notes
from ..api import default_tokenizer
from ..errors import GeoanalyzeError, InputError
from ..report.render import FORMATS
from . import outputs
from .inputs import check_applicable, given_options, refuse_counted_twice, traits_of
from .options import given_text
from .outputs import Folder, Output, all_or_none, guard

__all__ = ["Folder", "Output", "all_or_none", "guard"]

F = TypeVar("F", bound=Callable[..., Any])


def debug_enabled() -> bool:
    return os.environ.get("GEOANALYZE_DEBUG", "") not in ("", "0")


def handles_errors(command: F) -> F:
    """Turn a GeoanalyzeError into one line on stderr and its exit code (2: bad input).

    An operating-system error about a path (permission denied, read-only or full disk, a name
    too long, a folder where a file was expected, ...) raised anywhere in the command is the
    user's environment, not our bug: one ``cannot write <path>: <reason>; <fix>`` (or ``cannot
    read``) line and exit 2. With --debug (GEOANALYZE_DEBUG=1) the traceback is printed too.
    Notes the run recorded (geoanalyze.notes) are printed after a success; a failure prints only
    its error line. A threshold failure (exit 1) is a completed run, so its notes are kept.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        outputs.reset()
        try:
            with notes.collecting() as recorded:  # this command's notes, and only these
                result = command(*args, **kwargs)
        except GeoanalyzeError as exc:
            if debug_enabled():
                traceback.print_exc()
            if exc.exit_code != 2:
                _print_notes(recorded.messages)
            message = " ".join(str(exc).split())
            print(f"error: {message}", file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None
        except Exception as exc:
            if type(exc).__module__.startswith(("click", "typer")):
                raise  # Exit, Abort: the entry point's
            error = outputs.os_error_of(exc)
            if error is None:
                raise  # our bug: the entry point says "internal error"
            if debug_enabled():
                traceback.print_exc()
            print(f"error: {' '.join(outputs.os_error_line(error).split())}", file=sys.stderr)
            raise typer.Exit(2) from None
        finally:
            outputs.reset()
            notes.take()  # what the command's run left in the session's collector is printed here, or dropped
        _print_notes(recorded.messages)
        return result

    return wrapper  # type: ignore[return-value]


def _print_notes(recorded: list[str]) -> None:
    for message in recorded:
        print(f"note: {message}", file=sys.stderr)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise InputError(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def check_output_suffix(path: Path | None, suffix: str, what: str, option: str = "--output") -> None:
    """A file output: the right suffix, not written as a folder (``-o c.safetensors/``), and a place
    a file can go (checked before any work)."""
    if path is None:
        return
    if given_as_folder(option):
        raise InputError(
            f"{option} {path}/ ends in a slash, which names a folder; {what} are written to a file: "
            f"drop the slash ({option} {path})"
        )
    if path.suffix != suffix:
        raise InputError(f"{option} {path} should end in {suffix} ({what} are written as {suffix})")
    check_output_place(path, option=option)


#: the short names of the file options whose values are checked for a trailing slash
_SHORT_NAMES = {"--output": "-o"}


def given_as_folder(option: str, argv: list[str] | None = None) -> bool:
    """Whether the command line gave ``option`` a value ending in a path separator. A Path drops
    the trailing slash (``Path("c.safetensors/")`` is ``c.safetensors``), so the text typed is read:
    as the running command's parser recorded it (:func:`options.given_text`), or, given ``argv``,
    from those words."""
    separators = tuple({"/", os.sep})
    if argv is None:
        value = given_text(option)
        return value is not None and len(value) > 1 and value.endswith(separators)
    names = [option, *([_SHORT_NAMES[option]] if option in _SHORT_NAMES else [])]
    words = argv
    for index, word in enumerate(words):
        for name in names:
            if word == name and index + 1 < len(words):
                value = words[index + 1]
            elif word.startswith(f"{name}=") and name.startswith("--"):
                value = word[len(name) + 1 :]
            elif not name.startswith("--") and word.startswith(name) and len(word) > len(name):
                value = word[len(name) :]
            else:
                continue
            if len(value) > 1 and value.endswith(separators):
                return True
    return False


def split_compare(text: str) -> tuple[str, ...]:
    """--compare's specs, split at commas as :func:`geoanalyze.analysis.split_specs` does, except a
    comma inside quotes or after a backslash, which is part of a spec: ``file:"a,b.npy",rope``,
    ``file:'a,b.npy'`` and ``file:a\\,b.npy`` each name the file ``a,b.npy``."""
    from ..api import split_specs

    held, quote, escaped = [], "", False
    for char in text:
        if escaped:
            held.append("\x00" if char == "," else char if char in "\\\"'" else "\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
            held.append("\x00" if char == "," else "" if not quote else char)
        elif char in "\"'":
            quote = char
        else:
            held.append(char)
    if quote:
        raise InputError(f"--compare {text!r} opens a {quote} quote it does not close; close it")
    held.append("\\" if escaped else "")
    return tuple(spec.replace("\x00", ",") for spec in split_specs("".join(held)))


def check_output_place(path: Path | None, folder: bool = False, option: str = "--output") -> None:
    """Fail now, not after minutes of work, when an output cannot be written where asked."""
    if path is None:
        return
    outputs.check_name_lengths(option, path)
    if folder:
        if path.exists() and not path.is_dir():
            raise InputError(f"{option} {path} is a file; pass a folder")
    elif path.is_dir():
        raise InputError(f"{option} {path} is a folder; pass a file path")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{option}: {parent} is a file, so {path} cannot be created; choose another path")
            break


@dataclass(frozen=True)
class CorpusOptions:
    """The options that say how to read and count a corpus."""

    tokenizer: str | None = None
    max_length: int | None = None
    split: str | None = None
    data_dir: Path | None = None
    text_column: str | None = None
    limit: int | None = None
    exclude_special: bool = False
    add_special_tokens: bool = True
    split_seed: int = 0
    cache: bool = True
    sample: float | None = None
    sample_seed: int = 0
    workers: int | None = None
    cluster: str | None = None
    work_dir: Path | None = None
    include_hidden: bool = False
    #: rows, document or packed (--read)
    read: str = "rows"
    #: the parameter names given on the command line: each must apply to an input (inputs.OPTION_APPLIES)
    given: frozenset[str] = frozenset()


#: the fields of :class:`~geoanalyze.corpus.streaming.CountJob` by the names they have here: all but those
#: that say which corpus to read, the tokenizer (a source's default when not given) and the cache switch
_WHICH = ("tokenizer", "split", "data_dir", "text_column", "include_hidden", "given", "cache")
COUNTING = [field.name for field in fields(CorpusOptions) if field.name not in _WHICH]


def corpus_options(params: Mapping[str, Any], given: frozenset[str] = frozenset()) -> CorpusOptions:
    """A command's corpus options from its parsed parameters (``ctx.params``), by the names of the
    shared options (options.py): --no-special-tokens and --no-cache are stored as what they turn
    off, --sample's FRACTION as ``sample``. An option the command does not take keeps its default.
    ``given``: the names given on the command line (:func:`inputs.given_options`)."""
    values = dict(params, given=given)
    if "no_special_tokens" in values:
        values["add_special_tokens"] = not values.pop("no_special_tokens")
    if "no_cache" in values:
        values["cache"] = cache_option(values.pop("no_cache"))
    if "sample_fraction" in values:
        values["sample"] = values.pop("sample_fraction")
    names = {field.name for field in fields(CorpusOptions)}
    return CorpusOptions(**{name: value for name, value in values.items() if name in names})


def cache_option(no_cache: bool) -> bool:
    """What --no-cache turns off: every cache, read and write, for the rest of the command (the
    command runs inside :func:`geoanalyze.cache.caching`); returns whether caches are used."""
    if no_cache:
        from ..api import turn_off

        turn_off()
    return not no_cache


def load_counts(
    sources: list[str], options: CorpusOptions, progress: bool = True, reports: list[Mapping[str, Any]] | None = None
) -> tuple[Any, list[dict[str, str]]]:
    """Count (or load) every source and merge them; return (counts, per-source notes).

    Every input is checked to merge with the others (tokenizer, max length, options) before
    any corpus is counted. ``reports`` receives what each streamed count did.
    """
    from ..api import CountJob, PositionalCounts, compute_counts, resolve_source
    from ..progress import CountProgress

    if not sources:
        raise InputError("no corpus given; pass a dataset name, a file or a counts file")
    _refuse_repeated_sources(sources)
    plan = [_classify(source, options) for source in sources]

    @functools.cache
    def resolve(source: str) -> Any:  # each corpus resolved once (a folder's files are listed once)
        return resolve_source(source, options.split, options.data_dir, options.text_column, options.include_hidden)

    check_applicable(
        options.given, [(s, traits_of(kind, resolve(s) if kind == "corpus" else None)) for s, kind in plan]
    )
    _refuse_overlapping_sources([source for source, kind in plan if kind == "corpus"], resolve)
    refuse_counted_twice(plan, resolve, _header)
    if options.cluster and options.cluster != "local" and any(kind == "corpus" for _, kind in plan):
        from ..api import connect

        connect(options.cluster)  # an address that does not answer fails now, in seconds
    _check_mergeable_before_counting(plan, options)
    merged = None
    source_notes: list[dict[str, str]] = []

    bars = functools.partial(CountProgress, enabled=progress)
    for source, kind in plan:
        if kind == "counts":
            counts = PositionalCounts.load(source)
            source_notes.append({"source": source, "from": "counts file"})
        else:
            resolved = resolve(source)
            counting = {name: getattr(options, name) for name in COUNTING}
            job = CountJob(tokenizer=options.tokenizer or default_tokenizer(source), **counting)
            counts, report = compute_counts(resolved, job, cache=options.cache, progress=bars)
            source_notes.append({"source": source, "from": "cache" if report.cached else resolved.location})
            if options.read != "rows":
                source_notes[-1]["read"] = options.read
            if reports is not None and not report.cached:
                reports.append(dict(report.as_dict(), source=source))
        merged = counts if merged is None else merged.merge(counts)
    assert merged is not None
    return merged, source_notes


def _refuse_repeated_sources(sources: list[str]) -> None:
    """The same corpus or counts file given twice (``a.txt ./a.txt``) would be counted twice: refused."""
    seen: dict[str, str] = {}
    for source in sources:
        key = file_identity(source)
        if key in seen:
            same = (
                f"the source {source!r} is given twice"
                if seen[key] == source
                else f"the sources {seen[key]!r} and {source!r} are the same file"
            )
            raise InputError(f"{same}: its texts would be counted twice and every N_i doubled; give each corpus once")
        seen[key] = source


def _refuse_overlapping_sources(corpora: list[str], resolve: Callable[[str], Any]) -> None:
    """A folder or glob and a file it reads (``f f/a.txt``, ``'*.txt' a.txt``) would count that file twice."""
    if len(corpora) < 2:
        return
    from ..api import files_read

    owner: dict[str, tuple[str, str]] = {}  # file identity -> (the source reading it, its path)
    for source in corpora:
        for file in sorted(files_read(resolve(source))):
            identity = file_identity(file)
            if identity in owner and owner[identity][0] != source:
                first, path = owner[identity]
                same = (
                    _short_path(file) if path == file else f"{_short_path(path)} (the same file as {_short_path(file)})"
                )
                raise InputError(
                    f"{same} is read by both {first!r} and {source!r}: its texts would be counted "
                    "twice and every N_i doubled; give each file once (narrow the folder or the pattern)"
                )
            owner[identity] = (source, file)


def check_dataset_options(ctx: Any, dataset: str) -> None:
    """`stress` and `report`: the corpus options given (--split, --data-dir, --text-column) must
    apply to --dataset (inputs.OPTION_APPLIES); the corpus is resolved only when one is given. A
    default --dataset (sst2) is said in a note on stderr."""
    from ..api import resolve_source
    from ..notes import note

    if "dataset" not in given_options(ctx):
        note(f"no --dataset given: the corpus is {dataset}, the default; pass --dataset to choose it")
    given = given_options(ctx) & {"split", "data_dir", "text_column"}
    if given:
        params = ctx.params
        resolved = resolve_source(dataset, params.get("split"), params.get("data_dir"), params.get("text_column"))
        check_applicable(given, [(dataset, traits_of("corpus", resolved))])


def _header(path: str) -> Mapping[str, Any]:
    from ..io import read_metadata

    return read_metadata(path) or {}


def file_identity(source: str) -> str:
    """What makes two names one file: its device and inode (a hard link, a symlink and ``./a.txt``
    all name the same file; ``a.txt/`` too, as a path), or the name itself for what is not a local path."""
    try:
        stat = Path(source).stat()
    except (OSError, ValueError):
        return source
    return f"inode:{stat.st_dev}:{stat.st_ino}"


def _short_path(path: str) -> str:
    """A path as short as it can be said: relative to the current folder when under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _classify(source: str, options: CorpusOptions) -> tuple[str, str]:
    """(source, "counts" or "corpus"), refusing other geoanalyze files."""
    from ..io import file_kind

    path = Path(source)
    kind = file_kind(source) if path.is_file() else None
    # A .safetensors file is never a corpus: one without a geoanalyze header is refused by load().
    if kind == "counts" or (kind is None and path.suffix == ".safetensors" and path.is_file()):
        return source, "counts"
    if kind is not None:
        raise InputError(f"{source} holds geoanalyze {kind}, not a corpus or counts; pass a corpus or a counts file")
    return source, "corpus"


def _check_mergeable_before_counting(plan: list[tuple[str, str]], options: CorpusOptions) -> None:
    """Refuse a mix of tokenizers, max lengths or options now, not after hours of counting."""
    if len(plan) < 2:
        return
    from ..api import check_mergeable, get_tokenizer, tokenizer_identity
    from ..io import read_metadata

    expected: list[tuple[str, Mapping[str, Any]]] = []
    tokenizers: dict[str, Any] = {}
    for source, kind in plan:
        if kind == "counts":
            metadata = read_metadata(source) or {}
        else:
            spec = options.tokenizer or default_tokenizer(source)
            if spec not in tokenizers:
                tokenizers[spec] = get_tokenizer(
                    spec, max_length=options.max_length, add_special_tokens=options.add_special_tokens
                )
            tok = tokenizers[spec]
            metadata = {
                "tokenizer": tokenizer_identity(tok),
                "max_length": tok.max_length,
                "exclude_special": bool(options.exclude_special),
                "add_special_tokens": bool(getattr(tok, "add_special_tokens", False)),
            }
        expected.append((source, metadata))
    first_source, first = expected[0]
    for source, other in expected[1:]:
        try:
            check_mergeable(first, other)
        except InputError as exc:
            raise type(exc)(f"{first_source} and {source}: {exc}") from None


def load_geometry(
    sources: list[str], options: CorpusOptions, metric: str, min_count: int
) -> tuple[Any, list[dict[str, str]]]:
    """A PositionGeometry from a distances file, or from counts / corpora."""
    from ..api import PositionGeometry, position_geometry
    from ..io import file_kind

    if len(sources) == 1 and Path(sources[0]).is_file() and file_kind(sources[0]) == "distances":
        geometry = PositionGeometry.load(sources[0])
        if geometry.metric != metric:
            raise InputError(
                f"{sources[0]} holds {geometry.metric} distances but --metric is {metric}; "
                "recompute from the counts or change --metric"
            )
        check_applicable(options.given, [(sources[0], traits_of("distances"))])
        geometry = geometry.select(geometry.totals >= min_count, min_count)
        return geometry, [{"source": sources[0], "from": "distances file"}]
    counts, source_notes = load_counts(sources, options)
    if min_count >= 1:  # past the dense limit the n x n geometry is refused (geometry/sampled.py)
        from ..api import check_dense

        check_dense(counts.kept_positions(min_count).size)
    return position_geometry(counts, metric=metric, min_count=min_count), source_notes
