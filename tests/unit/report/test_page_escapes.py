"""The report page shows text from outside it literally: a target such as ``<site-packages>/model``
in the verdict lines, the warnings and the "not analysed" heading is escaped, so a GFM renderer does
not swallow ``<site-packages>`` as an HTML tag (issue 23)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

import geoanalyze as ga
from geoanalyze.report.page import NotAnalysed, build_report
from geoanalyze.results import StressResult

GFM = MarkdownIt("commonmark").enable("table")
TARGET = "<site-packages>/model"


@pytest.fixture(scope="module")
def noisy() -> StressResult:
    """A real result named like a path under site-packages, its noise fraction above the warning's."""
    result = ga.score("rope:d=16", dataset="synthetic:drift", null_draws=2, compare=("sinusoidal",))
    return dataclasses.replace(result, target=TARGET, noise={**result.noise, "noise_fraction": 0.9})


def test_verdicts_warnings_and_not_analysed_show_angle_brackets(noisy: StressResult, tmp_path: Path) -> None:
    failed = NotAnalysed("<site-packages>/other", "cannot read <site-packages>/other")
    page = build_report([noisy, failed], tmp_path / "figs", "a page")
    assert noisy.summary.warnings and noisy.summary.verdict.startswith(TARGET)
    lines = page.text.splitlines()
    assert f"- \\{noisy.summary.verdict}" in lines
    assert any(line.startswith("> **Warning:** \\<site-packages>/model: noise fraction 0.90") for line in lines)
    assert "## \\<site-packages>/other" in lines and "not analysed: cannot read \\<site-packages>/other" in lines
    html = GFM.render(page.text)
    assert "<site-packages>" not in html  # no tag left for a browser to swallow
    for shown in (
        "&lt;site-packages&gt;/model: noise fraction",
        "<li>&lt;site-packages&gt;/model: ",
        "<h2>&lt;site-packages&gt;/other</h2>",
        "cannot read &lt;site-packages&gt;/other",
    ):
        assert shown in html, shown
