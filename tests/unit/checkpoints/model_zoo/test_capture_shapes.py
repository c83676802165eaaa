"""Models that change the sequence inside, and encoder-only checkpoints of encoder-decoder families.

- Longformer and LED pad to a multiple of their attention window, Reformer to its chunk length,
  PegasusX to its block size; Funnel pools the sequence; DeBERTa-v2 buckets its relative positions
  (with DeBERTa-v3's shared key, its query/key projections also run on the relative embeddings);
  RWKV is recurrent (no attention mask, a "key" that is no attention's). Each gets a hidden row at
  every layer (a pooled layer's at the input position each pooled position ends at) or a note,
  never a shape error, and its hidden centroids equal a run of one unpadded sequence at a time
  (the model's own padding trimmed, Funnel's pooled position j of a layer after k poolings placed
  at input position j 2^k).
- T5EncoderModel, MT5/UMT5 encoders, BART's and LED's encoder classes, FSMT's encoder (a module
  without a config), GPT-NeoX-Japanese (a fused projection of its own layout), mT5, UMT5, LongT5,
  Pegasus, Marian, M2M100 and LED all produce rows, through the library and through ``stress``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import invoke, ok

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass

from .conftest import CORPUS
from .test_capture_models import SEQ2SEQ, T5, WIDTH, build, capture_tokenizer, model_class, texts

__all__ = ["capture_tokenizer"]

LED = {**SEQ2SEQ, "attention_window": 8, "max_encoder_position_embeddings": 64, "max_decoder_position_embeddings": 64}
REFORMER = {
    "attention_head_size": 8,
    "num_attention_heads": 4,
    "feed_forward_size": 64,
    "axial_pos_shape": [8, 8],
    "axial_pos_embds_dim": [16, 16],
    "local_attn_chunk_length": 8,
    "lsh_attn_chunk_length": 8,
    "num_buckets": 4,
    "num_hashes": 1,
    "hash_seed": 0,
    "is_decoder": True,
}
FUNNEL = {"d_model": WIDTH, "n_head": 4, "d_head": 8, "d_inner": 64, "block_sizes": [1, 1, 1], "num_decoder_layers": 1}

#: name -> (model_type, config, transformers class or None for AutoModel); the models that change the sequence
RESHAPING: dict[str, tuple[str, dict[str, Any], str | None]] = {
    "Longformer": ("longformer", {"attention_window": 8}, None),
    "Funnel": ("funnel", {**FUNNEL, "block_repeats": [1, 1, 1]}, "FunnelModel"),
    "Funnel (base, 2-layer blocks)": (
        "funnel",
        {**FUNNEL, "block_sizes": [2, 1], "block_repeats": [1, 1]},
        "FunnelBaseModel",
    ),
    "Reformer (local)": ("reformer", {**REFORMER, "attn_layers": ["local", "local"]}, None),
    "Reformer (local + LSH)": ("reformer", {**REFORMER, "attn_layers": ["local", "lsh"]}, None),
    "DeBERTa-v2 (position buckets)": (
        "deberta-v2",
        {
            "relative_attention": True,
            "position_buckets": 8,
            "max_relative_positions": 16,
            "pos_att_type": ["p2c", "c2p"],
            "position_biased_input": False,
        },
        None,
    ),
    # DeBERTa-v3's settings (its 256 buckets of 512 positions, here 32 of 64): its query/key projections
    # also project the 64 relative embeddings
    "DeBERTa-v2 (32 buckets, shared key: DeBERTa-v3)": (
        "deberta-v2",
        {
            "relative_attention": True,
            "max_relative_positions": -1,
            "position_buckets": 32,
            "pos_att_type": ["p2c", "c2p"],
            "share_att_key": True,
            "norm_rel_ebd": "layer_norm",
            "position_biased_input": False,
        },
        None,
    ),
    "RWKV": ("rwkv", {"attention_hidden_size": WIDTH, "context_length": 64}, None),
    "LED": ("led", LED, None),
    "PegasusX": ("pegasus_x", {**SEQ2SEQ, "block_size": 8, "num_global_tokens": 4}, None),
}
#: encoder-only checkpoints and encoder-decoders of the families users run encoders of
ENCODERS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    "T5EncoderModel": ("t5", T5, "T5EncoderModel"),
    "FSMT": ("fsmt", {**SEQ2SEQ, "langs": ["en", "de"], "src_vocab_size": 900, "tgt_vocab_size": 900}, None),
    "GPT-NeoX-Japanese": ("gpt_neox_japanese", {"intermediate_multiple_size": 2}, None),
    "BART encoder": ("bart", SEQ2SEQ, "BartEncoder"),
    "LED encoder": ("led", LED, "LEDEncoder"),
    "mT5": ("mt5", T5, None),
    "MT5EncoderModel": ("mt5", T5, "MT5EncoderModel"),
    "UMT5": ("umt5", T5, None),
    "UMT5EncoderModel": ("umt5", T5, "UMT5EncoderModel"),
    "LongT5": ("longt5", {**T5, "local_radius": 4, "global_block_size": 4}, None),
    "Pegasus": ("pegasus", SEQ2SEQ, None),
    "Marian": ("marian", SEQ2SEQ, None),
    "M2M100": ("m2m_100", SEQ2SEQ, None),
}
ALL = {**RESHAPING, **ENCODERS}
#: run by default (the issue's cases; Longformer's and Funnel's rows are checked by value, below); the
#: others are marked slow
DEFAULT = {"DeBERTa-v2 (32 buckets, shared key: DeBERTa-v3)", "RWKV", "T5EncoderModel"}
#: token counts of the test's sequences: multiples of 4, so that Funnel's batched pooling equals its
#: pooling of each sequence alone (truncate_seq drops a last odd position only when alone)
LENGTHS = [20, 8, 12, 16, 20, 12, 8, 16, 20, 12]


def _params(names: Any) -> list[Any]:
    return [pytest.param(name, marks=() if name in DEFAULT else pytest.mark.slow) for name in names]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Name -> its checkpoint folder, built on first use."""
    return {}


