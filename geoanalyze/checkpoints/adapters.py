"""Reading query/key maps by the tensor names the mechanism detector found.

The detector (:mod:`~geoanalyze.checkpoints.mechanism`) names each block's query and key
weights from the model's own modules; this module reads them from the checkpoint files and
orients them so that ``P @ W_Q`` projects row vectors (in x out), bias left out (GEOMETRY.md).
The one layout that needs knowing is GPT-2's fused Conv1D ``c_attn`` (in x 3h, [Q | K | V]).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import IncompatibleError

TensorReader = Callable[[str], np.ndarray]


def find_tensor(names: list[str], suffix: str) -> str:
    """The one tensor name ending with ``suffix`` (a model prefix such as 'bert.' may precede it,
    and a base-model prefix such as 'model.' may be absent from it)."""
    for candidate in _suffixes(suffix):
        pattern = re.compile(r"(^|\.)" + re.escape(candidate) + r"$")
        found = [n for n in names if pattern.search(n)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            exact = [n for n in found if n == candidate]
            if len(exact) == 1:
                return exact[0]
    raise IncompatibleError(f"expected one tensor named *{suffix}, found none; is this checkpoint complete?")


def _suffixes(name: str) -> list[str]:
    """'encoder.layer.0.x.weight' and, failing that, the same without leading components, down to a
    module and its tensor ('embed_positions.weight': an encoder saved alone, such as BartEncoder, has
    no 'encoder.' prefix)."""
    parts = name.split(".")
    return [".".join(parts[i:]) for i in range(max(1, len(parts) - 1))]


def query_key_maps(
    qk_weights: Sequence[Sequence[str]], names: list[str], read: TensorReader
) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(W_Q, W_K)] per block, each (hidden_in, hidden_out) so that q = p @ W_Q."""
    maps = []
    for query, key, layout in qk_weights:
        if layout == "fused-conv1d":
            fused = read(find_tensor(names, query))  # (in, 3 h)
            width = fused.shape[1] // 3
            maps.append((fused[:, :width], fused[:, width : 2 * width]))
        else:
            maps.append((read(find_tensor(names, query)).T, read(find_tensor(names, key)).T))
    return maps
