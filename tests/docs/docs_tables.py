"""The tables of the results pages, each with the marker above it, and the value at each cell's path.

The convention (docs/claims.md, "How a page names its records"): the last non-blank line above
every GFM table of docs/results.md, docs/edelta.md, docs/joformer.md and docs/training.md is an
HTML comment, either

    <!-- record: docs/results/monotonicity/monotonicity.json; command: geoanalyze verify ...;
         keys: ROW -> PATH | ...; cells: HEADER -> TEMPLATE | ...; at: ROW @ HEADER -> PATH | ... -->

(several records separated by commas), or

    <!-- not a measurement: REASON -->

for a table of definitions, settings or the paper's own figures. Every number of a measured table
is tied to the path of the value it prints in its record (:func:`named_cells`) and must equal that
value rounded to the digits the cell prints; "any number of the record" is not enough (a random
two-decimal number in [0, 1) is somewhere in the SST-2 stress record most of the time). Columns
left unchecked are named: ``paper columns: PREFIX, ...`` (a paper's figures), ``paper rows: TEXT``
(rows whose first cell starts with TEXT) and ``labels: PREFIX, ...`` (names, settings and
thresholds: ``shift, n = 8``, ``≤ 1e-5``). A record is a JSON file or any other committed text
file (a benchmark's output, a test that pins the figures), read line by line.
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
    span: tuple[int, int] = field(default=(0, 0), compare=False)  # where the cell prints it

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
        found.append(Number(match.group(0), value, 0.5 * 10.0 ** (exponent - decimals), unit, match.span()))
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
    """Every number of one or more records (and of a JSON record's Markdown page), for a lookup within a
    cell's printed precision: what the earlier check read a cell against, kept to show what it let pass."""

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


#: a cell's entry that names no value of the record: a label, a setting or a paper's figure printed
#: among measured numbers ("rank 2", "the paper's 0.009"); it must be written out, cell by cell
NOT_A_VALUE = "-"


def _split(spec: str, sep: str) -> list[list[str]]:
    """``NAME -> PATH | NAME -> PATH`` as [[NAME, PATH], ...] (``sep`` separates the pairs)."""
    pairs = [part.split("->", 1) for part in spec.split(sep) if part.strip()]
    return [[name.strip(), path.strip()] for name, path in pairs] if all(len(p) == 2 for p in pairs) else [[]]


def named_cells(table: Table) -> dict[int, list[tuple[int, list[str]]]]:
    """The record paths of every cell a marker names: ``{row index: [(column, [path, ...])]}``.

    Marker fields:

    - ``keys: ROW -> PATH | ROW -> PATH & PATH``: the row whose first cell is, or starts with, ROW has that
      path, or several (``&``: a row of two corpora, as "23 / 14" prints; or the numbers of a
      cell of prose, in order);
    - ``cells: HEADER -> TEMPLATE | ...``: the column whose header is, or starts with, HEADER holds, in
      each row, the value at TEMPLATE, ``{}`` standing for each of the row's paths (a template may
      itself be several, joined by ``&``);
    - ``at: ROW @ HEADER -> PATH & PATH | ...``: one cell's paths, overriding its column's template.

    A path is ``[RECORD:]KEY/KEY/...`` in a JSON record (:func:`value_at`; RECORD, the record's
    file name, only where the marker names several) or ``[RECORD:]LINE#K`` in a text record (the
    K-th number of its one line that starts with LINE, spaces collapsed; ``#-1`` the last). :data:`NOT_A_VALUE` names a number that
    is no value of the record (a label among measured numbers).
    """
    header = [cell.strip().lower() for cell in table.rows[0]]
    keys = _split(table.marker.get("keys", ""), "|")
    cells = _split(table.marker.get("cells", ""), "|")
    at = _split(table.marker.get("at", ""), "|")
    assert all(len(k) == 2 for k in keys + cells + at), f"{table.where}: keys, cells and at are 'NAME -> PATH' pairs"

    def column(name: str) -> int:
        matched = [i for i, h in enumerate(header) if h == name.strip().lower()]  # "final", not "final relative"
        matched = matched or [i for i, h in enumerate(header) if h.startswith(name.strip().lower())]
        assert len(matched) == 1, f"{table.where}: column {name.strip()!r} matches {len(matched)} headers"
        return matched[0]

    def row_of(label: str) -> int:
        rows = list(enumerate(table.rows[1:], start=1))
        matched = [i for i, row in rows if row[0].strip() == label.strip()]  # "2D-RoPE", not "2D-RoPE, learned"
        matched = matched or [i for i, row in rows if row[0].strip().startswith(label.strip())]
        assert len(matched) == 1, f"{table.where}: row {label.strip()!r} matches {len(matched)} rows"
        return matched[0]

    def entries(spec: str) -> list[str]:
        return [p.strip() for p in spec.split("&")]

    columns = {column(name): entries(template) for name, template in cells}
    bases: dict[int, list[str]] = {}
    for label, paths in keys:
        index = row_of(label)
        assert index not in bases, f"{table.where}: row {table.rows[index][0]!r} matches two keys"
        bases[index] = entries(paths)
    explicit: dict[tuple[int, int], list[str]] = {}
    for where, paths in at:
        label, sep, name = where.rpartition("@")
        assert sep, f"{table.where}: 'at' names a cell as 'ROW @ HEADER': {where!r}"
        explicit[(row_of(label), column(name))] = entries(paths)
    named: dict[int, list[tuple[int, list[str]]]] = {}
    for index in range(1, len(table.rows)):
        found: list[tuple[int, list[str]]] = []
        for col, templates in columns.items():
            if (index, col) in explicit:
                continue
            if any("{}" in t for t in templates):
                assert index in bases, f"{table.where}: row {table.rows[index][0]!r} matches no key"
                found.append((col, [t.replace("{}", b) for b in bases[index] for t in templates]))
            else:
                found.append((col, templates))
        found += [(col, paths) for (i, col), paths in explicit.items() if i == index]
        named[index] = sorted(found)
    return named


def label_columns(table: Table) -> set[int]:
    """The columns a marker's ``labels: PREFIX, ...`` names: their numbers are names, settings and
    thresholds (``shift, n = 8``, ``≤ 1e-5``), not values of the record."""
    header = [cell.strip().lower() for cell in table.rows[0]]
    prefixes = [n.strip().lower() for n in table.marker.get("labels", "").split(",") if n.strip()]
    unmatched = [p for p in prefixes if not any(h.startswith(p) for h in header)]
    assert not unmatched, f"{table.where}: labels {unmatched} start no header cell of the table: {header}"
    return {i for i, h in enumerate(header) if any(h.startswith(p) for p in prefixes)}


INDEX = re.compile(r"^(?P<path>.*?)(?:#(?P<k>-?\d+))?(?:@(?P<fn>min|max|len))?$")


class Records:
    """The records a marker names, for the value at a named path."""

    def __init__(self, paths: list[Path]) -> None:
        self.documents: dict[str, Any] = {}
        for path in paths:
            text = path.read_text(encoding="utf-8")
            assert path.name not in self.documents, f"two records named {path.name}"
            self.documents[path.name] = json.loads(text) if path.suffix == ".json" else text.splitlines()

    def value(self, path: str) -> float:
        """The number at ``path`` (see :func:`named_cells`)."""
        names = [name for name in self.documents if path.startswith(name + ":")]
        if names:
            name, path = names[0], path[len(names[0]) + 1 :]
        else:
            assert len(self.documents) == 1, f"{path}: name its record (one of {', '.join(self.documents)}:)"
            (name,) = self.documents
        document = self.documents[name]
        match = INDEX.match(path)
        assert match is not None
        if isinstance(document, list):  # a text record: the K-th number of the line that starts with LINE
            start = " ".join(match["path"].split())  # runs of spaces read as one: columns are padded
            lines = [line for line in document if " ".join(line.split()).startswith(start)]
            assert len(lines) == 1 and match["k"], f"{name}:{path}: {len(lines)} lines start so; name one, and #K"
            return numbers_in(lines[0])[_position(match["k"])].value
        value = _resolve(document, match["path"])
        if match["fn"]:
            assert isinstance(value, list), f"{path}: {match['fn']} of a {type(value).__name__}"
            return float(len(value)) if match["fn"] == "len" else float({"min": min, "max": max}[match["fn"]](value))
        if match["k"]:
            assert isinstance(value, str), f"{path}: #K of a {type(value).__name__}"
            return numbers_in(value)[_position(match["k"])].value
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: not a number: {value!r}"
        return float(value)


def _position(k: str) -> int:
    """``#1`` is the first number, ``#-1`` the last."""
    return int(k) - 1 if int(k) > 0 else int(k)


def _resolve(document: Any, path: str) -> Any:
    """The value at ``path`` (geoanalyze.experiments.claims.lookup's rules); ``*`` maps over a list."""
    from geoanalyze.experiments.claims import lookup

    head, star, rest = path.partition("/*")
    value = lookup(document, head) if head else document
    if not star:
        return value
    assert isinstance(value, list), f"{path}: * over a {type(value).__name__}"
    return [_resolve(item, rest.lstrip("/")) for item in value]


def value_at(document: Any, path: str) -> float:
    """The number at ``path`` of one JSON document ("a/b/c"; claims.lookup's rules)."""
    value = _resolve(document, path)
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: not a number: {value!r}"
    return float(value)


def matches(number: Number, value: float) -> bool:
    """Whether ``number`` prints ``value`` (a percent also as a fraction), to its last printed digit."""
    return any(abs(value - v) <= t * (1 + 1e-9) + 1e-300 for v, t in number.candidates())


def wrong_cells(
    table: Table, records: Records, named: dict[int, list[tuple[int, list[str]]]] | None = None
) -> list[str]:
    """Every named cell whose numbers are not the values at its paths, as 'row, column: why'.

    N numbers against N paths are read in order; one path holds every number of its cell; one
    number must print every path's value (two corpora that agree). ``named``: the cells' paths
    (default: :func:`named_cells` of ``table``).
    """
    wrong = []
    for index, cells in (named_cells(table) if named is None else named).items():
        row = table.rows[index]
        for column, paths in cells:
            where = f"row {index} ({row[0][:30]!r}), column {table.rows[0][column][:30]!r}"
            pairs = paired(numbers_in(row[column]), paths)
            if pairs is None:
                wrong.append(f"{where}: {len(numbers_in(row[column]))} numbers, {len(paths)} paths")
                continue
            for number, path in pairs:
                if path == NOT_A_VALUE:
                    continue
                value = records.value(path)
                if not matches(number, value):
                    wrong.append(f"{where}: {number.text} is not the value at {path} ({value:.6g})")
    return wrong


def paired(printed: list[Number], paths: list[str]) -> list[tuple[Number, str]] | None:
    """Each number of a cell with the path it prints (None where the counts do not fit; "—" pairs
    with nothing)."""
    if len(paths) == len(printed):
        return list(zip(printed, paths, strict=True))
    if len(paths) == 1 or len(printed) <= 1:
        return [(n, p) for n in printed for p in paths]
    return None
