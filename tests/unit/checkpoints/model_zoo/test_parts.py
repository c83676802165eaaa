"""One part of an encoder-decoder family saved alone: the pass runs that part's own weights.

An encoder-only checkpoint (the seq2seq model's get_encoder() saved: PegasusEncoder) and a decoder-only
one (its causal LM: MarianForCausalLM, the seq2seq config with is_encoder_decoder false and the weights
under model.decoder.) must give the hidden states the model that was saved computes. The reference is
that model in memory, before saving, run by transformers on the same token ids: independent of how
geoanalyze picks the class to load. A decoder-only checkpoint whose config names no architecture is
told by its weight names (a decoder stack, no encoder stack).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass
from geoanalyze.checkpoints.mechanism import TableMechanism
from geoanalyze.checkpoints.placement import part_class

from .conftest import CORPUS
from .zoo import build_config, corpus_tokenizer, generic_entry

TEXT = "the river ran past the old mill and the mill wheel turned slowly in the dark water"


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return corpus_tokenizer(CORPUS)


def _saved(model: Any, tokenizer: Any, folder: Path, **run: Any) -> tuple[Path, np.ndarray]:
    """Save ``model`` and the tokenizer; the model's own hidden states (L + 1, T, hidden) on TEXT."""
    import torch

    model.eval()
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    ids = torch.tensor([tokenizer(TEXT)["input_ids"]])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True, **run)
    return folder, np.stack([h[0].double().numpy() for h in out.hidden_states])


def _model(model_type: str, tokenizer: Any, cls: str = "", **values: Any) -> Any:
    import torch
    import transformers
    from transformers import AutoModel

    from .zoo import TYPE_KINDS

    torch.manual_seed(3)
    config = build_config(generic_entry(model_type, TYPE_KINDS[model_type]), len(tokenizer))
    for key, value in values.items():
        setattr(config, key, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(transformers, cls)(config) if cls else AutoModel.from_config(config)


def _pass(folder: Path) -> np.ndarray:
    result = forward_pass(load_checkpoint(str(folder)), [TEXT], max_length=64, device="cpu", capture=False)
    return result.centroids


def test_a_decoder_only_checkpoint_runs_its_decoder(tokenizer: Any, tmp_path: Path) -> None:
    model = _model("marian", tokenizer, "MarianForCausalLM")
    folder, expected = _saved(model, tokenizer, tmp_path / "marian-decoder")
    mechanism = load_checkpoint(str(folder)).mechanism
    assert isinstance(mechanism, TableMechanism) and mechanism.kind == "fixed"
    assert mechanism.table == "model.decoder.embed_positions.weight"  # the decoder's, by its own name
    assert mechanism.layers == model.config.decoder_layers
    got = _pass(folder)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_decoder_only_checkpoint_without_architectures_is_told_by_its_weights(tokenizer: Any, tmp_path: Path) -> None:
    model = _model("mbart", tokenizer, "MBartForCausalLM")
    folder, expected = _saved(model, tokenizer, tmp_path / "mbart-decoder")
    bare = tmp_path / "bare"
    shutil.copytree(folder, bare)
    config = json.loads((bare / "config.json").read_text())
    del config["architectures"]
    (bare / "config.json").write_text(json.dumps(config))
    mechanism = load_checkpoint(str(bare)).mechanism
    assert isinstance(mechanism, TableMechanism)
    assert mechanism.table == "model.decoder.embed_positions.weight"
    assert mechanism.offset == 2  # MBartLearnedPositionalEmbedding's
    np.testing.assert_allclose(_pass(bare), expected, rtol=1e-5, atol=1e-5)


def test_a_decoder_deeper_than_its_encoder_counts_its_own_layers(tokenizer: Any, tmp_path: Path) -> None:
    """Blenderbot's decoders are deeper than its encoders (blenderbot-400M-distill: 12 against 2), and its
    config's num_hidden_layers is encoder_layers. The decoder alone has its decoder_layers blocks; run with
    its config's use_cache, transformers sizes the cache by num_hidden_layers and fails (IndexError), so the
    reference runs without a cache, as the pass does (it never generates)."""
    model = _model("blenderbot", tokenizer, "BlenderbotForCausalLM", encoder_layers=2, decoder_layers=3)
    folder, expected = _saved(model, tokenizer, tmp_path / "blenderbot-decoder", use_cache=False)
    assert len(expected) == 3 + 1
    mechanism = load_checkpoint(str(folder)).mechanism
    assert mechanism.layers == 3 and mechanism.attention_layers == (1, 2, 3)
    np.testing.assert_allclose(_pass(folder), expected, rtol=1e-5, atol=1e-5)


def test_an_encoder_only_checkpoint_runs_its_encoder(tokenizer: Any, tmp_path: Path) -> None:
    whole = _model("pegasus", tokenizer)
    folder, expected = _saved(whole.get_encoder(), tokenizer, tmp_path / "pegasus-encoder")
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["PegasusEncoder"]
    mechanism = load_checkpoint(str(folder)).mechanism
    assert isinstance(mechanism, TableMechanism)
    assert mechanism.table == "embed_positions.weight"  # the encoder's, saved without a prefix
    np.testing.assert_allclose(_pass(folder), expected, rtol=1e-5, atol=1e-5)


def _names(*names: str) -> Any:
    return lambda: list(names)


@pytest.mark.parametrize(
    ("config", "names", "expected"),
    [
        ({"model_type": "bart", "architectures": ["BartForCausalLM"]}, (), ("BartForCausalLM", "decoder")),
        ({"model_type": "bart", "architectures": ["BartEncoder"]}, (), ("BartEncoder", "encoder")),
        ({"model_type": "t5", "architectures": ["T5EncoderModel"]}, (), ("T5EncoderModel", "encoder")),
        ({"model_type": "bart", "architectures": ["BartModel"]}, (), (None, "")),
        ({"model_type": "bart", "architectures": ["BartForConditionalGeneration"]}, (), (None, "")),
        # a causal LM of a decoder family is its base model's: AutoModel reads it
        ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, (), (None, "")),
        # no architectures: the weights say which part
        ({"model_type": "bart"}, ("model.decoder.layers.0.fc1.weight",), ("BartForCausalLM", "decoder")),
        (
            {"model_type": "bart"},
            ("model.encoder.layers.0.fc1.weight", "model.decoder.layers.0.fc1.weight"),
            (None, ""),
        ),
        ({"model_type": "llama"}, ("model.layers.0.mlp.up_proj.weight",), (None, "")),
        # a class transformers does not have: AutoModel reads it (its own refusal if it cannot)
        ({"model_type": "bart", "architectures": ["NoSuchDecoder"]}, (), (None, "")),
    ],
)
def test_the_part_is_read_from_the_architectures_then_the_weights(
    config: dict[str, Any], names: tuple[str, ...], expected: tuple[str | None, str]
) -> None:
    found, part = part_class(config, _names(*names))
    assert (found.__name__ if found is not None else None, part) == expected


def test_the_weight_names_are_not_read_when_the_config_names_the_class() -> None:
    def unread() -> list[str]:
        raise AssertionError("the weight names were read")

    assert part_class({"model_type": "bart", "architectures": ["BartForCausalLM"]}, unread)[1] == "decoder"
    assert part_class({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, unread) == (None, "")
