"""docs/reliability.md lists every file of the adversarial suite with its number of cases: kept true."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "docs" / "reliability.md"


def test_the_reliability_page_counts_the_cases_of_every_file() -> None:
    listed = {
        name: int(count)
        for name, count in re.findall(r"^\| `(test_\w+\.py)` \| (\d+) \|", PAGE.read_text(encoding="utf-8"), re.M)
    }
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "", "-p", "no:cacheprovider", str(HERE)],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE.parents[1],
    ).stdout
    counts = Counter(
        Path(line.split("::")[0]).name for line in collected.splitlines() if "::" in line and "tests/adversarial" in line
    )
    counts.pop(Path(__file__).name, None)
    assert listed == dict(counts), "update the table of docs/reliability.md to the collected cases"
    assert sum(listed.values()) >= 300
