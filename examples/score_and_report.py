"""Score encodings against a corpus from Python, read the verdicts, and write a report page.

Run from the repository root:  python examples/score_and_report.py [OUTPUT_FOLDER]
It uses the sample corpus shipped in sample_corpora/ and needs no network.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import geoanalyze as ga

CORPUS = Path(__file__).resolve().parent.parent / "sample_corpora" / "drift-words.txt"


def main(output: Path) -> None:
    # `geoanalyze stress rope:d=64 --dataset ... --compare sinusoidal,mds,random` (each row against its own
    # position shuffles, Holm-corrected over the run's tests)
    rope = ga.score("rope:d=64", dataset=str(CORPUS), compare=("sinusoidal", "mds", "random"))
    print(rope.verdict.sentence)
    scores = rope.scores["rope:d=64"].observed
    print(f"scaled stress {scores['scaled_stress']:.4f}, violation {scores['monotonicity_violation']:.4f}")
    print(dict(rope.verdict.categories))  # shape, order, local_order, lag, separation
    # rope.to_json() is what `stress -f json` prints; rope.vectors and rope.geometry are the arrays behind it

    # A second target, drawn at the same width, and a page with both (as `geoanalyze report`).
    alibi = ga.score("alibi", dataset=str(CORPUS), compare=("sinusoidal:d=12",))
    page = ga.write_report([rope, alibi], output / "report.md")
    print(f"wrote {page}")

    # Your own vectors against your own distances: every score, and the shuffle test of each.
    i = np.arange(40)
    D = np.abs(i[:, None] - i[None, :]) / 40  # a target that depends on |i - j| only
    P = ga.get_encoding("rope:d=32").vectors(i)
    print({name: round(value, 4) for name, value in ga.score_vectors(P, D).items()})
    tests = ga.shuffle_test(P, D, seed=0)
    order = tests["monotonicity_violation"]
    print(f"order: rank {order['rank']} of {order['draws'] + 1}, {order['category']} than its position shuffles")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="geoanalyze-example-")))
