"""Pretrained checkpoints: offline-first loading, the position mechanism read from the model, and
the forward pass that measures hidden states and the queries and keys attention sees."""

from .kinds import (
    AlibiMechanism,
    FixedTable,
    LearnedTable,
    Mechanism,
    NoMechanism,
    RelativeMechanism,
    RopeMechanism,
    RopeSet,
    TableMechanism,
)
from .load import Checkpoint, load_checkpoint, resolve_checkpoint

__all__ = [
    "AlibiMechanism",
    "Checkpoint",
    "FixedTable",
    "LearnedTable",
    "Mechanism",
    "NoMechanism",
    "RelativeMechanism",
    "RopeMechanism",
    "RopeSet",
    "TableMechanism",
    "load_checkpoint",
    "resolve_checkpoint",
]
