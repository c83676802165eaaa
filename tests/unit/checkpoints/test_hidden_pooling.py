"""Where a pooled layer's hidden rows go (checkpoints.hidden.pooled_positions), against Funnel itself.

Funnel says where its pooled tokens are: its attention structure's ``stride_pool_pos`` gives the
input position of each pooled token after every pooling (the first input position its window
covers; the [CLS] token a virtual position of its own). For every input length and both
``separate_cls`` settings: the rows go to the last input position each pooled position covers,
i.e. Funnel's position + s - 1 (position 0, [CLS] alone, at 0 under ``separate_cls``), and there
are as many as Funnel's own layers hold (its hidden states, run on that length). A pooled
position is real exactly where its row's input position is (the min-pooled mask), which holds
the rows inside the input and increasing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.checkpoints.hidden import pooled_positions

BLOCKS = [1, 1, 1]


def funnel(separate_cls: bool, truncate_seq: bool = True) -> Any:
    import torch
    from transformers import FunnelBaseModel, FunnelConfig

    torch.manual_seed(0)
    config = FunnelConfig(
        vocab_size=50,
        d_model=16,
        n_head=2,
        d_head=8,
        d_inner=32,
        block_sizes=BLOCKS,
        block_repeats=[1, 1, 1],
        separate_cls=separate_cls,
        truncate_seq=truncate_seq,
        max_position_embeddings=64,
    )
    return FunnelBaseModel(config).eval()


@pytest.fixture(scope="module", params=[True, False], ids=["separate_cls", "no separate_cls"])
def model(request: pytest.FixtureRequest) -> Any:
    return funnel(request.param)


@pytest.mark.parametrize("length", [6, 7, 13, 32])
def test_rows_sit_at_the_last_input_position_funnel_says_each_pooled_position_covers(model: Any, length: int) -> None:
    import torch

    config = model.config
    with torch.no_grad():
        states = model(input_ids=torch.arange(3, 3 + length)[None] % 50, output_hidden_states=True).hidden_states
    structure = model.encoder.attention_structure
    funnel_positions = list(range(length))
    for layer in range(1, len(states)):
        block = layer - 1  # one layer per block: block b pools b times
        if block > 0:
            funnel_positions = structure.stride_pool_pos(funnel_positions, block)
        found = pooled_positions(config, layer, states[layer].shape[1], length)
        if block == 0:
            assert states[layer].shape[1] == length and found is None
            continue
        assert found is not None, (layer, states[layer].shape)
        rows, stride = found
        assert stride == 2**block and len(rows) == states[layer].shape[1] == len(funnel_positions)
        first = np.asarray(funnel_positions)
        if config.separate_cls:
            assert rows[0] == 0
            first, rows = first[1:], rows[1:]
        np.testing.assert_array_equal(rows, np.minimum(first + stride - 1, length - 1))


@settings(max_examples=200, deadline=None)
@given(width=st.integers(1, 600), layer=st.integers(1, 3), separate=st.booleans())
def test_rows_lie_inside_the_input_in_order(width: int, layer: int, separate: bool) -> None:
    class Config:
        model_type = "funnel"
        block_sizes = BLOCKS
        separate_cls = separate

    stride = 2 ** (layer - 1)
    length = -(-width // stride)
    found = pooled_positions(Config(), layer, length, width)
    if stride == 1:
        assert found is None  # not pooled: the layer keeps the input's positions
        return
    assert found is not None
    rows, got = found
    assert got == stride and len(rows) == length
    assert rows[0] == (0 if separate else min(stride - 1, width - 1)) and rows[-1] <= width - 1
    assert np.all(np.diff(rows) > 0)
    # another length than Funnel's for this input: not placed
    assert pooled_positions(Config(), layer, length + 1, width) is None


def test_other_models_and_other_shapes_are_not_placed() -> None:
    class Other:
        model_type = "bert"

    assert pooled_positions(Other(), 1, 5, 10) is None
