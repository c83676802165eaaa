"""Results to stdout: a rich table for people, JSON for programs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from ..io import to_jsonable

# Piped output (files, CI logs) gets room for the wide score tables instead of rich's 80 columns.
stdout_console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
FORMATS = ("table", "json")


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


def grid_table(title: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A table with a header row."""
    table = Table(title=title, title_justify="left")
    for name in header:
        table.add_column(name, justify="right" if name not in ("", "name") else "left", overflow="fold")
    for row in rows:
        table.add_row(*(fmt(v) for v in row))
    return table


def fmt(value: Any) -> str:
    """Numbers to 4 significant digits, ranges [[a, b], ...] as 'a-b, ...', lists joined."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and value and all(isinstance(v, list) and len(v) == 2 for v in value):
        return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in value)
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value) if value else "none"
    if value is None:
        return "-"
    return str(value)
