"""The transformer: shapes, causality, padding, Theorem 1's permutation equivariance, heads, save / load, configs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from geoanalyze.errors import FormatError, InputError
from geoanalyze.models import ModelConfig, Transformer

KINDS = ["none", "sinusoidal", "learned", "lowrank", "rope", "alibi"]


def build(tiny, pe: str, pe_file: Path | None = None, **overrides: Any) -> Transformer:
    if pe == "mds":
        overrides["pe_file"] = str(pe_file)
    return Transformer(tiny(pe=pe, **overrides)).eval()


def tokens(batch: int = 2, length: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 50, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ["bert", "gpt"])
@pytest.mark.parametrize("pe", [*KINDS, "mds"])
def test_output_shapes(tiny, pe_file: Path, arch: str, pe: str) -> None:
    model = build(tiny, pe, pe_file, arch=arch, n_classes=3)
    out = model(tokens(2, 10))
    assert out["hidden_states"].shape == (2, 10, 32)
    assert out["logits"].shape == (2, 10, 50)
    assert out["cls_logits"].shape == (2, 3)
    assert all(torch.isfinite(value).all() for value in out.values())
    assert "cls_logits" not in build(tiny, pe, pe_file, arch=arch)(tokens())


@pytest.mark.parametrize("pe", KINDS)
@pytest.mark.parametrize("with_mask", [False, True])
def test_gpt_is_causal(tiny, pe: str, with_mask: bool) -> None:
    """Changing tokens t+1.. leaves every output at positions <= t unchanged."""
    model = build(tiny, pe, arch="gpt", n_classes=2)
    ids = tokens(3, 12)
    mask = torch.ones_like(ids) if with_mask else None  # an explicit mask takes the additive path
    reference = model(ids, mask)
    for t in (0, 5, 10):
        changed = ids.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 7) % 50
        out = model(changed, mask)
        for key in ("hidden_states", "logits"):
            assert (out[key][:, : t + 1] - reference[key][:, : t + 1]).abs().max() < 1e-6
        assert (out["logits"][:, t + 1 :] - reference["logits"][:, t + 1 :]).abs().max() > 1e-4


@pytest.mark.parametrize("arch", ["bert", "gpt"])
@pytest.mark.parametrize("pe", KINDS)
def test_padding_is_ignored(tiny, arch: str, pe: str) -> None:
    """With right padding, real positions do not depend on the padded tokens."""
    model = build(tiny, pe, arch=arch)
    ids = tokens(2, 9)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    reference = model(ids, mask)["hidden_states"]
    changed = ids.clone()
    changed[1, 6:] = (changed[1, 6:] + 3) % 50
    out = model(changed, mask)["hidden_states"]
    assert (out[1, :6] - reference[1, :6]).abs().max() < 1e-6
    # a sequence of its own, cut at its length, gives the same states
    alone = model(ids[1:, :6])["hidden_states"]
    assert (alone[0] - reference[1, :6]).abs().max() < 1e-5


def test_left_padding_gives_finite_outputs(tiny) -> None:
    model = build(tiny, "alibi", arch="gpt", n_classes=2)
    ids = tokens(2, 8)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # the first queries see only padding
    out = model(ids, mask)
    assert all(torch.isfinite(value).all() for value in out.values())


def test_without_positions_bert_is_permutation_equivariant(tiny) -> None:
    """Theorem 1: permuting the tokens permutes the hidden states."""
    model = build(tiny, "none", arch="bert")
    ids = tokens(3, 12)
    permutation = torch.randperm(12, generator=torch.Generator().manual_seed(1))
    reference = model(ids)["hidden_states"]
    permuted = model(ids[:, permutation])["hidden_states"]
    assert (permuted - reference[:, permutation]).abs().max() < 1e-5


@pytest.mark.parametrize("pe", [*KINDS[1:], "mds"])
def test_any_positional_encoding_breaks_permutation_equivariance(tiny, pe_file: Path, pe: str) -> None:
    model = build(tiny, pe, pe_file, arch="bert")
    ids = tokens(3, 12)
    permutation = torch.randperm(12, generator=torch.Generator().manual_seed(1))
    reference = model(ids)["hidden_states"]
    permuted = model(ids[:, permutation])["hidden_states"]
    assert (permuted - reference[:, permutation]).abs().max() > 1e-3


def test_heads_are_tied_to_the_token_embedding(tiny) -> None:
    bert = build(tiny, "learned", arch="bert")
    out = bert(tokens())
    assert bert.mlm_transform is not None
    expected = bert.mlm_transform(out["hidden_states"]) @ bert.tok_emb.weight.T + bert.mlm_bias
    torch.testing.assert_close(out["logits"], expected)
    gpt = build(tiny, "learned", arch="gpt")
    out = gpt(tokens())
    torch.testing.assert_close(out["logits"], out["hidden_states"] @ gpt.tok_emb.weight.T)
    # one V x d matrix, not two
    assert sum(1 for p in gpt.parameters() if p.shape == (50, 32)) == 1


def test_classification_reads_cls_for_bert_and_the_last_token_for_gpt(tiny) -> None:
    bert = build(tiny, "learned", arch="bert", n_classes=3)
    out = bert(tokens())
    assert bert.classifier is not None
    torch.testing.assert_close(out["cls_logits"], bert.classifier(out["hidden_states"][:, 0]))
    gpt = build(tiny, "rope", arch="gpt", n_classes=3)
    ids = tokens(2, 9)
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    padded = gpt(ids, mask)["cls_logits"]
    torch.testing.assert_close(padded[0], gpt(ids[:1, :6])["cls_logits"][0], atol=1e-5, rtol=0)
    torch.testing.assert_close(padded[1], gpt(ids[1:])["cls_logits"][0], atol=1e-5, rtol=0)


def test_training_mode_gives_gradients_everywhere_trainable(tiny) -> None:
    model = Transformer(tiny(pe="lowrank", arch="bert", n_classes=2, dropout=0.1)).train()
    out = model(tokens())
    (out["logits"].logsumexp(-1).mean() + out["cls_logits"].sum()).backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    assert missing == []


def test_rope_and_alibi_extrapolate_but_tables_do_not(tiny) -> None:
    for pe in ("rope", "alibi", "none"):
        assert build(tiny, pe, arch="gpt")(tokens(1, 24))["logits"].shape == (1, 24, 50)
    with pytest.raises(InputError, match="n_positions 16"):
        build(tiny, "learned")(tokens(1, 24))


def test_bad_inputs_raise_input_error(tiny) -> None:
    model = build(tiny, "learned")
    with pytest.raises(InputError, match="batch, length"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(InputError, match="one mask entry per token"):
        model(tokens(2, 6), torch.ones(2, 5))


# --- save / load --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"arch": "bert", "pe": "learned", "n_classes": 3},
        {"arch": "bert", "pe": "sinusoidal"},
        {"arch": "bert", "pe": "lowrank", "pe_rank": 5},
        {"arch": "gpt", "pe": "rope", "rope_base": 500.0, "n_classes": 2},
        {"arch": "gpt", "pe": "alibi"},
        {"arch": "bert", "pe": "none"},
    ],
)
def test_save_load_round_trip(tiny, tmp_path: Path, options: dict[str, Any]) -> None:
    model = Transformer(tiny(**options)).eval()
    # trained weights differ from a fresh model's, so the load really reads them
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    model.save(tmp_path / "model")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["config.json", "model.safetensors"]
    loaded = Transformer.load(tmp_path / "model")
    assert loaded.config == model.config and not loaded.training
    ids, mask = tokens(2, 10), torch.ones(2, 10)
    mask[0, 7:] = 0
    expected, got = model(ids, mask), loaded(ids, mask)
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key])


def test_saved_mds_model_no_longer_needs_its_pe_file(tiny, write_pe, tmp_path: Path) -> None:
    pe_path = tmp_path / "pe.safetensors"
    write_pe(pe_path, 16, 32)
    model = Transformer(tiny(pe="mds", pe_file=str(pe_path))).eval()
    model.save(tmp_path / "model")
    pe_path.unlink()
    loaded = Transformer.load(tmp_path / "model")
    assert loaded.pe.weight.requires_grad is False
    ids = tokens()
    assert torch.equal(model(ids)["logits"], loaded(ids)["logits"])


def test_load_refuses_missing_and_mismatched_folders(tiny, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"Transformer\.save"):
        Transformer.load(tmp_path / "absent")
    Transformer(tiny(pe="learned")).save(tmp_path / "model")
    config_file = tmp_path / "model" / "config.json"
    document = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**document, "d_ff": 48}))
    with pytest.raises(FormatError, match="does not fit"):
        Transformer.load(tmp_path / "model")
    config_file.write_text(json.dumps({**document, "width": 48}))
    with pytest.raises(InputError, match="unknown model configuration key 'width'"):
        Transformer.load(tmp_path / "model")
    config_file.write_text("{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        Transformer.load(tmp_path / "model")


# --- configuration ------------------------------------------------------------------------------


def test_config_round_trips_through_json(tiny) -> None:
    config = tiny(arch="gpt", pe="lowrank", pe_rank=3, pe_trainable=False, n_classes=4)
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert ModelConfig.from_dict({}) == ModelConfig()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"arch": "t5"}, "unknown arch 't5'; choose one of bert, gpt"),
        ({"pe": "xpos"}, "choose one of none, sinusoidal, learned, lowrank, mds, rope, alibi"),
        ({"n_heads": 5}, "not divisible by n_heads"),
        ({"pe": "rope", "d_model": 36, "n_heads": 4}, "even head dimension"),
        ({"pe": "rope", "rope_base": 1.0}, "rope_base must exceed 1"),
        ({"pe": "sinusoidal", "d_model": 33, "n_heads": 3}, "even d_model"),
        ({"pe": "lowrank", "pe_rank": None}, "needs pe_rank"),
        ({"pe": "lowrank", "pe_rank": 0}, "pe_rank must be at least 1"),
        ({"pe": "lowrank", "pe_rank": 17}, "pe_rank <= 16"),
        ({"pe": "learned", "pe_rank": 4}, "pe_rank applies to pe 'lowrank' only"),
        ({"pe": "mds"}, "needs its PE file: pass --set model.pe_file=PATH"),
        ({"pe": "learned", "pe_file": "pe.safetensors"}, "pe_file applies to pe 'mds' only"),
        ({"pe": "rope", "pe_trainable": True}, "no parameters to train"),
        ({"pe": "learned", "pe_trainable": "yes"}, "pe_trainable must be true, false or null"),
        ({"d_model": 32.0}, "d_model must be an integer"),
        ({"n_layers": True}, "n_layers must be an integer"),
        ({"vocab_size": 0}, "vocab_size must be at least 1"),
        ({"n_classes": -1}, "n_classes must be at least 0"),
        ({"dropout": 1.0}, r"dropout must be within \[0, 1\)"),
        ({"dropout": "0.1"}, "dropout must be a number"),
    ],
)
def test_invalid_configs_raise_input_error(tiny, options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        tiny(**options)


def test_from_dict_rejects_unknown_keys_and_non_objects() -> None:
    with pytest.raises(InputError, match="unknown model configuration key 'hidden_size'; known keys: arch"):
        ModelConfig.from_dict({"hidden_size": 32})
    with pytest.raises(InputError, match="JSON object"):
        ModelConfig.from_dict([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("arch", ["bert", "gpt"])
def test_logits_at_selected_positions_equal_the_full_logits_there(tiny, arch: str) -> None:
    model = Transformer(tiny(arch=arch)).eval()
    ids = torch.randint(0, 50, (3, 10))
    at = torch.rand(3, 10) < 0.3
    at[0, 0] = True  # at least one
    with torch.no_grad():
        full = model(ids)["logits"]
        selected = model(ids, logits_at=at)["logits"]
    assert selected.shape == (int(at.sum()), 50)
    torch.testing.assert_close(selected, full[at], rtol=0, atol=1e-6)


def test_all_hidden_states_are_the_embeddings_and_every_block_output(tiny) -> None:
    model = Transformer(tiny(pe="learned")).eval()
    ids = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        outputs = model(ids, all_hidden_states=True)
        layers = outputs["layers"]
        assert layers.shape == (tiny().n_layers + 1, 2, 7, 32)
        torch.testing.assert_close(layers[0], model.pe.add_to(model.tok_emb(ids)))
        x = layers[0]
        for index, block in enumerate(model.blocks, start=1):
            x = block(x)
            torch.testing.assert_close(layers[index], x)
        torch.testing.assert_close(model.ln_f(layers[-1]), outputs["hidden_states"])


def test_position_vectors_of_a_model_are_its_encodings(tiny) -> None:
    model = Transformer(tiny(pe="learned"))
    assert model.position_vectors(5).shape == (5, 32)
    torch.testing.assert_close(torch.as_tensor(model.position_vectors(5)), model.pe.weight[:5].double().detach())
