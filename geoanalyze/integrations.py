"""The position geometry of a model while ``transformers.Trainer`` trains it.

::

    callback = GeometryCallback(corpus="sample_corpora/drift-words.txt", every=1)
    trainer = Trainer(model, args, train_dataset=..., eval_dataset=..., callbacks=[callback])
    callback.bind(trainer)      # report through trainer.log: TensorBoard, W&B, any reporter configured
    trainer.train()

On every ``every``-th evaluation the model is written to a temporary folder (with the trainer's
tokenizer) and its position table scored against the corpus as ``geoanalyze track`` scores a
checkpoint: the scale-free scores as ``geometry/<score>`` and each category as
``geometry/<aspect>_category`` (+1 better than its position shuffles, 0 indistinguishable, -1 worse). They join the
evaluation's metrics (what ``trainer.evaluate()`` returns) and ``state.log_history``; a bound
callback also passes them to ``trainer.log``, so every reporter receives them. Nothing beyond
transformers is needed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from .analysis import StressOptions
from .tracking import find_series, track

CATEGORY_VALUES = {"better": 1.0, "indistinguishable": 0.0, "worse": -1.0}


class GeometryCallback(TrainerCallback):
    """Score the position geometry of the model being trained on each ``every``-th evaluation.

    Parameters
    ----------
    corpus : the corpus D is measured on (any ``--dataset`` of ``geoanalyze stress``).
    every : score on every this many evaluations (1: each).
    tokenizer : the tokenizer folder or name, when the Trainer has no ``processing_class``.
    null_draws, seed, max_length, limit : as for ``geoanalyze track``.
    """

    def __init__(
        self,
        corpus: str,
        every: int = 1,
        tokenizer: str | None = None,
        null_draws: int | None = None,
        seed: int = 0,
        max_length: int | None = None,
        limit: int | None = None,
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        self.options = StressOptions(
            str(corpus), layers="none", null_draws=null_draws, seed=seed, max_positions=max_length, limit=limit
        )
        self.every, self.tokenizer = every, tokenizer
        self.evaluations = 0
        self.trainer: Any = None
        self.history: list[dict[str, float]] = []

    def bind(self, trainer: Any) -> GeometryCallback:
        """Report through ``trainer.log`` (every reporter the trainer has); returns self."""
        self.trainer = trainer
        return self

    def score(self, model: Any, processing_class: Any = None) -> dict[str, float]:
        """The model's position scores and categories now, as ``geometry/...`` numbers."""
        with tempfile.TemporaryDirectory(prefix="geoanalyze-callback-") as folder:
            model.save_pretrained(folder)
            if processing_class is not None:
                processing_class.save_pretrained(folder)
            elif self.tokenizer is not None:
                from transformers import AutoTokenizer

                AutoTokenizer.from_pretrained(self.tokenizer).save_pretrained(folder)
            result = track(find_series([str(Path(folder))], order="given"), self.options)
        (record,) = result.records
        if record.position is None:
            return {}
        scores = {f"geometry/{key}": float(value) for key, value in record.position.observed.items()}
        for aspect, category in record.position.categories.items():
            if category in CATEGORY_VALUES:
                scores[f"geometry/{aspect}_category"] = CATEGORY_VALUES[category]
        return scores

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        self.evaluations += 1
        if (self.evaluations - 1) % self.every or not state.is_world_process_zero:
            return
        scores = self.score(kwargs["model"], kwargs.get("processing_class"))
        self.history.append({"step": state.global_step, **scores})
        if metrics is not None:
            metrics.update(scores)
        if self.trainer is not None:
            self.trainer.log(dict(scores))
        else:
            state.log_history.append({**scores, "step": state.global_step})
