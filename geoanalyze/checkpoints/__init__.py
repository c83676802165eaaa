"""Pretrained checkpoints: offline-first loading, the position mechanism read from the model, and
the forward pass that measures hidden states and the queries and keys attention sees."""

from .load import Checkpoint, load_checkpoint, resolve_checkpoint
from .mechanism import Mechanism, RopeSet

__all__ = ["Checkpoint", "Mechanism", "RopeSet", "load_checkpoint", "resolve_checkpoint"]
