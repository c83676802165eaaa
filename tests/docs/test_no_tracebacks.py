"""No page shows a Python traceback as a recorded output.

A recorded session whose script crashed is regenerated faithfully: the traceback becomes the
"output" and the page's comparison test keeps passing. Users read it as the tool's behaviour.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_page_records_a_traceback() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    crashed = [str(p.relative_to(ROOT)) for p in pages if "Traceback (most recent call last)" in p.read_text()]
    assert crashed == []
