"""Axial position embeddings (Reformer): the table geoanalyze reads is what the model computes.

Reformer keeps no (positions, width) table: its AxialPositionEmbeddings holds one factor table per axis,
factor a of shape (1, .., n_a, .., 1, d_a), and its forward broadcasts them to (n_1, ..., n_k, d_a),
concatenates them along the width and flattens the positions. The reference here is the model's own
module, run in eval mode on position ids 0..n-1 (dropout off), on real tiny checkpoints saved with
``save_pretrained``; geoanalyze reads only the files and a skeleton on the meta device.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file, save_file

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.mechanism import LearnedTable, Mechanism, axial_table
from geoanalyze.errors import FormatError

#: (axial_pos_shape, axial_pos_embds_dim): square, and oblong with unequal widths (a transposed reading,
#: or factors concatenated in the other order, cannot pass the second)
SHAPES = [([8, 8], [16, 16]), ([4, 16], [8, 24])]


def reformer_config(shape: list[int], dims: list[int], **extra: Any) -> Any:
    from transformers import ReformerConfig

    return ReformerConfig(
        vocab_size=64,
        hidden_size=sum(dims),
        num_attention_heads=4,
        attention_head_size=8,
        attn_layers=["local", "lsh"],
        feed_forward_size=64,
        axial_pos_embds=True,
        axial_pos_shape=shape,
        axial_pos_embds_dim=dims,
        local_attn_chunk_length=8,
        lsh_attn_chunk_length=8,
        num_buckets=4,
        max_position_embeddings=int(np.prod(shape)),
        pad_token_id=0,
        **extra,
    )


@pytest.fixture(scope="module", params=SHAPES, ids=["8x8", "4x16"])
def reformer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A saved random-weight ReformerModel and the model itself (eval mode)."""
    from transformers import ReformerModel

    shape, dims = request.param
    torch.manual_seed(0)
    model = ReformerModel(reformer_config(shape, dims)).eval()
    folder = tmp_path_factory.mktemp("reformer")
    model.save_pretrained(str(folder))
    return folder, model


def model_positions(model: Any, n: int) -> np.ndarray:
    """The model's own position vectors of positions 0..n-1 (its AxialPositionEmbeddings, eval mode)."""
    module = model.embeddings.position_embeddings
    assert type(module).__name__ == "AxialPositionEmbeddings" and not module.training
    with torch.no_grad():
        return module(torch.arange(n)[None, :])[0].double().numpy()


def test_the_table_is_the_models_position_vectors(reformer: tuple[Path, Any]) -> None:
    folder, model = reformer
    checkpoint = load_checkpoint(str(folder))
    mechanism = checkpoint.mechanism
    positions = int(np.prod(model.config.axial_pos_shape))
    assert isinstance(mechanism, LearnedTable) and mechanism.kind == "learned"
    assert mechanism.factors == tuple(f"embeddings.position_embeddings.weights.{a}" for a in range(2))
    assert (mechanism.offset, checkpoint.max_positions) == (0, positions)
    assert mechanism.table_shape == (positions, model.config.hidden_size)
    # The factors are random (normal init), so every row differs and a misordered reading shows.
    np.testing.assert_array_equal(checkpoint.position_table(), model_positions(model, positions))


@pytest.mark.parametrize("n", [1, 13, 24])
def test_position_vectors_of_a_shorter_sequence(reformer: tuple[Path, Any], n: int) -> None:
    """The eval forward cuts the table to the columns a sequence needs: rows 0..n-1 are the same."""
    folder, model = reformer
    np.testing.assert_array_equal(
        load_checkpoint(str(folder)).position_vectors(np.arange(n)), model_positions(model, n)
    )


def test_the_mechanism_record_keeps_the_factors(reformer: tuple[Path, Any]) -> None:
    """A warm run reads the mechanism from its cache record: the factors survive the JSON round trip."""
    mechanism = load_checkpoint(str(reformer[0])).mechanism
    assert Mechanism.from_record(json.loads(json.dumps(mechanism.to_record()))) == mechanism


def test_three_axes_as_the_module_concatenates_them() -> None:
    """The general rule, for three axes: the module's training forward (dropout 0, a sequence of every
    position) flattens the broadcast factors as axial_table does."""
    from transformers.models.reformer.modeling_reformer import AxialPositionEmbeddings

    torch.manual_seed(1)
    module = AxialPositionEmbeddings(reformer_config([2, 3, 4], [8, 8, 16], hidden_dropout_prob=0.0)).train()
    for weight in module.weights:
        torch.nn.init.normal_(weight)
    with torch.no_grad():
        expected = module(torch.arange(24)[None, :])[0].double().numpy()
    ours = axial_table([weight.detach().numpy() for weight in module.weights])
    assert ours.shape == (24, 32)
    np.testing.assert_array_equal(ours, expected)


def test_a_factor_of_the_wrong_shape_is_refused(reformer: tuple[Path, Any], tmp_path: Path) -> None:
    """A factor stored transposed (1, n_1, d) instead of (n_0, 1, d) makes no table: one FormatError naming
    the factors, not a table of wrong rows."""
    import shutil

    folder = tmp_path / "transposed"
    shutil.copytree(reformer[0], folder)
    tensors = load_file(str(folder / "model.safetensors"))
    name = "embeddings.position_embeddings.weights.0"
    tensors[name] = np.ascontiguousarray(np.swapaxes(tensors[name], 0, 1))
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(FormatError, match="axial position factors"):
        load_checkpoint(str(folder)).position_table()
