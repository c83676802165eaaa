"""Wall time of the CI-preset experiments a user runs first.

Requirement: ``geoanalyze verify necessity --preset ci`` and ``geoanalyze verify separation
--preset ci`` each finish in under 3 minutes on this machine (CPU), the whole command included
(start-up, tokenization, every training run, figures, the record). There is no peer here: the
budget is the reference, and the ratio printed is our time / 180 s.

Run: .venv/bin/python benchmarks/bench_verify.py [--experiments necessity separation]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA_DIR, machine, print_table, verdict

BUDGET_S = 180.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", nargs="+", default=["necessity", "separation"])
    args = parser.parse_args()
    script = shutil.which("geoanalyze", path=str(Path(sys.executable).parent))
    if script is None:
        sys.exit("the geoanalyze console script is not installed next to this Python; pip install -e .")
    print(f"machine: {machine()}")
    rows, passed = [], True
    for name in args.experiments:
        with tempfile.TemporaryDirectory() as folder:
            command = [script, "verify", name, "--device", "cpu", "--data-dir", str(DATA_DIR), "-o", f"{folder}/out"]
            start = time.perf_counter()
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            seconds = time.perf_counter() - start
        outcome = {0: "PASS", 1: "FAIL (verdict)"}.get(result.returncode, f"error {result.returncode}")
        rows.append((name, f"{seconds:.1f}", f"{BUDGET_S:.0f}", f"{seconds / BUDGET_S:.2f}", outcome))
        if result.returncode not in (0, 1):
            print(result.stderr[-2000:])
        passed &= verdict(f"verify {name} --preset ci under 3 minutes", seconds < BUDGET_S, f"{seconds:.1f} s")
    print_table(rows, ("experiment", "seconds", "budget s", "ratio", "verdicts"))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
