"""Rendering takes an explicit base folder: one StressResult rendered from two working directories with
the same base gives the same text in every format (the command line passes its working directory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import geoanalyze as ga
from geoanalyze.report.page import build_report
from geoanalyze.report.render import rendered
from geoanalyze.report.stress import terminal_report
from geoanalyze.results import StressResult

SAMPLES = Path(__file__).resolve().parents[3] / "sample_corpora"


@pytest.fixture(scope="module")
def result() -> StressResult:
    return ga.score("rope:d=16", dataset=SAMPLES / "drift-words.txt", null_draws=3, compare=("sinusoidal",))


def renderings(result: StressResult, base: Path | None, figures: Path) -> list[str]:
    page = build_report([result], figures, "page", base=base)
    shown = [
        result.to_markdown(base=base),
        result.to_json(base),
        rendered(*terminal_report(result, True, None, width=80, base=base)),
    ]
    return [*shown, page.text, page.to_json()]


def test_the_same_base_renders_the_same_text_from_two_working_directories(
    result: StressResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    far = tmp_path / "a" / "b" / "c" / "d"  # more than RELATIVE_UPS folders away from the corpus
    far.mkdir(parents=True)
    texts = []
    for where in (SAMPLES.parent, far):
        monkeypatch.chdir(where)
        texts.append(renderings(result, SAMPLES.parent, tmp_path / "figures"))
    assert texts[0] == texts[1]
    assert "sample_corpora/drift-words.txt" in texts[0][0] and str(SAMPLES) not in texts[0][0]


def test_without_a_base_the_working_directory_is_the_base(
    result: StressResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(SAMPLES)
    assert result.to_markdown() == result.to_markdown(base=Path(os.getcwd()))
    assert result.to_markdown() != result.to_markdown(base=SAMPLES.parent)
