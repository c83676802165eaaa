"""Training: one loop for every model and task, configured by one dataclass.

    from geoanalyze.train import resolve_config, train
    config = resolve_config("ci", ["task=order", "model.pe=rope"])
    metrics = train(config, "runs/order-rope")

Importing this package imports torch.
"""

from __future__ import annotations

from .config import PRESETS, TASKS, TrainConfig, resolve_config, valid_keys
from .loop import lr_at, select_device, train
from .tasks import Batch, Task, build_task

__all__ = [
    "PRESETS",
    "TASKS",
    "Batch",
    "Task",
    "TrainConfig",
    "build_task",
    "lr_at",
    "resolve_config",
    "select_device",
    "train",
    "valid_keys",
]
