"""Hidden rows of hyper-connection models (several residual streams per position) and rows that rank no
pair of positions, each against an independent computation.

DeepSeek-V4 and HY-V4 keep ``hc_mult`` residual streams per position: their decoder layers take and
return (B, T, hc_mult, h). The toolkit's row of layer l is the mean over the streams (hidden.py's
docstring says why that is the residual state). The check here runs each sequence alone, unpadded,
and takes what the model's own modules return, through forward hooks (not ``output_hidden_states``):
the embedding (layer 0: every stream starts as it, so the stream mean must be it), each decoder
layer's output streams, averaged here, and the model's last hidden state (its head collapses the
streams); then the mean over the sequences reaching each position.

ZAYA's untrained checkpoint scales its keys to 0 (``qk_norm.temp`` starts at 0): a key row of zeros
ranks no positions, and its monotonicity would be NaN. The toolkit leaves such a row out with a note
(``flat_row``); a hook on ZAYA's QK norm shows that its keys are exactly 0 and its queries are not.
The law behind ``flat_row`` is checked on random tables: a table is flat exactly where the
monotonicity violation against untied target distances is undefined.

The model checks are slow (each builds a zoo model and runs it twice, 5-20 s on two cores); the
zoo's default run does not build these types. The law and the wording of ``flat_row`` run by default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import flat_row, forward_pass
from geoanalyze.geometry.scores import monotonicity_violation

from .test_capture_models import texts

LENGTHS = [12, 5, 9, 12, 7, 3, 10, 12]
STREAMS = 4  # the zoo's hc_mult (transformers' default) for both hyper-connection types


def _model(folder: Path) -> Any:
    import warnings

    from transformers import AutoModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModel.from_pretrained(str(folder), dtype="float32").eval()


def _tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def own_stream_means(folder: Path, lines: list[str]) -> np.ndarray:
    """(L + 1, n, h): per position, the mean over the sequences reaching it of: the embedding (layer 0),
    the mean over the streams of the output of decoder layers 1 .. L - 1, the model's last hidden state
    (layer L: the last layer's streams collapsed by the model's head, then normed);
    each sequence run alone, unpadded, its states taken by forward hooks on the model's own modules."""
    import torch

    model, tokenizer = _model(folder), _tokenizer(folder)
    captured: list[Any] = []

    def keep(_module: Any, _inputs: Any, out: Any) -> None:  # HY-V4's layers return (states, top-k indices)
        captured.append((out[0] if isinstance(out, tuple) else out)[0])

    handles = [module.register_forward_hook(keep) for module in (model.embed_tokens, *model.layers)]
    sums: np.ndarray | None = None
    counts = np.zeros(max(LENGTHS))
    try:
        with torch.no_grad():
            for line in lines:
                ids = torch.tensor([tokenizer(line)["input_ids"]])
                captured.clear()
                last = model(input_ids=ids).last_hidden_state[0]
                assert [tuple(state.shape) for state in captured[1:]] == [(ids.shape[1], STREAMS, 32)] * len(
                    model.layers
                ), "the decoder layers' output is no longer (T, streams, h): this check's premise changed"
                # the last layer's output streams are collapsed by the model's head: its last hidden state
                rows = [captured[0], *(state.mean(dim=1) for state in captured[1:-1]), last]
                states = np.stack([row.double().numpy() for row in rows])  # (L + 1, T, h)
                if sums is None:
                    sums = np.zeros((states.shape[0], max(LENGTHS), states.shape[2]))
                sums[:, : ids.shape[1]] += states
                counts[: ids.shape[1]] += 1
    finally:
        for handle in handles:
            handle.remove()
    assert sums is not None
    return sums / counts[None, :, None]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["deepseek_v4", "hy_v4"])
def test_hyper_connection_rows_are_the_stream_mean(zoo: dict[str, Path], name: str) -> None:
    folder = zoo[name]
    lines = texts(LENGTHS, _tokenizer(folder))
    result = forward_pass(load_checkpoint(str(folder)), lines, max_length=32, batch_size=4, capture=False)
    expected = own_stream_means(folder, lines)
    assert result.centroids.shape == expected.shape  # a row for every layer, each h wide
    assert result.layer_reach is None  # every layer reaches every position
    np.testing.assert_allclose(result.centroids, expected, rtol=1e-4, atol=1e-5)
    (line,) = [line for line in result.hidden_notes if "residual streams" in line]
    assert f"keeps {STREAMS} residual streams per position (hyper-connections) at layers 0, 1, 2;" in line
    assert "mean over the streams" in line


