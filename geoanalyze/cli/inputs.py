"""What each input of a command is, which options apply to it, and whether two inputs are one.

Two rules every command follows, each in one place:

* **An option that does not apply to any input is refused.** :data:`OPTION_APPLIES` says, for
  every corpus option, which inputs it shapes: a counts file's or a distances file's counts were
  fixed when it was made, so ``distances ws.safetensors --limit 10`` would print the whole file's
  numbers as if limited; ``--text-column`` on plain text, ``--split`` on a local file,
  ``--include-hidden`` on a file would change nothing either. Only options given on the command
  line are checked (an environment variable such as GEOANALYZE_DATA_DIR is a setting for every
  run). With several inputs an option must apply to one of them at least: a corpus option then
  shapes the corpora (``marginals new.txt old.safetensors -t whitespace``).
* **No input is counted twice.** A counts file's header records the ``fingerprint`` of every
  corpus it counted (the digest of its contents) and where it was read; a counts file given
  beside one of those corpora, beside a copy of itself or beside another counts file of one of
  those corpora is refused, naming both inputs. Two corpora are compared as files (device and
  inode, see ``common``): a copy of a corpus is another corpus that happens to agree.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

#: what an input is, in words (the traits an option can ask for)
TRAITS = {
    "corpus": "corpora (files, folders, globs, datasets, synthetic specs)",
    "named": "the named datasets (sst2, imdb, wikitext2)",
    "dataset": "named and hub datasets (sst2, a hub id)",
    "columns": "tables and JSON (.tsv, .csv, .jsonl, .json, .parquet, hub datasets)",
    "folder": "folders and globs",
}


@dataclass(frozen=True)
class Applies:
    """An option as typed (``flag``) and the trait an input needs for the option to change it."""

    flag: str
    to: str


#: every corpus option, by its parameter name: the one table every command consults
OPTION_APPLIES: dict[str, Applies] = {
    "split": Applies("--split", "dataset"),
    "data_dir": Applies("--data-dir", "named"),
    "text_column": Applies("--text-column", "columns"),
    "include_hidden": Applies("--include-hidden", "folder"),
    "limit": Applies("--limit", "corpus"),
    "read": Applies("--read", "corpus"),
    "tokenizer": Applies("--tokenizer", "corpus"),
    "max_length": Applies("--max-length", "corpus"),
    "exclude_special": Applies("--exclude-special", "corpus"),
    "no_special_tokens": Applies("--no-special-tokens", "corpus"),
    "split_seed": Applies("--split-seed", "corpus"),
    "no_cache": Applies("--no-cache", "corpus"),
    "sample_fraction": Applies("--sample", "corpus"),
    "sample_seed": Applies("--sample-seed", "corpus"),
    "workers": Applies("--workers", "corpus"),
    "cluster": Applies("--cluster", "corpus"),
    "work_dir": Applies("--work-dir", "corpus"),
}

#: what a file that is not a corpus is, for the message
_NOT_A_CORPUS = {
    "counts": "a counts file: its counts were fixed when it was made",
    "distances": "a distances file: its counts were fixed when it was made",
}


def given_options(ctx: Any) -> frozenset[str]:
    """The parameter names of a command that were given on its command line (not defaults, not
    environment variables): typer's ``ctx.get_parameter_source``."""
    given = set()
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "COMMANDLINE":
            given.add(name)
    return frozenset(given)


def traits_of(kind: str, resolved: Any = None) -> frozenset[str]:
    """The traits of an input: ``kind`` "counts" or "distances", or "corpus" with its resolved source."""
    if kind != "corpus":
        return frozenset({kind})
    from ..api import DATASETS, reads_columns

    traits = {"corpus"}
    if resolved is not None:
        if resolved.kind == "hub" or (resolved.kind == "file" and resolved.split is not None):
            traits.add("dataset")
            if resolved.name in DATASETS:
                traits.add("named")
        if reads_columns(resolved):
            traits.add("columns")
        if resolved.kind in ("folder", "shards"):
            traits.add("folder")
    return frozenset(traits)


