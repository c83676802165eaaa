"""``geoanalyze.capture``: the example of docs/checkpoints.md runs as written, and its rows are the forward
pass's (the same machinery as ``stress``), on the real all-MiniLM-L6-v2."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from pathlib import Path

import numpy as np
import pytest

import geoanalyze
from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass
from geoanalyze.errors import InputError

DOC = Path(__file__).resolve().parents[3] / "docs" / "checkpoints.md"


def example() -> str:
    """The python block (fenced ``py``: the page's one ``python`` block builds the zoo's tiny Llama) of the section
    "Capture the rows from Python"."""
    section = DOC.read_text(encoding="utf-8").split("## Capture the rows from Python", 1)[1]
    found = re.search(r"```py\n(.*?)```", section, re.DOTALL)
    assert found is not None, "docs/checkpoints.md: the capture section has no python example"
    return found.group(1)


def test_the_documented_example_runs(minilm_path: Path) -> None:
    printed = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(printed):
        exec(compile(example(), str(DOC), "exec"), namespace)  # the documented example, as written
    first, shapes = printed.getvalue().splitlines()
    assert first.startswith("attention interface [")
    counts = [int(count) for count in first.removeprefix("attention interface [").rstrip("]").split(", ")]
    assert counts[0] == 2 and counts == sorted(counts, reverse=True) and len(counts) <= 16
    n = len(counts)
    assert shapes == f"({n}, 384) ({n}, 384) ({n}, 384) None"


def test_the_rows_are_the_forward_pass_rows(minilm_path: Path) -> None:
    texts = ["one short text", "and a second, longer text than the first one"]
    checkpoint = load_checkpoint(str(minilm_path))
    result = geoanalyze.capture(checkpoint, texts, max_length=12, device="cpu", dtype="float32")
    forward = forward_pass(checkpoint, texts, 12, device="cpu", dtype="float32")
    assert isinstance(result, geoanalyze.CaptureResult)
    assert [rows.layer for rows in result.layers] == list(range(7))
    np.testing.assert_array_equal(result.reach, forward.reach)
    for rows in result.layers:
        np.testing.assert_array_equal(rows.hidden, forward.centroids[rows.layer])
        assert (rows.query is None) == (rows.layer == 0) and (rows.key is None) == (rows.layer == 0)
        if rows.layer:
            np.testing.assert_array_equal(rows.query, forward.queries[rows.layer])
            np.testing.assert_array_equal(rows.key, forward.keys[rows.layer])
    assert result.method == forward.capture and result.notes == tuple(forward.notes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.layers[0].layer = 2  # type: ignore[misc]
    with pytest.raises(KeyError, match="layer 9 was not captured"):
        result.layer(9)


def test_a_layer_the_model_has_not_is_refused(minilm_path: Path) -> None:
    with pytest.raises(InputError, match=r"has layers 0\.\.6, not 7"):
        geoanalyze.capture(str(minilm_path), ["a text"], layers=[7], max_length=8, device="cpu")
