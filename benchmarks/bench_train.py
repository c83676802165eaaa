"""Training throughput: our BERT against transformers' BertForMaskedLM, same sizes, same batches.

Requirement: tokens per second of one training step (forward, backward, AdamW step) of
geoanalyze's BERT (learned PE, masked-LM head) at least equal to ``BertForMaskedLM`` with the
same sizes, on the same MLM batches (SST-2 texts, bert-base-uncased tokenizer, 15% masking).

Both models: vocabulary 30,522, width 256, 4 layers, 4 heads, MLP 1024, 128 positions, dropout
0.1, SDPA attention, AdamW, float32 on CPU (bf16 autocast on CUDA for both). Ours computes the
vocabulary logits at the masked positions only (``logits_at``); transformers computes them at
every position. For honesty, ours with logits at every position is timed too.

Timing: the contenders alternate (see _common.time_interleaved), ``steps`` steps per round, the
best round reported. Run: .venv/bin/python benchmarks/bench_train.py [--repeats 3] [--steps 5]
[--batch 16] [--length 128] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA_DIR, machine, print_table, time_interleaved, verdict

SIZES = {"d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 1024, "dropout": 0.1}


def batches(batch: int, length: int, count: int) -> list[Any]:
    """``count`` MLM batches of SST-2 train, as the training loop draws them."""
    from geoanalyze.train import build_task, resolve_config

    config = resolve_config(
        "ci",
        [
            "task=mlm",
            "dataset=sst2",
            f"data_dir={DATA_DIR}",
            f"batch_size={batch}",
            f"max_length={length}",
            f"model.n_positions={length}",
            "limit=5000",
        ],
    )
    task = build_task(config)
    return [task.train_batch(step) for step in range(1, count + 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()

    import torch
    from transformers import BertConfig, BertForMaskedLM

    from geoanalyze.models import ModelConfig, Transformer
    from geoanalyze.train.loop import loss_terms

    device = torch.device(args.device)
    print(f"machine: {machine()}, torch {torch.__version__}, threads {torch.get_num_threads()}, device {device}")
    data = batches(args.batch, args.length, args.steps)
    tensors = [tuple(torch.from_numpy(a).to(device) for a in (b.input_ids, b.attention_mask, b.labels)) for b in data]
    tokens = sum(int(b.attention_mask.sum()) for b in data)
    print(
        f"batches: {args.steps} x {args.batch} SST-2 texts, padded to the longest (<= {args.length}), "
        f"{tokens} real tokens per round"
    )

    torch.manual_seed(0)
    ours = Transformer(ModelConfig(arch="bert", vocab_size=30522, n_positions=args.length, pe="learned", **SIZES))
    hf_config = BertConfig(
        vocab_size=30522,
        hidden_size=SIZES["d_model"],
        num_hidden_layers=SIZES["n_layers"],
        num_attention_heads=SIZES["n_heads"],
        intermediate_size=SIZES["d_ff"],
        max_position_embeddings=args.length,
        hidden_dropout_prob=SIZES["dropout"],
        attention_probs_dropout_prob=SIZES["dropout"],
        attn_implementation="sdpa",
    )
    peer = BertForMaskedLM(hf_config)
    models = {"ours": ours.to(device).train(), "peer": peer.to(device).train()}
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-4) for name, model in models.items()}
    ours_params = sum(p.numel() for p in ours.parameters())
    peer_params = sum(p.numel() for p in peer.parameters())
    print(f"parameters: ours {ours_params:,}, BertForMaskedLM {peer_params:,}")

    def autocast() -> Any:
        if device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step_ours(full_logits: bool = False) -> None:
        for ids, mask, labels in tensors:
            with autocast():
                if full_logits:
                    logits = ours(ids, mask)["logits"].float()
                    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
                else:
                    loss_sum, _, count = loss_terms(ours, ids, mask, labels, sequence_level=False)
                    loss = loss_sum / count.clamp(min=1)
            optimizers["ours"].zero_grad(set_to_none=True)
            loss.backward()
            optimizers["ours"].step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step_peer() -> None:
        for ids, mask, labels in tensors:
            with autocast():
                loss = peer(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimizers["peer"].zero_grad(set_to_none=True)
            loss.backward()
            optimizers["peer"].step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    timings = time_interleaved(
        {"ours": step_ours, "ours (full logits)": lambda: step_ours(True), "peer": step_peer}, repeats=args.repeats
    )
    rows = [(name, f"{t.best:.3f}", f"{t.median:.3f}", f"{tokens / t.best:,.0f}") for name, t in timings.items()]
    print_table(rows, ("contender", "best s / round", "median s", "tokens / s"))
    ratio = timings["peer"].best / timings["ours"].best
    full_ratio = timings["peer"].best / timings["ours (full logits)"].best
    print(f"throughput ratio ours / BertForMaskedLM: {ratio:.2f} (with logits at every position: {full_ratio:.2f})")
    passed = verdict("our BERT's training throughput >= BertForMaskedLM's", ratio >= 1.0, f"ratio {ratio:.2f}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
