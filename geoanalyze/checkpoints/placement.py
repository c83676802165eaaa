"""Where a forward pass runs: the device, the dtype, the memory free there, and the class to load.

auto device: CUDA when visible, else the CPU. auto dtype: float32 on the CPU (its bf16 matmuls
are slow), the checkpoint's own dtype on CUDA (bf16 when the config states none). Free memory:
all visible GPUs together, or the host's ``MemAvailable``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
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


#: the endings of the class names that hold one part of an encoder-decoder family
PART_ENDINGS = {"encoder": ("Encoder", "EncoderModel"), "decoder": ("ForCausalLM", "Decoder")}


def part_class(config: Mapping[str, Any], names: Callable[[], Sequence[str]] = tuple) -> tuple[Any, str]:
    """The transformers class of a checkpoint that holds one part of an encoder-decoder family, and
    the part: ("encoder", T5EncoderModel, MT5EncoderModel, BartEncoder, LEDEncoder, ...) or ("decoder",
    BartForCausalLM, MarianForCausalLM, PegasusForCausalLM, ...: the seq2seq config with
    ``is_encoder_decoder`` false, the decoder's weights under ``model.decoder.``); (None, "") for any
    other checkpoint (AutoModel loads it). Loading the whole encoder-decoder instead would run an
    encoder whose weights are not read, or both stacks on weights of one.

    The class is the config's ``architectures[0]``; where the config names none, a model type whose
    base model is an encoder-decoder and whose weight names (``names()``, read only then) hold a decoder
    and no encoder is read with the type's causal-LM class. The class is looked up in transformers, then in the file of the
    model type's base model (BartEncoder is not exported), and must be a PreTrainedModel."""
    from transformers.models.auto import modeling_auto

    model_type = str(config.get("model_type", ""))
    listed = config.get("architectures") or []
    name = listed[0] if listed and isinstance(listed[0], str) else ""
    seq2seq = model_type in modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    if not name and seq2seq and _decoder_only(names()):
        name = str(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, ""))
    part = next((part for part, endings in PART_ENDINGS.items() if name.endswith(endings)), "")
    if not part or (part == "decoder" and not seq2seq):
        return None, ""  # a decoder of its own family (Llama's ForCausalLM): AutoModel reads it
    found = _transformers_class(name, model_type)
    return (found, part) if found is not None else (None, "")


def _decoder_only(names: Sequence[str]) -> bool:
    """Whether weight names hold a decoder stack and no encoder stack (``model.decoder.layers.0...``)."""
    parts = [set(name.split(".")) for name in names]
    return any("decoder" in p for p in parts) and not any("encoder" in p for p in parts)


def _transformers_class(name: str, model_type: str) -> Any:
    """The PreTrainedModel subclass ``name`` of transformers or of the model type's modeling file, or None."""
    import sys

    import transformers
    from transformers import PreTrainedModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    base = MODEL_MAPPING_NAMES.get(model_type)
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


def part_module(model: Any, part: str, is_encoder_decoder: bool) -> Any:
    """The module a pass runs and the mechanism is read from: the decoder of a decoder-only checkpoint
    (BartForCausalLM's model.decoder), the encoder of an encoder-decoder, else the model itself (an
    encoder class such as T5EncoderModel runs whole: it takes the token ids)."""
    if part == "decoder" and hasattr(model, "get_decoder"):
        return model.get_decoder()
    if not part and is_encoder_decoder and hasattr(model, "get_encoder"):
        return model.get_encoder()
    return model
