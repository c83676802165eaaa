"""Where a forward pass runs: the device, the dtype, and the memory free there.

auto device: CUDA when visible, else the CPU. auto dtype: float32 on the CPU (its bf16 matmuls
are slow), the checkpoint's own dtype on CUDA (bf16 when the config states none). Free memory:
all visible GPUs together, or the host's ``MemAvailable``.
"""

from __future__ import annotations

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
