"""BLT's rows against an independent recomputation: the Byte Latent Transformer runs three stacks over
two sequences (the local encoder and decoder over the input's bytes, the global transformer over
patches) and an entropy patcher over the bytes beside them. The blocks geoanalyze measures are the
local encoder's layers, where the input's tokens enter: its hidden rows and query/key rows are at
the input's positions, rotated by the local encoder's own RoPE (encoder_config's base, interleaved
pairs). Its four stacks are given different widths, depths and RoPE bases here, so that a row or
base read from another stack shows.

The recomputation runs each sequence alone, unpadded, on the eager attention path, with this file's
own arithmetic where it can: layer 0 is the byte embedding plus the hash n-gram embeddings computed
here (rolling polynomial hashes of the preceding 3..8 tokens, as BLT's paper and model card describe
them), layer i the output of local_encoder.layers[i - 1] (a forward hook), and q and k the attention
input times W_Q, W_K, rotated in (2i, 2i + 1) pairs by encoder_config's base alone. The capture runs
padded batches of 4 through the default attention (sdpa).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass

from .test_capture_independent import heads, linear, rotate_pairs
from .test_capture_models import capture_tokenizer, texts

__all__ = ["capture_tokenizer"]

LENGTHS = [20, 7, 13, 16, 20, 11, 5, 18, 20, 9, 14, 20]
#: each stack its own width, depth and RoPE base (the local encoder's are the ones measured)
STACKS: dict[str, dict[str, Any]] = {
    "encoder_config": {"hidden_size": 32, "num_hidden_layers": 2, "theta": 1000.0},
    "global_config": {"hidden_size": 64, "num_hidden_layers": 3, "theta": 50000.0},
    "decoder_config": {"hidden_size": 32, "num_hidden_layers": 1, "theta": 7000.0},  # reads the encoder's states
    "patcher_config": {"hidden_size": 16, "num_hidden_layers": 2, "theta": 10000.0},
}
HEADS = 4
HASH_VOCAB = 64
PRIMES = (1000000007, 5915587277)  # BLT's first two hash primes, one per hash function


def blt_config(vocab_size: int) -> Any:
    from transformers import BltConfig

    subs: dict[str, Any] = {}
    for name, sizes in STACKS.items():
        subs[name] = {
            "hidden_size": sizes["hidden_size"],
            "num_hidden_layers": sizes["num_hidden_layers"],
            "num_attention_heads": HEADS,
            "num_key_value_heads": 2,
            "intermediate_size": 64,
            "vocab_size": vocab_size,
            "rope_parameters": {"rope_type": "default", "rope_theta": sizes["theta"]},
        }
    for name in ("encoder_config", "decoder_config"):
        subs[name]["hidden_size_global"] = STACKS["global_config"]["hidden_size"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BltConfig(
            vocab_size=vocab_size,
            encoder_hash_byte_group_vocab=HASH_VOCAB,
            encoder_hash_byte_group_nb_functions=len(PRIMES),
            pad_token_id=0,
            **subs,
        )


@pytest.fixture(scope="module")
def blt(capture_tokenizer: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoModel

    folder = tmp_path_factory.mktemp("blt")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AutoModel.from_config(blt_config(len(capture_tokenizer))).eval().save_pretrained(str(folder))
    capture_tokenizer.save_pretrained(str(folder))
    return folder


def hash_embeddings(model: Any, ids: Any) -> Any:
    """(T, w): the byte embedding plus, for each hash function and n-gram size, the embedding of the
    rolling polynomial hash sum_j token_(t - n + 1 + j) prime^j (tokens before the start are 0), mod the
    hash vocabulary, in that function's slice of the fused hash table."""
    import torch

    config = model.config
    out = model.local_encoder.embed_tokens.weight[ids].double()
    table = model.encoder_hash_tok_embedding.weight.double()
    padded = [0] * 8 + ids.tolist()
    slot = 0
    for prime in PRIMES[: config.encoder_hash_byte_group_nb_functions]:
        for size in config.encoder_hash_byte_group_size:
            for t in range(len(ids)):
                window = padded[8 + t - size + 1 : 8 + t + 1]
                value = sum(token * prime**j for j, token in enumerate(window))
                # int64 arithmetic, as the model's: the powers overflow and wrap the same way
                wrapped = torch.tensor(value % 2**64, dtype=torch.uint64).view(torch.int64).item()
                out[t] += table[int(wrapped % HASH_VOCAB) + slot * HASH_VOCAB]
            slot += 1
    return out


