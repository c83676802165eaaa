"""Reformer's captured query/key centroids against an independent recomputation (the method of
test_capture_independent.py: own hooks, eager, each sequence alone, unpadded).

Reformer's blocks are of two kinds (``config.attn_layers``):

- LocalSelfAttention: separate ``query``, ``key`` and ``value`` projections;
- LSHSelfAttention: one shared ``query_key`` projection. Its queries are that projection; the keys
  it compares them against are the same vectors length-normalised per head,
  ``x * rsqrt(mean(x^2) + 1e-6) / sqrt(head size)`` (``_len_and_dim_norm``). The capture leaves out
  the 1/sqrt(head size), the score scaling, as it does for every block read at its projections (the
  local blocks divide their keys by it too); this file's arithmetic is checked against the model's
  own ``_len_and_dim_norm`` on every sequence.

Recomputed here from what enters each block's attention module (a forward pre-hook: its hidden
states, after the block's layer norm), with the module's own weights. A sequence alone is still
padded by the model itself to a multiple of its chunk length; its first ``length`` positions are
the sequence's. The capture runs one sequence per batch (the model pads it as it does alone; max |diff|
1.9e-7, float32 against float64) and in batches of 4 (the toolkit groups sequences by the chunk multiple
they are padded to alone: 1.9e-7 too). Slow: two models, built once (~10 s in all).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.capture import QueryKeySums, hook_projections
from geoanalyze.checkpoints.hidden import forward_pass

from .test_capture_independent import LENGTHS, compare_rows, hook_inputs, linear, qk_centroids
from .test_capture_models import build, capture_tokenizer, texts

__all__ = ["capture_tokenizer"]

HEAD = 8
REFORMER = {
    "axial_pos_embds_dim": [16, 16],
    "axial_pos_shape": [8, 8],
    "num_hidden_layers": 2,
    "feed_forward_size": 64,
    "attention_head_size": HEAD,
    "local_attn_chunk_length": 8,
    "lsh_attn_chunk_length": 8,
    "num_buckets": 4,
    "hash_seed": 0,
}
NOTE = (
    "block {block} (LSHSelfAttention) projects its queries and keys with one shared map (query_key): its query rows "
    "are that projection, the key rows the same projection length-normalised per head (x / sqrt(mean(x^2) + 1e-6)), "
    "what the attention compares the queries against (its 1/sqrt(head size) is the score scaling, left out as for "
    "every block)"
)


def query_key(attention: Any, x: Any) -> tuple[Any, Any]:
    """(q, k), each (T, H * d), of one attention module from its input x (T, w), float64."""
    import torch

    if not hasattr(attention, "query_key"):  # LocalSelfAttention
        return linear(attention.query, x), linear(attention.key, x)
    shared = linear(attention.query_key, x)
    heads = shared.view(x.shape[0], -1, HEAD)
    keys = heads / torch.sqrt((heads**2).mean(-1, keepdim=True) + 1e-6)
    # the model's own rule on the same vectors: this arithmetic, divided by sqrt(head size)
    own = attention._len_and_dim_norm(heads, np.sqrt(HEAD))
    torch.testing.assert_close(keys / np.sqrt(HEAD), own, atol=1e-12, rtol=1e-12)
    return shared, keys.flatten(1)


def _recompute(folder: Path, sequences: list[str], tokenizer: Any) -> dict[int, tuple[Any, Any]]:
    """Block (1-based) -> (query, key) centroids (20, width), each sequence alone, eager, unpadded."""
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    attention = {number: layer.attention.self_attention for number, layer in enumerate(model.encoder.layers, 1)}
    seen, hooks = hook_inputs(attention)

    def step(ids: Any) -> Iterator[tuple[int, tuple[Any, Any]]]:
        seen.clear()
        model(input_ids=ids)
        for number, x in seen.items():
            yield number, query_key(attention[number], x[: ids.shape[1]].double())

    return qk_centroids(sequences, tokenizer, step, hooks)


class Block(torch.nn.Module):
    """A block holding one real LSHSelfAttention (as ReformerLayer holds it under attention.self_attention)."""

    def __init__(self, attention: torch.nn.Module) -> None:
        super().__init__()
        self.self_attention = attention

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        return self.self_attention(hidden_states=hidden_states, attention_mask=attention_mask)


def _lsh(seed: int) -> Any:
    from transformers import ReformerConfig
    from transformers.models.reformer.modeling_reformer import LSHSelfAttention

    config = ReformerConfig(
        hidden_size=32, num_attention_heads=4, attention_head_size=HEAD, lsh_attn_chunk_length=4, num_buckets=2
    )
    torch.manual_seed(seed)
    return LSHSelfAttention(config).eval()


@pytest.mark.parametrize("seed", [0, 1])
def test_the_shared_projection_gives_the_query_and_its_normalised_heads_the_key(seed: int) -> None:
    """Default run, on a real LSHSelfAttention (no checkpoint): a batch of two padded by the model to 8
    (chunk 4) for a mask of 6; the rows are the mask-weighted sums of the query_key output and of the keys
    the module compares against (its own _len_and_dim_norm, times sqrt(head size)), the padding trimmed."""
    attention = _lsh(seed)
    block = Block(attention)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    padded = torch.cat([mask, torch.zeros(2, 2, dtype=torch.long)], dim=1)
    x = torch.randn(2, 8, 32)
    recorder = QueryKeySums({id(m): 1 for m in block.modules()}, 6)
    handles = hook_projections(recorder, [block], "reformer")
    recorder.start(mask)
    with torch.no_grad():
        block(x, padded)
    recorder.stop()
    for handle in handles:
        handle.remove()
    shared = attention.query_key(x).detach()
    own = attention._len_and_dim_norm(shared.view(2, 8, 4, HEAD), np.sqrt(HEAD)) * np.sqrt(HEAD)
    weights = mask.double()
    for store, states in ((recorder.queries, shared), (recorder.keys, own.flatten(2))):
        expected = torch.einsum("btw,bt->tw", states[:, :6].double(), weights)
        torch.testing.assert_close(store[1], expected, atol=1e-6, rtol=1e-6)
    assert recorder.padded == 2
    assert recorder.notes() == [NOTE.format(block=1)]


def test_a_shared_projection_of_an_unknown_model_type_is_dropped_with_the_reason() -> None:
    recorder = QueryKeySums({}, 6)
    assert hook_projections(recorder, [Block(_lsh(0))], "other") == []
    assert recorder.dropped == {1: "its shared query/key projection has no known key rule for model type 'other'"}


LAYERS = {"local-lsh": ["local", "lsh"], "lsh-local": ["lsh", "local"]}


#: a batch of mixed lengths would pad a sequence further than it is padded alone, and Reformer's attention
#: is not blind to how far: LocalSelfAttention looks one chunk back circularly (_look_adjacent: chunk 0 sees
#: the last chunk, padding in a batch, the sequence's own tail alone), LSHSelfAttention chunks the
#: bucket-sorted padded sequence. Measured before the toolkit batched by padded length: block 2's keys
#: differed by 8.0e-5 (a 13-token sequence padded to 24 instead of 16). hidden.padded_alone and
#: batch_groups now start a batch wherever the length rounded up to the chunk multiple changes.
@pytest.fixture(scope="module")
def reformers(capture_tokenizer: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Name -> (checkpoint, the sequences, their independent centroids), built once."""
    sequences = texts(LENGTHS, capture_tokenizer)
    built = {}
    for name, layers in LAYERS.items():
        folder = tmp_path_factory.mktemp(name) / "model"
        build(folder, capture_tokenizer, "reformer", {**REFORMER, "attn_layers": layers})
        built[name] = (load_checkpoint(str(folder)), sequences, _recompute(folder, sequences, capture_tokenizer))
    return built


def _compare(reformers: dict[str, Any], name: str, batch_size: int) -> None:
    checkpoint, sequences, expected = reformers[name]
    result = forward_pass(checkpoint, sequences, max_length=20, batch_size=batch_size, device="cpu", dtype="float32")
    assert result.capture == "projections"
    assert sorted(result.queries) == sorted(result.keys) == sorted(expected) == [1, 2], result.notes
    assert NOTE.format(block=LAYERS[name].index("lsh") + 1) in result.notes, result.notes
    worst, _ = compare_rows(result, expected, atol=1e-6)
    print(f"\nreformer {name}, batches of {batch_size}: max |diff| {worst:.2e}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYERS))
def test_captured_centroids_equal_an_independent_recomputation(reformers: dict[str, Any], name: str) -> None:
    """One sequence per batch: the model pads it to its chunk multiple as it does alone."""
    _compare(reformers, name, 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYERS))
def test_batches_of_mixed_lengths_equal_the_sequences_alone(reformers: dict[str, Any], name: str) -> None:
    """Batches of 4: each holds only sequences the model pads to one chunk multiple, as alone."""
    _compare(reformers, name, 4)
