"""Counting IMDB train: geoanalyze's count_positions against the bare Hugging Face tokenizer.

Requirement: our total time (tokenizer loaded, count_positions over the 25,000 reviews,
max_length 512) is at most 1.4x the time of the tokenizer alone on the same texts, written as a
user would: ``tok(texts, truncation=True, max_length=512)`` with the transformers fast tokenizer.
Loading the texts is excluded from both (loaded once). Our time includes loading the tokenizer;
the peer's does not (it is loaded once, before timing), which can only count against us.

Run: .venv/bin/python benchmarks/bench_counting.py [--repeats N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    MAX_LENGTH,
    imdb_texts,
    machine,
    print_table,
    time_interleaved,
    time_once,
    tokenizer_path,
    verdict,
)

LIMIT = 1.4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds after the warm-up (default 3)")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from geoanalyze.corpus.marginals import count_positions
    from geoanalyze.corpus.tokenize import HFTokenizer

    print(f"machine: {machine()}")
    load_seconds, texts = time_once(imdb_texts)
    path = tokenizer_path()
    print(f"texts: {len(texts)} IMDB train reviews (loaded once in {load_seconds:.2f} s, not timed)")
    print(f"tokenizer: {path} (bert-base-uncased WordPiece), max_length {MAX_LENGTH}")

    hf = AutoTokenizer.from_pretrained(path)
    print(f"peer: {type(hf).__name__} (is_fast={hf.is_fast})")

    def ours() -> object:
        return count_positions(texts, HFTokenizer(path, max_length=MAX_LENGTH))

    def peer() -> object:
        return hf(texts, truncation=True, max_length=MAX_LENGTH)

    # Both must see the same tokens: the number counted equals the number the peer returns.
    counted = int(ours().counts.sum())
    returned = sum(map(len, peer()["input_ids"]))
    print(f"check: tokens counted {counted:,} == tokens the peer returns {returned:,}: {counted == returned}")

    timings = time_interleaved({"ours": ours, "peer": peer}, repeats=args.repeats)
    ratio = timings["ours"].best / timings["peer"].best
    print(f"timing: best (median) of {args.repeats} interleaved rounds after one warm-up each")
    print_table(
        [
            (
                "geoanalyze: HFTokenizer + count_positions",
                f"{timings['ours'].best:.2f}",
                f"{timings['ours'].median:.2f}",
                f"{ratio:.2f}",
            ),
            (
                "transformers: tok(texts, truncation=True, max_length=512)",
                f"{timings['peer'].best:.2f}",
                f"{timings['peer'].median:.2f}",
                "1.00",
            ),
        ],
        ("contender", "best s", "median s", "ratio"),
    )
    passed = verdict(
        f"counting IMDB train within {LIMIT}x the tokenizer alone",
        ratio <= LIMIT and counted == returned,
        f"ours {timings['ours'].best:.2f} s / peer {timings['peer'].best:.2f} s = {ratio:.2f}x, limit {LIMIT}x",
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
