"""Results to stdout: a rich table for people, JSON for programs, GitHub Markdown for CI pages.

Every command builds its tables with :func:`key_value_table` / :func:`grid_table` and prints them
with :func:`print_table`, which renders the same cells as a Rich table (``--format table``) or as
GFM tables (``--format markdown``: ``|`` escaped, no Rich markup, no ANSI codes).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from ..io import dumps, markdown_cell
from ..io import markdown_table as gfm_table
from ..results import Provenance, display_path, fmt, md_text

#: the narrowest width results are laid out in, whatever COLUMNS says
MIN_OUTPUT_WIDTH = 40


def output_width() -> int:
    """The width results are laid out in, read at each print: a terminal's own (or COLUMNS); in a pipe
    or a CI log COLUMNS when set, else 160 columns."""
    columns = os.environ.get("COLUMNS", "")
    # COLUMNS=5 would fold every cell to nothing: a width below MIN_OUTPUT_WIDTH is read as it
    given = max(int(columns), MIN_OUTPUT_WIDTH) if columns.isdigit() and int(columns) > 0 else None
    if sys.stdout is not None and sys.stdout.isatty():  # None: stdout closed (``>&-``)
        return given or shutil.get_terminal_size((80, 24)).columns
    return given or 160


#: the console results are rendered with (its width is set from :func:`output_width` at each print)
stdout_console = Console(soft_wrap=True, width=output_width(), emoji=False)
OUTPUT_FORMATS = ("table", "json", "markdown")
FORMATS = OUTPUT_FORMATS


def print_json(data: Any) -> None:
    """Print a result as JSON on stdout (plain print: no markup, no wrapping)."""
    print(dumps(data))


#: a table in the one style of every command: a rule under the header, no other lines, two spaces between
#: columns (no padding at the edges)
styled_table = functools.partial(
    Table,
    box=box.SIMPLE_HEAD,
    show_edge=False,
    pad_edge=False,
    padding=(0, 1, 0, 0),
    title_justify="left",
    header_style="bold",
)


def key_value_table(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table of labelled values (labels and values left-aligned)."""
    table = styled_table(title=title, show_header=False)
    table.add_column("", style="bold", overflow="fold")
    table.add_column("", overflow="fold")
    for label, value in rows:
        table.add_row(Text(str(label)), Text(fmt(value)))  # text, not markup: a "[x]" or ":a:" stays as typed
    return table


def grid_table(
    title: str,
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    text_columns: Sequence[str] = (),
    compact: bool = False,
    whole: Sequence[str] = (),
    numbers: Sequence[str] = (),
) -> Table:
    """A table with a header row, in the one style (:data:`styled_table`).

    A column of numbers is right-aligned and never wraps: a number split over two lines
    (``0.0801`` / ``2``) reads as two numbers; every other column is text, left-aligned, and folds
    to fit the terminal instead (``text_columns`` are text whatever their cells). Columns named in
    ``whole`` (names: a check, an experiment) never wrap either: the other text columns fold to make
    room. Columns named in ``numbers`` are aligned as numbers (a transposed score table's encodings,
    whose "null" cell is text). ``compact`` is accepted for callers of the former two styles; there is one style now.
    """
    del compact
    rows = [list(row) for row in rows]
    table = styled_table(title=title)
    for index, name in enumerate(header):
        cells = [row[index] for row in rows if index < len(row)]
        numeric = name in numbers or (
            is_numeric_column(cells) and name not in text_columns and name not in ("", "name")
        )
        keep = name in whole
        widest = max((len(fmt(cell)) for cell in cells), default=0)
        # A text column is never squeezed below its header (up to 12 characters) nor below its longest
        # word (up to 16: "unsupervised" is not split) to make room.
        word = max((len(part) for cell in cells for part in plain(fmt(cell)).split()), default=0)
        table.add_column(
            Text(name),
            justify="right" if numeric else "left",
            overflow="fold",
            no_wrap=numeric or keep,
            min_width=max(widest, len(name)) if keep else None if numeric else max(min(len(name), 12), min(word, 16)),
        )
    for row in rows:
        table.add_row(*(fmt(v) for v in row))  # Rich markup in a cell is styled here, plain text in Markdown
    return table


def is_numeric_column(cells: Sequence[Any]) -> bool:
    """Whether a column holds numbers: some number, and otherwise only "not computed" (None, "-")."""
    return any(_is_number(cell) and cell is not None for cell in cells) and all(
        _is_number(cell) or cell == "-" for cell in cells
    )


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def print_table(table: Table, format: str = "table") -> None:
    """Print one result table in ``format``: the one table style for "table", a GFM table for "markdown"."""
    if format == "markdown":
        print(table_markdown(table) + "\n")
    else:
        emit(table)


