"""The CLI reference, rendered from the typer app itself: ``python -m geoanalyze.cli.docgen > docs/cli.md``.

Every command of the tree gets its full name, help text, usage line and a table of its
arguments and options. The output is plain Markdown (no rich markup, no ANSI codes) and
depends on nothing but the command definitions, so tests can compare it with docs/cli.md.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator

import typer
from rich.text import Text
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from .app import app
from .examples import EXAMPLES, command_words
from .options import aliases_hidden

Command = TyperCommand | TyperGroup
Param = TyperOption | TyperArgument

HEADER = """# Command-line reference

Generated from the command definitions by `python -m geoanalyze.cli.docgen > docs/cli.md`;
do not edit by hand. Every command also answers `--help` (or `-h`).
"""


def walk(command: Command, parent: typer.Context | None = None, name: str = "geoanalyze") -> Iterator[typer.Context]:
    """A context per command, depth first, in the order the commands were registered."""
    ctx = typer.Context(command, info_name=name, parent=parent, **command.context_settings)
    yield ctx
    if isinstance(command, TyperGroup):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if not isinstance(sub, TyperCommand | TyperGroup):
                raise TypeError(f"{ctx.command_path} {sub_name} is not a typer command")
            if not sub.hidden:
                yield from walk(sub, ctx, sub_name)


def root_command() -> Command:
    command = typer.main.get_command(app)
    assert isinstance(command, TyperGroup)
    return command


def render() -> str:
    """The whole reference as Markdown text."""
    sections = [HEADER]
    for ctx in walk(root_command()):
        sections.append(_command_section(ctx))
    return "\n".join(sections)


def _command_section(ctx: typer.Context) -> str:
    command = ctx.command
    assert isinstance(command, TyperCommand | TyperGroup)
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    help_text = _escape(_plain(command, command.help or ""))
    lines = [f"## `{ctx.command_path}`", "", *([help_text, ""] if help_text else []), "```", usage, "```", ""]
    if isinstance(command, TyperGroup):
        names = [n for n in command.list_commands(ctx) if not getattr(command.get_command(ctx, n), "hidden", False)]
        lines += ["Commands: " + ", ".join(f"`{ctx.command_path} {n}`" for n in names), ""]
    params = [p for p in command.get_params(ctx) if isinstance(p, Param) and not p.hidden]
    with aliases_hidden(params):  # an option's old names are accepted, not documented
        for title, kind in (("Arguments", "argument"), ("Options", "option")):
            rows = [_row(command, ctx, p) for p in params if p.param_type_name == kind]
            if rows:
                lines += [f"{title}:", "", "| name | description | default |", "| --- | --- | --- |", *rows, ""]
    examples = EXAMPLES.get(command_words(ctx.command_path), ())
    if examples:
        lines += ["Examples:" if len(examples) > 1 else "Example:", "", "```bash", *examples, "```", ""]
    return "\n".join(lines)


def _row(command: Command, ctx: typer.Context, param: Param) -> str:
    record = param.get_help_record(ctx)
    name = record[0] if record else param.name or ""
    notes = []
    if param.envvar:
        envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
        notes.append("env var: " + ", ".join(envvars))
    if param.min is not None:
        notes.append(f"at least {param.min}")
    if param.max is not None:
        notes.append(f"at most {param.max}")
    description = " ".join([_plain(command, param.help or ""), *(f"({n})" for n in notes)]).strip()
    cells = [f"`{name}`", _escape(description), _escape(_default(param))]
    return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"


def _default(param: Param) -> str:
    if param.required:
        return "required"
    if isinstance(param.show_default, str):
        return param.show_default
    default = param.default
    if param.show_default is False or default is None or callable(default):
        return ""
    if isinstance(param, TyperOption) and param.is_flag:
        return "on" if default else ""
    if isinstance(default, list | tuple):
        return ", ".join(str(v) for v in default)
    return str(default)


def _plain(command: Command, text: str) -> str:
    """Help text as a user reads it in --help: rich markup removed when the command interprets it."""
    text = inspect.cleandoc(text).partition("\f")[0]
    return Text.from_markup(text).plain if command.rich_markup_mode == "rich" else text


def _escape(text: str) -> str:
    """Escape what Markdown would otherwise read as HTML, emphasis or code."""
    for char in ("\\", "<", "*", "`"):
        text = text.replace(char, "\\" + char)
    return text


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
