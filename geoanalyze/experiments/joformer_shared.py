r"""What JoFormer's language-model experiments share: the smoke preset's corpora and LM, and block perplexity.

    ppl(stream, L) = exp( sum over blocks b of L tokens of -log p(x_{t+1} | x_{b..t}) / #scored tokens )

Every block is scored from its own start (no carried context): length-generalization scores the
same tokens at L, 2L, 4L and 8L; joformer-reference and lm-vocab at their training block.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import InputError

#: the smoke preset's corpora: synthetic drift texts (no download), read as characters or BPE tokens
SMOKE_CORPUS = "synthetic:drift,n=300,length=16,vocab=40,seed=0"
SMOKE_EVAL_CORPUS = "synthetic:drift,n=100,length=16,vocab=40,seed=1"
#: the smoke preset's LM: one layer of width 16
SMOKE_LM = ["model.d_model=16", "model.n_heads=2", "model.n_layers=1", "model.d_ff=32", "model.dropout=0.0"]
#: the ci language model of length-generalization and lm-vocab (64 positions, width 64, 2 layers)
CI_LM = [
    "model.n_positions=64",
    "model.d_model=64",
    "model.n_layers=2",
    "model.n_heads=4",
    "model.d_ff=256",
    "model.dropout=0.0",
]


def block_perplexity(
    model: Any, stream: np.ndarray, length: int, n_tokens: int, device: Any, batch_size: int = 8
) -> float:
    r"""exp of the mean next-token NLL over stream[: n_tokens + 1] cut into blocks of ``length``.

    Every block is scored from its own start (no carried context), so shorter blocks see less
    context; ``n_tokens`` must be a multiple of ``length``.
    """
    import torch
    from torch.nn import functional as F  # noqa: N812

    from ..train.tasks import lm_batch

    if n_tokens % length or len(stream) < n_tokens + 1:
        raise InputError(
            f"cannot cut {n_tokens} tokens into blocks of {length} from a stream of {len(stream)}; "
            "lower the number of evaluation blocks"
        )
    starts = np.arange(n_tokens // length) * length
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for first in range(0, len(starts), batch_size):
            batch = lm_batch(stream, starts[first : first + batch_size], length)
            ids = torch.as_tensor(batch.input_ids, device=device)
            labels = torch.as_tensor(batch.labels, device=device)
            logits = model(ids)["logits"].float()  # (B, T, V)
            total += float(F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum"))
            count += labels.numel()
    return math.exp(total / count)
