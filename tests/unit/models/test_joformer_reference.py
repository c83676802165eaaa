"""JoFormer as published (models/joformer_reference.py) against loops, and against our design.

The oracle is a float64 loop over explicit 2 x 2 rotation matrices, written from the reference
scripts' algebra (c_t = sum_{s <= t} w_ts R(Phi_s - Phi_t) v_s, w from <R(Phi_t) k_t, R(Phi_s) q_s>);
it shares no code with the module.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from geoanalyze.errors import InputError
from geoanalyze.models.joformer import journey_attention, transport
from geoanalyze.models.joformer_reference import (
    ReferenceConfig,
    ReferenceJoFormer,
    reference_attention,
    reversed_integer_angles,
    suffix_sum,
)


def rotation(angle: float) -> np.ndarray:
    return np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])


def rotate(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    return np.concatenate([rotation(a) @ x[2 * i : 2 * i + 2] for i, a in enumerate(angles)])


def loop_reference(q, k, v, frames, normalisation="softplus", transport_values=True) -> np.ndarray:  # type: ignore[no-untyped-def]
    T, C = q.shape
    out = np.zeros((T, C))
    for t in range(T):
        scores = [rotate(k[t], frames[t]) @ rotate(q[s], frames[s]) / math.sqrt(C) for s in range(t + 1)]
        if normalisation == "softplus":
            weights = [math.log1p(math.exp(x)) for x in scores]
        else:
            top = max(scores)
            weights = [math.exp(x - top) for x in scores]
            weights = [w / sum(weights) for w in weights]
        for s, w in enumerate(weights):
            out[t] += w * (rotate(v[s], frames[s] - frames[t]) if transport_values else v[s])
    return out


def random_case(seed: int, T: int = 7, C: int = 6) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, T, C, generator=g, dtype=torch.float64) for _ in range(3))
    a = torch.randn(1, T, C // 2, generator=g, dtype=torch.float64)
    return q, k, v, a


@pytest.mark.parametrize("normalisation", ["softplus", "softmax"])
@pytest.mark.parametrize("transport_values", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_reference_attention_matches_the_loop(normalisation: str, transport_values: bool, seed: int) -> None:
    q, k, v, a = random_case(seed)
    frames = suffix_sum(a)
    ours = reference_attention(q, k, v, frames, normalisation=normalisation, transport_values=transport_values)
    oracle = loop_reference(
        q[0].numpy(), k[0].numpy(), v[0].numpy(), frames[0].numpy(), normalisation, transport_values
    )
    np.testing.assert_allclose(ours[0].numpy(), oracle, atol=1e-12)


def test_suffix_sum_and_the_fixed_angles_are_the_scripts() -> None:
    a = torch.arange(12.0).view(1, 4, 3)
    np.testing.assert_allclose(suffix_sum(a)[0, 1].numpy(), a[0, 1:].sum(dim=0).numpy())
    fixed = reversed_integer_angles(5, 3)
    assert fixed.shape == (1, 5, 3)
    np.testing.assert_allclose(fixed[0, 0].numpy(), [0.0, 4.0, 8.0])  # (T - 1 - 0) k
    np.testing.assert_allclose(fixed[0, 4].numpy(), [0.0, 0.0, 0.0])


def swap_pairs(x: torch.Tensor) -> torch.Tensor:
    """The reflection S that swaps the two coordinates of every pair: S R(phi) S = R(-phi)."""
    return x.view(*x.shape[:-1], -1, 2).flip(-1).flatten(-2)


@pytest.mark.parametrize("variant", ["per-token", "fixed"])
def test_with_softmax_the_reference_is_our_journey_attention_up_to_documented_maps(variant: str) -> None:
    # (i) the reference's suffix window (tokens s..t-1) is our prefix sum of increments shifted by one;
    # (ii) its scores <R(Phi_t) k_t, R(Phi_s) q_s> are ours with q, k swapped and reflected by S
    # (absorbed by W_Q, W_K); (iii) the fixed script's reversed positions cancel: phi_t = t k.
    q, k, v, a = random_case(3, T=9, C=8)
    if variant == "per-token":
        frames = suffix_sum(a)
        shifted = torch.cat([torch.zeros_like(a[:, :1]), a[:, :-1]], dim=1)
        ours_angles = shifted.cumsum(dim=1)  # phi_t = sum_{u < t} a_u
    else:
        frames = reversed_integer_angles(9, 4).double()
        ours_angles = torch.outer(torch.arange(9.0), torch.arange(4.0)).double()[None]
    reference = reference_attention(q, k, v, frames, normalisation="softmax")
    ours = journey_attention(
        swap_pairs(k)[:, None], swap_pairs(q)[:, None], v[:, None], ours_angles[:, None], causal=True
    )[:, 0]
    np.testing.assert_allclose(reference.numpy(), ours.numpy(), atol=1e-12)


def test_value_path_formula_covers_attention_ssm_and_joformer() -> None:
    g = torch.Generator().manual_seed(5)
    T, hs = 11, 6
    v = torch.randn(1, T, hs, generator=g, dtype=torch.float64)
    theta = torch.rand(hs // 2, generator=g, dtype=torch.float64)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * theta  # phi_t = t theta
    rho = 0.9
    # a diagonal (block-rotation) linear SSM, h_t = rho R(theta) h_{t-1} + v_t, as a loop
    h = np.zeros(hs)
    scan = []
    for t in range(T):
        h = rho * rotate(h, theta.numpy()) + v[0, t].numpy()
        scan.append(h.copy())
    lag = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    decay = torch.where(lag >= 0, rho ** lag.clamp(min=0).double(), torch.zeros((), dtype=torch.float64))
    np.testing.assert_allclose(transport(decay, v, angles)[0].numpy(), np.array(scan), atol=1e-12)


def test_the_model_runs_and_checks_its_config() -> None:
    for variant in ("per-token", "fixed", "roformer"):
        model = ReferenceJoFormer(ReferenceConfig(vocab_size=30, n_embed=10, n_layers=2, block_size=8, variant=variant))
        logits = model(torch.randint(0, 30, (2, 8)))["logits"]
        assert logits.shape == (2, 8, 30) and torch.isfinite(logits).all()
    per_token = ReferenceJoFormer(ReferenceConfig(vocab_size=65, variant="per-token"))
    # the script's used parameters: embeddings 65 x 45 twice, expander, 3 blocks, head
    blocks = 3 * (4 * (90 * 90 + 90) + 2 * 2 * 90 + 90 * 360 + 360 + 360 * 90 + 90)
    assert per_token.num_parameters() == 2 * 65 * 45 + 45 * 90 + 90 + blocks + 90 * 65 + 65
    with pytest.raises(InputError, match="variant"):
        ReferenceConfig(vocab_size=10, variant="projected")
    with pytest.raises(InputError, match="even"):
        ReferenceConfig(vocab_size=10, n_embed=9)
    with pytest.raises(InputError, match="normalisation"):
        ReferenceConfig(vocab_size=10, normalisation="sigmoid")


def test_causal_the_future_does_not_leak() -> None:
    torch.manual_seed(0)
    model = ReferenceJoFormer(ReferenceConfig(vocab_size=20, n_embed=8, n_layers=2, block_size=10, dropout=0.0)).eval()
    ids = torch.randint(0, 20, (1, 10))
    changed = ids.clone()
    changed[0, 7:] = (changed[0, 7:] + 1) % 20
    # the suffix sum makes absolute frames depend on later tokens, but only relative ones enter
    with torch.no_grad():
        np.testing.assert_allclose(
            model(ids)["logits"][0, :7].numpy(), model(changed)["logits"][0, :7].numpy(), atol=1e-5
        )
