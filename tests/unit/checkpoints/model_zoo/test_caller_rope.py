"""NoPE decided by the caller: the model's forward hands a block its rotary tables, or None, per block.

LaRA-mini's attention rotates whatever tables it is given; its model's loop gives them only to the
sliding-window layers (``position_embeddings=position_embeddings if layer_type == "sliding_attention"
else None``), so its full-attention layers are NoPE. ``mechanism.caller_rope`` reads that loop, and a
block's own forward handing its attention None one level down. Each
test checks the reading against what the model does when it runs: a forward pre-hook on each block
(or attention module) sees whether ``position_embeddings`` arrives as None, and for LaRA-mini the
full-attention layer's output is recomputed with and without the rotation.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.checkpoints.mechanism import caller_rope, detect

from .zoo import TYPE_KINDS, build_config, generic_entry

torch = pytest.importorskip("torch")


class Block(torch.nn.Module):
    """A block that adds the tables it is given (none: its input unchanged)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def forward(self, x: Any, position_embeddings: Any = None) -> Any:
        return x if position_embeddings is None else x + position_embeddings


class Stack(torch.nn.Module):
    """Blocks of the given kinds; its subclasses' forwards hand them the tables in different ways."""

    def __init__(self, kinds: list[str]) -> None:
        super().__init__()
        self.config = SimpleNamespace(layer_types=list(kinds))
        self.layers = torch.nn.ModuleList(Block(kind) for kind in kinds)


class ByConfig(Stack):
    """LaRA-mini's loop: the layer type read from the config, a conditional expression."""

    def forward(self, x: Any, tables: Any) -> Any:
        for i, decoder_layer in enumerate(self.layers[: len(self.config.layer_types)]):
            layer_type = self.config.layer_types[i]
            x = decoder_layer(x, position_embeddings=tables if layer_type == "sliding_attention" else None)
        return x


class ByStatement(Stack):
    """An index loop, an if statement choosing the tables, the block called as self.layers[i]."""

    def forward(self, x: Any, tables: Any) -> Any:
        for i in range(len(self.layers)):
            if self.config.layer_types[i] in ("full_attention", "global"):
                layer_tables = None
            else:
                layer_tables = tables
            x = self.layers[i](x, position_embeddings=layer_tables)
        return x


class ByBlock(Stack):
    """The condition on the block's own attribute."""

    def forward(self, x: Any, tables: Any) -> Any:
        for layer in self.layers:
            x = layer(x, position_embeddings=None if layer.kind == "full_attention" else tables)
        return x


class NoneToAll(Stack):
    """Every block gets None (GLM-5-Next's NoPE)."""

    def forward(self, x: Any, tables: Any) -> Any:
        for decoder_layer in self.layers:
            x = decoder_layer(x, position_embeddings=None)
        return x


class ByInput(Stack):
    """A condition on the data: nothing the reading can decide (no block is called NoPE)."""

    def forward(self, x: Any, tables: Any) -> Any:
        for layer in self.layers:
            x = layer(x, position_embeddings=tables if float(x.sum()) > 0 else None)
        return x


class Inner(torch.nn.Module):
    """The attention inside a block: adds the tables it is given."""

    def forward(self, x: Any, position_embeddings: Any = None) -> Any:
        return x if position_embeddings is None else x + position_embeddings


