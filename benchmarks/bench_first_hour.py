"""The times README and `verify list` state, measured as a newcomer meets them, with the machine.

Each step runs the command as a user types it (a real process, from the repository root), with a
fresh cache folder ($GEOANALYZE_CACHE_DIR in a temp folder), and reports its wall time and the CPU
time of the process and its children (user + system), beside the machine: CPU model, cores, and
the load average before and after (other work on the machine slows the wall time, not the CPU time).

    .venv/bin/python benchmarks/bench_first_hour.py                 # first run, cold and warm (~2 min)
    .venv/bin/python benchmarks/bench_first_hour.py --repeats 3 --install --pytest   # README's figures
    .venv/bin/python benchmarks/bench_first_hour.py --train         # + the tour's `train` (200 steps)
    .venv/bin/python benchmarks/bench_first_hour.py --verify necessity   # + `verify necessity` (ci preset)

Steps: ``first-run`` (README's one command, no caches; ``--repeats N``: N times, each with a fresh
cache folder, and the median), ``warm-run`` (the same again, its caches read), ``install``
(README's install into a fresh virtual environment: the CPU build of torch, then ``pip install
-e .``; ``--torch-index-url`` where pip should not take torch from its configured index),
``pytest`` (README's test command, the default run), ``tour-train`` (the tour's `train` on SST-2
with ../shared/data), ``verify NAME`` (the experiment at the ci preset with --data-dir, as the tour
runs it; compared with its minutes_ci).

A figure for README is a quiet one: the script says ``LOADED`` when other work kept the machine
busy (a 1-minute load above half its cores before the first step, or, during any step, more than
half a core of busy time beyond the step's own CPU time, from /proc/stat), and such a run's wall
times are not the ones to state.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GEOANALYZE = [sys.executable, "-m", "geoanalyze"]
DATA_DIR = Path(os.environ.get("GEOANALYZE_DATA_DIR") or REPO.parent / "shared" / "data")
FIRST_RUN = ["stress", "sentence-transformers/all-MiniLM-L6-v2", "--dataset", "sample_corpora/drift-words.txt"]
TOUR_TRAIN = [
    "train", "--task", "mlm", "--dataset", "sst2", "--data-dir", str(DATA_DIR),
    "--pe", "learned", "--set", "max_length=48", "--set", "model.n_positions=48",
]  # fmt: skip


@dataclass
class Measured:
    step: str
    wall: float
    cpu: float
    code: int
    #: the CPU seconds the whole machine spent during the step beyond the step's own (other work)
    others: float = 0.0

    @property
    def other_cores(self) -> float:
        """How many cores other work kept busy during the step, on average."""
        return self.others / self.wall if self.wall > 0 else 0.0


def machine_busy() -> float:
    """CPU seconds every core of the machine has spent busy since boot (/proc/stat), or NaN where unknown."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return float("nan")
    ticks = [int(x) for x in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def machine() -> str:
    """CPU model, cores this process may use, and the 1-minute load average."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


#: cores of other work during a step above which the run is not a quiet one
OTHER_WORK = 0.5


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "-"


def loaded() -> bool:
    """Whether other work keeps the machine busy: a 1-minute load above half the cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return hasattr(os, "getloadavg") and os.getloadavg()[0] > cores / 2


def run(step: str, words: list[str], env: dict[str, str], command: list[str] | None = None) -> Measured:
    """One command as a real process: wall time and the CPU time of it and its children
    (``command``: the program, default ``python -m geoanalyze``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = machine_busy()
    began = time.perf_counter()
    argv = [*(GEOANALYZE if command is None else command), *words]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    others = max(0.0, machine_busy() - busy - cpu)
    if done.returncode != 0:
        print(f"{step}: exit {done.returncode}\n{(done.stdout + done.stderr)[-1500:]}", file=sys.stderr)
    return Measured(step, wall, cpu, done.returncode, others)


def minutes_ci(name: str) -> float | None:
    from geoanalyze.experiments import EXPERIMENTS

    return EXPERIMENTS[name].minutes_ci if name in EXPERIMENTS else None


def install(scratch: Path, index_url: str | None) -> Measured:
    """README's install into a fresh environment: venv, the CPU build of torch, then the package."""
    venv = scratch / "venv"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [*pip, "torch", *(["--index-url", index_url] if index_url else [])],
        [*pip, "-e", str(REPO)],
    ]
    total = Measured("install", 0.0, 0.0, 0)
    for argv in steps:
        measured = run("install", argv[1:], dict(os.environ), command=argv[:1])
        total = Measured(
            "install", total.wall + measured.wall, total.cpu + measured.cpu, measured.code, total.others + measured.others
        )
        if measured.code != 0:
            break
    return total


