"""geoanalyze.score returns a frozen, typed StressResult: its to_json() is what `stress -f json` prints,
its to_markdown() what `-f markdown` prints, and the figures are drawn from it alone."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import DRIFT_WORDS, PNG_SIGNATURE, geoanalyze, ok

import geoanalyze as ga
from geoanalyze.results import EncodingScores, LayerRow, StressResult

#: the same inputs as keyword arguments of score() and as options of `stress`
SPEC_CASE: dict[str, Any] = {"null_draws": 3, "compare": ("sinusoidal", "mds", "random"), "bootstrap": 3}
SPEC_ARGS = ("--null-draws", 3, "--compare", "sinusoidal,mds,random", "--bootstrap", 3)


def cli_json(tmp_path: Path, *args: Any) -> dict[str, Any]:
    return json.loads(ok(geoanalyze("stress", *args, "-f", "json", cwd=tmp_path)).stdout)


@pytest.fixture(scope="module")
def spec_result() -> StressResult:
    return ga.score("rope:d=16", dataset=str(DRIFT_WORDS), **SPEC_CASE)


def test_to_json_is_the_stress_json(spec_result: StressResult, tmp_path: Path) -> None:
    cli = cli_json(tmp_path, "rope:d=16", "--dataset", DRIFT_WORDS, *SPEC_ARGS)
    text = spec_result.to_json()
    assert isinstance(text, str) and json.loads(ga.to_json(spec_result)) == json.loads(text)
    assert json.loads(text) == {key: value for key, value in cli.items() if key not in ("gate", "run")}
    # with the command's own records, the whole document, in the command's key order
    whole = json.loads(spec_result.to_json(gate=cli["gate"], run=cli["run"]))
    assert whole == cli and list(whole) == list(cli)
    assert cli["scores"]["rope:d=16"]["bootstrap"]["samples"]["count"] >= 2


def test_to_markdown_is_the_stress_markdown(
    spec_result: StressResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # paths are shown relative to the working directory, as the command's are
    printed = ok(geoanalyze("stress", "rope:d=16", "--dataset", DRIFT_WORDS, *SPEC_ARGS, "-f", "markdown", cwd=tmp_path))
    provenance = printed.stdout.rstrip("\n").rsplit("\n", 1)[-1]
    assert provenance.startswith("geoanalyze ")
    assert printed.stdout == spec_result.to_markdown() + "\n" + provenance + "\n"
    assert ga.to_markdown(spec_result) == spec_result.to_markdown()


def test_a_checkpoint_result_is_the_stress_json(minilm_path: Path, tmp_path: Path) -> None:
    options = ("--max-length", 24, "--max-sequences", 24, "--layers", "0,2", "--null-draws", 2)
    cli = cli_json(tmp_path, minilm_path, "--dataset", DRIFT_WORDS, *options)
    result = ga.score(str(minilm_path), dataset=str(DRIFT_WORDS), max_length=24, max_sequences=24, layers="0,2",
                      null_draws=2)  # fmt: skip
    assert json.loads(result.to_json()) == {key: value for key, value in cli.items() if key not in ("gate", "run")}
    assert result.checkpoint is not None and result.checkpoint.rows == cli["checkpoint"]["rows"]
    assert all(isinstance(row, LayerRow) for row in result.layers) and {row.layer for row in result.layers} == {0, 2}
    assert list(result.peaks) == list(cli["peaks"])


def test_the_result_is_frozen_and_typed(spec_result: StressResult) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec_result.target = "sinusoidal"  # type: ignore[misc]
    mine = spec_result.target_scores
    with pytest.raises(dataclasses.FrozenInstanceError):
        mine.dim = 3  # type: ignore[misc, union-attr]
    assert isinstance(mine, EncodingScores) and mine is spec_result.scores["rope:d=16"]
    assert list(spec_result.scores) == ["rope:d=16", "sinusoidal", "mds", "random"]
    assert spec_result.verdict.sentence == ga.verdict(spec_result) == spec_result.summary.verdict
    assert set(spec_result.verdict.categories) == {"shape", "order", "local_order", "lag", "separation"}
    # the arrays behind the scores are attributes, never keys of the JSON
    assert set(spec_result.vectors) == set(spec_result.scores)
    assert spec_result.distances.shape == (len(spec_result.positions),) * 2
    document = json.loads(spec_result.to_json())
    assert not any(key.startswith("_") for key in document)
    assert {"geometry", "vectors", "truth", "exact_distances"}.isdisjoint(document)


def test_the_figures_are_drawn_from_the_result(tmp_path: Path) -> None:
    """A synthetic corpus: the result knows the exact distances (its ``truth``) and the figures draw them."""
    result = ga.score("rope:d=16", dataset="synthetic:drift", null_draws=2, compare=("sinusoidal",))
    truth = result.truth
    assert truth is not None and truth.shape == result.distances.shape
    finite = np.isfinite(truth)
    assert finite.any() and np.allclose(truth[finite], truth.T[finite])
    drawn = ga.write_figures(result, tmp_path / "figs", prefix="t-")
    assert [figure.path.name for figure in drawn] == ["t-hellinger.png", "t-mds.png", "t-shepard.png", "t-null.png"]
    for figure in drawn:
        assert figure.path.read_bytes()[:8] == PNG_SIGNATURE


def test_write_report_writes_the_page_report_writes(spec_result: StressResult, tmp_path: Path) -> None:
    """The page of geoanalyze.write_report is the command's, less the command line (no command ran)."""
    page = ga.write_report([spec_result], tmp_path / "api" / "page.md", title="a page")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# a page\n\n| target |")
    assert "## rope:d=16 on drift-words.txt" in text
    figures = sorted(p.name for p in (tmp_path / "api" / "page_files").iterdir())
    assert figures == ["0-hellinger.png", "0-mds.png", "0-null.png", "0-shepard.png"]
    assert all(f"page_files/{name}" in text for name in figures)


