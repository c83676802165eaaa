"""Geometry over training: `track` on a series against one `stress` per checkpoint, and the cost of
`train --geometry-every`.

Requirements (issue 24):

1. ``track`` on 10 checkpoints of our own ``train`` costs at most 1.2x the sum of 10 single
   ``stress model:<checkpoint> --layers none --compare ''`` analyses with warm counts (both
   in-process; the counts of the corpus are cached before either is timed). A series counts the
   corpus and draws the null once; each ``stress`` reads the counts and draws its null again.
2. ``train --geometry-every N`` at N = the preset's evaluation interval (50 steps of the ci preset)
   adds at most 5% to the training time (the same run with and without the probe, interleaved).

Corpus: sample_corpora/drift.txt (bert-base-uncased WordPiece, 64 positions). Run:
.venv/bin/python benchmarks/bench_track.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, print_table, time_interleaved, verdict

REPO = Path(__file__).resolve().parents[1]
CORPUS = str(REPO / "sample_corpora" / "drift.txt")
POSITIONS = 64
TINY = ["model.d_model=32", "model.d_ff=64", "model.n_positions=64", "batch_size=8", "eval_batches=1"]


def trained_series(folder: Path, checkpoints: int = 10) -> Path:
    """A run of ``checkpoints`` evaluations, every one kept."""
    from geoanalyze.train import train
    from geoanalyze.train.config import resolve_config
    from geoanalyze.train.loop import RunExtras

    config = resolve_config("ci", [*TINY, f"steps={2 * checkpoints}", "eval_every=2", "warmup_steps=2"])
    train(config, folder / "run", progress=False, extras=RunExtras(keep_checkpoints=checkpoints))
    return folder / "run"


def series_against_singles(run: Path, repeats: int) -> bool:
    from geoanalyze.analysis import StressOptions, analyze
    from geoanalyze.tracking import find_series, track

    members = find_series([str(run)])
    options = StressOptions(CORPUS, layers="none", compare=(), max_positions=POSITIONS)
    analyze(f"model:{members[0].location}", options)  # warm counts

    def singles() -> Any:
        return [analyze(f"model:{member.location}", options) for member in members]

    def series() -> Any:
        return track(members, options)

    timings = time_interleaved({"10 x stress": singles, "track": series}, repeats=repeats)
    ratio = timings["track"].best / timings["10 x stress"].best
    rows: list[tuple[str, ...]] = [(name, f"{t.best:.3f}", f"{t.median:.3f}") for name, t in timings.items()]
    print_table(rows, ("contender", "best s", "median s"))
    return verdict("track on 10 checkpoints <= 1.2 x 10 single stress runs", ratio <= 1.2, f"ratio {ratio:.3f}")


def probe_overhead(folder: Path, repeats: int) -> bool:
    from geoanalyze.tracking.probe import GeometryProbe
    from geoanalyze.train import train
    from geoanalyze.train.config import resolve_config
    from geoanalyze.train.loop import RunExtras

    config = resolve_config("ci", [])  # 200 steps, an evaluation every 50
    probe = RunExtras(geometry_every=config.eval_every, probe=lambda task: GeometryProbe(task, seed=config.seed))

    def run(extras: RunExtras | None) -> Path:
        out = Path(tempfile.mkdtemp(dir=folder))
        shutil.rmtree(out)
        train(config, out, progress=False, extras=extras)
        return out

    timings = time_interleaved({"train": lambda: run(None), "train --geometry-every 50": lambda: run(probe)}, repeats)
    wall = timings["train --geometry-every 50"].best / timings["train"].best - 1
    rows: list[tuple[str, ...]] = [(name, f"{t.best:.3f}", f"{t.median:.3f}") for name, t in timings.items()]
    print_table(rows, ("contender", "best s", "median s"))
    # The probes' own seconds against the run's training time, measured inside one run: on a shared
    # machine the difference of two whole runs (printed above) is mostly the other load's.
    lines = [json.loads(line) for line in (run(probe) / "metrics.jsonl").read_text().splitlines()]
    probes = sum(line["geometry_s"] for line in lines if "geometry_s" in line)
    trained = max(line["time_s"] for line in lines if "time_s" in line)
    share = probes / trained
    print(f"probes: {probes:.3f} s of {trained:.3f} s of training ({share:.1%}); whole runs differ by {wall:+.1%}")
    return verdict("--geometry-every at the evaluation interval adds <= 5%", share <= 0.05, f"{share:.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as folder:
        run = trained_series(Path(folder))
        passed = series_against_singles(run, args.repeats)
        passed &= probe_overhead(Path(folder), 1)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
