"""Tiny checkpoints for the capture tests (no tests of its own): built from transformers' config
classes at width 32, random weights, saved with the zoo's corpus tokenizer, as a user's folder.

``texts(lengths, tokenizer)`` gives corpus lines cut to exactly those token counts, so that a test
controls the padding of a batch.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from .conftest import CORPUS
from .zoo import COMMON, corpus_tokenizer

WIDTH = 32
#: encoder-decoder sizes (BART, Marian, Pegasus, M2M100, LED, FSMT, PegasusX)
SEQ2SEQ = {
    "d_model": WIDTH,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "decoder_start_token_id": 0,
}
T5 = {"d_model": WIDTH, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4, "decoder_start_token_id": 0}
#: keys of COMMON a config class refuses or misreads (Funnel counts its layers by block_sizes)
DROP = {"funnel": ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")}


def build(folder: Path, tokenizer: Any, model_type: str, config: dict[str, Any], cls: str | None = None) -> Path:
    """Save a random-weight model of ``model_type`` (the class ``cls`` of transformers, or AutoModel's)
    and the tokenizer into ``folder``."""
    import torch
    from transformers import AutoConfig, AutoModel

    values = {**COMMON, "vocab_size": len(tokenizer), **config}
    for key in DROP.get(model_type, ()):
        values.pop(key, None)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = AutoConfig.for_model(model_type, **values)
        model = model_class(cls, built)(built) if cls else AutoModel.from_config(built)
        model.eval().save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def model_class(name: str, config: Any) -> Any:
    """transformers' class ``name``, or the one of that name beside the model type's base model
    (BartEncoder and LEDEncoder are not exported)."""
    import sys

    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    if hasattr(transformers, name):
        return getattr(transformers, name)
    base = MODEL_MAPPING_NAMES[config.model_type]
    return getattr(sys.modules[getattr(transformers, base).__module__], name)


@pytest.fixture(scope="session")
def capture_tokenizer() -> Any:
    return corpus_tokenizer(CORPUS)


def texts(lengths: list[int], tokenizer: Any) -> list[str]:
    """Corpus lines cut to a prefix of exactly ``lengths`` tokens (the zoo's tokenizer adds no special
    tokens), one for each length, from successive lines."""
    lines = [line.split() for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    found: list[str] = []
    start = 0
    for length in lengths:
        for offset in range(len(lines)):
            words = lines[(start + offset) % len(lines)]
            prefixes = (" ".join(words[:k]) for k in range(1, len(words) + 1))
            text = next((t for t in prefixes if len(tokenizer(t)["input_ids"]) == length), None)
            if text is not None:
                found.append(text)
                start += offset + 1
                break
        else:
            raise AssertionError(f"no corpus line has a prefix of {length} tokens")
    return found
