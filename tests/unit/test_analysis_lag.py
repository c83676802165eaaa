"""The lag violation reaches every place scores appear: the stress analysis, its null, its tables."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import DRIFT_WORDS, invoke

from geoanalyze.analysis import LAYER_SCORES, StressOptions, analyze
from geoanalyze.geometry.scores import lag_violation
from geoanalyze.results import LayerRow, StressResult, layer_rows, markdown, score_rows


@pytest.fixture(scope="module")
def result() -> StressResult:
    options = StressOptions(dataset=str(DRIFT_WORDS), null_draws=3, compare=("sinusoidal", "mds", "random"))
    return analyze("rope:d=64", options)


def test_every_encoding_has_it_with_its_null(result: StressResult) -> None:
    positions = np.asarray(result.positions)
    for name, scores in result.scores.items():
        expected = lag_violation(result.vectors[name], positions)
        assert scores.observed["lag_violation"] == pytest.approx(expected, abs=1e-12), name
        assert set(scores.null["lag_violation"].to_dict()) == {
            *("statistic", "observed", "mean", "sd", "low", "high", "z", "beats"),
            *("rank", "p_better", "p_worse", "p", "p_adjusted", "effect", "draws", "category"),
        }
        assert scores.null["lag_violation"]["mean"] == pytest.approx(0.5, abs=0.05)
    # a drift corpus moves steadily with position: RoPE's and the MDS's vectors drift with the lag
    assert result.scores["rope:d=64"].observed["lag_violation"] < 0.1
    assert result.scores["random"].observed["lag_violation"] == pytest.approx(0.5, abs=0.05)


def test_tables_and_markdown_carry_a_column(result: StressResult) -> None:
    header, rows = score_rows(result)
    column = header.index("lag viol.")
    assert [row[column] for row in rows] == [s.observed["lag_violation"] for s in result.scores.values()]
    assert "lag viol." in markdown(result)
    assert "lag_violation" in LAYER_SCORES
    layered = replace(result, layers=(LayerRow(1, "query", dict.fromkeys(LAYER_SCORES, 0.25), {}, {}),))
    header, rows = layer_rows(layered)
    assert rows[0][header.index("lag viol.")] == 0.25


@pytest.mark.slow
@pytest.mark.integration
def test_the_results_page_numbers_on_sst2(shared_data: Path, tmp_path: Path) -> None:
    """docs/results.md, "the paper's 22% and 25.4% in two readings": the command and its figures."""
    import json

    command = ["stress", "sentence-transformers/all-MiniLM-L6-v2", "--dataset", "sst2"]
    command += ["--data-dir", str(shared_data), "--layers", "none", "-f", "json"]
    done = invoke(command, cwd=tmp_path)
    assert done.code == 0, done.stderr
    scores = json.loads(done.stdout)["scores"]
    assert scores["mds"]["lag_violation"] == pytest.approx(0.2410, abs=5e-4)
    assert scores["sentence-transformers/all-MiniLM-L6-v2"]["lag_violation"] == pytest.approx(0.2738, abs=5e-4)
    assert scores["sinusoidal"]["lag_violation"] == pytest.approx(0.0029, abs=5e-4)
    assert scores["random"]["lag_violation"] == pytest.approx(0.5074, abs=5e-4)
