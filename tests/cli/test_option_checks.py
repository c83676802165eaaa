"""Every option declares its own check (geoanalyze/cli/options.py): text and path options refuse an
empty value, seeds are bounded; --help lists flags without a type; a bare group prints its help, exit 2."""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.models import OptionInfo

from geoanalyze.cli import options
from geoanalyze.cli.app import app, main

#: the one text option where the empty string means something: --compare '' compares nothing
EMPTY_MEANS_SOMETHING = {"--compare"}


def functions(group: typer.Typer = app, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(command name, the function behind it) for every command of the tree."""
    for info in group.registered_commands:
        assert info.callback is not None
        yield " ".join((*path, info.name or info.callback.__name__)), inspect.unwrap(info.callback)
    for sub in group.registered_groups:
        assert sub.typer_instance is not None and isinstance(sub.name, str)
        yield from functions(sub.typer_instance, (*path, sub.name))


def declared_options() -> Iterator[tuple[str, str, Any, OptionInfo]]:
    """(command, option names, value type, its OptionInfo) for every option of every command."""
    for command, function in functions():
        for hint in typing.get_type_hints(function, include_extras=True).values():
            for info in getattr(hint, "__metadata__", ()):
                if isinstance(info, OptionInfo):
                    names = " ".join(str(d) for d in (info.default, *(info.param_decls or ())) if str(d)[:1] == "-")
                    yield command, names, hint.__origin__, info


def test_the_tree_is_walked() -> None:
    found = {command for command, *_ in declared_options()}
    assert {"stress", "report", "mds", "train", "verify", "datasets synthesize", "encodings list"} <= found


def of_type(annotation: Any, kind: type) -> bool:
    return annotation is kind or set(typing.get_args(annotation)) == {kind, type(None)}


@pytest.mark.parametrize("kind", ["text", "path", "seed"])
def test_every_option_declares_its_check(kind: str) -> None:
    missing = []
    for command, names, annotation, info in declared_options():
        if kind == "seed" and any(name.endswith("seed") for name in names.split()):
            ok = (info.min, info.max) == (options.SEED_MIN, options.SEED_MAX)
        elif kind == "path" and of_type(annotation, Path):
            ok = info.parser is options.path_not_blank and info.metavar == options.PATH_METAVAR
        elif kind == "text" and of_type(annotation, str) and not EMPTY_MEANS_SOMETHING & set(names.split()):
            ok = info.callback is options.not_blank
        else:
            continue
        if not ok:
            missing.append(f"{command} {names}")
    assert not missing, f"declare these with options.{kind}_option: {missing}"


def run(*args: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["geoanalyze", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit:
        main()
    out, err = capsys.readouterr()
    return int(exit.value.code or 0), out, err


COMMANDS = [name.split() for name, _ in functions()] + [["datasets"], ["encodings"], []]


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(["geoanalyze", *w]) for w in COMMANDS])
def test_help_lists_flags_without_a_type(
    words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(*words, "--help", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0 and "Usage:" in out and "--help" in out, err
    assert "<bool>" not in out


@pytest.mark.parametrize("words", [[], ["datasets"], ["encodings"]], ids=["geoanalyze", "datasets", "encodings"])
def test_a_bare_group_prints_its_help_and_exits_2(
    words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(*words, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert "Usage:" in out and "Commands" in out
    assert err.strip() == ""


def test_corpus_options_are_read_from_the_parsed_parameters_by_name() -> None:
    from geoanalyze.cli.common import CorpusOptions, corpus_options

    params = {"split": "test", "limit": 5, "no_special_tokens": True, "no_cache": True, "sample_fraction": 0.5}
    params |= {"sample_seed": 3, "work_dir": Path("w"), "seed": 7, "format": "json", "sources": ["a.txt"]}
    turned = {"add_special_tokens": False, "cache": False, "sample": 0.5}
    expected = CorpusOptions(split="test", limit=5, sample_seed=3, work_dir=Path("w"), **turned)
    assert corpus_options(params) == expected
    assert corpus_options({"no_special_tokens": False, "no_cache": False}) == CorpusOptions()
