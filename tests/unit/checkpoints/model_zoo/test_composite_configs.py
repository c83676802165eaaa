"""Composite configs: a float size where the model type's own config holds one, the width of a config that
states none, and the blocks of a model with an audio tower beside its language model.

The expectations come from transformers' own config classes and modeling code: MusicFlamingoConfig sets
max_position_embeddings to its rope_theta (1200.0, a float its audio rotary divides by), BertConfig's is
an integer (it sizes an nn.Embedding); BLT's byte tokens enter in its local encoder
(``local_encoder.embed_tokens``, of the encoder config's width); MusicFlamingo's text runs through
``language_model.layers`` (its audio tower runs on audio only).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.load import read_config
from geoanalyze.errors import FormatError

from .zoo import build_config, generic_entry


def write_config(folder: Path, config: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def flamingo_config() -> dict[str, Any]:
    """MusicFlamingo's own default config, as save_pretrained writes it (max_position_embeddings 1200.0)."""
    from transformers import MusicFlamingoConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MusicFlamingoConfig().to_dict()


def bert_config() -> dict[str, Any]:
    from transformers import BertConfig

    return BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64).to_dict()


def test_musicflamingos_own_default_is_a_float() -> None:
    """The premise: transformers itself writes 1200.0 (its rope_theta) for this type, 512 for BERT."""
    config = flamingo_config()
    assert config["max_position_embeddings"] == 1200.0 and isinstance(config["max_position_embeddings"], float)
    assert isinstance(bert_config()["max_position_embeddings"], int)


@pytest.mark.parametrize("value", [1200.0, 1234.5, 64])
def test_a_float_size_is_read_where_the_type_defaults_to_one(tmp_path: Path, value: float) -> None:
    folder = write_config(tmp_path / "flamingo", {**flamingo_config(), "max_position_embeddings": value})
    assert read_config(folder)["max_position_embeddings"] == value


@pytest.mark.parametrize(
    ("where", "changes", "word"),
    [
        ("bert", {"max_position_embeddings": 64.0}, "max_position_embeddings must be an integer"),
        ("bert", {"hidden_size": 32.0}, "hidden_size must be an integer"),
        ("flamingo", {"max_position_embeddings": 0.0}, "max_position_embeddings"),
        ("flamingo", {"max_position_embeddings": -1200.0}, "max_position_embeddings"),
        ("flamingo", {"max_position_embeddings": 1e30}, "max_position_embeddings"),
        ("flamingo", {"max_position_embeddings": float("inf")}, "max_position_embeddings"),
        ("flamingo", {"max_position_embeddings": "1200"}, "max_position_embeddings"),
        ("flamingo", {"max_position_embeddings": True}, "max_position_embeddings"),
        ("unknown", {"model_type": "no-such-type", "max_position_embeddings": 64.0}, "max_position_embeddings"),
    ],
)
def test_a_float_size_is_refused_elsewhere(tmp_path: Path, where: str, changes: dict[str, Any], word: str) -> None:
    """BERT's 64.0 (nn.Embedding refuses it), MusicFlamingo's out of range or not a number, and a float of a
    type transformers does not know: one FormatError naming the field."""
    base = bert_config() if where == "bert" else flamingo_config()
    folder = write_config(tmp_path / where, {**base, **changes})
    with pytest.raises(FormatError, match=word) as caught:
        read_config(folder)
    assert "\n" not in str(caught.value) and str(caught.value).endswith("fix the config")


def test_a_text_config_size_is_checked_as_its_own_type(tmp_path: Path) -> None:
    """MusicFlamingo's text_config is a Qwen2 config, whose hidden_size is an integer: 32.0 there is refused."""
    config = flamingo_config()
    config["text_config"] = {**config["text_config"], "hidden_size": 32.0}
    with pytest.raises(FormatError, match=r"text_config\.hidden_size must be an integer"):
        read_config(write_config(tmp_path / "flamingo", config))


def save(config: Any, folder: Path) -> Path:
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AutoModel.from_config(config).eval().save_pretrained(str(folder))
    return folder


def test_blts_width_is_its_token_embeddings(tmp_path: Path) -> None:
    """BLT's top config states no width; its four sub-configs four of their own here (32, 64, 48, 16): the
    width read is the local encoder's, where its byte tokens enter."""
    from transformers import BltConfig

    sizes = {"encoder_config": 32, "global_config": 64, "decoder_config": 48, "patcher_config": 16}
    common = {"num_attention_heads": 4, "num_hidden_layers": 1, "intermediate_size": 64, "vocab_size": 260}
    subs = {name: {**common, "hidden_size": width} for name, width in sizes.items()}
    for name in ("encoder_config", "decoder_config"):
        subs[name]["hidden_size_global"] = 64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = BltConfig(encoder_hash_byte_group_vocab=64, **subs)
    assert not hasattr(config, "hidden_size")
    checkpoint = load_checkpoint(str(save(config, tmp_path / "blt")))
    assert checkpoint.hidden_size == 32 == config.encoder_config.hidden_size


def test_musicflamingos_blocks_are_its_language_models(tmp_path: Path) -> None:
    """With 3 audio layers beside 2 text layers, the blocks are language_model.layers (its text config's
    count): the audio tower never runs on text."""
    import torch
    from transformers import AutoModel

    from geoanalyze.checkpoints.mechanism import layer_list

    config = build_config(generic_entry("musicflamingo", "rope"), 400)
    config.audio_config.num_hidden_layers = 3
    config.text_config.num_hidden_layers = 2
    checkpoint = load_checkpoint(str(save(config, tmp_path / "flamingo")))
    assert (checkpoint.mechanism.layers, checkpoint.mechanism.attention_layers) == (2, (1, 2))
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModel.from_config(config)
    blocks = layer_list(model, model.config)
    assert len(blocks) == 2 and all(a is b for a, b in zip(blocks, model.language_model.layers, strict=True))
