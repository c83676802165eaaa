"""Campaign 4, checkpoints from transformers' own config classes (docs/reliability.md): a DOTS.3 text
config (``dots3_note_text``) whose ``num_attention_heads`` is a per-layer attribute exited 3 with
"internal error (AmbiguousGlobalPerLayerAttributeError ...)": a heterogeneous config refuses a global
read of what its layers set apart. Per-layer attributes are now read per layer
(:func:`geoanalyze.checkpoints.mechanism.config_attr`)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from .harness import SAMPLES, Sandbox

QUICK = ["--null-draws", "2", "--compare", "", "--max-sequences", "32", "--limit", "60", "--min-count", "5"]


def dots3_config(**extra: Any) -> Any:
    """A tiny DOTS.3 text config: 4 layers (indexed, sliding, sliding, indexed attention), whose layers
    2 and 3 have 2 heads of the others' 4."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING["dots3_note_text"]
    values = {
        "vocab_size": 900, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
        "shared_experts_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "kv_lora_rank": 16,
        "q_lora_rank": 32, "qk_rope_head_dim": 8, "v_head_dim": 16, "qk_nope_head_dim": 16, "head_dim": 24,
        "index_topk": 16, "index_head_dim": 16, "index_n_heads": 2, "max_position_embeddings": 512,
        "sliding_window": 16, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
        "layer_types": ["indexed_attention", "sliding_attention", "sliding_attention", "indexed_attention"],
        "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
        "per_layer_config": {"01": {"num_attention_heads": 2, "num_key_value_heads": 2},
                             "02": {"num_attention_heads": 2, "num_key_value_heads": 2}},
        "rope_parameters": config_class().rope_parameters,
        **extra,
    }  # fmt: skip
    return config_class(**values)


@pytest.fixture(scope="module")
def dots3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoModel
    from unit.checkpoints.model_zoo.zoo import corpus_tokenizer

    folder = tmp_path_factory.mktemp("dots3") / "dots3"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AutoModel.from_config(dots3_config()).eval().save_pretrained(str(folder))
    corpus_tokenizer(SAMPLES / "drift-words.txt").save_pretrained(str(folder))
    return folder


def test_per_layer_attributes_are_read_per_layer() -> None:
    from geoanalyze.checkpoints.mechanism import config_attr

    config = dots3_config()
    assert [config_attr(config, "num_attention_heads", layer=i) for i in range(4)] == [4, 2, 2, 4]
    assert config_attr(config, "num_attention_heads") is None  # the layers differ: no one value
    assert config_attr(config, "num_attention_heads", 7) == 7
    assert config_attr(config, "hidden_size") == 64  # not per layer: read as it is
    same = dots3_config(per_layer_config={"01": {"num_attention_heads": 4}})
    assert config_attr(same, "num_attention_heads") == 4  # every layer agrees


def test_a_config_with_per_layer_heads_is_analysed(sandbox: Sandbox, dots3: Path) -> None:
    sandbox.copy_sample("drift-words.txt")
    run = sandbox.accepted("stress", dots3, "--dataset", "drift-words.txt", *QUICK, "-f", "json")
    document = json.loads(run.stdout)
    assert document["kind"] == "checkpoint"
    rows = {(row["layer"], row["projection"]) for row in document["layers"]}
    for layer in (1, 2, 3, 4):  # layers 2 and 3 have their own head count
        assert {(layer, "query"), (layer, "key"), (layer, "hidden")} <= rows, sorted(rows)


@pytest.fixture(scope="module")
def hrm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny HRM: two stacks (L and H) of two layers, run over H_cycles 2 and L_cycles 3: 16 blocks."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModel
    from unit.checkpoints.model_zoo.zoo import SPECIAL, corpus_tokenizer, tiny_values

    config_class = CONFIG_MAPPING["hrm_text"]
    values = tiny_values(config_class().to_dict(), 900)
    for key in ("model_type", "transformers_version", "architectures"):
        values.pop(key, None)
    values.update(SPECIAL, num_layers_per_stack=2, H_cycles=2, L_cycles=3, L_bp_cycles=[1], num_hidden_layers=16)
    folder = tmp_path_factory.mktemp("hrm") / "hrm"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AutoModel.from_config(config_class(**values)).eval().save_pretrained(str(folder))
    corpus_tokenizer(SAMPLES / "drift-words.txt").save_pretrained(str(folder))
    return folder


def test_blocks_reused_over_cycles_are_counted_as_they_run(sandbox: Sandbox, hrm: Path) -> None:
    """HRM (num_hidden_layers 16) was NoPE at layers 3-16, though every attention call applies RoPE, and
    its query/key rows of blocks 7-8 (the H stack's first run) were missing."""
    sandbox.copy_sample("drift-words.txt")
    run = sandbox.accepted("stress", hrm, "--dataset", "drift-words.txt", *QUICK, "-f", "json")
    document = json.loads(run.stdout)
    mechanism = document["checkpoint"]["position_mechanism"]
    assert mechanism["rope_layers"] == ["rotary"] * 16 and "nope_layers" not in mechanism
    rows = {(row["layer"], row["projection"]) for row in document["layers"]}
    assert {(block, kind) for block in range(1, 17) for kind in ("query", "key", "hidden")} <= rows
    by_block = {(row["layer"], row["projection"]): row["scaled_stress"] for row in document["layers"]}
    assert by_block[7, "query"] != by_block[1, "query"]  # the H stack's own, not a copy of the L stack's
