"""Fixtures of the encoding and checkpoint tests: real (tiny) transformers models saved to disk.

Each tiny model is built with transformers from a small config, saved with ``save_pretrained``
and kept in memory, so a test can compare what geoanalyze reads from the files with the
model's own modules. Built once per session: importing torch and transformers dominates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TINY = {"max_position_embeddings": 40, "vocab_size": 100}


@dataclass
class SavedModel:
    """A model and the folder it was saved to."""

    path: Path
    model: Any


def _save(model: Any, folder: Path) -> SavedModel:
    model.eval()
    model.save_pretrained(str(folder))
    return SavedModel(folder, model)


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory: pytest.TempPathFactory) -> dict[int, SavedModel]:
    """RoBERTa with the usual pad_token_id 1 (position offset 2) and with pad_token_id 4 (offset 5)."""
    import torch
    from transformers import RobertaConfig, RobertaModel

    saved = {}
    for pad in (1, 4):
        torch.manual_seed(pad)
        config = RobertaConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, pad_token_id=pad, **TINY
        )
        saved[pad] = _save(RobertaModel(config), tmp_path_factory.mktemp(f"roberta-pad{pad}"))
    return saved


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory: pytest.TempPathFactory) -> SavedModel:
    import torch
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    config = DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, **TINY)
    return _save(DistilBertModel(config), tmp_path_factory.mktemp("distilbert"))


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> SavedModel:
    import torch
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=40, vocab_size=100, bos_token_id=0, eos_token_id=0)
    return _save(GPT2Model(config), tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="session")
def minilm_model(minilm_path: Path) -> Any:
    """transformers' own BertModel of the real all-MiniLM-L6-v2, in eval mode."""
    from transformers import BertModel

    return BertModel.from_pretrained(str(minilm_path)).eval()
