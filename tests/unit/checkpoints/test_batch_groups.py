"""How the forward pass batches sequences (hidden.batch_groups): sorted by length, at most batch_size,
and, for a model whose output depends on how far it pads (Reformer: hidden.padded_alone), never two
sequences the model would pad to different chunk multiples alone in one batch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import ReformerConfig

from geoanalyze.checkpoints.hidden import batch_groups, padded_alone


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 80), min_size=1, max_size=40), st.integers(1, 9), st.sampled_from([1, 4, 8, 16]))
def test_groups_partition_the_sequences_in_length_order(lengths: list[int], batch_size: int, multiple: int) -> None:
    groups = batch_groups(lengths, batch_size, multiple)
    flat = np.concatenate(groups)
    assert sorted(flat.tolist()) == list(range(len(lengths)))  # every sequence once
    assert np.all(np.diff(np.asarray(lengths)[flat]) >= 0)  # sorted by length, as before
    assert all(1 <= len(group) <= batch_size for group in groups)
    if multiple > 1:
        for group in groups:
            assert len({-(-lengths[i] // multiple) for i in group}) == 1  # one padded length per batch
    else:  # no model rule: plain consecutive batches of the sorted order, as always
        order = np.argsort(lengths, kind="stable")
        assert [g.tolist() for g in groups] == [order[s : s + batch_size].tolist() for s in range(0, len(order), batch_size)]


def test_reformer_pads_to_the_least_common_multiple_of_its_chunks() -> None:
    """As modeling_reformer's _get_least_common_mult_chunk_len computes it."""
    base = {"lsh_attn_chunk_length": 8, "local_attn_chunk_length": 12}
    assert padded_alone(ReformerConfig(attn_layers=["local", "lsh"], **base)) == 24
    assert padded_alone(ReformerConfig(attn_layers=["lsh", "lsh"], **base)) == 8
    assert padded_alone(ReformerConfig(attn_layers=["local"], **base)) == 12
    from transformers import BertConfig

    assert padded_alone(BertConfig()) == 1
