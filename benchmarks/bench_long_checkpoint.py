"""The checkpoint pass at long lengths against a plain transformers forward, in time and peak memory.

Requirement (issue 34, "Checkpoints at long lengths"): a tiny Llama-config model (random weights,
RoPE scaled by YaRN), 32k tokens, CPU forward: our capture pass (every layer's hidden-state
centroids and every block's rotated query/key centroids, chunked prefill through the model's
cache) within 1.2x a plain transformers forward (the same dtype, SDPA attention, ``use_cache=False``)
in time and in peak memory.

Each side runs in a subprocess of its own (a fresh interpreter: the peak is that process's alone),
which loads the saved checkpoint and its tokenizer, tokenizes the text (real text: this repository's
docs, repeated to length) and runs the pass; it reports its own seconds (from load to result) and its
peak memory (``resource.getrusage`` ru_maxrss on CPU, ``torch.cuda.max_memory_allocated`` on CUDA).

    python benchmarks/bench_long_checkpoint.py                      # CPU, tiny model, 32,768 tokens
    python benchmarks/bench_long_checkpoint.py --size 1b --device cuda --dtype bfloat16 \\
        --lengths 32768,65536,131072                                # benchmarks/gpu/long_context.sh
    python benchmarks/bench_long_checkpoint.py --tiny               # a dry run: tiny, CPU, 2,048 tokens
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, print_table, tokenizer_path, verdict

REPO = Path(__file__).resolve().parents[1]
GOAL = 1.2
#: model shapes: the tiny CPU one, and a Llama-3.2-1B-like one (the bert-base-uncased vocabulary stands in)
SIZES = {
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 128},
    "1b": {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 8192},
}  # fmt: skip


def build(folder: Path, size: str, device: str, dtype: str) -> int:
    """Save a random-weight Llama of ``size`` (YaRN x4 over 8192 positions) with the MiniLM tokenizer; its parameters."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=131072,
        rope_parameters={"rope_type": "yarn", "factor": 16.0, "rope_theta": 500000.0,
                         "original_max_position_embeddings": 8192},
        pad_token_id=tokenizer.pad_token_id,
        **SIZES[size],
    )  # fmt: skip
    with torch.device(device):
        model = LlamaModel(config).to(getattr(torch, dtype))
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return sum(parameter.numel() for parameter in model.parameters())


def text(tokens: int) -> str:
    """Real text (this repository's docs) repeated to more than ``tokens`` word-piece tokens."""
    words = " ".join(path.read_text(encoding="utf-8") for path in sorted((REPO / "docs").glob("*.md"))).split()
    return " ".join(words * (1 + tokens // max(len(words), 1)))


def peak(device: str) -> int:
    """Peak bytes of this process: GPU memory allocated on CUDA, else the resident set."""
    import resource

    if device == "cuda":
        import torch

        return int(torch.cuda.max_memory_allocated())
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker(side: str, folder: str, length: int, device: str, dtype: str) -> dict[str, Any]:
    """One side's pass, in this process: seconds from load to result, peak memory, tokens."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel, AutoTokenizer

    from geoanalyze.checkpoints.hidden import forward_pass
    from geoanalyze.checkpoints.load import load_checkpoint

    start = time.perf_counter()  # imports done: from loading the checkpoint to the result
    if side == "ours":
        result = forward_pass(load_checkpoint(folder), [text(length)], length, 1, device=device, dtype=dtype)
        tokens = int(result.reach.sum())
        rows = len(result.queries) + len(result.keys) + result.centroids.shape[0]
    else:
        model = AutoModel.from_pretrained(folder, dtype=getattr(torch, dtype)).to(device).eval()
        ids = AutoTokenizer.from_pretrained(folder)(text(length), truncation=True, max_length=length)["input_ids"]
        with torch.no_grad():
            output = model(input_ids=torch.tensor([ids], device=device), use_cache=False)
        output.last_hidden_state.float().sum().item()
        tokens, rows = len(ids), 0
    if device == "cuda":
        torch.cuda.synchronize()
    return {"seconds": time.perf_counter() - start, "peak": peak(device), "tokens": tokens, "rows": rows}


def measure(side: str, folder: Path, length: int, device: str, dtype: str) -> dict[str, Any]:
    """Run :func:`worker` in a subprocess; its report (an error line and exit 1 where it fails)."""
    command = [sys.executable, __file__, "--worker", side, "--folder", str(folder), "--lengths", str(length),
               "--device", device, "--dtype", dtype]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the {side} pass at {length} tokens failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--lengths", default="32768", help="comma-separated token counts")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--tiny", "--dry-run", action="store_true", help="the tiny model at 2,048 tokens on CPU")
    parser.add_argument("--worker", choices=("ours", "plain"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    lengths = [int(value) for value in args.lengths.split(",")]
    if args.worker:
        print(json.dumps(worker(args.worker, args.folder, lengths[0], args.device, args.dtype)))
        return 0
    if args.tiny:
        args.size, args.device, args.dtype, lengths = "tiny", "cpu", "float32", [2048]
    print(f"# checkpoint pass at long lengths: {args.size} Llama, {args.device}, {args.dtype} ({machine()})")
    rows, passed = [], True
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "llama"
        start = time.perf_counter()
        parameters = build(folder, args.size, args.device, args.dtype)
        print(f"built and saved {parameters / 1e6:.1f} M parameters in {time.perf_counter() - start:.0f} s")
        for length in lengths:
            plain = measure("plain", folder, length, args.device, args.dtype)
            ours = measure("ours", folder, length, args.device, args.dtype)
            time_ratio, memory_ratio = ours["seconds"] / plain["seconds"], ours["peak"] / plain["peak"]
            for side, report in (("plain transformers", plain), ("geoanalyze capture", ours)):
                rows.append((str(length), side, f"{report['seconds']:.1f}", f"{report['tokens'] / report['seconds']:,.0f}",
                             f"{report['peak'] / 2**30:.2f}"))  # fmt: skip
            rows.append((str(length), "ratio (goal 1.2x)", f"{time_ratio:.2f}x", "", f"{memory_ratio:.2f}x"))
            passed &= verdict(f"time at {length} tokens within {GOAL}x", time_ratio <= GOAL, f"{time_ratio:.2f}x")
            passed &= verdict(f"peak memory at {length} tokens within {GOAL}x", memory_ratio <= GOAL,
                              f"{memory_ratio:.2f}x")  # fmt: skip
    print_table(rows, ("tokens", "pass", "seconds", "tokens/s", "peak GiB"))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
