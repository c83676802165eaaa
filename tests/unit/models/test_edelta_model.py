"""The GPT-style model with a pluggable residual: presets, shapes, causality, plain blocks = nanoGPT's, validation."""

from __future__ import annotations

import pytest
import torch

from geoanalyze.errors import InputError
from geoanalyze.models.edelta import (
    MODEL_NAMES,
    BareOperator,
    EDeltaConfig,
    EDeltaModel,
    count_parameters,
    preset_config,
)
from geoanalyze.models.residual import RESIDUALS

SMALL = {"n_embd": 16, "n_layers": 2, "n_heads": 2, "n_streams": 4, "d_in": 5, "hidden": 4}


pytestmark = pytest.mark.usefixtures("one_thread")


def test_presets_are_matched_at_the_papers_size(capsys: pytest.CaptureFixture[str]) -> None:
    counts = {name: count_parameters(EDeltaModel(preset_config(name))) for name in MODEL_NAMES}
    with capsys.disabled():
        print("\nparameters (d_in 16):", counts)
    for name, count in counts.items():
        assert 1.72e6 <= count <= 1.84e6, (name, count)
    assert abs(counts["edelta"] - counts["gpt"]) / counts["gpt"] < 0.01


@pytest.mark.parametrize("residual", RESIDUALS)
def test_every_residual_runs_forward_and_backward(residual: str) -> None:
    model = EDeltaModel(EDeltaConfig(residual=residual, **SMALL))
    x = torch.randn(3, 7, 5)
    y = model(x)
    assert y.shape == (3, 7, 5)
    (y.square().mean() + model.aux_loss()).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("residual", RESIDUALS)
def test_token_pooling_is_causal(residual: str) -> None:
    model = EDeltaModel(EDeltaConfig(residual=residual, **SMALL)).eval()
    x = torch.randn(2, 6, 5)
    changed = x.clone()
    changed[:, 4:] += torch.randn(2, 2, 5)
    assert torch.allclose(model(x)[:, :4], model(changed)[:, :4], atol=1e-6)


def test_sequence_pooling_is_not_causal() -> None:
    model = EDeltaModel(EDeltaConfig(residual="hybrid", pooling="sequence", **SMALL)).eval()
    for block in model.blocks:
        nets = block.res_attn.nets
        torch.nn.init.normal_(nets.first.weight[nets.linear_slice("gate")], std=1.0)
    x = torch.randn(2, 6, 5)
    changed = x.clone()
    changed[:, 5] += 2.0
    assert not torch.allclose(model(x)[:, :5], model(changed)[:, :5])


def test_plain_block_is_nanogpts_block() -> None:
    model = EDeltaModel(EDeltaConfig(residual="plain", **SMALL)).eval()
    block = model.blocks[0]
    h = torch.randn(2, 5, 16)
    expected = h + block.attn(block.ln_1(h))
    expected = expected + block.mlp(block.ln_2(expected))
    assert torch.allclose(block(h), expected, atol=1e-6)


def test_geometric_block_is_g_plus_post_branch_pre() -> None:
    model = EDeltaModel(EDeltaConfig(residual="cayley", **SMALL)).eval()
    block = model.blocks[0]
    residual = block.res_attn
    torch.nn.init.normal_(residual.pre.weight)
    h = torch.randn(2, 5, 16)
    g = residual.operator(h)
    expected = g + residual.post(block.attn(residual.pre(block.ln_1(g))))
    assert torch.allclose(residual(h, block.ln_1, block.attn), expected, atol=1e-6)


def test_gate_starts_at_the_bias_and_shortcut_of_collapsed_hybrids_keeps_norms() -> None:
    model = EDeltaModel(EDeltaConfig(residual="hybrid", gate_bias=-40.0, **SMALL))
    model(torch.randn(1, 3, 5))
    assert model.gate() == pytest.approx(0.0, abs=1e-9)
    h = torch.randn(2, 4, 16)
    assert torch.allclose(model.shortcut(h).norm(dim=-1), h.norm(dim=-1), rtol=1e-5)
    assert EDeltaModel(EDeltaConfig(residual="plain", **SMALL)).gate() is None


class _KIsX(torch.nn.Module):
    def forward(self, c: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"k": c}


