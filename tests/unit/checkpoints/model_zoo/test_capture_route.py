"""The query/key capture goes through transformers' public attention hooks and leaves the model as it was.

- Inside the capture the model runs ``geoanalyze_capture_<original>`` (registered with
  ``AttentionInterface.register``, selected with ``set_attn_implementation``); afterwards its
  original implementation is back, and transformers' own ``sdpa`` entry was never replaced.
- The captured pass gives bit-identical hidden states to an uncaptured one (sdpa and eager models).
- A model whose attention bypasses the interface (BLOOM) keeps its implementation and is not called.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from geoanalyze.checkpoints.capture import CAPTURE_PREFIX, QueryKeySums, capture_attention
from geoanalyze.checkpoints.mechanism import layer_list


def _model(folder: Path) -> torch.nn.Module:
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(folder)).eval()


def _recorder(model: torch.nn.Module, length: int) -> QueryKeySums:
    blocks = layer_list(model, model.config)
    return QueryKeySums({id(m): i + 1 for i, block in enumerate(blocks) for m in block.modules()}, length)


def _hidden(model: torch.nn.Module, recorder: QueryKeySums | None, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    mask = torch.ones_like(ids)
    if recorder is not None:
        recorder.start(mask)
    with torch.no_grad():
        states = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    if recorder is not None:
        recorder.stop()
    return tuple(states)


@pytest.mark.parametrize(("name", "original"), [("Llama", "sdpa"), ("BERT", "sdpa"), ("Gemma2", "eager")])
def test_the_capture_switches_the_implementation_and_back(zoo: dict[str, Path], name: str, original: str) -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    model = _model(zoo[name])
    assert model.config._attn_implementation == original
    ids = torch.arange(3, 11)[None]
    plain = _hidden(model, None, ids)
    recorder = _recorder(model, ids.shape[1])
    with capture_attention(model, recorder):
        assert model.config._attn_implementation == CAPTURE_PREFIX + original
        assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa_attention_forward
        captured = _hidden(model, recorder, ids)
    assert model.config._attn_implementation == original
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa_attention_forward
    assert recorder.calls == 2 and sorted(recorder.queries) == sorted(recorder.keys) == [1, 2]
    for a, b in zip(plain, captured, strict=True):
        assert torch.equal(a, b)
    # after the capture the model runs as before, with nothing recorded
    calls = recorder.calls
    assert all(torch.equal(a, b) for a, b in zip(plain, _hidden(model, None, ids), strict=True))
    assert recorder.calls == calls


def test_a_model_that_bypasses_the_interface_is_left_alone(zoo: dict[str, Path]) -> None:
    model = _model(zoo["BLOOM"])
    before = model.config._attn_implementation
    ids = torch.arange(3, 11)[None]
    recorder = _recorder(model, ids.shape[1])
    with capture_attention(model, recorder):
        _hidden(model, recorder, ids)
    assert model.config._attn_implementation == before
    assert recorder.calls == 0
