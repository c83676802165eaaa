"""Campaign 4, resources (docs/reliability.md): ``GEOANALYZE_CPU_THREADS=10000 geoanalyze train ...``
was accepted and started about 9,000 threads on a 2-core machine (a load average of 1,287; every
other process stalled). A count above the cores the run may use is now capped there, with a note;
the numbers do not depend on the thread count (docs/determinism.md)."""

from __future__ import annotations

import os

from .harness import Sandbox, python_process

# The run as typed, with torch's thread setter watched and the process's threads counted at the end.
_WATCHED = """
import atexit, os, sys, torch
asked = []
set_threads = torch.set_num_threads
def watched(n):
    asked.append(n)
    set_threads(n)
torch.set_num_threads = watched
def report():
    threads = next(l for l in open("/proc/self/status") if l.startswith("Threads:")).split()[1]
    print("asked:", max(asked, default=0), "threads:", threads, file=sys.stderr, flush=True)
atexit.register(report)
sys.argv = ["geoanalyze", *sys.argv[1:]]
from geoanalyze.cli.app import main
main()
"""


def test_a_thread_count_above_the_cores_is_capped_with_a_note(sandbox: Sandbox) -> None:
    cores = len(os.sched_getaffinity(0))
    done = python_process(
        sandbox, _WATCHED, "train", "-o", "run", "--preset", "smoke", "--steps", "2", "--device", "cpu",
        env={"GEOANALYZE_CPU_THREADS": "10000"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    asked, threads = (int(word) for word in lines[-1].split()[1::2])
    assert asked <= cores, done.stderr  # 0: torch already ran one thread per core
    assert threads <= 4 * cores + 16, done.stderr  # torch's pools and ours, not thousands
    notes = [line for line in lines if line.startswith("note:")]
    assert any("GEOANALYZE_CPU_THREADS=10000" in line and f"{cores} thread" in line for line in notes), notes
    assert (sandbox.path("run") / "checkpoint").is_dir()


def test_a_thread_count_within_the_cores_is_kept_without_a_note(sandbox: Sandbox) -> None:
    done = python_process(
        sandbox, _WATCHED, "train", "-o", "run", "--preset", "smoke", "--steps", "2", "--device", "cpu",
        env={"GEOANALYZE_CPU_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stderr.splitlines() if "GEOANALYZE_CPU_THREADS" in line]
