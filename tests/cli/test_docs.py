"""Every command has help text, answers --help, and is in docs/cli.md, which is generated and kept in sync."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import REPO_ROOT, invoke, run_process

from geoanalyze.cli.app import app

CLI_DOC = REPO_ROOT / "docs" / "cli.md"
REGENERATE = "docs/cli.md is stale: run python -m geoanalyze.cli.docgen > docs/cli.md"


def commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(words after `geoanalyze`, click command) for the root and every visible command below it."""
    command = command if command is not None else typer.main.get_command(app)
    yield path, command
    ctx = typer.Context(command, info_name=" ".join(("geoanalyze", *path)))
    for name in getattr(command, "commands", {}):
        sub = command.get_command(ctx, name)
        if not sub.hidden:
            yield from commands(sub, (*path, name))


COMMANDS = dict(commands())
IDS = [" ".join(("geoanalyze", *path)) for path in COMMANDS]


def docgen(**env: str) -> str:
    """docs/cli.md as the generator prints it, in a real process (the terminal's environment is read at import)."""
    result = run_process([sys.executable, "-m", "geoanalyze.cli.docgen"], cwd=REPO_ROOT, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def test_cli_reference_is_up_to_date() -> None:
    assert CLI_DOC.is_file(), REGENERATE
    assert docgen() == CLI_DOC.read_text(encoding="utf-8"), REGENERATE


def test_cli_reference_does_not_depend_on_the_terminal() -> None:
    assert docgen(COLUMNS="40", TERM="xterm-256color", FORCE_COLOR="1") == docgen(COLUMNS="300", NO_COLOR="1")


def test_cli_reference_is_plain_markdown() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")
    assert "\x1b" not in text
    for markup in ("[bold", "[/", "[dim", "[red", "╭", "│"):
        assert markup not in text
    assert text.endswith("\n") and not text.endswith("\n\n")


@pytest.mark.parametrize("path", COMMANDS, ids=IDS)
def test_every_command_has_help_and_is_in_the_reference(path: tuple[str, ...]) -> None:
    command = COMMANDS[path]
    name = " ".join(("geoanalyze", *path))
    assert (command.help or "").strip(), f"{name} has no help text (a docstring or help=...)"
    for param in command.params:
        if not getattr(param, "hidden", False):
            assert (getattr(param, "help", None) or "").strip(), f"{name}: {param.opts or param.name} has no help"
    assert f"## `{name}`\n" in CLI_DOC.read_text(encoding="utf-8"), f"{name} is missing from docs/cli.md; {REGENERATE}"


@pytest.mark.parametrize("path", COMMANDS, ids=IDS)
def test_help_exits_0(path: tuple[str, ...], tmp_path: Path) -> None:
    for flag in ("--help", "-h"):
        result = invoke([*path, flag], cwd=tmp_path)
        assert result.code == 0, f"{' '.join(path)} {flag}: exit {result.code}\n{result.stderr}"
        assert "Usage:" in result.stdout
        assert result.stderr == ""
