"""Results to stdout: a rich table for people, JSON for programs, GitHub Markdown for CI pages.

Every command builds its tables with :func:`key_value_table` / :func:`grid_table` and prints them
with :func:`print_table`, which renders the same cells as a Rich table (``--format table``) or as
GFM tables (``--format markdown``: ``|`` escaped, no Rich markup, no ANSI codes).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from ..io import markdown_cell, to_jsonable
from ..io import markdown_table as gfm_table
from ..results import display_path, fmt


def _stdout_width() -> int | None:
    """A terminal's own width; COLUMNS when set; otherwise (pipes, CI logs) 160 columns."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else 160


stdout_console = Console(soft_wrap=True, width=_stdout_width())
#: every command that prints a result takes these (``--format``), checked by ``cli.common.check_format``
OUTPUT_FORMATS = ("table", "json", "markdown")
FORMATS = OUTPUT_FORMATS


def dumps(data: Any) -> str:
    """JSON text of a result (numpy values converted, non-finite floats as null)."""
    return json.dumps(to_jsonable(data), indent=2, allow_nan=False)


def print_json(data: Any) -> None:
    """Print a result as JSON on stdout (plain print: no markup, no wrapping)."""
    print(dumps(data))


def key_value_table(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table of labelled values."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("")
    for label, value in rows:
        table.add_row(label, fmt(value))
    return table


def grid_table(
    title: str,
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    text_columns: Sequence[str] = (),
    compact: bool = False,
    whole: Sequence[str] = (),
) -> Table:
    """A table with a header row.

    A column whose cells are all numbers never wraps: a number split over two lines (``0.0801``
    / ``2``) reads as two numbers; text columns fold to fit the terminal instead. Columns named in
    ``text_columns`` are left-aligned. ``compact``: no rules and no outer padding (2 characters a
    column), for the wide score tables in 80 columns. Columns named in ``whole`` (names: a check,
    an experiment) never wrap either: the other text columns fold to make room.
    """
    rows = [list(row) for row in rows]
    table = (
        Table(title=title, title_justify="left", box=None, pad_edge=False, header_style="bold underline")
        if compact
        else Table(title=title, title_justify="left")
    )
    for index, name in enumerate(header):
        cells = [row[index] for row in rows if index < len(row)]
        numeric = bool(cells) and all(_is_number(cell) for cell in cells)
        keep = name in whole
        widest = max((len(fmt(cell)) for cell in cells), default=0)
        left = index == 0 or name in text_columns or name in ("", "name")
        # A text column is never squeezed below its header (up to 12 characters) to make room.
        table.add_column(
            name,
            justify="left" if left else "right",
            overflow="fold",
            no_wrap=numeric or keep,
            min_width=max(widest, len(name)) if keep else None if numeric else min(len(name), 12),
        )
    for row in rows:
        table.add_row(*(fmt(v) for v in row))
    return table


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def print_table(table: Table, format: str = "table") -> None:
    """Print one result table in ``format``: Rich for "table", a GFM table for "markdown"."""
    if format == "markdown":
        print(table_markdown(table) + "\n")
    else:
        stdout_console.print(table)


def plain(text: Any) -> str:
    """The text of a cell or title without Rich markup (``[bold]x[/]`` -> ``x``)."""
    from rich.text import Text

    if isinstance(text, Text):
        return text.plain
    value = str(text)
    if "[" not in value:
        return value
    try:
        return Text.from_markup(value).plain
    except Exception:  # not markup after all (a literal "[" in a value)
        return value


def table_markdown(table: Table) -> str:
    """A Rich table as a bold title line and a GFM table with the same cells.

    A table without a header (:func:`key_value_table`) gets the header ``item | value``.
    """
    header = [plain(column.header) for column in table.columns]
    if not table.show_header or not any(header):
        header = ["item", "value"] if len(header) == 2 else [h or f"column {i + 1}" for i, h in enumerate(header)]
    columns = [[plain(cell) for cell in column.cells] for column in table.columns]
    rows = [[column[i] if i < len(column) else "" for column in columns] for i in range(table.row_count)]
    body = markdown_table(header, rows, formatter=str)
    title = plain(table.title) if table.title else ""
    return f"**{md_cell(title, str)}**\n\n{body}" if title else body


def md_cell(text: Any, formatter: Callable[[Any], str] | None = None) -> str:
    """One GitHub-Markdown table cell (:func:`geoanalyze.io.markdown_cell`), numbers through :func:`fmt`."""
    return markdown_cell(text, formatter or fmt)


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], formatter: Callable[[Any], str] | None = None
) -> str:
    """A GitHub (GFM) table (:func:`geoanalyze.io.markdown_table`), numbers through :func:`fmt` unless told."""
    return gfm_table(header, rows, formatter or fmt)


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as the user typed it (program name as ``geoanalyze``), quoted for a shell."""
    words = list(sys.argv if argv is None else argv)
    return shlex.join(["geoanalyze", *(display_path(w) if os.path.isabs(w) else w for w in words[1:])])


def provenance(seed: int | None = None) -> dict[str, Any]:
    """What a report needs to be reproduced: version, command line and seed."""
    from ..version import __version__

    return {"version": __version__, "command": command_line(), "seed": seed}


def provenance_line(run: dict[str, Any]) -> str:
    """The provenance as one Markdown line."""
    seed = "" if run.get("seed") is None else f", seed {run['seed']}"
    return f"geoanalyze {run['version']}{seed}: `{run['command']}`"