def check_applicable(given: Iterable[str], inputs: list[tuple[str, frozenset[str]]]) -> None:
    """Refuse the first given option that applies to none of the inputs ((name, traits) pairs)."""
    for name in given:
        applies = OPTION_APPLIES.get(name)
        if applies is None or any(applies.to in traits for _, traits in inputs):
            continue
        source, traits = inputs[0]
        what = next((_NOT_A_CORPUS[t] for t in traits if t in _NOT_A_CORPUS), None) or _missing(applies.to)
        subject = source if len(inputs) == 1 else f"any of {', '.join(repr(s) for s, _ in inputs)}"
        named = _close_dataset(str(source)) if applies.to == "named" and len(inputs) == 1 else None
        if named is not None:  # sts2 for sst2: the fix is the name, not leaving --data-dir out
            raise InputError(
                f"{applies.flag} does not apply to {subject} ({what}); did you mean --dataset {named}? "
                f"({TRAITS[applies.to]})"
            )
        raise InputError(
            f"{applies.flag} does not apply to {subject} ({what}); it applies to {TRAITS[applies.to]}: "
            f"leave {applies.flag} out{_or_pass(traits)}"
        )


def _close_dataset(source: str) -> str | None:
    """The named dataset ``source`` is a typo of (sts2 -> sst2), or None."""
    from difflib import get_close_matches

    from ..api import DATASETS

    close = get_close_matches(source.lower(), list(DATASETS), n=1, cutoff=0.6)
    return close[0] if close and close[0] != source.lower() else None


def _missing(trait: str) -> str:
    return {
        "dataset": "a local corpus: its file is read, not a split",
        "named": "not a named dataset: it is not looked up in a data directory",
        "columns": "plain text: one text a line or a file, no columns",
        "folder": "a single file: there are no files to skip",
    }.get(trait, "not a corpus")


def _or_pass(traits: frozenset[str]) -> str:
    return ", or pass the corpus it was made from" if traits & set(_NOT_A_CORPUS) else ""


# --- counted twice -------------------------------------------------------------------------


def corpus_marks(resolved: Any) -> dict[str, str]:
    """What identifies a resolved corpus -> how to say it: its content fingerprint, and for local
    corpora where it was read (a counts file of an earlier version of the file overlaps it too)."""
    marks = {f"fingerprint:{resolved.fingerprint}": "the same contents"}
    if resolved.kind in ("file", "folder", "shards"):
        marks[f"location:{resolved.kind}:{resolved.location}:{resolved.split}"] = f"read from {resolved.location}"
    return marks


def counts_marks(path: str, metadata: Mapping[str, Any]) -> dict[str, str]:
    """What identifies the corpora a counts file holds (its header's ``corpus`` entries), and the
    file's own contents (a copy of a counts file of unknown corpora is still the same counts)."""
    from ..api import file_digests

    marks: dict[str, str] = {}
    for entry in metadata.get("corpus") or []:
        if not isinstance(entry, dict):
            continue
        if entry.get("fingerprint"):
            marks[f"fingerprint:{entry['fingerprint']}"] = "the same contents"
        if entry.get("kind") in ("file", "folder", "shards"):
            marks[f"location:{entry.get('kind')}:{entry.get('location')}:{entry.get('split')}"] = (
                f"read from {entry.get('location')}"
            )
    with contextlib.suppress(OSError):  # unreadable: loading it reports that
        marks[f"counts:{file_digests([path])[0]}"] = "the same counts, byte for byte"
    return marks


def refuse_counted_twice(
    plan: list[tuple[str, str]], resolve: Callable[[str], Any], metadata: Callable[[str], Mapping[str, Any]]
) -> None:
    """A counts file beside a corpus it counted, or beside another counts file of one of its
    corpora (a copy of it included), would count those texts twice: refused, naming both."""
    if not any(kind == "counts" for _, kind in plan) or len(plan) < 2:
        return
    seen: list[tuple[str, str, dict[str, str]]] = []
    for source, kind in plan:
        marks = counts_marks(source, metadata(source)) if kind == "counts" else corpus_marks(resolve(source))
        for earlier, earlier_kind, earlier_marks in seen:
            if kind != "counts" and earlier_kind != "counts":
                continue  # two corpora: compared as files
            shared = next((mark for mark in marks if mark in earlier_marks), None)
            if shared is not None:
                raise InputError(_twice(earlier, earlier_kind, source, kind, marks[shared]))
        seen.append((source, kind, marks))


def _twice(first: str, first_kind: str, second: str, second_kind: str, why: str) -> str:
    if first_kind == second_kind == "counts":
        same = f"{first!r} and {second!r} hold counts of one corpus ({why})"
    else:
        counts, corpus = (second, first) if second_kind == "counts" else (first, second)
        same = f"{counts!r} already holds the counts of {corpus!r} ({why})"
    return f"{same}: its texts would be counted twice and every N_i doubled; give each corpus once, as a corpus or as counts"