def recompute(folder: Path, sequences: list[str], tokenizer: Any) -> tuple[Any, dict[int, Any], dict[int, Any]]:
    """(hidden (L + 1, 20, w), queries, keys): centroids over the sequences, each alone, eager, unpadded."""
    import torch
    from transformers import AutoModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model: Any = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    layers = model.local_encoder.layers
    size = int(STACKS["encoder_config"]["hidden_size"]) // HEADS
    base = float(STACKS["encoder_config"]["theta"])
    outputs: dict[int, Any] = {}
    inputs: dict[int, Any] = {}
    hooks = []
    for number, layer in enumerate(layers, 1):
        hooks.append(layer.register_forward_hook(lambda m, a, o, n=number: outputs.__setitem__(n, o[0])))
        hooks.append(
            layer.self_attn.register_forward_pre_hook(
                lambda m, a, k, n=number: inputs.__setitem__(n, (a[0] if a else k["hidden_states"])[0]),
                with_kwargs=True,
            )
        )
    hidden = torch.zeros(len(layers) + 1, 20, size * HEADS, dtype=torch.float64)
    queries = {n: torch.zeros(20, size * HEADS, dtype=torch.float64) for n in range(1, len(layers) + 1)}
    keys = {n: torch.zeros(20, size * 2, dtype=torch.float64) for n in queries}
    counts = torch.zeros(20, dtype=torch.float64)
    with torch.no_grad():
        for text in sequences:
            ids = torch.tensor([tokenizer(text)["input_ids"]])
            length = ids.shape[1]
            model(input_ids=ids, use_cache=False)
            hidden[0, :length] += hash_embeddings(model, ids[0])
            for number in range(1, len(layers) + 1):
                hidden[number, :length] += outputs[number].double()
                attention, x = layers[number - 1].self_attn, inputs[number].double()
                queries[number][:length] += rotate_pairs(heads(linear(attention.q_proj, x), size), base).flatten(1)
                keys[number][:length] += rotate_pairs(heads(linear(attention.k_proj, x), size), base).flatten(1)
            counts[:length] += 1
    for handle in hooks:
        handle.remove()
    mean = {n: q / counts[:, None] for n, q in queries.items()}, {n: k / counts[:, None] for n, k in keys.items()}
    return hidden / counts[None, :, None], mean[0], mean[1]


def test_blts_mechanism_is_its_local_encoders(blt: Path) -> None:
    """The blocks are local_encoder.layers (2, not the global transformer's 3), the width and RoPE base the
    encoder_config's (32, 1000: not the global 64/50000, the decoder's base 7000 or the patcher's 16/10000), interleaved over the
    whole head (8 dims), in both blocks."""
    mechanism: Any = load_checkpoint(str(blt)).mechanism
    assert mechanism.kind == "rope"
    assert mechanism.layers == 2 and mechanism.attention_layers == (1, 2)
    assert mechanism.hidden_size == 32
    summary = mechanism.summary()["rope"][mechanism.rope_main]
    assert summary["dims"] == 8 and summary["base"] == pytest.approx(1000.0, rel=1e-5), summary
    assert mechanism.rope_layers == (mechanism.rope_main, mechanism.rope_main)
    assert [q for q, _, _ in mechanism.qk_weights] == [
        f"local_encoder.layers.{i}.self_attn.q_proj.weight" for i in range(2)
    ]


@pytest.mark.slow
def test_blts_rows_equal_an_independent_recomputation(blt: Path, capture_tokenizer: Any) -> None:
    sequences = texts(LENGTHS, capture_tokenizer)
    result = forward_pass(load_checkpoint(str(blt)), sequences, max_length=20, batch_size=4, device="cpu")
    hidden, queries, keys = recompute(blt, sequences, capture_tokenizer)
    assert result.centroids.shape == (3, 20, 32), result.centroids.shape  # input positions, the encoder's width
    assert result.layer_reach is None  # every layer at the input's positions
    np.testing.assert_allclose(result.centroids, hidden.numpy(), atol=2e-5, rtol=1e-5)
    assert sorted(result.queries) == sorted(result.keys) == [1, 2], (result.capture, result.notes)
    worst = float(np.abs(result.centroids - hidden.numpy()).max())
    for block in (1, 2):
        for got, reference in ((result.queries[block], queries[block]), (result.keys[block], keys[block])):
            np.testing.assert_allclose(got[:20], reference.numpy(), atol=2e-5, rtol=1e-5)
            worst = max(worst, float(np.abs(got[:20] - reference.numpy()).max()))
    (note,) = [text for text in result.hidden_notes if "not its 2 blocks'" in text]
    for stack in ("global_transformer.layers (3)", "local_decoder.layers (1)", "patcher.layers (2)"):
        assert stack in note, note
    print(f"\nBLT [{result.capture}]: hidden, query and key rows max |diff| {worst:.2e}")
