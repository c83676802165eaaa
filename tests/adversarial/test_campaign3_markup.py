"""Campaign 3, results under odd file names: quotes, backslashes, pipes, backticks, angle
brackets, stars and brackets in a corpus's name keep the JSON valid (the name round-trips) and the
Markdown table one row per line, its cells escaped."""

from __future__ import annotations

import json

import pytest

from .harness import Sandbox

NAMES = ['q"uote.txt', "back\\slash.txt", "pi|pe.txt", "back`tick.txt", "<b>x.txt", "*star*.txt", "[brack].txt"]


@pytest.mark.parametrize("name", NAMES)
def test_an_odd_name_round_trips_through_json(sandbox: Sandbox, name: str) -> None:
    sandbox.copy_sample("drift.txt", name)
    report = json.loads(sandbox.accepted("marginals", name, "-t", "whitespace", "-f", "json").stdout)
    assert report["sources"][0]["source"] == name and report["n_sequences"] == 2000


@pytest.mark.parametrize("name", NAMES)
def test_an_odd_name_keeps_the_markdown_table_whole(sandbox: Sandbox, name: str) -> None:
    sandbox.copy_sample("drift.txt", name)
    page = sandbox.accepted("marginals", name, "-t", "whitespace", "-f", "markdown").stdout
    rows = [line for line in page.splitlines() if line.startswith("| sources")]
    assert len(rows) == 1, page
    # two cells: an unescaped pipe would split the name into a third
    cells = [cell for cell in rows[0].replace("\\|", "").split("|") if cell.strip()]
    assert len(cells) == 2, rows[0]
    stem = name.split(".")[0]
    for char in "|*<":
        stem = stem.replace(char, f"\\{char}")
    assert stem.replace("\\", "") in rows[0].replace("\\", ""), rows[0]
