"""docs/checkpoints.md shows the zoo exactly as the tests assert it (GEOANALYZE_REGENERATE_DOCS=1 rewrites it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from helpers import REPO_ROOT, SAMPLES, invoke, run_process

from .zoo import ADDED_IN, installed_has, markdown_table

DOC = REPO_ROOT / "docs" / "checkpoints.md"
BEGIN, END = "<!-- zoo:begin -->", "<!-- zoo:end -->"


def test_the_docs_table_is_the_zoo() -> None:
    """Under the transformers the page names (CI's pin) the page is the zoo, byte for byte; under another
    release its rows of the installed types are the zoo's rows, in order, and its other rows are of types a
    later release added (zoo.ADDED_IN): the counts of its first line are the named release's."""
    import transformers

    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    table, _, tail = rest.partition(END)
    generated = markdown_table()
    expected = f"{head}{BEGIN}\n{generated}\n{END}{tail}"
    if os.environ.get("GEOANALYZE_REGENERATE_DOCS") == "1":
        DOC.write_text(expected, encoding="utf-8")
    stale = "docs/checkpoints.md is stale: run GEOANALYZE_REGENERATE_DOCS=1 pytest tests/unit/checkpoints/model_zoo"
    found = re.search(r"auto mappings of transformers (\S+) ", table)
    assert found, stale
    pinned = re.search(r"^transformers==(\S+)$", (REPO_ROOT / ".ci" / "constraints.txt").read_text(), re.MULTILINE)
    assert pinned and found.group(1) == pinned.group(1), "the page's zoo is of another transformers than CI pins"
    if found.group(1) == transformers.__version__:
        assert text == expected, stale
        return
    rows = _rows(table)
    assert [row for row in rows if installed_has(_model_type(row))] == _rows(generated), stale
    assert all(_model_type(row) in ADDED_IN for row in rows if not installed_has(_model_type(row))), stale


def _rows(table: str) -> list[str]:
    """The entries' rows of a zoo table (below its header and its rule)."""
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    return lines[1:]


def _model_type(row: str) -> str:
    """The model type of a zoo table's row (its second cell, in backquotes)."""
    return row.split(" | ")[1].strip("`")


def _blocks(language: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return [part.split("```", 1)[0] for part in text.split(f"```{language}\n")[1:]]


def test_the_docs_commands_run(tmp_path: Path) -> None:
    """The page's Python block builds the tiny Llama; its shell block scores it; the JSON says what the page says."""
    import json
    import shlex
    import sys

    (tmp_path / "sample_corpora").symlink_to(SAMPLES)
    (python,) = _blocks("python")
    built = run_process([sys.executable, "-c", python], cwd=tmp_path)  # the block as a user runs it
    assert built.returncode == 0, built.stderr
    (shell,) = _blocks("bash")
    words = shlex.split(shell.strip())
    assert words[0] == "geoanalyze"
    result = invoke(words[1:], cwd=tmp_path)
    assert result.code == 0, result.stderr
    document = json.loads((tmp_path / "tiny-llama.json").read_text())
    mechanism = document["checkpoint"]["position_mechanism"]
    assert mechanism["kind"] == "rope"
    assert mechanism["rope"]["rotary"]["dims"] == 16 and mechanism["rope"]["rotary"]["base"] == 500000
    assert {(row["layer"], row["projection"]) for row in document["layers"]} >= {
        (layer, projection) for layer in (1, 2) for projection in ("query", "key")
    }
    assert document["checkpoint"]["rows"]["query_key"] == "measured (attention interface)"
