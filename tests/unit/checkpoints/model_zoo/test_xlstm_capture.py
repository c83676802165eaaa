"""xLSTM's mLSTM cells are attention layers, and their captured queries and keys are the ones the cell uses.

An mLSTM layer projects its input to q, k and v (``self.q``, ``self.k``, ``self.v``) and its backend
weighs the values by q . k under exponential input and forget gates: a gated linear attention, with
no softmax and no position module. The mechanism lists these layers as attention layers (they hold a
query and a key projection side by side) and the capture hooks those projections. The check here is
independent of both: each sequence alone, unpadded, a forward pre-hook on the cell's backend
(``mlstm_backend``) takes the query and key it is handed, (1, heads, T, d); their mean over the
sequences reaching each position must equal the captured centroids of the padded, batched pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass

from .test_capture_independent import compare_rows, qk_centroids
from .test_capture_models import capture_tokenizer, texts
from .zoo import TYPE_KINDS, build_checkpoint, generic_entry

__all__ = ["capture_tokenizer"]

LENGTHS = [20, 7, 13, 16, 20, 11, 5, 18]


def _backend_centroids(folder: Path, sequences: list[str], tokenizer: Any) -> dict[int, tuple[Any, Any]]:
    """Block -> mean (T, heads * d) query and key as each block's mLSTM backend receives them."""
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder)).eval()
    seen: dict[int, tuple[Any, Any]] = {}
    handles = []
    for number, block in enumerate(model.blocks, 1):

        def hook(_: Any, args: Any, kwargs: Any, number: int = number) -> None:
            seen[number] = (kwargs["query"], kwargs["key"])

        handles.append(block.mlstm_layer.mlstm_backend.register_forward_pre_hook(hook, with_kwargs=True))

    def step(ids: Any) -> Iterator[tuple[int, tuple[Any, Any]]]:
        model(input_ids=ids)
        for number, pair in seen.items():
            q, k = (state[0].transpose(0, 1).flatten(1).double() for state in pair)  # (T, heads * d)
            yield number, (q, k)

    return qk_centroids(sequences, tokenizer, step, handles)


@pytest.mark.slow  # a forward pass and twelve more: seconds on two cores
def test_mlstm_queries_and_keys_are_the_cells_own(capture_tokenizer: Any, tmp_path: Path) -> None:
    folder = build_checkpoint(generic_entry("xlstm", TYPE_KINDS["xlstm"]), tmp_path / "xlstm", capture_tokenizer)
    checkpoint = load_checkpoint(str(folder))
    assert checkpoint.mechanism.kind == "none"
    assert checkpoint.mechanism.attention_layers == (1, 2)
    sequences = texts(LENGTHS, capture_tokenizer)
    result = forward_pass(checkpoint, sequences, max_length=20, batch_size=4, device="cpu", dtype="float32")
    assert result.capture == "projections", result.notes
    assert not result.notes
    expected = _backend_centroids(folder, sequences, capture_tokenizer)
    assert sorted(result.queries) == sorted(result.keys) == sorted(expected) == [1, 2]
    worst, _ = compare_rows(result, expected)
    print(f"\nxlstm [{result.capture}]: max |diff| {worst:.2e}")
