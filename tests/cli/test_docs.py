"""Every command has help text, answers --help, and is in docs/cli.md, which is generated and kept in sync."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from geoanalyze.cli.app import app

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = REPO_ROOT / "docs" / "cli.md"
REGENERATE = "docs/cli.md is stale: run python -m geoanalyze.cli.docgen > docs/cli.md"
SCRIPT = shutil.which("geoanalyze", path=str(Path(sys.executable).parent)) or shutil.which("geoanalyze")


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
    result = subprocess.run(
        [sys.executable, "-m", "geoanalyze.cli.docgen"],
        cwd=REPO_ROOT,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
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
    assert SCRIPT is not None, "the geoanalyze console script is not installed; run pip install -e ."
    for flag in ("--help", "-h"):
        result = subprocess.run(
            [SCRIPT, *path, flag], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
        )
        assert result.returncode == 0, f"{' '.join(path)} {flag}: exit {result.returncode}\n{result.stderr}"
        assert "Usage:" in result.stdout
        assert result.stderr == ""
