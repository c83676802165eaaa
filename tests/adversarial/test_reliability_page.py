"""docs/reliability.md lists every file of the adversarial suite with its number of cases: kept true."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from helpers import run_process

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "docs" / "reliability.md"


def test_the_reliability_page_counts_the_cases_of_every_file() -> None:
    listed = {
        name: int(count)
        for name, count in re.findall(r"^\| `(test_\w+\.py)` \| (\d+) \|", PAGE.read_text(encoding="utf-8"), re.M)
    }
    # pytest's own collection (in one process: -n 0, whatever the addopts say), every mark included
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "", "-n", "0", "-p", "no:cacheprovider"]
    done = run_process([*command, HERE], cwd=HERE.parents[1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = done.stdout
    counts = Counter(
        Path(line.split("::")[0]).name for line in collected.splitlines() if "::" in line and "tests/adversarial" in line
    )
    counts.pop(Path(__file__).name, None)
    assert listed == dict(counts), "update the table of docs/reliability.md to the collected cases"
    assert sum(listed.values()) >= 300
