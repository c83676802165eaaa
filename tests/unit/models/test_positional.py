"""Positional encodings as modules: RoPE, ALiBi, the tables, the PE file, the attention mask."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from geoanalyze.encodings import standard
from geoanalyze.errors import IncompatibleError, InputError
from geoanalyze.models.attention import build_attention_mask
from geoanalyze.models.positional import (
    Alibi,
    LowRankTable,
    PositionTable,
    Rotary,
    alibi_bias,
    apply_rope,
    positional_encoding,
    rope_angles,
)


def n_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- RoPE ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("head_dim", "base"), [(8, 10000.0), (16, 500.0), (2, 10.0)])
def test_rope_rotation_of_unit_pairs_is_standard_rope(head_dim: int, base: float) -> None:
    """Rotating (1, 0) in every pair gives (cos i theta_k, sin i theta_k): encodings.standard.rope."""
    positions = torch.arange(40)
    angles = rope_angles(positions, head_dim, base)
    unit = torch.zeros(40, head_dim, dtype=torch.float64)
    unit[:, 0::2] = 1.0
    rotated = apply_rope(unit, angles.cos(), angles.sin())
    expected = standard.rope(np.arange(40), d=head_dim, base=base)
    np.testing.assert_allclose(rotated.numpy(), expected, rtol=0, atol=1e-12)


def test_rope_scores_depend_on_the_offset_only() -> None:
    """<R_i q, R_j k> = <R_{i+s} q, R_{j+s} k> for all shifts s, and changes with i - j."""
    generator = torch.Generator().manual_seed(3)
    head_dim = 8
    q = torch.randn(head_dim, dtype=torch.float64, generator=generator)
    k = torch.randn(head_dim, dtype=torch.float64, generator=generator)
    positions = torch.arange(64)
    angles = rope_angles(positions, head_dim)
    cos, sin = angles.cos(), angles.sin()
    rotated_q = apply_rope(q.expand(64, head_dim), cos, sin)  # row i: R_i q
    rotated_k = apply_rope(k.expand(64, head_dim), cos, sin)
    scores = rotated_q @ rotated_k.T  # (64, 64): entry (i, j) = <R_i q, R_j k>
    for shift in (1, 5, 17):
        np.testing.assert_allclose(scores[shift:, shift:].numpy(), scores[:-shift, :-shift].numpy(), atol=1e-12)
    # and the kernel is not constant: different offsets give different scores
    assert abs(float(scores[10, 3] - scores[10, 4])) > 1e-3


def test_apply_rope_keeps_shape_dtype_and_norms() -> None:
    x = torch.randn(2, 4, 10, 8)  # (B, nh, T, hs)
    angles = rope_angles(torch.arange(10), 8)
    y = apply_rope(x, angles.cos().float(), angles.sin().float())
    assert y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))


def test_rotary_module_caches_and_extrapolates() -> None:
    rotary = Rotary(head_dim=8, n_positions=16)
    cos, sin = rotary.rotation(12)
    assert cos.shape == (12, 4) and sin.shape == (12, 4)
    long_cos, long_sin = rotary.rotation(40)  # beyond the cache: computed on demand
    assert long_cos.shape == (40, 4)
    torch.testing.assert_close(long_cos[:12], cos)
    torch.testing.assert_close(long_sin[:12], sin)
    assert not any(True for _ in rotary.parameters()) and rotary.state_dict() == {}
    np.testing.assert_array_equal(rotary.position_vectors(20), standard.rope(np.arange(20), d=8))


def test_rope_angles_rejects_odd_head_dim() -> None:
    with pytest.raises(InputError, match="even head dimension"):
        rope_angles(torch.arange(3), 5)


# --- ALiBi --------------------------------------------------------------------------------------


@pytest.mark.parametrize("heads", [1, 4, 6])
@pytest.mark.parametrize("causal", [False, True])
def test_alibi_bias_equals_a_brute_force_loop(heads: int, causal: bool) -> None:
    slopes = standard.alibi_slopes(heads)
    length = 7
    expected = np.empty((heads, length, length))
    for h in range(heads):
        for i in range(length):
            for j in range(length):
                if causal and j > i:
                    expected[h, i, j] = -np.inf
                elif causal:
                    expected[h, i, j] = -slopes[h] * (i - j)
                else:
                    expected[h, i, j] = -slopes[h] * abs(i - j)
    got = alibi_bias(torch.as_tensor(slopes), length, causal)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-15, atol=0)
    module = Alibi(heads)
    np.testing.assert_allclose(module.attention_bias(length, causal).numpy(), expected, rtol=1e-6, atol=0)


def test_alibi_position_vectors_are_standard_alibi() -> None:
    module = Alibi(4)
    np.testing.assert_array_equal(module.position_vectors(9), standard.alibi(np.arange(9), heads=4))
    assert module.state_dict() == {}


# --- tables -------------------------------------------------------------------------------------


def test_low_rank_table_has_r_n_plus_d_parameters_and_equals_a_times_w(tiny) -> None:
    config = tiny(pe="lowrank", pe_rank=3)
    pe = positional_encoding(config)
    assert isinstance(pe, LowRankTable)
    n, d, r = config.n_positions, config.d_model, 3
    assert n_parameters(pe) == r * (n + d)
    assert pe.A.shape == (n, r) and pe.W.shape == (r, d)
    torch.testing.assert_close(pe.table(n), pe.A @ pe.W)
    np.testing.assert_allclose(pe.position_vectors(5), (pe.A[:5] @ pe.W).detach().double().numpy(), rtol=1e-6)
    # gradients reach both factors
    x = torch.zeros(2, n, d)
    pe.add_to(x).square().sum().backward()
    assert pe.A.grad is not None and pe.W.grad is not None


def test_low_rank_table_can_be_frozen(tiny) -> None:
    pe = positional_encoding(tiny(pe="lowrank", pe_trainable=False))
    assert n_parameters(pe) == 0
    assert set(pe.state_dict()) == {"A", "W"}


def test_sinusoidal_table_is_standard_sinusoidal_and_fixed(tiny) -> None:
    pe = positional_encoding(tiny(pe="sinusoidal"))
    assert isinstance(pe, PositionTable) and n_parameters(pe) == 0
    expected = standard.sinusoidal(np.arange(16), d=32)
    np.testing.assert_allclose(pe.position_vectors(16), expected, atol=1e-7)
    trained = positional_encoding(tiny(pe="sinusoidal", pe_trainable=True))
    assert n_parameters(trained) == 16 * 32
    np.testing.assert_allclose(trained.position_vectors(16), expected, atol=1e-7)


def test_learned_table_is_trained_by_default_and_can_be_frozen(tiny) -> None:
    assert n_parameters(positional_encoding(tiny(pe="learned"))) == 16 * 32
    assert n_parameters(positional_encoding(tiny(pe="learned", pe_trainable=False))) == 0


def test_table_rejects_too_many_positions(tiny) -> None:
    pe = positional_encoding(tiny(pe="learned"))
    with pytest.raises(InputError, match="n_positions 16"):
        pe.position_vectors(17)
    with pytest.raises(InputError, match="n_positions 16"):
        pe.add_to(torch.zeros(1, 17, 32))


def test_no_encoding_puts_every_position_at_one_point(tiny) -> None:
    pe = positional_encoding(tiny(pe="none"))
    np.testing.assert_array_equal(pe.position_vectors(5), np.zeros((5, 1)))
    x = torch.randn(2, 5, 32)
    assert pe.add_to(x) is x and pe.rotation(5) is None and pe.attention_bias(5, True) is None


# --- MDS PE files -------------------------------------------------------------------------------


def test_mds_file_loads_as_a_frozen_table(tiny, pe_file: Path) -> None:
    from safetensors.numpy import load_file

    expected = load_file(str(pe_file))["position_embeddings"]
    pe = positional_encoding(tiny(pe="mds", pe_file=str(pe_file)))
    assert isinstance(pe, PositionTable)
    assert pe.weight.requires_grad is False and n_parameters(pe) == 0
    np.testing.assert_array_equal(pe.weight.numpy(), expected)
    np.testing.assert_array_equal(pe.position_vectors(16), expected.astype(np.float64))
    trained = positional_encoding(tiny(pe="mds", pe_file=str(pe_file), pe_trainable=True))
    assert trained.weight.requires_grad is True and n_parameters(trained) == 16 * 32


def test_mds_file_takes_rows_by_their_position(tiny, write_pe, tmp_path: Path) -> None:
    """The file's rows may come in any order: row k holds position positions[k]."""
    path = tmp_path / "shuffled.safetensors"
    order = np.random.default_rng(0).permutation(20)
    encoding = write_pe(path, 20, 32, positions=order)
    pe = positional_encoding(tiny(pe="mds", pe_file=str(path)))
    table = encoding.position_embeddings.astype(np.float32)
    expected = table[np.argsort(order)][:16]
    np.testing.assert_array_equal(pe.weight.numpy(), expected)


