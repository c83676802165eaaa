"""The recorder's rules for blocks that do more than one attention, or pad inside, on tensors made here.

- Two attention modules of one block, each called once (LongCat-Flash's self_attn[0] and [1]): the
  block's sums hold both side by side, in call order, and a note says so; one module's q and k
  arriving twice in one pass still drop the block (the capture cannot tell which call is the block's).
- A block that pads its attention's input at both ends (PegasusX's staggered layers): the rows are
  the input's positions wherever the padding puts them, and the end padding is still trimmed.
- Which blocks pad inside is read from the block as PegasusX's modeling code keeps it.
The whole-model checks against an independent recomputation are test_capture_independent_inside.py (slow).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.checkpoints.capture import QueryKeySums, _padded_inside


class Attention(torch.nn.Module):
    """A stand-in source (only its identity and class name are read)."""


def _recorder(mask: torch.Tensor) -> QueryKeySums:
    recorder = QueryKeySums({}, mask.shape[1])
    recorder.start(mask)
    return recorder


MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])


def _weighted(states: torch.Tensor) -> torch.Tensor:
    """(B, T, w) -> the per-position sums over the batch's real positions, float64."""
    return torch.einsum("btw,bt->tw", states.double(), MASK.double())


def test_two_attention_modules_of_a_block_are_side_by_side_in_call_order() -> None:
    recorder = _recorder(MASK)
    first, second = Attention(), Attention()
    a, b = torch.randn(2, 5, 8), torch.randn(2, 5, 6)
    for store in (recorder.queries, recorder.keys):
        recorder.add(store, 1, a, heads_first=False, source=first)
        recorder.add(store, 1, b, heads_first=False, source=second)
    recorder.stop()
    assert recorder.dropped == {}
    for store in (recorder.queries, recorder.keys):
        torch.testing.assert_close(store[1][:5], torch.cat([_weighted(a), _weighted(b)], dim=1))
    assert recorder.notes() == [
        "block 1 runs 2 attention modules (Attention, Attention); its query and key rows hold the queries and "
        "keys of all of them side by side (every head of each), in the order they run"
    ]


def test_one_source_twice_in_a_pass_drops_the_block() -> None:
    recorder = _recorder(MASK)
    module = Attention()
    recorder.add(recorder.queries, 2, torch.randn(2, 5, 8), heads_first=False, source=module)
    recorder.add(recorder.queries, 2, torch.randn(2, 5, 8), heads_first=False, source=module)
    recorder.stop()
    assert recorder.dropped == {2: "its query/key projections run more than once in one pass"}
    assert recorder.notes() == []


@settings(max_examples=30, deadline=None)
@given(offset=st.integers(0, 6), end=st.integers(0, 6), width=st.integers(1, 4))
def test_rows_padded_inside_are_read_at_the_input_positions(offset: int, end: int, width: int) -> None:
    """Position p of the input at row offset + p: the sums are the input's, whatever the padding holds."""
    inner = torch.randn(2, 5, width)
    padded = torch.cat([torch.randn(2, offset, width), inner, torch.randn(2, end, width)], dim=1)
    recorder = _recorder(MASK)
    recorder.add(recorder.keys, 1, padded, heads_first=False, source=Attention(), offset=offset)
    heads_first = padded.view(2, padded.shape[1], 1, width).transpose(1, 2)  # (B, H = 1, T', d)
    recorder.add(recorder.queries, 1, heads_first, heads_first=True, source=Attention(), offset=offset)
    recorder.stop()
    for store in (recorder.queries, recorder.keys):
        torch.testing.assert_close(store[1][:5], _weighted(inner))
    assert recorder.padded == end


def test_too_few_positions_after_the_offset_drop_the_block() -> None:
    recorder = _recorder(MASK)
    recorder.add(recorder.queries, 1, torch.randn(2, 6, 4), heads_first=False, source=Attention(), offset=2)
    assert recorder.dropped == {1: "its attention sees (2, 6) for a batch of (2, 5)"}


@pytest.mark.parametrize("stagger", [True, False])
def test_the_staggered_layers_of_pegasus_x_pad_half_a_block_inside(stagger: bool) -> None:
    """PegasusXEncoderLayer.pad_local_tokens pads block_size // 2 at each end where stagger_blocks_this_layer."""
    from transformers import PegasusXConfig
    from transformers.models.pegasus_x.modeling_pegasus_x import PegasusXEncoderLayer

    config = PegasusXConfig(d_model=16, encoder_attention_heads=2, encoder_ffn_dim=16, block_size=6)
    layer = PegasusXEncoderLayer(stagger_blocks_this_layer=stagger, config=config)
    assert _padded_inside(layer) == (3 if stagger else 0)
    states = torch.randn(1, 6, 16)
    padded, _ = layer.pad_local_tokens(states, torch.zeros(1, 6), block_size=6)
    if stagger:  # the modeling code's padding is what the rule says
        assert padded.shape[1] == 6 + 2 * 3 and torch.equal(padded[:, 3:9], states)
    assert _padded_inside(torch.nn.Linear(2, 2)) == 0