class PassingBlock(torch.nn.Module):
    """A block whose own forward hands its attention the tables only where it uses RoPE."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.use_rope = kind != "full_attention"
        self.self_attn = Inner()

    def forward(self, x: Any, position_embeddings: Any = None) -> Any:
        return self.self_attn(x, position_embeddings=position_embeddings if self.use_rope else None)


class ToAll(Stack):
    """Every block gets the tables; the blocks decide (one level down)."""

    def __init__(self, kinds: list[str]) -> None:
        super().__init__(kinds)
        self.layers = torch.nn.ModuleList(PassingBlock(kind) for kind in kinds)

    def forward(self, x: Any, tables: Any) -> Any:
        for decoder_layer in self.layers:
            x = decoder_layer(x, position_embeddings=tables)
        return x


def handed_none(model: Any, modules: dict[int, Any], *inputs: Any) -> set[int]:
    """Run the model; the numbers of the modules whose position_embeddings arrived as None."""
    seen: dict[int, bool] = {}
    handles = []
    for number, module in modules.items():

        def hook(_: Any, args: Any, kwargs: Any, number: int = number) -> None:
            seen[number] = kwargs.get("position_embeddings", args[1] if len(args) > 1 else None) is None

        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    with torch.no_grad():
        model(*inputs)
    for handle in handles:
        handle.remove()
    assert set(seen) == set(modules), seen
    return {number for number, none in seen.items() if none}


KINDS = st.lists(st.sampled_from(["sliding_attention", "full_attention", "global"]), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(kinds=KINDS, stack=st.sampled_from([ByConfig, ByStatement, ByBlock, NoneToAll, ToAll]))
def test_the_blocks_read_as_nope_are_those_handed_none(kinds: list[str], stack: type[Stack]) -> None:
    model = stack(kinds)
    blocks = list(model.layers)
    read = caller_rope(model, blocks)
    hooked = {number: getattr(block, "self_attn", block) for number, block in enumerate(blocks, 1)}
    observed = handed_none(model, hooked, torch.ones(2), torch.ones(2))
    assert set(read) == set(range(1, len(blocks) + 1))  # every block's call is decided
    assert {block for block, passed in read.items() if not passed} == observed


def test_a_condition_on_the_data_makes_no_block_nope() -> None:
    model = ByInput(["full_attention", "sliding_attention"])
    assert not [block for block, passed in caller_rope(model, list(model.layers)).items() if not passed]
    blocks = dict(enumerate(model.layers, 1))
    assert handed_none(model, blocks, -torch.ones(2), torch.ones(2)) == {1, 2}  # decided at run time
    assert handed_none(model, blocks, torch.ones(2), torch.ones(2)) == set()


def test_a_model_whose_loop_passes_no_tables_is_not_read() -> None:
    model = Stack(["full_attention"])  # nn.Module's forward: no loop over the blocks
    assert caller_rope(model, list(model.layers)) == {}
    assert caller_rope(model, []) == {}


@pytest.fixture(scope="module")
def lara_mini() -> Any:
    """The zoo's tiny LaRA-mini (gated delta net, sliding attention, full attention), random weights, eager."""
    from transformers import AutoModel

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = build_config(generic_entry("lara_mini", TYPE_KINDS["lara_mini"]), 64)
        for key in ("linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads"):
            setattr(config, key, 4)  # a narrow gated delta net (its defaults make the build take seconds)
        return AutoModel.from_config(config, attn_implementation="eager").eval()


@pytest.mark.slow  # building LaRA-mini takes seconds
def test_lara_mini_nope_layers_are_the_ones_its_forward_hands_none(lara_mini: Any) -> None:
    config = lara_mini.config
    assert config.layer_types == ["linear_attention", "sliding_attention", "full_attention"]
    mechanism = detect(lara_mini, config)
    attention = {
        number: block.self_attn for number, block in enumerate(lara_mini.layers, 1) if hasattr(block, "self_attn")
    }
    assert set(mechanism.attention_layers) == set(attention) == {2, 3}
    observed = handed_none(lara_mini, attention, torch.tensor([[5, 9, 3, 17, 4, 8]]))
    assert observed == {3}
    nope = {number for number in attention if mechanism.rope_layers[number - 1] is None}
    assert nope == observed
    assert "blocks 3 apply no rotary embedding (NoPE); the others use RoPE" in mechanism.notes


@pytest.mark.slow  # building LaRA-mini takes seconds
def test_lara_mini_full_attention_output_is_the_unrotated_one(lara_mini: Any) -> None:
    """Block 3's attention output in the model's own pass equals its output without rotary tables and
    differs from its output with them: the model does not rotate there (block 2's does)."""
    ids = torch.tensor([[5, 9, 3, 17, 4, 8, 30, 2]])
    seen: dict[int, tuple[dict[str, Any], Any]] = {}
    handles = []
    for number in (2, 3):

        def hook(_: Any, args: Any, kwargs: Any, output: Any, number: int = number) -> None:
            seen[number] = (dict(kwargs), output[0])

        handles.append(lara_mini.layers[number - 1].self_attn.register_forward_hook(hook, with_kwargs=True))
    with torch.no_grad():
        lara_mini(input_ids=ids, use_cache=False)  # no cache: the calls below see the same keys
    for handle in handles:
        handle.remove()
    tables = lara_mini.rotary_emb(seen[3][0]["hidden_states"], torch.arange(ids.shape[1])[None])
    for number in (2, 3):
        attention = lara_mini.layers[number - 1].self_attn
        kwargs, output = seen[number]
        with torch.no_grad():  # the call as the model made it (its mask), with and without the tables
            plain = attention(**{**kwargs, "position_embeddings": None})[0]
            rotated = attention(**{**kwargs, "position_embeddings": tables})[0]
        same, other = (plain, rotated) if number == 3 else (rotated, plain)
        assert (output - same).abs().max() < 1e-6, number
        assert (output - other).abs().max() > 1e-4, number
