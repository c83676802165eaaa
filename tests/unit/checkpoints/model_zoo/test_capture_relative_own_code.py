"""Queries and keys of relative-position attentions that score them in their own code, recomputed independently.

CPM-Ant and XLNet compute attention themselves (a bucketed relative bias; relative keys and biases), outside
transformers' attention interface; the capture reads their content queries and keys, as projected (no bias
the score adds to q, no score scaling). The recomputation here shares nothing with the capture: each
sequence alone, unpadded, eager; a forward pre-hook on the attention module takes its input (CPM-Ant's
hidden_q, which holds the model's prompt positions first; XLNet's content stream h, sequence-first); q and k
are this file's arithmetic on the module's weights (x W^T for Linear maps, x . W for XLNet's (d, H, d_head)
Parameters); then the mean over the sequences reaching each position, compared with the captured centroids
(batches of 4, the model's default attention). Funnel (no query/key rows yet: its pooled blocks' queries
cover fewer positions than the input) is here for its hidden rows: CPM-Ant's and Funnel's batches hold one
length (hidden.unpadded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geoanalyze.checkpoints import load_checkpoint
from geoanalyze.checkpoints.hidden import forward_pass

from .test_capture_independent import LENGTHS, capture_and_recompute, compare_rows, linear
from .test_capture_models import DROP, capture_tokenizer, texts
from .zoo import COMMON

__all__ = ["capture_tokenizer"]

#: (attention module, its call's arguments (positional, keyword), the model's config) -> q, k (T, width) float64
QK = Callable[[Any, tuple[Any, ...], dict[str, Any], Any], tuple[Any, Any]]


def cpmant(attention: Any, args: tuple[Any, ...], kwargs: dict[str, Any], config: Any) -> tuple[Any, Any]:
    """hidden_q (1, P + T, d): the prompt_length prompt positions, then the input's; project_q, project_k."""
    x = (args[0] if args else kwargs["hidden_q"])[0, config.prompt_length :].double()
    return linear(attention.project_q, x), linear(attention.project_k, x)


def xlnet(attention: Any, args: tuple[Any, ...], kwargs: dict[str, Any], config: Any) -> tuple[Any, Any]:
    """h (T, 1, d), sequence-first; q[t, n, e] = sum_d h[t, d] q[d, n, e] (and k), heads side by side."""
    h = (args[0] if args else kwargs["h"])[:, 0].double()
    length = h.shape[0]
    q = (h @ attention.q.double().reshape(h.shape[1], -1)).reshape(length, -1)
    k = (h @ attention.k.double().reshape(h.shape[1], -1)).reshape(length, -1)
    return q, k


def funnel(attention: Any, args: tuple[Any, ...], kwargs: dict[str, Any], config: Any) -> tuple[Any, Any]:
    """q_head of the query (1, T', d), k_head of the key (1, T, d): the first layer of a pooled group pools
    its queries only (pool_q_only), T' < T; q as projected (no bias: q_head has none; r_w_bias not added)."""
    query, key = (args[0], args[1]) if len(args) > 1 else (kwargs["query"], kwargs["key"])
    return linear(attention.q_head, query[0].double()), linear(attention.k_head, key[0].double())


@dataclass(frozen=True)
class Case:
    model_type: str
    config: dict[str, Any]
    attentions: Callable[[Any], list[Any]]  # the model -> its blocks' attention modules, in block order
    qk: QK
    drop: tuple[str, ...] = ()  # keys of COMMON its config refuses (XLNet has no max_position_embeddings)


def build(folder: Path, tokenizer: Any, case: Case) -> Path:
    """Save a random-weight AutoModel of the case's type (COMMON's sizes, the case's values) and the tokenizer."""
    import warnings

    import torch
    from transformers import AutoConfig, AutoModel

    values = {**COMMON, "vocab_size": len(tokenizer), **case.config}
    for key in (*DROP.get(case.model_type, ()), *case.drop):
        values.pop(key, None)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = AutoConfig.for_model(case.model_type, **values)
        AutoModel.from_config(built).eval().save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


CASES: dict[str, Case] = {
    "CPM-Ant": Case(
        "cpmant",
        {"dim_head": 8, "dim_ff": 64, "prompt_length": 3, "segment_types": 4},
        lambda m: [block.self_att.self_attention for block in m.encoder.layers],
        cpmant,
    ),
    "XLNet": Case(
        "xlnet",
        {"d_model": 32, "n_layer": 2, "n_head": 4, "d_inner": 64, "initializer_range": 0.5},  # std 0.02: q of 3e-3
        lambda m: [layer.rel_attn for layer in m.layer],
        xlnet,
        drop=(
            "max_position_embeddings",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
        ),
    ),
}


