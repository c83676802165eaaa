"""The tables of the results pages, each with the marker above it, and the numbers in a cell or a record.

The convention (docs/claims.md, "How a table names its record"): the last non-blank line above
every GFM table of docs/results.md, docs/edelta.md, docs/joformer.md and docs/training.md is an
HTML comment, either

    <!-- record: docs/results/monotonicity/monotonicity.json; command: geoanalyze verify ... -->

(several records separated by commas; optional ``paper columns: PREFIX, PREFIX``: the columns
whose header cell starts with a prefix quote a paper's figures; and ``paper rows: TEXT``, rows whose first cell starts with
TEXT, both left unchecked), or

    <!-- not a measurement: REASON -->

for a table of definitions, settings or the paper's own figures. Every number of every other cell
must equal a number of the named records when the record's value is rounded to the digits the cell
prints. A record is a JSON file (its numbers, the numbers inside its strings, and those of the
Markdown page of the same name beside it, which the same run wrote) or any other committed text
file (a test that pins the figures: the numbers in its text).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

GFM = MarkdownIt("commonmark").enable("table")

#: a number as the pages print it: 0.2410, -0.930, 1,788,944, 2.7e-31, 16.4e-6, 24.1%, 3.6x, 17.5×
#: (a minus is a sign only where it follows no letter, digit or bracket: 1-12 is a range of 1 and 12)
NUMBER = re.compile(
    r"(?<![\w.^/])(?P<sign>-)?(?P<body>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?)"
    r"(?:[eE](?P<exp>[-+]?\d+))?(?P<unit>%|×|x(?![A-Za-z]))?"
)


@dataclass(frozen=True)
class Number:
    """A number printed in a cell: its value, the half-width of its last printed digit, its unit."""

    text: str
    value: float
    half_ulp: float
    unit: str  # "", "%" or "x"

    def candidates(self) -> list[tuple[float, float]]:
        """(value, tolerance) pairs a record value may match: a percent also as a fraction."""
        pairs = [(self.value, self.half_ulp)]
        if self.unit == "%":
            pairs.append((self.value / 100, self.half_ulp / 100))
        return pairs


def numbers_in(text: str) -> list[Number]:
    """Every number a cell prints (signs read only where a minus cannot be a dash or a hyphen)."""
    found: list[Number] = []
    text = text.replace("\u2212", "-").replace("\u2009", " ").replace("\u00a0", " ")
    for match in NUMBER.finditer(text):
        after = text[match.end() : match.end() + 1]
        if after.isalpha() or after == "_":
            continue  # a label: 2D, 8k, 1.79M
        body = match["body"]
        decimals = len(body.split(".")[1]) if "." in body else 0
        exponent = int(match["exp"]) if match["exp"] else 0
        value = float(body.replace(",", "")) * 10.0**exponent
        if match["sign"]:
            value = -value
        unit = {"%": "%", "x": "x", "×": "x"}.get(match["unit"] or "", "")
        digits = body.replace(",", "")
        if decimals == 0 and exponent == 0 and len(digits) >= 4:  # 20,460 or 1,335,000: rounded to 4 digits
            decimals = -(len(digits) - len(digits.rstrip("0")))
        found.append(Number(match.group(0), value, 0.5 * 10.0 ** (exponent - decimals), unit))
    return found


@dataclass
class Table:
    """A GFM table of a page: its rows of cell texts (header first), its line, the marker above it."""

    page: Path
    line: int
    rows: list[list[str]]
    marker: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


MARKER = re.compile(r"^<!--\s*(?P<body>.*?)\s*-->$")


def parse_marker(line: str) -> dict[str, str]:
    """``<!-- key: value; key: value -->`` as a dict; {} when the line is not such a comment."""
    match = MARKER.match(line.strip())
    if not match:
        return {}
    fields: dict[str, str] = {}
    for part in split_fields(match["body"]):
        key, sep, value = part.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields


def split_fields(body: str) -> list[str]:
    """``a: x; b: y`` split at the semicolons that are outside backquotes."""
    parts, current, quoted = [], [], False
    for char in body:
        if char == "`":
            quoted = not quoted
        if char == ";" and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


def page_tables(page: Path) -> list[Table]:
    """Every GFM table of ``page`` with the marker on the last non-blank line above it."""
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    tables: list[Table] = []
    row: list[str] | None = None
    cell: list[str] | None = None
    for token in GFM.parse(text):
        if token.type == "table_open":
            assert token.map is not None
            start = token.map[0]
            above = start - 1
            while above >= 0 and not lines[above].strip():
                above -= 1
            marker = parse_marker(lines[above]) if above >= 0 else {}
            tables.append(Table(page, start + 1, [], marker))
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            assert row is not None
            tables[-1].rows.append(row)
        elif token.type in ("th_open", "td_open"):
            cell = []
        elif token.type in ("th_close", "td_close"):
            assert row is not None and cell is not None
            row.append("".join(cell))
            cell = None
        elif token.type == "inline" and cell is not None:
            cell.append("".join(child.content for child in token.children or []))
    return tables


def _collect(value: Any, into: list[float]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            into.append(float(value))
    elif isinstance(value, str):
        into.extend(n.value for n in numbers_in(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect(key, into) if isinstance(key, str) and key[:1].isdigit() else None
            _collect(item, into)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, into)


class RecordNumbers:
    """The numbers of one or more records, sorted, for a lookup within a cell's printed precision."""

    def __init__(self, paths: list[Path]) -> None:
        values: list[float] = []
        for path in paths:
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".json":
                _collect(json.loads(text), values)
                page = path.with_suffix(".md")  # the record's page: the same run, as it printed it
                if page.is_file():
                    values.extend(n.value for n in numbers_in(page.read_text(encoding="utf-8")))
            else:
                values.extend(n.value for n in numbers_in(text))
        self.values = sorted(values)

    def __contains__(self, number: Number) -> bool:
        for value, tolerance in number.candidates():
            slack = tolerance * (1 + 1e-9) + 1e-300
            low = bisect.bisect_left(self.values, value - slack)
            if low < len(self.values) and self.values[low] <= value + slack:
                return True
        return False


