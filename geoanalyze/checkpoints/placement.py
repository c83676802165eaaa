"""Where a forward pass runs: the device, the dtype, the memory free there, and the class to load.

auto device: CUDA when visible, else the CPU. auto dtype: float32 on the CPU (its bf16 matmuls
are slow), the checkpoint's own dtype on CUDA (bf16 when the config states none). Free memory:
all visible GPUs together, or the host's ``MemAvailable``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from ..errors import InputError

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str | None) -> str:
    """``cpu`` or ``cuda`` for an asked device (``auto`` or None: CUDA when visible)."""
    import torch

    device = (device or "auto").lower()
    if device not in DEVICES:
        raise InputError(f"unknown --device {device!r}; choose one of {', '.join(DEVICES)}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is visible here; use --device cpu or auto")
    return device


def resolve_dtype(dtype: str | None, device: str, config: Mapping[str, Any]) -> Any:
    """auto: float32 on CPU (its bf16 matmuls are slow), the checkpoint's own dtype on CUDA (bf16 if unstated)."""
    import torch

    dtype = (dtype or "auto").lower()
    if dtype not in DTYPES:
        raise InputError(f"unknown --dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if dtype == "auto":
        if device == "cpu":
            return torch.float32
        stated = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        return {"float16": torch.float16, "float32": torch.float32}.get(stated, torch.bfloat16)
    return getattr(torch, dtype)


def available_memory(device: str) -> int:
    """Bytes free where the model goes: all visible GPUs together, or the host's available memory."""
    if device == "cuda":
        import torch

        return int(sum(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())))
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def encoder_class(config: Mapping[str, Any]) -> Any:
    """The transformers class an encoder-only checkpoint of an encoder-decoder family names (its
    config's ``architectures``: T5EncoderModel, MT5EncoderModel, BartEncoder, LEDEncoder, ...), or
    None for any other checkpoint (AutoModel loads it). Loading the whole encoder-decoder instead
    would give an encoder whose weights, saved without the ``encoder.`` prefix, are not read.
    The class is looked up in transformers, then in the file of the model type's base model
    (BartEncoder is not exported), and must be a PreTrainedModel."""
    import sys

    import transformers
    from transformers import PreTrainedModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    names = config.get("architectures") or []
    name = names[0] if names and isinstance(names[0], str) else ""
    if not name.endswith(("Encoder", "EncoderModel")):
        return None
    base = MODEL_MAPPING_NAMES.get(str(config.get("model_type", "")))
    places = [transformers]
    for candidate in base if isinstance(base, tuple) else (base,):
        with contextlib.suppress(AttributeError, ImportError, TypeError):
            places.append(sys.modules[getattr(transformers, str(candidate)).__module__])
    for place in places:
        with contextlib.suppress(AttributeError, ImportError):
            found = getattr(place, name)
            if isinstance(found, type) and issubclass(found, PreTrainedModel):
                return found
    return None
