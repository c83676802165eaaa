"""Hidden-state centroids: the mean hidden state at each position over a corpus, per layer.

c_l(i) = (1 / N'_i) sum_s h_l(s, i) over the N'_i sampled sequences s longer than i
(GEOMETRY.md, hidden-state stress). One batched no_grad forward pass with
``output_hidden_states``; sequences are sorted by length so batches carry little padding,
and sums are accumulated in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from .load import Checkpoint


def sample_indices(n_texts: int, max_sequences: int | None, seed: int = 0) -> np.ndarray:
    """Which texts the forward pass uses: all, or a seeded sample of ``max_sequences`` in corpus order."""
    if max_sequences is None or max_sequences >= n_texts:
        return np.arange(n_texts)
    if max_sequences < 1:
        raise InputError(f"--max-sequences must be at least 1, got {max_sequences}")
    return np.sort(np.random.default_rng(seed).choice(n_texts, size=max_sequences, replace=False))


def hidden_centroids(
    checkpoint: Checkpoint,
    texts: Sequence[str],
    max_length: int,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
    trust_remote_code: bool = False,
    device: str | None = None,
    tokenizer_spec: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer position centroids of ``texts``.

    Returns
    -------
    centroids : (L + 1, n, hidden) float64; layer 0 is the embedding output; rows of
        positions no sequence reaches are NaN.
    counts : (n,) number of sequences that reach each position.
    """
    if not texts:
        # Checked first: a tokenizer given an empty batch fails with an IndexError of its own.
        raise InputError("no sequence to run through the model; check the corpus")
    import torch
    from transformers import AutoModel, AutoTokenizer

    from ..corpus.tokenize import _import_transformers

    _import_transformers()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if tokenizer_spec is None:
        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint.path), trust_remote_code=trust_remote_code)
    else:  # the tokenizer the counts were made with, resolved the same offline-first way
        from ..corpus.tokenize import load_hf_tokenizer

        tokenizer, _ = load_hf_tokenizer(tokenizer_spec)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model: Any = AutoModel.from_pretrained(str(checkpoint.path), trust_remote_code=trust_remote_code)
    model.eval().to(device)
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    order = np.argsort([len(ids) for ids in encoded], kind="stable")
    n = max((len(ids) for ids in encoded), default=0)
    sums: torch.Tensor | None = None
    counts = torch.zeros(n, dtype=torch.float64)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            batch = [encoded[k] for k in order[start : start + batch_size]]
            width = max(len(ids) for ids in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, sequence in enumerate(batch):
                ids[row, : len(sequence)] = torch.tensor(sequence)
                mask[row, : len(sequence)] = 1
            output = model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
            states = torch.stack(output.hidden_states)  # (L+1, B, T, H), on the device
            weights = mask.to(device=states.device, dtype=states.dtype)
            # Sum over the batch where the states are; only (L+1, T, H) crosses to the host.
            batch_sums = torch.einsum("lbth,bt->lth", states, weights).to("cpu", torch.float64)
            if sums is None:
                sums = torch.zeros((states.shape[0], n, states.shape[-1]), dtype=torch.float64)
            sums[:, :width] += batch_sums
            counts[:width] += mask.to(torch.float64).sum(0)
            if progress is not None:
                progress(len(batch))
    if sums is None:
        raise InputError("no sequence to run through the model; check the corpus")
    with np.errstate(invalid="ignore", divide="ignore"):
        centroids = sums.numpy() / counts.numpy()[None, :, None]
    return centroids, counts.numpy().astype(np.int64)
