"""The blocks of a model whose num_hidden_layers counts attention calls, not layers (LongCat-Flash: two
per layer, num_layers the layers): with one layer, its self_attn pair is a list of num_hidden_layers = 2
modules, and the blocks are still the model's one layer."""

from __future__ import annotations

import warnings

import pytest

from geoanalyze.checkpoints.mechanism import detect, layer_list

from .zoo import build_config, generic_entry


@pytest.mark.parametrize("layers", [1, 2])
def test_longcat_flash_blocks_are_its_layers(layers: int) -> None:
    import torch
    from transformers import AutoModel

    config = build_config(generic_entry("longcat_flash", "rope family=moe"), 400)
    config.num_layers, config.num_hidden_layers = layers, 2 * layers
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModel.from_config(config)
    blocks = layer_list(model, config)
    assert blocks == list(model.layers)  # the decoder layers, not one layer's two attentions
    assert detect(model, config).layers == layers