def test_score_takes_the_command_s_option_names(tmp_path: Path) -> None:
    """--estimate, --no-cache and --plot-dir by their names: the same result as `stress` with them."""
    args = ("--null-draws", 2, "--compare", "sinusoidal", "--estimate", "corrected", "--no-cache")
    cli = cli_json(tmp_path, "rope:d=8", "--dataset", DRIFT_WORDS, *args)
    result = ga.score(
        "rope:d=8",
        dataset=str(DRIFT_WORDS),
        null_draws=2,
        compare="sinusoidal",
        estimate="corrected",
        no_cache=True,
        plot_dir=tmp_path / "figures",
    )
    document = json.loads(result.to_json())
    assert document == {key: value for key, value in cli.items() if key not in ("gate", "run")}
    assert document["distance"] == cli["distance"] and "corrected" in json.dumps(document["distance"])
    assert sorted(path.name for path in (tmp_path / "figures").iterdir())[:1] and all(
        path.read_bytes()[:8] == PNG_SIGNATURE for path in (tmp_path / "figures").iterdir()
    )


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"nul_draws": 3}, "unknown keyword nul_draws=; did you mean null_draws? it takes: batch_size,"),
        ({"fail_above": "scaled=0.5"}, "score() has no fail_above= (a gate on the exit code;"),
        ({"fail_if": "shape=worse"}, "score() has no fail_if="),
        ({"colour": "red"}, "unknown keyword colour=; it takes: batch_size,"),
    ],
)
def test_score_refuses_an_unknown_keyword_naming_the_valid_ones(keywords: dict[str, Any], message: str) -> None:
    from geoanalyze.errors import InputError

    with pytest.raises(InputError) as caught:
        ga.score("rope:d=8", dataset=str(DRIFT_WORDS), **keywords)
    assert message in str(caught.value)