#: models whose hidden rows alone are checked here (their query/key rows are not captured)
HIDDEN_ONLY: dict[str, Case] = {
    "Funnel": Case(
        "funnel",
        {
            "block_sizes": [1, 1],
            "block_repeats": [1, 1],
            "d_model": 32,
            "n_head": 4,
            "d_head": 8,
            "d_inner": 64,
            "architectures": ["FunnelModel"],
        },
        lambda m: [block[0].attention for block in m.encoder.blocks],
        funnel,
    ),
}


def _recompute(folder: Path, case: Case, sequences: list[str], tokenizer: Any) -> dict[int, tuple[Any, Any]]:
    """Block (1-based) -> (query, key) centroids (n, width), each sequence alone, unpadded."""
    import torch
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    attentions = dict(enumerate(case.attentions(model), 1))
    seen: dict[int, tuple[Any, Any]] = {}

    def hook(number: int) -> Callable[..., None]:
        def record(module: Any, args: Any, kwargs: Any) -> None:
            seen[number] = case.qk(module, args, kwargs, model.config)

        return record

    handles = [module.register_forward_pre_hook(hook(n), with_kwargs=True) for n, module in attentions.items()]
    sums: dict[tuple[int, int], Any] = {}  # (block, 0 query / 1 key) -> sums (20, width)
    counts: dict[tuple[int, int], Any] = {}
    with torch.no_grad():
        for text in sequences:
            ids = torch.tensor([tokenizer(text)["input_ids"]])
            seen.clear()
            model(input_ids=ids)
            for number, pair in seen.items():
                for kind, rows in enumerate(pair):
                    at = positions(rows.shape[0], ids.shape[1], model.config)
                    sums.setdefault((number, kind), torch.zeros(20, rows.shape[1], dtype=torch.float64))[at] += rows
                    counts.setdefault((number, kind), torch.zeros(20, dtype=torch.float64))[at] += 1
    for handle in handles:
        handle.remove()
    means = {key: total / counts[key][:, None] for key, total in sums.items()}
    return {number: (means[(number, 0)], means[(number, 1)]) for number, _ in means}


def positions(rows: int, length: int, config: Any) -> Any:
    """The input positions of ``rows`` rows of a sequence of ``length``: all of them (no case here pools)."""
    import torch

    assert rows == length, (config.model_type, rows, length)
    return torch.arange(length)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_relative_queries_and_keys_equal_an_independent_recomputation(
    name: str, capture_tokenizer: Any, tmp_path: Path
) -> None:
    case = CASES[name]
    folder = build(tmp_path / "model", capture_tokenizer, case)
    _, result, expected = capture_and_recompute(folder, capture_tokenizer, _recompute, case)
    assert result.capture == "projections", (result.capture, result.notes)
    assert sorted(result.queries) == sorted(result.keys) == sorted(expected) == [1, 2], result.notes

    def check(block: int, got: Any, reference: Any) -> None:
        assert np.nanmax(np.abs(reference)) > 1e-2, (block, np.nanmax(np.abs(reference)))  # not vanishing
        np.testing.assert_array_equal(np.isnan(got), np.isnan(reference))  # a pooled block's unplaced rows

    worst, _ = compare_rows(result, expected, check=check)
    print(f"\n{name}: max |diff| {worst:.2e}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["CPM-Ant", "Funnel"])
def test_hidden_rows_in_batches_equal_those_of_each_sequence_alone(
    name: str, capture_tokenizer: Any, tmp_path: Path
) -> None:
    """CPM-Ant reads no attention mask (left padding assumed from ids != 0) and Funnel pools the padded batch:
    their batches hold sequences of one length (hidden.unpadded), so that batches of 4 give the rows of each
    sequence run alone (before: hidden rows differed by up to 186 (CPM-Ant) and 0.40 (Funnel), block 2's
    queries by 5.7 and 0.12)."""
    folder = build(tmp_path / "model", capture_tokenizer, {**CASES, **HIDDEN_ONLY}[name])
    sequences = texts(LENGTHS, capture_tokenizer)
    checkpoint = load_checkpoint(str(folder))
    batched, alone = (
        forward_pass(checkpoint, sequences, max_length=20, batch_size=size, device="cpu") for size in (4, 1)
    )
    np.testing.assert_allclose(batched.centroids, alone.centroids, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(batched.reach, alone.reach)


def test_unpadded_batches_hold_one_length() -> None:
    from geoanalyze.checkpoints.hidden import batch_groups

    lengths = [5, 3, 5, 5, 3, 7, 5, 5, 5]
    groups = batch_groups(lengths, 4, exact=True)
    assert [sorted(lengths[k] for k in group) for group in groups] == [[3, 3], [5, 5, 5, 5], [5, 5], [7]]
    assert sorted(int(k) for group in groups for k in group) == list(range(len(lengths)))
