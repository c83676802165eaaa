"""Small transformers (BERT / GPT) whose positional encoding is one config axis.

    from geoanalyze.models import ModelConfig, Transformer
    model = Transformer(ModelConfig(arch="gpt", vocab_size=100, pe="rope"))

Importing this package imports torch (``geoanalyze`` itself does not).
"""

from __future__ import annotations

from .config import ModelConfig
from .transformer import Transformer

__all__ = ["ModelConfig", "Transformer"]