@pytest.mark.slow
def test_a_key_row_of_zeros_is_left_out_with_a_note(zoo: dict[str, Path]) -> None:
    """ZAYA's keys are 0 at every position (its key scale starts at 0): no key row, a note; the queries stay."""
    import torch

    folder = zoo["zaya"]
    model, tokenizer = _model(folder), _tokenizer(folder)
    seen: list[tuple[Any, Any]] = []
    hooks = [
        layer.self_attn.qk_norm.register_forward_hook(lambda _m, _i, out: seen.append(out)) for layer in model.layers
    ]
    lines = texts(LENGTHS, tokenizer)
    with torch.no_grad():
        model(input_ids=torch.tensor([tokenizer(lines[0])["input_ids"]]))
    for hook in hooks:
        hook.remove()
    assert len(seen) == 2 and all(bool((keys == 0).all()) and bool(queries.abs().sum() > 0) for queries, keys in seen)

    result = forward_pass(load_checkpoint(str(folder)), lines, max_length=32, batch_size=4)
    assert set(result.queries) == {1, 2} and not result.keys, (set(result.queries), set(result.keys))
    for block in (1, 2):
        assert any(
            line.startswith(f"block {block} has no key row: its keys are 0 at every position") for line in result.notes
        )
        assert flat_row(result.queries[block]) is None


# --- DeepSeek-V4's compressed attention: the positions' own queries and keys -----------------------------


def _rms(x: Any, weight: Any, eps: float) -> Any:
    """x / sqrt(mean(x^2) + eps) (times ``weight`` when there is one), over the last axis."""
    out = x / (x.square().mean(-1, keepdim=True) + eps).sqrt()
    return out * weight.double() if weight is not None else out


def _rope_trailing(x: Any, angles: Any, scaling: float) -> Any:
    """(T, H, d): the last 2 * angles.shape[1] channels of each head rotated in interleaved pairs (2i, 2i + 1)."""
    import torch

    rotary = 2 * angles.shape[1]
    plain, rotated = x[..., :-rotary], x[..., -rotary:]
    c, s = (torch.cos(angles) * scaling)[:, None], (torch.sin(angles) * scaling)[:, None]
    even, odd = rotated[..., 0::2], rotated[..., 1::2]
    turned = torch.stack([even * c - odd * s, odd * c + even * s], dim=-1).flatten(-2)
    return torch.cat([plain, turned], dim=-1)


