"""Independent checks of what the forward pass captures and of the implied RoPE vectors.

- Captured query centroids of a RoPE model equal a manual recomputation from its hidden states:
  the layer's input (its own input layer norm) -> W_Q -> per-head RMS norm where the model has one
  -> rotary with the model's cos/sin -> the mean over sequences at each position.
- Implied RoPE vectors for partial, llama3-scaled and yarn-scaled rotary equal the model's own
  cos/sin tables (its rotary module's forward).
- The capture does not change the hidden states.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass
from geoanalyze.checkpoints.mechanism import check_rope_matches

from .conftest import CORPUS

TEXTS = CORPUS.read_text(encoding="utf-8").splitlines()[:24]


def _model(folder: Path) -> torch.nn.Module:
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(folder)).eval()


def _encoded(folder: Path, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    rows = [tokenizer(text, truncation=True, max_length=max_length)["input_ids"] for text in TEXTS]
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


@pytest.mark.parametrize("name", ["Llama", "Qwen3", "Phi (partial 0.5)", "GPT-NeoX (rotary_pct 0.5)"])
def test_captured_queries_equal_a_manual_recomputation(zoo: dict[str, Path], name: str) -> None:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    folder = zoo[name]
    checkpoint = load_checkpoint(str(folder))
    result = forward_pass(checkpoint, TEXTS, max_length=20, batch_size=5, device="cpu", dtype="float32")
    assert result.capture == "attention interface"
    model = _model(folder)
    ids, mask = _encoded(folder, 20)
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        layers = model.layers
        rotary = model.rotary_emb
        positions = torch.arange(ids.shape[1])[None]
        cos, sin = rotary(hidden[0], positions)
        for block in (1, 2):
            layer = layers[block - 1]
            attention = getattr(layer, "self_attn", None) or getattr(layer, "attention", None)
            norm = layer.input_layernorm
            x = norm(hidden[block - 1])
            if hasattr(attention, "q_proj"):
                q = attention.q_proj(x)
                head_dim = attention.head_dim
                q = q.view(*q.shape[:2], -1, head_dim)
                if hasattr(attention, "q_norm"):
                    q = attention.q_norm(q)
                q = q.transpose(1, 2)
            else:  # GPT-NeoX: fused [q | k | v] per head
                qkv = attention.query_key_value(x).view(*x.shape[:2], -1, 3 * attention.head_size)
                q = qkv[..., : attention.head_size].transpose(1, 2)
                head_dim = attention.head_size
            rot = cos.shape[-1]
            q_rot, _ = apply_rotary_pos_emb(q[..., :rot], q[..., :rot], cos, sin)
            q = torch.cat([q_rot, q[..., rot:]], dim=-1)  # (B, H, T, d)
            weights = mask.double()
            sums = torch.einsum("bhtd,bt->thd", q.double(), weights).reshape(q.shape[2], -1)
            expected = (sums / weights.sum(0)[:, None]).numpy()
            np.testing.assert_allclose(result.queries[block][: expected.shape[0]], expected, atol=2e-5, rtol=1e-4)
        # The hidden states are untouched by the capture.
        for layer_index, states in enumerate(hidden):
            weights = mask.double()
            expected = (torch.einsum("bth,bt->th", states.double(), weights) / weights.sum(0)[:, None]).numpy()
            np.testing.assert_allclose(result.centroids[layer_index][: expected.shape[0]], expected, atol=2e-5)


@pytest.mark.parametrize(
    "name",
    [
        "Llama",
        "Llama (llama3 scaling)",
        "Llama (linear scaling)",
        "Qwen2 (yarn scaling)",
        "Phi (partial 0.5)",
        "StableLM (partial 0.5)",
        "GPT-NeoX (rotary_pct 0.5)",
        "GLM-4 (partial 0.5)",
        "Gemma3",
    ],
)
def test_implied_rope_vectors_equal_the_models_cos_sin(zoo: dict[str, Path], name: str) -> None:
    checkpoint = load_checkpoint(str(zoo[name]))
    mechanism = checkpoint.mechanism
    model = _model(zoo[name])
    positions = torch.arange(48)[None]
    x = torch.zeros(1, 48, checkpoint.hidden_size)
    for set_name, rope in mechanism.rope.items():
        with torch.no_grad():
            if set_name in ("full_attention", "sliding_attention"):
                cos, sin = model.rotary_emb(x, positions, layer_type=set_name)
            else:
                cos, sin = model.rotary_emb(x, positions)
        assert check_rope_matches(rope, cos[0].double().numpy(), sin[0].double().numpy()) < 1e-6
    vectors = checkpoint.position_vectors(np.arange(48))
    assert vectors.shape == (48, 2 * len(mechanism.rope[mechanism.rope_main].inv_freq))


def test_old_and_new_config_spellings_give_the_same_mechanism(tmp_path: Path, zoo: dict[str, Path]) -> None:
    """GPT-NeoX's rotary_pct / rotary_emb_base against rope_parameters; Gemma 3's top-level rope_theta."""
    import json
    import shutil

    old = zoo["GPT-NeoX (rotary_pct 0.5)"]
    new = tmp_path / "neox-new"
    shutil.copytree(old, new)
    config = json.loads((new / "config.json").read_text())
    for key in ("rotary_pct", "rotary_emb_base", "rope_theta", "partial_rotary_factor"):
        config.pop(key, None)
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 5000.0, "partial_rotary_factor": 0.5}
    (new / "config.json").write_text(json.dumps(config))
    a = load_checkpoint(str(old)).mechanism
    b = load_checkpoint(str(new)).mechanism
    assert a.summary() == b.summary()
    assert a.rope[a.rope_main].inv_freq == b.rope[b.rope_main].inv_freq

    spelled = tmp_path / "neox-old"
    shutil.copytree(old, spelled)
    config = json.loads((spelled / "config.json").read_text())
    config.pop("rope_parameters", None)
    config.update(rotary_pct=0.5, rotary_emb_base=5000)
    (spelled / "config.json").write_text(json.dumps(config))
    c = load_checkpoint(str(spelled)).mechanism
    assert c.summary() == a.summary()
