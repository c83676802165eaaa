"""One --format option for every command: table, json and markdown say the same.

Each command that prints a result is run as a user types it with ``-f markdown``, ``-f json`` and
``-f table``. The Markdown is parsed by markdown-it-py's CommonMark parser with the GFM table rule:
every row must have the header's number of cells (an unescaped ``|`` would add one), and no Rich
markup or ANSI escape may leak in. The cells are then compared with the Rich table's cells and with
the JSON values (formatted as the table formats them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import DRIFT, geoanalyze, gfm_tables
from rich.table import Table

from geoanalyze.report.render import fmt, grid_table, key_value_table, table_markdown

CORPUS = [str(DRIFT), "-t", "whitespace", "--no-cache"]  # the same "sources" line in every format


def rich_rows(text: str) -> list[list[str]]:
    """The body rows of the tables in ``text`` (wide enough not to wrap): lines of two or more cells
    (two or more spaces apart), the header above a table's rule left out."""
    lines = text.splitlines()
    rows = []
    for index, line in enumerate(lines):
        header = index + 1 < len(lines) and lines[index + 1] != "" and set(lines[index + 1]) == {"─"}
        cells = re.split(r" {2,}", line.strip())
        if len(cells) >= 2 and not header:
            rows.append(cells)
    return rows


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run in an empty folder, with a console wide enough that no table cell wraps."""
    from geoanalyze.report import render

    monkeypatch.setattr(render.stdout_console, "_width", 400)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def run(*args: str) -> str:
    """The command's stdout, run in the current folder (the ``cwd`` fixture's)."""
    result = geoanalyze(*args, cwd=Path.cwd(), env={"COLUMNS": "400"})
    assert result.code == 0, str(result)
    return result.stdout


def three_formats(*args: str) -> tuple[list[list[list[str]]], Any, list[list[str]]]:
    """(GFM tables of -f markdown, the -f json document, the Rich rows of -f table); the Markdown checked."""
    markdown = run(*args, "-f", "markdown")
    assert "\x1b" not in markdown, "an ANSI escape in the Markdown"
    assert not any(ch in markdown for ch in "┃━│┏└"), "a Rich table in the Markdown"
    assert not re.search(r"\[/?(bold|dim|red|green|yellow|italic)[^\]]*\]", markdown), "Rich markup in the Markdown"
    tables = gfm_tables(markdown, code_backticks=True)
    assert tables, f"no GFM table in:\n{markdown}"
    for table in tables:
        widths = {len(row) for row in table}
        assert widths == {len(table[0])}, f"a row with another number of cells than the header: {table}"
    document = json.loads(run(*args, "-f", "json"))
    return tables, document, rich_rows(run(*args, "-f", "table"))


def body(tables: list[list[list[str]]]) -> list[list[str]]:
    return [row for table in tables for row in table[1:]]


def untimed(rows: list[list[str]]) -> list[list[str]]:
    """The rows without the ones that time a step (they differ from one run to the next)."""
    return [row for row in rows if not row[0].startswith(("counted ", "time_s"))]


def items(tables: list[list[list[str]]]) -> dict[str, str]:
    """The item -> value rows of the key-value tables."""
    return {row[0]: row[1] for table in tables if table[0] == ["item", "value"] for row in table[1:]}


def test_marginals(cwd: Path) -> None:
    tables, document, rich = three_formats("marginals", *CORPUS)
    assert untimed(body(tables)) == untimed(rich)
    values = items(tables)
    assert values["sequences"] == fmt(document["n_sequences"]) == "2000"
    assert values["positions n"] == fmt(document["n_positions"])
    assert values["vocabulary V"] == fmt(document["vocab_size"])
    assert values["non-zero counts"] == fmt(document["nonzero"])
    (counts,) = [t for t in tables if t[0] == ["position", "N_i"]]
    assert all(row[1] == fmt(int(document["totals"][int(row[0])])) for row in counts[1:])


def test_distances(cwd: Path) -> None:
    tables, document, rich = three_formats("distances", *CORPUS)
    assert body(tables) == rich
    values, noise = items(tables), document["noise"]
    assert values["median naive distance"] == fmt(noise["median_naive"])
    assert values["median corrected distance"] == fmt(noise["median_corrected"])
    assert values["noise fraction of naive d^2"] == fmt(noise["noise_fraction"])
    (floors,) = [t for t in tables if t[0] == ["position", "N_i", "floor"]]
    positions = document["positions"]
    for position, _, floor in floors[1:]:
        assert floor == fmt(document["noise_floor"][positions.index(int(position))])


def test_mds(cwd: Path) -> None:
    tables, document, rich = three_formats("mds", *CORPUS, "--dim", "32")
    assert body(tables) == rich
    assert items(tables)["positions n"] == fmt(document["n_positions"])
    assert items(tables)["stress at rank r"] == fmt(document["stress"])
    (eigen,) = [t for t in tables if t[0] == ["component", "eigenvalue"]]
    assert [row[1] for row in eigen[1:]] == [fmt(v) for v in document["eigenvalues"][:10]]
    (curve,) = [t for t in tables if t[0] == ["rank", "stress"]]
    assert {row[0]: row[1] for row in curve[1:]} == {k: fmt(v) for k, v in document["stress_curve"].items()}


def test_datasets_list(cwd: Path) -> None:
    tables, document, rich = three_formats("datasets", "list")
    assert body(tables) == rich
    assert [row[0] for row in body(tables)] == [d["name"] for d in document["datasets"]]
    hub = [fmt(d["hub_id"]) + (f" ({d['config']})" if d["config"] else "") for d in document["datasets"]]
    assert [row[1] for row in body(tables)] == hub


def test_encodings_list(cwd: Path) -> None:
    tables, document, rich = three_formats("encodings", "list")
    assert body(tables) == rich
    assert [row[:2] for row in body(tables)] == [[d["name"], d["summary"]] for d in document]


def test_train_list_keys_and_a_training_run(cwd: Path) -> None:
    tables, document, rich = three_formats("train", "--list-keys")
    assert body(tables) == rich
    assert {row[0]: row[1] for row in body(tables)} == {k: fmt(v) for k, v in document.items()}
    run_args = (
        "train",
        "--steps",
        "2",
        "--set",
        "eval_every=1",
        "--set",
        "eval_batches=1",
        "--set",
        "model.d_model=16",
    )
    markdown = run(*run_args, "-o", "md", "-f", "markdown")
    (table,) = gfm_tables(markdown, code_backticks=True)
    assert {len(row) for row in table} == {2} and table[0] == ["item", "value"]
    run_json = json.loads(run(*run_args, "-o", "js", "-f", "json"))
    values = {row[0]: row[1] for row in table[1:]}
    assert values["task"] == run_json["config"]["task"] == "order"
    for key, value in run_json["metrics"].items():  # the same run twice (same seed): the same metrics
        if key != "time_s":
            assert values[key] == fmt(value), key


def test_verify_list(cwd: Path) -> None:
    tables, document, rich = three_formats("verify", "list")
    assert body(tables) == rich
    assert [row[0] for row in body(tables)] == [e["name"] for e in document]
    assert all("smoke" in e["presets"] for e in document)


def test_an_unknown_format_is_refused_with_the_choices(cwd: Path) -> None:
    result = geoanalyze("datasets", "list", "-f", "html", cwd=cwd)
    assert result.code == 2
    assert "unknown --format 'html'; choose one of table, json, markdown" in result.stderr


def test_the_renderer_escapes_pipes_and_drops_markup() -> None:
    """The shared renderer itself: a ``|`` stays in its cell, Rich markup becomes plain text."""
    table = grid_table(
        "[bold]scores[/] | of x", ["check", "claim"], [["a|b", "max |f(x)| <= 1"], ["[red]bad[/]", None]]
    )
    text = table_markdown(table)
    assert text.splitlines()[0] == "**scores \\| of x**"
    (parsed,) = gfm_tables(text, code_backticks=True)
    assert parsed == [["check", "claim"], ["a|b", "max |f(x)| <= 1"], ["bad", "-"]]
    pairs = table_markdown(key_value_table("kv", [("x | y", 0.123456), ("[CLS] count", 3)]))
    assert gfm_tables(pairs, code_backticks=True) == [[["item", "value"], ["x | y", "0.1235"], ["[CLS] count", "3"]]]
    assert isinstance(table, Table)