def own_v4_queries_keys(folder: Path, lines: list[str]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Per block, per position: the mean over the sequences reaching it of q and of the position's own k
    (DeepSeek-V4's shared key/value), computed here from what enters each attention module (a forward
    pre-hook: its hidden states), with the module's weights and this file's arithmetic: q = RoPE(rms_h(
    W_qb rms(W_qa x))), k = RoPE(rms(W_kv x)), RoPE on each head's trailing slice in interleaved pairs at
    the compress or main frequencies by the layer type; each sequence alone, unpadded, eager (V4's only)."""
    import torch

    model, tokenizer = _model(folder), _tokenizer(folder)
    config, rotary = model.config, model.rotary_emb
    inputs: list[Any] = []
    handles = [
        layer.self_attn.register_forward_pre_hook(
            lambda _m, args, kwargs: inputs.append(kwargs.get("hidden_states", args[0] if args else None)),
            with_kwargs=True,
        )
        for layer in model.layers
    ]
    sums: dict[str, dict[int, Any]] = {"q": {}, "k": {}}
    counts = np.zeros(max(LENGTHS))
    try:
        with torch.no_grad():
            for line in lines:
                ids = torch.tensor([tokenizer(line)["input_ids"]])
                inputs.clear()
                model(input_ids=ids)
                length = ids.shape[1]
                for block, (layer, x) in enumerate(zip(model.layers, inputs, strict=True), 1):
                    attention, x = layer.self_attn, x[0].double()
                    kind = attention.rope_layer_type
                    angles = torch.arange(length, dtype=torch.float64)[:, None] * getattr(rotary, f"{kind}_inv_freq")
                    scaling = float(getattr(rotary, f"{kind}_attention_scaling"))
                    q = _rms(x @ attention.q_a_proj.weight.double().T, attention.q_a_norm.weight, config.rms_norm_eps)
                    q = (q @ attention.q_b_proj.weight.double().T).view(length, -1, config.head_dim)
                    q = _rope_trailing(_rms(q, None, config.rms_norm_eps), angles.double(), scaling)
                    k = _rms(x @ attention.kv_proj.weight.double().T, attention.kv_norm.weight, config.rms_norm_eps)
                    k = _rope_trailing(k.view(length, 1, -1), angles.double(), scaling)
                    for name, states in (("q", q), ("k", k)):
                        total = sums[name].setdefault(block, np.zeros((max(LENGTHS), states[0].numel())))
                        total[:length] += states.flatten(1).numpy()
                counts[:length] += 1
    finally:
        for handle in handles:
            handle.remove()
    mean = {name: {b: total / counts[:, None] for b, total in store.items()} for name, store in sums.items()}
    return mean["q"], mean["k"]


@pytest.mark.slow
def test_deepseek_v4_compressed_attention_rows_are_the_positions_own(zoo: dict[str, Path]) -> None:
    """Block 2 is compressed sparse attention: its keys are the positions' own, then one compressed entry per
    4 positions; the key row is the positions' own keys, with a note (batches of 4, padded, default path)."""
    import json

    folder = zoo["deepseek_v4"]
    config = json.loads((folder / "config.json").read_text())
    assert config["layer_types"][1] == "compressed_sparse_attention"
    lines = texts(LENGTHS, _tokenizer(folder))
    result = forward_pass(load_checkpoint(str(folder)), lines, max_length=32, batch_size=4)
    queries, keys = own_v4_queries_keys(folder, lines)
    assert set(result.queries) == set(result.keys) == {1, 2, 3}
    for block in (1, 2, 3):
        np.testing.assert_allclose(result.queries[block], queries[block], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(result.keys[block], keys[block], rtol=1e-4, atol=1e-5)
    assert any(
        line.startswith("block 2's attention also attends to up to 3 compressed entries") for line in result.notes
    )


# --- flat_row: exactly where the monotonicity is undefined ----------------------------------------------


def untied_distances(n: int) -> np.ndarray:
    """Condensed target distances with no two alike (points on a curve in general position)."""
    from scipy.spatial.distance import pdist

    t = np.arange(n, dtype=np.float64)
    return pdist(np.stack([t, np.sqrt(t + 0.37), np.log(t + 1.7)], axis=1))


@st.composite
def tables(draw: Any) -> np.ndarray:
    """An (n, k) table: random, one vector repeated, an equidistant simplex (scaled, shifted), some
    rows repeated, or all zero; at a scale from 1e-200 to 1e200."""
    n = draw(st.integers(3, 9))
    k = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["random", "constant", "simplex", "repeats", "zero"]))
    values = st.floats(-10, 10, allow_nan=False, width=64)
    if kind == "random":
        table = draw(hnp.arrays(np.float64, (n, k), elements=values))
    elif kind == "constant":
        table = np.tile(draw(hnp.arrays(np.float64, (1, k), elements=values)), (n, 1))
    elif kind == "simplex":
        table = draw(st.floats(0.1, 10)) * np.eye(n) + draw(st.floats(-5, 5))
    elif kind == "repeats":
        rows = draw(hnp.arrays(np.float64, (2, k), elements=values))
        table = rows[np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))]
    else:
        table = np.zeros((n, k))
    return table * 10.0 ** draw(st.integers(-200, 200))


@settings(max_examples=150, deadline=None)
@given(tables())
def test_a_table_is_flat_exactly_where_monotonicity_is_undefined(table: np.ndarray) -> None:
    violation = monotonicity_violation(table, untied_distances(table.shape[0]))
    assert (flat_row(table) is None) == bool(np.isfinite(violation)), (flat_row(table), violation)


def test_flat_row_says_how_the_table_is_flat() -> None:
    assert flat_row(np.zeros((5, 3))) == "are 0 at every position"
    assert flat_row(np.tile([1.0, -2.0], (4, 1))) == "are one and the same vector at every position"
    assert flat_row(3.0 * np.eye(4) + 1.0) == "are equally far apart at every pair of positions"
    assert flat_row(np.arange(12.0).reshape(4, 3) ** 2) is None


def test_flat_row_reads_only_the_reached_positions() -> None:
    """Rows of positions no sequence reaches are NaN (0 / 0): they neither make a table flat nor break it."""
    table = np.full((6, 2), np.nan)
    table[:4] = 0.0
    assert flat_row(table) == "are 0 at every position"
    table[:4] = [[0, 0], [1, 0], [3, 0], [7, 1]]
    assert flat_row(table) is None
    assert flat_row(np.array([[0.0, 0.0], [0.0, 0.0], [np.nan, np.nan]])) is None  # 2 rows: no score is taken
