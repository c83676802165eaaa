"""Pretrained checkpoints: offline-first loading and the position vectors inside them."""

from .adapters import Adapter, adapter_for
from .load import Checkpoint, load_checkpoint, resolve_checkpoint

__all__ = ["Adapter", "Checkpoint", "adapter_for", "load_checkpoint", "resolve_checkpoint"]
