"""Position tables stored in files: MDS PE files and plain .npy / .safetensors arrays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError, IncompatibleError, InputError


def load_table(path: str, positions: np.ndarray, counts: dict[str, Any] | None = None) -> np.ndarray:
    """Rows of a stored position table for the given position indices.

    MDS PE files carry a ``positions`` array naming the position of each row; plain arrays
    are indexed by position directly. A position the file lacks is an error, and so is an MDS
    file made from counts whose positions mean something else than ``counts``' (another
    vocabulary, or no special tokens: position 0 would be the first word, not [CLS]).
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"encoding file not found: {file}; check the path")
    row_positions: np.ndarray | None = None
    if file.suffix == ".npy":
        try:
            table = np.load(file, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise FormatError(f"{file} is not a readable .npy array ({exc}); save it with numpy.save") from exc
    elif file.suffix == ".safetensors":
        from safetensors.numpy import load_file

        try:
            arrays = load_file(str(file))
        except Exception as exc:
            raise FormatError(f"{file} is not a readable safetensors file ({exc})") from exc
        if "position_embeddings" in arrays:
            table = arrays["position_embeddings"]
            row_positions = arrays.get("positions")
            _check_same_positions(file, counts)
        elif len(arrays) == 1:
            table = next(iter(arrays.values()))
        else:
            raise FormatError(
                f"{file} holds {len(arrays)} tensors and none is named position_embeddings; "
                "save the table alone or under that name"
            )
    else:
        raise InputError(f"{file}: unsupported encoding file type {file.suffix!r}; use .npy or .safetensors")
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2:
        raise FormatError(f"{file} holds an array of shape {table.shape}; a position table is (n, d)")
    if row_positions is None:
        row_positions = np.arange(table.shape[0])
    lookup = {int(p): row for row, p in enumerate(np.asarray(row_positions).tolist())}
    missing = [int(p) for p in positions if int(p) not in lookup]
    if missing:
        raise InputError(
            f"{file} has no row for position {missing[0]} (it covers {len(lookup)} positions); "
            "lower --max-positions or regenerate the file"
        )
    rows = np.fromiter((lookup[int(p)] for p in positions), dtype=np.int64, count=len(positions))
    selected = table[rows]
    if not np.all(np.isfinite(selected)):
        raise InputError(f"{file} has NaN or infinite entries; fix the file")
    return selected


def _check_same_positions(file: Path, counts: dict[str, Any] | None) -> None:
    from ..io import read_metadata

    made_from = ((read_metadata(file) or {}).get("counts")) or {}
    if not counts or not made_from:
        return
    for key in ("add_special_tokens", "exclude_special"):
        if key in made_from and key in counts and made_from[key] != counts[key]:
            raise IncompatibleError(
                f"{file} was made from counts with {key}={made_from[key]}, these have {counts[key]}: "
                "its positions mean something else; rebuild it from the same kind of counts"
            )
    theirs, ours = made_from.get("tokenizer") or {}, counts.get("tokenizer") or {}
    if theirs.get("vocab_sha256") != ours.get("vocab_sha256") or theirs.get("kind") != ours.get("kind"):
        raise IncompatibleError(
            f"{file} was made with the tokenizer {theirs.get('name')}, these counts with {ours.get('name')}; "
            "rebuild it with the same --tokenizer"
        )
