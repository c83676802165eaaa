"""The forward pass of `stress --layers all` against plain transformers, and what capturing queries and keys costs.

Requirements (issue "Any checkpoint, any size"):

1. Hidden-state pass throughput at most 1.1x a plain transformers loop doing the same forward
   passes (the same sorted batches, ``output_hidden_states=True``, model and tokenizer loaded,
   texts tokenized), on the real MiniLM checkpoint and on a small random-weight Llama (RoPE).
2. The query/key capture through the attention interface at most 1.2x the same pass without it.

Both sides run in this process, interleaved, best of three after a warm-up, on 512 SST-2
sentences (../shared/data) or the drift-words sample when the real corpora are absent. Wall
time and this process's CPU time are both printed; the verdicts use CPU time, which other
work on a shared machine disturbs far less than wall time.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DATA_DIR, machine, print_table, tokenizer_path, verdict

REPO = Path(__file__).resolve().parents[1]
MAX_LENGTH = 64
BATCH = 32


def texts() -> list[str]:
    sst2 = DATA_DIR / "sst2" / "train.tsv"
    if sst2.is_file():
        lines = sst2.read_text(encoding="utf-8").splitlines()[1:513]
        return [line.split("\t")[0] for line in lines]
    return (REPO / "sample_corpora" / "drift-words.txt").read_text(encoding="utf-8").splitlines()[:512]


def tiny_llama(folder: Path) -> Path:
    """A random-weight Llama (width 256, 4 blocks, 8 heads, GQA 2) with the bert-base-uncased vocabulary."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        LlamaModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def plain_loop(folder: str, sample: list[str]) -> Any:
    """What a user would write with transformers alone for the same centroids: load, tokenize, sort, pad,
    forward with every hidden state, masked per-position sums of all layers accumulated in float64."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    encoded = tokenizer(sample, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    order = np.argsort([len(ids) for ids in encoded], kind="stable")
    pad = tokenizer.pad_token_id or 0
    n = max(len(ids) for ids in encoded)
    total = None
    counts = torch.zeros(n, dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, len(order), BATCH):
            batch = [encoded[k] for k in order[start : start + BATCH]]
            width = max(len(ids) for ids in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, sequence in enumerate(batch):
                ids[row, : len(sequence)] = torch.tensor(sequence)
                mask[row, : len(sequence)] = 1
            states = torch.stack(model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states)
            sums = torch.einsum("lbth,bt->lth", states, mask.float()).double()
            if total is None:
                total = torch.zeros((states.shape[0], n, states.shape[-1]), dtype=torch.float64)
            total[:, :width] += sums
            counts[:width] += mask.sum(0)
    return total / counts[None, :, None]


def ours(folder: str, sample: list[str], capture: bool) -> Any:
    from geoanalyze.checkpoints import load_checkpoint
    from geoanalyze.checkpoints.hidden import forward_pass

    checkpoint = load_checkpoint(folder)
    return forward_pass(
        checkpoint, sample, MAX_LENGTH, batch_size=BATCH, device="cpu", dtype="float32", capture=capture
    )


def measure(contenders: dict[str, Any], repeats: int = 3) -> dict[str, tuple[float, float]]:
    """Best wall and best CPU seconds of each contender, interleaved, after one warm-up call each."""
    import time

    for function in contenders.values():
        function()
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, function in contenders.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            function()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return {name: (min(wall[name]), min(cpu[name])) for name in contenders}


def main() -> int:
    import torch

    print(machine(), f"torch threads {torch.get_num_threads()}")
    sample = texts()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "MiniLM (BERT, learned)": tokenizer_path(),
            "Llama 256x4 (RoPE, GQA)": str(tiny_llama(Path(tmp) / "llama")),
        }
        rows = []
        for label, folder in models.items():
            timings = measure(
                {
                    "plain": lambda f=folder: plain_loop(f, sample),
                    "hidden": lambda f=folder: ours(f, sample, capture=False),
                    "capture": lambda f=folder: ours(f, sample, capture=True),
                }
            )
            (plain_w, plain), (hidden_w, hidden), (captured_w, captured) = (
                timings[k] for k in ("plain", "hidden", "capture")
            )
            rows.append(
                (
                    label,
                    f"{plain_w:.2f} / {plain:.2f} s",
                    f"{hidden_w:.2f} / {hidden:.2f} s",
                    f"{captured_w:.2f} / {captured:.2f} s",
                    f"{hidden / plain:.2f}",
                    f"{captured / hidden:.2f}",
                )
            )
            ok &= verdict(
                f"{label}: hidden-state pass <= 1.1x plain transformers",
                hidden / plain <= 1.1,
                f"{hidden / plain:.2f}x CPU",
            )
            ok &= verdict(
                f"{label}: capture <= 1.2x the pass without it",
                captured / hidden <= 1.2,
                f"{captured / hidden:.2f}x CPU",
            )
        print_table(
            rows,
            (
                "model (wall / CPU)",
                "plain transformers",
                "ours, hidden only",
                "ours, hidden + q/k",
                "CPU ratio hidden",
                "CPU ratio capture",
            ),
        )
    print(f"{len(sample)} sentences, max length {MAX_LENGTH}, batch {BATCH}, best of 3 interleaved")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
