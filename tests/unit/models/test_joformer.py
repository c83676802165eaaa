"""JoFormer attention (models/joformer.py), its ViT (models/vit.py) and the lm task: factored vs materialized."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.encodings import standard
from geoanalyze.errors import InputError
from geoanalyze.models import ModelConfig, Transformer
from geoanalyze.models.attention import SelfAttention, build_attention_mask
from geoanalyze.models.joformer import (
    JoFormerAttention,
    axis_frequencies,
    dense_journey_attention,
    grid_positions,
    journey_attention,
    materialized_journey_attention,
)
from geoanalyze.models.journey import block_rotation
from geoanalyze.models.positional import Rotary
from geoanalyze.models.transformer import make_attention
from geoanalyze.models.vit import ViT, ViTConfig
from geoanalyze.train import build_task, resolve_config, train
from geoanalyze.train.tasks import LMTask, lm_batch

SETTINGS = settings(max_examples=20, deadline=None)
JOFORMER = {"pe": "none", "dropout": 0.0, "vocab_size": 40, "n_positions": 16, "d_model": 32, "n_heads": 4}
ATTENTIONS = ["joformer-fixed", "joformer-learned", "joformer-projected"]


def config(**overrides: Any) -> ModelConfig:
    return ModelConfig(**{**JOFORMER, "n_layers": 2, "d_ff": 64, "attention": "joformer-fixed", **overrides})


def brute_force(q: np.ndarray, k: np.ndarray, v: np.ndarray, angles: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """c_k = sum_j alpha_kj P_{j->k} v_j with explicit block matrices and loops: an independent float64 oracle.

    q, k, v (T, hs); angles (T, hs/2); allowed (T, T) bool (key j visible from query i).
    """
    T, hs = q.shape
    frames = [block_rotation(angles[t]) for t in range(T)]
    out = np.zeros((T, hs))
    for i in range(T):
        scores = np.array([(frames[i] @ q[i]) @ (frames[j] @ k[j]) / math.sqrt(hs) for j in range(T)])
        scores = np.where(allowed[i], scores, -np.inf)
        weights = np.exp(scores - scores.max())
        weights /= weights.sum()
        for j in range(T):
            out[i] += weights[j] * (frames[i] @ frames[j].T @ v[j])  # P_{j->i} = F_i F_j^{-1}
    return out


# --- the factored attention against the references ---------------------------------------------


@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(1, 9),
    st.sampled_from([2, 4, 8]),
    st.sampled_from(["none", "causal", "padding", "padding+causal"]),
    st.booleans(),
)
@SETTINGS
def test_factored_equals_materialized_in_float32(
    seed: int, B: int, nh: int, T: int, hs: int, masking: str, per_head: bool
) -> None:
    """Random inputs, angles (shared or per batch and head), masks: agreement to float32 round-off."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, nh, T, hs, generator=gen) for _ in range(3))
    shape = (B, nh, T, hs // 2) if per_head else (T, hs // 2)
    angles = torch.randn(*shape, generator=gen) * 5
    padding = None
    if "padding" in masking:
        padding = torch.ones(B, T, dtype=torch.long)
        padding[0, T // 2 + 1 :] = 0
    causal = "causal" in masking
    mask = build_attention_mask(T, causal=causal, padding=padding)
    fast = journey_attention(q, k, v, angles, mask=mask, causal=causal)
    slow = materialized_journey_attention(q, k, v, angles, mask=mask, causal=causal)
    torch.testing.assert_close(fast, slow, atol=2e-5, rtol=2e-5)


@given(st.integers(0, 2**31 - 1), st.integers(1, 7), st.sampled_from([2, 4, 6]), st.booleans())
@SETTINGS
def test_factored_equals_an_independent_brute_force(seed: int, T: int, hs: int, causal: bool) -> None:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((T, hs)) for _ in range(3))
    angles = rng.uniform(-20, 20, (T, hs // 2))
    allowed = np.tril(np.ones((T, T), dtype=bool)) if causal else np.ones((T, T), dtype=bool)
    expected = brute_force(q, k, v, angles, allowed)
    as_t = [torch.as_tensor(a)[None, None] for a in (q, k, v)]
    ours = journey_attention(*as_t, torch.as_tensor(angles), causal=causal)[0, 0]
    np.testing.assert_allclose(ours.numpy(), expected, atol=1e-10)


def test_dense_frames_equal_toral_frames_built_as_matrices() -> None:
    """dense_journey_attention with the block matrices of the angles gives the toral result."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 6, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    angles = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    frames = torch.as_tensor(np.stack([block_rotation(a) for a in angles.numpy()]))
    for causal in (False, True):
        torch.testing.assert_close(
            dense_journey_attention(q, k, v, frames, causal=causal), journey_attention(q, k, v, angles, causal=causal)
        )


def test_without_value_transport_it_is_rope_attention() -> None:
    """transport_values=False, fixed frequencies: exactly SelfAttention with RoPE (same weights)."""
    torch.manual_seed(0)
    jo = JoFormerAttention(config(), transport_values=False)
    rope = SelfAttention(config(attention="standard", pe="rope"))
    rope.load_state_dict({k: v for k, v in jo.state_dict().items() if not k.startswith("journey")})
    x = torch.randn(2, 9, 32)
    torch.testing.assert_close(jo(x), rope(x, Rotary(8, 16).rotation(9)))


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_modules_match_the_oracle_with_their_own_angles(attention: str) -> None:
    """The module's output equals the materialized oracle fed the module's q, k, v and angles."""
    torch.manual_seed(1)
    module = JoFormerAttention(config(attention=attention, arch="gpt")).eval()
    x = torch.randn(2, 7, 32)
    B, T, C = x.shape
    q, k, v = (t.view(B, T, 4, 8).transpose(1, 2) for t in module.qkv(x).split(C, dim=2))
    y = materialized_journey_attention(q, k, v, module.journey.frames(x), causal=True)
    expected = module.proj(y.transpose(1, 2).reshape(B, T, C))
    torch.testing.assert_close(module(x), expected, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_causal_models_do_not_look_ahead(attention: str) -> None:
    """Changing token t changes no output before t (the projected cumsum is causal too)."""
    torch.manual_seed(2)
    model = Transformer(config(attention=attention, arch="gpt")).eval()
    ids = torch.randint(0, 40, (1, 12))
    changed = ids.clone()
    changed[0, 8] = (ids[0, 8] + 1) % 40
    a, b = model(ids)["logits"], model(changed)["logits"]
    torch.testing.assert_close(a[:, :8], b[:, :8])
    assert not torch.allclose(a[:, 8:], b[:, 8:])


def test_fixed_variant_is_translation_equivariant_and_learned_starts_equal() -> None:
    torch.manual_seed(3)
    fixed = JoFormerAttention(config())
    learned = JoFormerAttention(config(attention="joformer-learned"))
    learned.load_state_dict(fixed.state_dict(), strict=False)
    x = torch.randn(1, 10, 32)
    torch.testing.assert_close(fixed(x), learned(x))
    q, k, v = (torch.randn(1, 2, 10, 8, dtype=torch.float64) for _ in range(3))
    W = axis_frequencies(8, 10000.0, 1)
    positions = torch.arange(10, dtype=torch.float64)[:, None]
    torch.testing.assert_close(
        journey_attention(q, k, v, positions @ W), journey_attention(q, k, v, (positions + 123) @ W)
    )


def test_padding_keys_are_ignored() -> None:
    """Right padding: the real tokens' outputs equal those of the unpadded sequence."""
    torch.manual_seed(4)
    for attention in ATTENTIONS:
        model = Transformer(config(attention=attention)).eval()
        ids = torch.randint(0, 40, (1, 6))
        padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
        mask = torch.tensor([[1] * 6 + [0] * 3])
        torch.testing.assert_close(model(padded, mask)["logits"][:, :6], model(ids)["logits"], atol=1e-5, rtol=1e-5)


# --- 2-D grids ---------------------------------------------------------------------------------


def test_axial_grid_angles_are_2d_rope() -> None:
    """Fixed on a grid: rows turn the first half of the pairs, columns the second, both at RoPE frequencies."""
    module = JoFormerAttention(config(), grid=(3, 4))
    angles = module.journey.frames(torch.zeros(1, 12, 32))  # (12, 4)
    positions = grid_positions(3, 4)
    theta = 10000.0 ** (-2.0 * torch.arange(2, dtype=torch.float64) / 4)
    torch.testing.assert_close(angles[:, :2].double(), positions[:, :1].double() * theta, check_dtype=False)
    torch.testing.assert_close(angles[:, 2:].double(), positions[:, 1:].double() * theta, check_dtype=False)


def test_axial_grid_attention_is_equivariant_to_grid_shifts() -> None:
    q, k, v = (torch.randn(1, 2, 12, 8, dtype=torch.float64) for _ in range(3))
    W = axis_frequencies(8, 100.0, 2)
    cells = grid_positions(3, 4).double()
    base = journey_attention(q, k, v, cells @ W)
    torch.testing.assert_close(base, journey_attention(q, k, v, (cells + torch.tensor([5.0, 7.0])) @ W))


def test_dense_grid_frames_are_orthogonal_and_curved() -> None:
    torch.manual_seed(5)
    module = JoFormerAttention(config(), variant="dense", grid=(3, 3))
    frames = module.journey.frames(torch.zeros(1, 9, 32)).double()  # (9, 8, 8)
    torch.testing.assert_close(
        frames @ frames.transpose(1, 2), torch.eye(8, dtype=torch.float64).expand(9, 8, 8), atol=1e-5, rtol=0
    )
    S = module.journey.generators.detach().double()
    S = S - S.transpose(1, 2)
    assert (S[0] @ S[1] - S[1] @ S[0]).abs().max() > 1e-6
    assert module(torch.randn(2, 9, 32)).shape == (2, 9, 32)
    assert module.position_vectors(9).shape == (9, 64)


def test_vit_shapes_and_every_rotation() -> None:
    images = torch.rand(3, 1, 8, 8)
    for rotation in ("none", "rope2d", "rope2d-learned", "joformer-fixed", "joformer-learned", "dense"):
        model = ViT(ViTConfig(rotation=rotation, d_model=32, n_heads=4, n_layers=1, d_ff=32))
        logits = model(images)
        assert logits.shape == (3, 10)
        logits.sum().backward()


def test_vit_patches_are_row_major() -> None:
    model = ViT(ViTConfig(d_model=32, n_heads=4, n_layers=1, d_ff=32))
    images = torch.arange(64, dtype=torch.float32).view(1, 1, 8, 8)
    patches = model.patches(images)  # (1, 16, 4)
    assert patches.shape == (1, 16, 4)
    torch.testing.assert_close(patches[0, 1], torch.tensor([2.0, 3.0, 10.0, 11.0]))
    torch.testing.assert_close(patches[0, 4], torch.tensor([16.0, 17.0, 24.0, 25.0]))


# --- bad input -------------------------------------------------------------------------------------


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(InputError, match="set pe to none"):
        ModelConfig(**{**JOFORMER, "pe": "rope", "attention": "joformer-fixed"})
    with pytest.raises(InputError, match=r"even head dimension.*change d_model or n_heads"):
        ModelConfig(**{**JOFORMER, "d_model": 36, "n_heads": 4, "attention": "joformer-learned"})
    with pytest.raises(InputError, match="unknown attention"):
        ModelConfig(**{**JOFORMER, "attention": "joformer-curvy"})
    with pytest.raises(InputError, match="unknown JoFormer variant 'curvy'; choose one of"):
        JoFormerAttention(config(), variant="curvy")
    module = JoFormerAttention(config(), grid=(3, 3))
    with pytest.raises(InputError, match="3x3 grid holds 9 positions but the sequence has 10 tokens"):
        module(torch.randn(1, 10, 32))
    with pytest.raises(InputError, match="no 2-D form"):
        JoFormerAttention(config(), variant="projected", grid=(2, 2))
    with pytest.raises(InputError, match="pe none"):
        module(torch.randn(1, 9, 32), rotation=(torch.ones(9, 4), torch.zeros(9, 4)))
    with pytest.raises(InputError, match="even head dimension"):
        JoFormerAttention(ModelConfig(**{**JOFORMER, "d_model": 36, "n_heads": 4}), variant="fixed")
    with pytest.raises(InputError, match="unknown rotation"):
        ViTConfig(rotation="rope3d")
    with pytest.raises(InputError, match="not a multiple of patch"):
        ViTConfig(patch=3)


def test_make_attention_picks_joformer() -> None:
    assert isinstance(make_attention(config(attention="joformer-projected")), JoFormerAttention)
    assert isinstance(make_attention(config(attention="standard", pe="rope")), SelfAttention)


# --- position vectors and saving ------------------------------------------------------------------


def test_position_vectors() -> None:
    """fixed: RoPE's unit-circle vectors (encodings.standard.rope); learned: the same at init;
    projected: unit circle of t * mean increment, (n, d_model)."""
    fixed = JoFormerAttention(config())
    np.testing.assert_allclose(fixed.position_vectors(20), standard.rope(np.arange(20), d=8, base=10000.0), atol=1e-6)
    learned = JoFormerAttention(config(attention="joformer-learned"))
    np.testing.assert_allclose(learned.position_vectors(20), fixed.position_vectors(20), atol=1e-5)
    projected = JoFormerAttention(config(attention="joformer-projected"))
    vectors = projected.position_vectors(5)
    assert vectors.shape == (5, 32) and vectors.dtype == np.float64
    np.testing.assert_allclose(np.hypot(vectors[:, 0::2], vectors[:, 1::2]), 1.0)
    before = projected.journey.mean_increment.clone()
    projected.train()(torch.randn(2, 6, 32))
    assert not torch.equal(before, projected.journey.mean_increment)  # tracks the increments in training
    with pytest.raises(InputError, match="at least 1"):
        fixed.position_vectors(0)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_save_and_load_round_trip(tmp_path: Path, attention: str) -> None:
    model = Transformer(config(attention=attention, arch="gpt")).eval()
    model.save(tmp_path / "m")
    loaded = Transformer.load(tmp_path / "m")
    ids = torch.randint(0, 40, (2, 20))  # longer than n_positions: journeys extrapolate
    torch.testing.assert_close(loaded(ids)["logits"], model(ids)["logits"])


# --- the lm task ---------------------------------------------------------------------------------


def lm_settings(corpus: Path, **extra: str) -> list[str]:
    settings_ = {
        "task": "lm",
        "dataset": str(corpus),
        "tokenizer": "char",
        "model.arch": "gpt",
        "model.pe": "none",
        "model.attention": "joformer-fixed",
        "model.d_model": "32",
        "model.n_heads": "4",
        "model.n_layers": "1",
        "model.d_ff": "32",
        "max_length": "16",
        "batch_size": "4",
        "steps": "6",
        "eval_every": "3",
        "eval_batches": "2",
        **extra,
    }
    return [f"{k}={v}" for k, v in settings_.items()]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    lines = ["".join(rng.choice(list("abcdefgh "), size=int(rng.integers(20, 60)))) for _ in range(80)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_lm_blocks_are_contiguous_and_deterministic(corpus: Path) -> None:
    config_ = resolve_config("ci", lm_settings(corpus))
    task = build_task(config_)
    assert isinstance(task, LMTask)
    batch = task.train_batch(5)
    assert batch.input_ids.shape == (4, 16) and batch.attention_mask.all()
    np.testing.assert_array_equal(batch.labels[:, :-1], batch.input_ids[:, 1:])
    # every block is a window of the training stream
    stream = task.train
    for row, label in zip(batch.input_ids, batch.labels, strict=True):
        windows = np.lib.stride_tricks.sliding_window_view(stream, 17)
        matches = np.flatnonzero((windows[:, :16] == row).all(axis=1))
        assert any(windows[m, 16] == label[-1] for m in matches)
    again = build_task(config_)
    np.testing.assert_array_equal(again.train_batch(5).input_ids, batch.input_ids)
    first, second = task.eval_batch(0), task.eval_batch(1)
    np.testing.assert_array_equal(first.input_ids[0], task.held_out[:16])
    np.testing.assert_array_equal(first.input_ids[1], task.held_out[16:32])
    assert not np.array_equal(first.input_ids, second.input_ids)


def test_lm_batch_formula() -> None:
    stream = np.arange(100)
    batch = lm_batch(stream, np.array([0, 10]), 5)
    np.testing.assert_array_equal(batch.input_ids, [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])
    np.testing.assert_array_equal(batch.labels, [[1, 2, 3, 4, 5], [11, 12, 13, 14, 15]])


def test_lm_task_errors(corpus: Path) -> None:
    with pytest.raises(InputError, match=r"set model\.arch to gpt"):
        build_task(resolve_config("ci", [*lm_settings(corpus), "model.arch=bert"]))
    with pytest.raises(InputError, match="fewer than one block"):
        build_task(resolve_config("ci", [*lm_settings(corpus), "max_length=5000", "model.n_positions=5000"]))


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_lm_trains_with_every_variant(tmp_path: Path, corpus: Path, attention: str) -> None:
    metrics = train(
        resolve_config("ci", lm_settings(corpus, **{"model.attention": attention})), tmp_path / "run"
    ).metrics
    assert math.isfinite(metrics["eval_loss"]) and metrics["step"] == 6
    model = Transformer.load(tmp_path / "run" / "checkpoint")
    assert model.blocks[0].attn.position_vectors(8).shape[0] == 8
