"""docs/checkpoints.md shows the zoo exactly as the tests assert it (GEOANALYZE_REGENERATE_DOCS=1 rewrites it)."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import REPO_ROOT, SAMPLES, invoke, run_process

from .zoo import markdown_table

DOC = REPO_ROOT / "docs" / "checkpoints.md"
BEGIN, END = "<!-- zoo:begin -->", "<!-- zoo:end -->"


def test_the_docs_table_is_the_zoo() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    expected = f"{head}{BEGIN}\n{markdown_table()}\n{END}{tail}"
    if os.environ.get("GEOANALYZE_REGENERATE_DOCS") == "1":
        DOC.write_text(expected, encoding="utf-8")
    assert text == expected, (
        "docs/checkpoints.md is stale: run GEOANALYZE_REGENERATE_DOCS=1 pytest tests/unit/checkpoints/model_zoo"
    )


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