@pytest.fixture
def folder(
    folders: dict[str, Path], capture_tokenizer: Any, tmp_path_factory: pytest.TempPathFactory, name: str
) -> Path:
    if name not in folders:
        model_type, config, cls = ALL[name]
        folders[name] = build(tmp_path_factory.mktemp("capture-shapes"), capture_tokenizer, model_type, config, cls)
    return folders[name]


@pytest.fixture(scope="module")
def sequences(capture_tokenizer: Any) -> list[str]:
    return texts(LENGTHS, capture_tokenizer)


def test_the_sequences_have_the_lengths_asked(capture_tokenizer: Any, sequences: list[str]) -> None:
    assert [len(capture_tokenizer(text)["input_ids"]) for text in sequences] == LENGTHS


@pytest.mark.parametrize("name", _params(ALL))
def test_every_layer_has_a_hidden_row_and_every_block_query_key_rows_or_a_note(
    folder: Path, name: str, sequences: list[str]
) -> None:
    checkpoint = load_checkpoint(str(folder))
    result = forward_pass(checkpoint, sequences, max_length=20, batch_size=3, device="cpu", dtype="float32")
    layers = checkpoint.mechanism.layers
    assert result.centroids.shape[0] >= layers + 1
    for layer in range(layers + 1):
        reached = result.reach_of(layer) > 0
        assert reached.sum() >= 3 or any(f"layer {layer} " in line for line in result.hidden_notes), (layer, result)
        assert np.all(np.isfinite(result.centroids[layer][reached]))
    assert not any("are left out: transformers'" in line for line in result.hidden_notes), result.hidden_notes
    noted = " ".join(result.notes)
    for block in checkpoint.mechanism.attention_layers:
        assert (block in result.queries and block in result.keys) or noted, (block, result.notes)
    for rows in (result.queries, result.keys):
        for block, centroids in rows.items():
            assert np.all(np.isfinite(centroids[: len(result.reach)])), block


#: name -> the query and key projections (module path endings) of the models whose queries and keys
#: are checked beside the hidden states: padded to a window or chunk, sequence-first (Longformer, LED),
#: or run on the relative embeddings too (DeBERTa-v3)
PROJECTIONS = {
    "Longformer": ("attention.self.query", "attention.self.key"),
    "LED": ("longformer_self_attn.query", "longformer_self_attn.key"),
    "Reformer (local)": ("self_attention.query", "self_attention.key"),
    "DeBERTa-v2 (32 buckets, shared key: DeBERTa-v3)": ("self.query_proj", "self.key_proj"),
}