def test_bare_operator_negates_when_reflecting_along_x() -> None:
    op = BareOperator("householder", d=8, hidden=4)
    x = torch.randn(5, 8)
    assert op(x).shape == (5, 8)
    op.residual.nets = _KIsX()  # type: ignore[assignment]  (k(x) = x: H_2(x) x = -x exactly)
    assert torch.allclose(op(x), -x, atol=1e-5)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"residual": "resnet"}, "unknown residual 'resnet'"),
        ({"n_embd": 30, "n_heads": 3, "n_streams": 4}, "not divisible by n_streams"),
        ({"n_heads": 5}, "not divisible by n_heads"),
        ({"pooling": "max"}, "unknown pooling"),
        ({"gate_bias": float("nan")}, "gate_bias"),
        ({"gate_weight": -0.1}, "gate_weight"),
        ({"beta_max": 2.5}, "beta_max"),
        ({"n_layers": 0}, "n_layers"),
    ],
)
def test_bad_configs_raise_one_clear_error(fields: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        EDeltaConfig(**fields)  # type: ignore[arg-type]


def test_unknown_preset_and_wrong_input_shape() -> None:
    with pytest.raises(InputError, match="unknown model 'bert'"):
        preset_config("bert")
    model = EDeltaModel(EDeltaConfig(**SMALL))
    with pytest.raises(InputError, match="expected"):
        model(torch.randn(2, 3, 4))


# --- the reference code's models (protocol=reference) ----------------------------------------------

#: parameters of the reference code's five models (arash-shahmansoori/edelta f51372f, train_continuous.py
#: --match_proposed_params, gyroscope: d_in 16, 256 positions), counted by instantiating that code, less
#: the two tables it counts but never uses (its GPT core's 1 x d token table and 256 x d position table)
REFERENCE_COUNTS = {"gpt": 1808912, "ddl": 1812256, "mhc": 1866998, "jpmhc": 1885616, "edelta": 1816376}


def test_reference_presets_have_the_reference_codes_parameter_counts() -> None:
    for name, expected in REFERENCE_COUNTS.items():
        config = preset_config(name, reference=True, d_in=16, positions=256)
        assert count_parameters(EDeltaModel(config)) == expected, name
    assert preset_config("jpmhc", reference=True).n_embd == 512
    assert preset_config("jpmhc", reference=True).branch_width == 128


def test_reference_init_draws_every_linear_and_keeps_only_the_gate() -> None:
    config = preset_config("edelta", reference=True, d_in=8, n_embd=64, n_layers=2, positions=10)
    model = EDeltaModel(config)
    residual = model.blocks[0].res_attn
    nets = residual.nets
    gate = nets.linear_slice("gate")
    assert torch.count_nonzero(nets.first.weight[gate]) == 0 and torch.all(nets.first.bias[gate] == 0.0)
    others = torch.cat([nets.first.weight[: gate.start].flatten(), nets.second["u"].weight.flatten()]).detach()
    assert 0.015 < float(others.std()) < 0.025  # N(0, 0.02), not PyTorch's default
    assert not torch.allclose(residual.pre.weight, torch.eye(64))  # the maps are re-drawn too
    assert model.pos is not None and 0.015 < float(model.pos.detach().std()) < 0.025
    ours = EDeltaModel(preset_config("edelta", d_in=8, n_embd=64, n_layers=2))
    assert torch.equal(ours.blocks[0].res_attn.pre.weight, torch.eye(64))


def test_reference_models_have_no_branch_biases_and_pool_edelta_and_ddl_over_the_sequence() -> None:
    x = torch.randn(2, 6, 5)
    changed = x.clone()
    changed[:, 5] += 2.0
    for name in MODEL_NAMES:
        config = preset_config(name, reference=True, d_in=5, n_embd=16, n_layers=1, positions=6)
        model = EDeltaModel(config).eval()
        block = model.blocks[0]
        assert block.attn.qkv.bias is None and block.mlp.proj.bias is None and block.ln_1.bias is None
        causal = torch.allclose(model(x)[:, :5], model(changed)[:, :5], atol=1e-6)
        assert causal is (config.pooling == "token"), name
        assert (config.pooling == "sequence") is (name in ("ddl", "edelta"))


def test_position_table_breaks_permutation_equivariance_and_bounds_the_length() -> None:
    model = EDeltaModel(EDeltaConfig(residual="plain", positions=4, **SMALL)).eval()
    x = torch.randn(1, 1, 5).expand(1, 4, 5)  # the same vector at every position
    y = model(x)
    assert not torch.allclose(y[0, 0], y[0, 3])  # position 0 sees what position 3 sees, but has its own vector
    with pytest.raises(InputError, match="position table"):
        model(torch.randn(1, 5, 5))


def test_entropy_gate_in_the_model_and_bad_new_fields() -> None:
    model = EDeltaModel(EDeltaConfig(residual="hybrid", gate="entropy", **SMALL))
    model(torch.randn(2, 3, 5))
    assert model.gate() == pytest.approx(0.5)  # logit 0 at init: sigmoid(0 (1 + phi))
    for fields, message in (
        ({"gate": "thermo"}, "unknown gate"),
        ({"init": "xavier"}, "unknown init"),
        ({"positions": -1}, "positions"),
    ):
        with pytest.raises(InputError, match=message):
            EDeltaConfig(**fields)  # type: ignore[arg-type]


def test_reference_bare_operators() -> None:
    x = torch.randn(5, 8)
    hybrid = BareOperator("hybrid", d=8, hidden=4, reference=True)
    assert hybrid.residual.unit  # type: ignore[union-attr]
    before = hybrid(x)
    with torch.no_grad():  # the lengths of u and v do not matter once normalised
        hybrid.residual.nets.second["u"].weight.mul_(3.0)  # type: ignore[union-attr]
        hybrid.residual.nets.second["u"].bias.mul_(3.0)  # type: ignore[union-attr]
    assert torch.allclose(hybrid(x), before, atol=1e-5)
    dense = BareOperator("jpmhc", d=8, hidden=4, reference=True)
    raw = dense.residual.nets(x[:, None])["w"].view(5, 8, 8)  # type: ignore[union-attr]
    w = raw - raw.transpose(-1, -2)
    y = torch.eye(8) + 0.1 * w + 0.005 * w @ w  # two iterations from Y_0 = I
    assert torch.allclose(dense(x), (y @ x[:, :, None])[..., 0], atol=1e-5)
    assert count_parameters(dense) == (8 * 4 + 4) + (4 * 64 + 64)