def test_mds_file_too_small_or_wrong_width_is_refused(tiny, write_pe, tmp_path: Path) -> None:
    small = tmp_path / "small.safetensors"
    write_pe(small, 10, 32)
    with pytest.raises(IncompatibleError, match=r"no row for position 10.*n_positions to at most 10"):
        positional_encoding(tiny(pe="mds", pe_file=str(small)))
    gap = tmp_path / "gap.safetensors"
    write_pe(gap, 16, 32, positions=np.array([0, 1, 3, *range(4, 17)]))
    with pytest.raises(InputError, match="no row for position 2"):
        positional_encoding(tiny(pe="mds", pe_file=str(gap)))
    narrow = tmp_path / "narrow.safetensors"
    write_pe(narrow, 16, 24)
    with pytest.raises(InputError, match="--width 32"):
        positional_encoding(tiny(pe="mds", pe_file=str(narrow)))


def test_mds_file_missing_or_foreign_is_refused(tiny, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        positional_encoding(tiny(pe="mds", pe_file=str(tmp_path / "absent.safetensors")))
    from safetensors.numpy import save_file

    foreign = tmp_path / "foreign.safetensors"
    save_file({"position_embeddings": np.zeros((16, 32), dtype=np.float32)}, str(foreign))
    with pytest.raises(InputError, match="geoanalyze mds"):
        positional_encoding(tiny(pe="mds", pe_file=str(foreign)))


# --- the attention mask -------------------------------------------------------------------------


def test_attention_mask_is_none_without_bias_or_padding() -> None:
    assert build_attention_mask(5, causal=True) is None
    assert build_attention_mask(5, causal=False) is None


@pytest.mark.parametrize("causal", [False, True])
def test_attention_mask_combines_alibi_causality_and_padding(causal: bool) -> None:
    heads, length = 4, 6
    bias = alibi_bias(torch.as_tensor(standard.alibi_slopes(heads), dtype=torch.float32), length, causal)
    padding = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]])
    mask = build_attention_mask(length, causal=causal, bias=bias, padding=padding)
    assert mask is not None and mask.shape == (3, heads, length, length)
    lowest = torch.finfo(torch.float32).min
    for b in range(3):
        for i in range(length):
            for j in range(length):
                forbidden = (causal and j > i) or padding[b, j] == 0
                if forbidden:
                    assert torch.all(mask[b, :, i, j] == lowest)
                else:
                    torch.testing.assert_close(mask[b, :, i, j], bias[:, i, j])
    assert torch.isfinite(mask).all()


def test_attention_mask_from_padding_alone() -> None:
    padding = torch.tensor([[1, 1, 0]], dtype=torch.bool)
    mask = build_attention_mask(3, causal=False, padding=padding)
    assert mask is not None and mask.shape == (1, 1, 3, 3)
    assert torch.all(mask[..., :2] == 0) and torch.all(mask[..., 2] == torch.finfo(torch.float32).min)