def _reference(
    folder: Path, name: str, capture_tokenizer: Any, sequences: list[str], projected: dict[str, np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per layer: the mean hidden state at each input position over the sequences, each run alone and
    unpadded by transformers itself (a pooled layer's position j at input position j s); and the counts.
    ``projected`` gets the sums of the first output of each projection of :data:`PROJECTIONS` per
    forward (module path -> (20, width)), trimmed to the sequence."""
    import torch
    from transformers import AutoConfig, AutoModel

    cls = ALL[name][2] if name in ALL else None
    loader = model_class(cls, AutoConfig.from_pretrained(str(folder))) if cls else AutoModel
    model: Any = loader.from_pretrained(str(folder)).eval()
    if getattr(model.config, "is_encoder_decoder", False):
        model = model.get_encoder()
    sums: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    calls: dict[str, Any] = {}

    def keep(path: str) -> Any:
        def hook(_: Any, __: Any, out: Any) -> None:  # returns None: the model's output stays its own
            calls.setdefault(path, out.clone())

        return hook

    hooks = [
        module.register_forward_hook(keep(path))
        for path, module in model.named_modules()
        if path.endswith(PROJECTIONS.get(name, ()))
    ]
    for text in sequences:
        ids = torch.tensor([capture_tokenizer(text)["input_ids"]])
        length = ids.shape[1]
        calls.clear()
        with torch.no_grad():
            states = model(input_ids=ids, output_hidden_states=True).hidden_states
        for path, out in calls.items():  # the first call of each projection: (1, T', w), or (T', 1, w) sequence-first
            rows = (out[0] if out.shape[0] == 1 else out[:, 0])[:length].double().numpy()
            total = projected.setdefault(path, np.zeros((20, rows.shape[1])))
            total[:length] += rows
        for layer, hidden in enumerate(states):
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden  # PegasusX: (sequence, global tokens)
            if hidden.dim() == 4:  # Gemma3n's AltUp streams: the active one
                hidden = hidden[model.config.altup_active_idx]
            hidden = hidden[0].double().numpy()
            if len(sums) <= layer:
                sums.append(np.zeros((20, hidden.shape[-1])))
                counts.append(np.zeros(20))
            if hidden.shape[0] >= length:  # the model's own padding (Reformer, PegasusX) trimmed
                at = np.arange(length)
                hidden = hidden[:length]
            else:  # Funnel: separate_cls, pooled j covers (j - 1) s + 1 .. j s
                stride = -(-length // hidden.shape[0])
                stride = 1 << (stride - 1).bit_length()
                at = np.arange(hidden.shape[0]) * stride
            sums[layer][at] += hidden
            counts[layer][at] += 1
    for handle in hooks:
        handle.remove()
    return sums, counts


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=() if name in ("Funnel", "Longformer") else pytest.mark.slow)
        for name in RESHAPING
        if "LSH" not in name
    ],
)
def test_hidden_centroids_equal_one_unpadded_sequence_at_a_time(
    folder: Path, name: str, capture_tokenizer: Any, sequences: list[str]
) -> None:
    """LSH attention hashes the padding too, so a padded batch is not its sequences alone: left out."""
    checkpoint = load_checkpoint(str(folder))
    result = forward_pass(checkpoint, sequences, max_length=20, batch_size=3, device="cpu", dtype="float32")
    projected: dict[str, np.ndarray] = {}
    sums, counts = _reference(folder, name, capture_tokenizer, sequences, projected)
    worst = 0.0
    for layer in range(checkpoint.mechanism.layers + 1):
        np.testing.assert_array_equal(result.reach_of(layer), counts[layer], err_msg=f"layer {layer}")
        reached = counts[layer] > 0
        expected = sums[layer][reached] / counts[layer][reached][:, None]
        np.testing.assert_allclose(result.centroids[layer][reached], expected, atol=1e-4, rtol=1e-4)
        worst = max(worst, float(np.abs(result.centroids[layer][reached] - expected).max()))
    reached = counts[0] > 0
    for path, total in sorted(projected.items()):  # layer.<i>.…: block i + 1
        block = int(next(part for part in path.split(".") if part.isdigit())) + 1
        store = result.queries if path.endswith(PROJECTIONS[name][0]) else result.keys
        expected = total[reached] / counts[0][reached][:, None]
        np.testing.assert_allclose(store[block][: len(reached)][reached], expected, atol=1e-4, rtol=1e-4)
        worst = max(worst, float(np.abs(store[block][: len(reached)][reached] - expected).max()))
    assert len(projected) == (2 * checkpoint.mechanism.layers if name in PROJECTIONS else 0)
    print(f"{name}: max abs difference {worst:.2e}")
    if name in NOTED:
        assert any(NOTED[name] in line for line in result.hidden_notes), result.hidden_notes


#: what the notes say of a model that pools or pads
NOTED = {
    "Funnel": "pooled position j covers input positions (j - 1) s + 1 .. j s (position 0: the first token alone)",
    "Longformer": "positions more than the input, appended after the sequence (padding to a multiple of an attention window",
    "Reformer (local)": "positions more than the input, appended after the sequence (padding to a multiple of an attention window or chunk",
}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=() if name == "Funnel" else pytest.mark.slow) for name in ALL]
)
def test_stress_runs_as_a_user_runs_it(folder: Path, name: str, tmp_path: Path) -> None:
    load_checkpoint.cache_clear()
    run = ok(
        invoke(
            [
                "stress",
                folder,
                "--dataset",
                CORPUS,
                "--layers",
                "all",
                "--max-sequences",
                "24",
                "--max-length",
                "16",
                "--null-draws",
                "2",
                "-f",
                "json",
            ],
            tmp_path,
        )
    )
    document = json.loads(run.stdout)
    rows = document["checkpoint"]["rows"]
    hidden = sorted({row["layer"] for row in document["layers"] if row["projection"] == "hidden"})
    assert hidden == list(range(load_checkpoint(str(folder)).mechanism.layers + 1)), rows
    assert rows["hidden"].startswith("measured"), rows
    assert rows["query_key"].startswith(("measured", "skipped: ")), rows


def test_a_batch_transformers_itself_cannot_run_is_left_out_with_a_note(
    folders: dict[str, Path], capture_tokenizer: Any, tmp_path: Path
) -> None:
    """Funnel's pooling fails on its own on a 3-token input (three blocks pool it to one position):
    that batch is skipped and counted in a note, the others measured."""
    if "Funnel" not in folders:
        model_type, config, cls = ALL["Funnel"]
        folders["Funnel"] = build(tmp_path / "funnel", capture_tokenizer, model_type, config, cls)
    sequences = texts([20, 16, 3, 3], capture_tokenizer)
    result = forward_pass(load_checkpoint(str(folders["Funnel"])), sequences, max_length=20, batch_size=2, device="cpu")
    assert result.reach[:3].tolist() == [2, 2, 2] and result.reach[19] == 1
    assert any(
        line.startswith("2 sequences (in batches of up to 3 tokens) are left out") for line in result.hidden_notes
    )


@pytest.mark.slow
def test_gemma3n_altup_streams_give_the_active_streams_rows(capture_tokenizer: Any, tmp_path: Path) -> None:
    """Gemma3n's hidden states are (4 streams, batch, length, width): the rows are the active stream's
    (altup_active_idx), equal to each sequence run alone, and a note says so."""
    from .zoo import build_checkpoint, full_zoo

    entry = next(entry for entry in full_zoo() if entry.model_type == "gemma3n_text")
    folder = build_checkpoint(entry, tmp_path / "gemma3n", capture_tokenizer)
    sequences = texts(LENGTHS, capture_tokenizer)
    checkpoint = load_checkpoint(str(folder))
    result = forward_pass(checkpoint, sequences, max_length=20, batch_size=3, device="cpu", dtype="float32")
    sums, counts = _reference(folder, "Gemma3n", capture_tokenizer, sequences, {})
    for layer in range(checkpoint.mechanism.layers + 1):
        reached = counts[layer] > 0
        expected = sums[layer][reached] / counts[layer][reached][:, None]
        np.testing.assert_allclose(result.centroids[layer][reached], expected, atol=1e-4, rtol=1e-4)
    assert any("AltUp streams" in line for line in result.hidden_notes), result.hidden_notes


def test_a_model_transformers_cannot_run_on_any_sequence_is_refused_in_one_line(
    folders: dict[str, Path], capture_tokenizer: Any, tmp_path: Path
) -> None:
    """Every sequence of 3 tokens: Funnel fails on each batch on its own, so the checkpoint (with this
    corpus) is refused, exit 2, naming transformers' reason; not 'no sequence to run'."""
    from helpers import refused

    from geoanalyze.errors import FormatError

    if "Funnel" not in folders:
        model_type, config, cls = ALL["Funnel"]
        folders["Funnel"] = build(tmp_path / "funnel", capture_tokenizer, model_type, config, cls)
    sequences = texts([3] * 8, capture_tokenizer)
    with pytest.raises(FormatError, match=r"transformers' FunnelModel cannot run .* on any of its sequences \(Runtime"):
        forward_pass(load_checkpoint(str(folders["Funnel"])), sequences, max_length=8, batch_size=4, device="cpu")
    corpus = tmp_path / "short.txt"
    corpus.write_text("\n".join(sequences * 4) + "\n", encoding="utf-8")
    load_checkpoint.cache_clear()
    args = [
        "stress",
        folders["Funnel"],
        "--dataset",
        corpus,
        "--layers",
        "all",
        "--null-draws",
        "2",
        "--min-count",
        "8",
    ]
    run = invoke(args, tmp_path)
    refused(run, "FunnelModel cannot run", "check the checkpoint's config")