def median_of(runs: list[Measured]) -> Measured:
    """The median wall and CPU time of repeated runs (the worst exit code)."""
    import statistics

    name = f"{runs[0].step} (median of {len(runs)})" if len(runs) > 1 else runs[0].step
    return Measured(
        name,
        statistics.median(m.wall for m in runs),
        statistics.median(m.cpu for m in runs),
        max(m.code for m in runs),
        max(m.others for m in runs),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="cold first runs, each with a fresh cache (median)")
    parser.add_argument("--install", action="store_true", help="also time README's install into a fresh venv")
    parser.add_argument("--torch-index-url", help="where the install takes torch from (e.g. PyTorch's CPU index)")
    parser.add_argument("--pytest", action="store_true", help="also time README's test command (pytest)")
    parser.add_argument("--train", action="store_true", help="also time the README tour's train (200 steps)")
    parser.add_argument("--verify", action="append", default=[], help="also time `verify NAME` at the ci preset")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"load average before (1, 5, 15 min): {load()}{'  LOADED' if loaded() else ''}")
    busy = loaded()
    results = []
    with tempfile.TemporaryDirectory(prefix="geoanalyze-first-hour-") as scratch:
        env = {**os.environ, "GEOANALYZE_CACHE_DIR": str(Path(scratch) / "cache"), "HF_HUB_OFFLINE": "1"}
        if args.install:
            results.append(install(Path(scratch), args.torch_index_url))
        cold = []
        for index in range(max(args.repeats, 1)):
            fresh = {**env, "GEOANALYZE_CACHE_DIR": str(Path(scratch) / f"cache-{index}")}
            cold.append(run("first-run", FIRST_RUN, fresh))
        results.append(median_of(cold))
        results.append(run("warm-run", FIRST_RUN, {**env, "GEOANALYZE_CACHE_DIR": str(Path(scratch) / "cache-0")}))
        if args.pytest:
            pytest = [str(Path(sys.executable).parent / "pytest"), "-q", "-p", "no:cacheprovider"]
            results.append(run("pytest", [], {**os.environ}, command=pytest))
        if args.train:
            results.append(run("tour-train", [*TOUR_TRAIN, "--output-dir", str(Path(scratch) / "run")], env))
        for name in args.verify:
            words = ["verify", name, "--data-dir", str(DATA_DIR), "--output-dir", str(Path(scratch) / name)]
            results.append(run(f"verify {name}", words, env))
    # The load average after the steps counts the steps' own work (pytest keeps both cores busy); what
    # says whether other work shared the machine is the busy time beyond the steps' own, step by step.
    busy = busy or any(m.other_cores > OTHER_WORK for m in results)
    print(f"load average after (1, 5, 15 min): {load()}")
    if busy:
        print("LOADED: other work kept the machine busy; these wall times are not quiet figures")
    print(f"{'step':<30} {'wall s':>8} {'cpu s':>8} {'others':>7} {'exit':>5}  stated")
    for m in results:
        stated = ""
        if m.step.startswith("verify "):
            stated = f"verify list: {minutes_ci(m.step.split()[1])} min"
        print(f"{m.step:<30} {m.wall:8.1f} {m.cpu:8.1f} {m.other_cores:7.2f} {m.code:5d}  {stated}")
    print("others: cores other work kept busy during the step, on average (/proc/stat minus the step's own CPU)")
    return 0 if all(m.code in (0, 1) for m in results) else 1


if __name__ == "__main__":
    sys.exit(main())