def named_cells(table: Table) -> dict[int, list[tuple[int, list[str]]]]:
    """The record path of every cell a marker names: ``{row index: [(column, [path, ...])]}``.

    Marker fields (optional): ``keys: ROW -> PATH | ROW -> PATH & PATH`` maps a row (its first cell
    starts with ROW) to one or more paths in the record (``&``: a row of two corpora, as "23 / 14"
    prints); ``cells: HEADER -> TEMPLATE | ...`` maps a column (its header starts with HEADER) to a
    path template, ``{}`` standing for the row's path. A cell's numbers must be values at its paths.
    """
    header = [cell.strip().lower() for cell in table.rows[0]]
    keys = [part.split("->") for part in table.marker.get("keys", "").split("|") if part.strip()]
    cells = [part.split("->") for part in table.marker.get("cells", "").split("|") if part.strip()]
    assert all(len(k) == 2 for k in keys + cells), f"{table.where}: keys and cells are 'NAME -> PATH' pairs"
    columns: dict[int, str] = {}
    for name, template in cells:
        matched = [i for i, h in enumerate(header) if h.startswith(name.strip().lower())]
        assert len(matched) == 1, f"{table.where}: cells column {name.strip()!r} matches {len(matched)} headers"
        columns[matched[0]] = template.strip()
    named: dict[int, list[tuple[int, list[str]]]] = {}
    for index, row in enumerate(table.rows[1:], start=1):
        found = [paths for label, paths in keys if row[0].strip().startswith(label.strip())]
        assert len(found) == 1, f"{table.where}: row {row[0]!r} matches {len(found)} keys"
        bases = [p.strip() for p in found[0].split("&")]
        named[index] = [(c, [t.replace("{}", base) for base in bases]) for c, t in columns.items()]
    return named


def value_at(document: Any, path: str) -> float:
    """The number at ``path`` ("a/b/c"; geoanalyze.experiments.claims.lookup's rules)."""
    from geoanalyze.experiments.claims import lookup

    value = lookup(document, path)
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: not a number: {value!r}"
    return float(value)


def matches(number: Number, value: float) -> bool:
    """Whether ``number`` prints ``value`` (a percent also as a fraction), to its last printed digit."""
    return any(abs(value - v) <= t * (1 + 1e-9) + 1e-300 for v, t in number.candidates())