def print_warnings(lines: Iterable[str], format: str = "table") -> None:
    """Warnings beside a result on stdout: ``warning:`` lines folded to the output, or Markdown quotes."""
    from rich.markup import escape

    for line in lines:
        if format == "markdown":
            print(f"> **Warning:** {md_text(line)}\n")
        else:
            folded = [escape(part) for part in wrapped(f"warning: {line}")]
            emit(f"[bold yellow]warning:[/]{folded[0][len('warning:') :]}", *folded[1:])


def print_paragraph(text: str, format: str = "table") -> None:
    """A sentence under a result (a note, a caveat): folded to the output's width in the table format
    (next lines indented by two), one Markdown paragraph otherwise."""
    from rich.markup import escape

    if format == "markdown":
        print(md_text(text) + "\n")
    else:
        emit(*(escape(line) for line in wrapped(text)))


def rendered(*renderables: RenderableType, width: int | None = None) -> str:
    """What :func:`emit` prints: the renderables laid out in ``width`` (default :func:`output_width`),
    every line without trailing spaces (a terminal's styles kept)."""
    console = stdout_console
    console.width = width or output_width()
    with console.capture() as capture:
        for renderable in renderables:
            if isinstance(renderable, Table) and renderable.title:
                # The title is a line of its own, folded to the output, not to the table's width.
                console.print(Text(plain(renderable.title), style="italic"), highlight=False, soft_wrap=False)
                renderable = _untitled(renderable)
            console.print(renderable, highlight=False, soft_wrap=isinstance(renderable, str))
    return "".join(_rstrip(line) for line in capture.get().splitlines(keepends=True))


def _untitled(table: Table) -> Table:
    """The same table without its title (a shallow copy: the caller's table is left as it was)."""
    import copy

    untitled = copy.copy(table)
    untitled.title = None
    return untitled


#: spaces (and the style codes among them) at the end of a line
_TRAILING = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)+(?=\r?\n?$)")
_STYLE_CODE = re.compile(r"\x1b\[[0-9;]*m")


def _rstrip(line: str) -> str:
    """A line without trailing spaces; style codes among them are kept (a reset must still come)."""
    found = _TRAILING.search(line)
    if found is None:
        return line
    return line[: found.start()] + "".join(_STYLE_CODE.findall(found.group(0))) + line[found.end() :]


def emit(*renderables: RenderableType) -> None:
    """Print results on stdout at :func:`output_width`, no line with trailing spaces.

    A string is one line of Rich markup, never wrapped here (wrap it with :func:`wrapped` first);
    tables and other renderables are laid out in the width.
    """
    sys.stdout.write(rendered(*renderables))
    sys.stdout.flush()


def wrapped(text: str, indent: int = 0, hanging: int = 2, width: int | None = None) -> list[str]:
    """``text`` (plain, no markup) folded at spaces to ``width`` (default :func:`output_width`):
    ``indent`` spaces before the first line, ``indent + hanging`` before the next ones."""
    import textwrap

    width = width or output_width()
    first, rest = " " * indent, " " * (indent + hanging)
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False) or [
        first.rstrip()
    ]


def plain(text: Any) -> str:
    """The text of a cell or title without Rich markup (``[bold]x[/]`` -> ``x``)."""
    if isinstance(text, Text):
        return text.plain
    value = str(text)
    if "[" not in value:
        return value
    try:
        return Text.from_markup(value, emoji=False).plain
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
    return f"**{md_cell(title, md_text)}**\n\n{body}" if title else body


def md_cell(text: Any, formatter: Callable[[Any], str] | None = None) -> str:
    """One GitHub-Markdown table cell (:func:`geoanalyze.io.markdown_cell`), numbers through :func:`fmt`,
    text escaped (:func:`geoanalyze.results.md_text`)."""
    shown = formatter or fmt
    return markdown_cell(text, lambda value: md_text(shown(value)))


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], formatter: Callable[[Any], str] | None = None
) -> str:
    """A GitHub (GFM) table (:func:`geoanalyze.io.markdown_table`), numbers through :func:`fmt` unless
    told, text escaped (:func:`geoanalyze.results.md_text`: a ``<name>`` is not an HTML tag)."""
    shown = formatter or fmt
    return gfm_table([md_text(str(h)) for h in header], rows, lambda value: md_text(shown(value)))


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as the user typed it (program name as ``geoanalyze``), quoted for a shell."""
    words = list(sys.argv if argv is None else argv)
    return shlex.join(["geoanalyze", *(display_path(w) if os.path.isabs(w) else w for w in words[1:])])


def provenance(seed: int | None = None) -> Provenance:
    """What a report needs to be reproduced: version, command line and seed."""
    from ..version import __version__

    return Provenance(__version__, command_line(), seed)
