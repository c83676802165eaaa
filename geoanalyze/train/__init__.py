"""Training: one loop for every model and task (:func:`fit`), and its runner configured by one dataclass.

    from geoanalyze.train import resolve_config, train
    config = resolve_config("ci", ["task=order", "model.pe=rope"])
    run = train(config, "runs/order-rope")  # a TrainResult: run.metrics, run.to_json()

    from geoanalyze.train import Schedule, fit
    state = fit(model, batches, loss, Schedule(steps=100, lr=1e-3, grad_clip=1.0), hooks)

Importing this package imports torch.
"""

from __future__ import annotations

from .config import PRESETS, TASKS, TrainConfig, resolve_config, valid_keys
from .core import RunState, Schedule, fit
from .loop import TrainResult, lr_at, select_device, train
from .tasks import Batch, Task, build_task

__all__ = [
    "PRESETS",
    "TASKS",
    "Batch",
    "RunState",
    "Schedule",
    "Task",
    "TrainConfig",
    "TrainResult",
    "build_task",
    "fit",
    "lr_at",
    "resolve_config",
    "select_device",
    "train",
    "valid_keys",
]
