"""The optimality experiments (sinusoidal-optimality, alibi-rank1, mds-parameters): parts and smoke runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.distance import pdist, squareform

from geoanalyze.corpus.synthetic import rough_length_scale, rough_marginals, synthetic_corpus
from geoanalyze.encodings.standard import sinusoidal
from geoanalyze.errors import InputError
from geoanalyze.experiments import ExperimentOptions, run_experiment, write_result
from geoanalyze.experiments.optimality import (
    best_sinusoidal,
    corpus_fit,
    parameter_saving,
    rank_within,
    shift_equivariance,
)
from geoanalyze.geometry.distances import hellinger_distances

#: the smoke presets' settings, run here at ci (its stricter thresholds)
SMOKE: dict[str, tuple[str, ...]] = {
    "sinusoidal-optimality": ("positions=32", "vocab=100", "steps=3", "bases=8", "null_draws=2", "sst2=false"),
    "alibi-rank1": ("longest=32", "vocab=60", "step=1", "steps=3", "null_draws=2", "sst2=false", "arcs=2"),
    "mds-parameters": ("real=false",),
}

# --- the rough family -----------------------------------------------------------------------------------


def test_rough_marginals_are_distributions_and_span_smooth_to_rough() -> None:
    smooth = rough_marginals(40, 200, np.random.default_rng(0), roughness=0.0)
    rough = rough_marginals(40, 200, np.random.default_rng(0), roughness=1.0)
    for marginals in (smooth, rough):
        assert marginals.shape == (40, 200) and np.all(marginals > 0)
        np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-12)
    near, far = hellinger_distances(smooth), hellinger_distances(rough)
    # smooth: neighbours close, far positions apart; rough: neighbours as far apart as any two positions
    assert near[0, 1] < 0.2 * near[0, 39]
    assert far[0, 1] > 0.8 * np.median(far[np.triu_indices(40, 1)])
    assert rough_length_scale(40, 0.0) == 10.0 and rough_length_scale(40, 1.0) == 0.25


def test_rough_moves_continuously_with_roughness() -> None:
    a = rough_marginals(30, 100, np.random.default_rng(3), roughness=0.5)
    b = rough_marginals(30, 100, np.random.default_rng(3), roughness=0.5001)
    assert np.abs(a - b).max() < 1e-3


def test_rough_is_a_synthetic_kind_and_checks_its_options() -> None:
    corpus = synthetic_corpus("rough", n_sequences=50, length=12, vocab_size=30, seed=1, roughness=0.3)
    assert corpus.marginals.shape == (12, 30) and len(corpus.texts) == 50
    with pytest.raises(InputError, match="roughness"):
        synthetic_corpus("rough", length=12, vocab_size=30, roughness=1.5)


# --- the measurements --------------------------------------------------------------------------------


def test_shift_equivariance_is_one_for_a_function_of_the_lag_and_low_for_noise() -> None:
    i = np.arange(20.0)
    assert shift_equivariance(np.sqrt(np.abs(i[:, None] - i[None, :]))) == pytest.approx(1.0)
    noise = squareform(np.random.default_rng(0).random(190))
    assert shift_equivariance(noise) < 0.2
    # with gaps, lags come from the indices
    t = np.array([0, 1, 5, 6, 20])
    assert shift_equivariance(np.abs(t[:, None] - t[None, :]).astype(float), t) == pytest.approx(1.0)


def test_best_sinusoidal_recovers_a_sinusoidal_geometry() -> None:
    i = np.arange(24)
    truth = squareform(pdist(sinusoidal(i, d=32, base=100.0)))
    best = best_sinusoidal(truth, i, np.array([10.0, 100.0, 1000.0]))
    assert best["scaled_stress"] < 1e-12 and best["base"] == 100.0 and best["width"] == 32


def test_corpus_fit_of_a_line() -> None:
    i = np.arange(15.0)
    line = np.abs(i[:, None] - i[None, :])
    fit = corpus_fit(line, null_draws=2)
    assert fit["mds"]["scaled_stress"] < 1e-12 and fit["alibi"]["scaled_stress"] < 1e-12
    assert fit["mds rank 1"]["scaled_stress"] < 1e-12
    assert fit["alibi"]["lag_violation"] == 0.0 and fit["mds"]["lag_violation"] == 0.0
    assert fit["shift_equivariance"] == pytest.approx(1.0) and fit["null"] > 0
    assert "sinusoidal" not in fit


def test_rank_within_and_the_saving() -> None:
    points = np.random.default_rng(0).standard_normal((30, 2)) * [3.0, 1.0]
    found = rank_within(squareform(pdist(points)), tolerance=1e-9)
    assert found["rank"] == 2 and found["scaled_stress"] < 1e-9
    saving = parameter_saving(512, 10, 768)
    assert saving["factored"] == 10 * (512 + 768) and saving["dense"] == 512 * 768
    assert saving["saving"] == pytest.approx(1 - 10 * 1280 / (512 * 768))


# --- smoke runs --------------------------------------------------------------------------------------------


EXPECTED = {
    "sinusoidal-optimality": {
        "optimal on smooth stationary corpora",
        "better on smooth than on rough",
        "beats random on smooth corpora",
    },
    "alibi-rank1": {
        "near-optimal on short shift-equivariant corpora",
        "as good as the best rank 1",
        "short sentences",
        "shift-equivariance is what matters",
        "control: fails without shift-equivariance",
    },
    "mds-parameters": {"saving at BERT-base width", "control: no saving without structure"},
}


def test_the_smoke_presets_are_these_settings() -> None:
    from geoanalyze.experiments.optimality import SETTINGS

    for name, overrides in SMOKE.items():
        assert SETTINGS[name]["smoke"] == SETTINGS[name]["ci"].override(overrides, name)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_smoke_runs_write_a_record_and_a_figure(name: str, tmp_path: Path) -> None:
    options = ExperimentOptions(preset="ci", work_dir=tmp_path, overrides=SMOKE[name], progress=False)
    result = run_experiment(name, options)
    assert {c.name for c in result.checks} == EXPECTED[name]
    assert all(math.isfinite(c.value) for c in result.checks)
    for figure in result.figures:
        assert (tmp_path / figure).stat().st_size > 1000
    document = json.loads(write_result(result, tmp_path)["json"].read_text())
    assert document["experiment"] == name


def test_the_shift_claims_hold_at_smoke_scale_only_where_the_arc_is_near_linear(tmp_path: Path) -> None:
    # 5 lengths: the trend test needs more than 3 points to reach p < 0.05 (3 would leave it undecided)
    overrides = [*SMOKE["alibi-rank1"], "steps=5", "arcs="]
    options = ExperimentOptions(preset="ci", work_dir=tmp_path / "linear", overrides=overrides, progress=False)
    (tmp_path / "linear").mkdir()
    result = run_experiment("alibi-rank1", options)
    assert result.passed, [(c.name, c.detail) for c in result.checks if not c.passed]
    # a short shift corpus whose bump travels most of the token circle: as shift-equivariant, not linear
    overrides = [*SMOKE["alibi-rank1"], "steps=5", "arcs=7"]
    options = ExperimentOptions(preset="ci", work_dir=tmp_path, overrides=overrides, progress=False)
    failed = {c.name for c in run_experiment("alibi-rank1", options).checks if not c.passed}
    assert failed == {"near-optimal on short shift-equivariant corpora"}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("name", list(EXPECTED))
def test_ci_runs_with_the_real_corpora(name: str, tmp_path: Path, shared_data: Path) -> None:
    options = ExperimentOptions(preset="ci", work_dir=tmp_path, data_dir=str(shared_data), progress=False)
    result = run_experiment(name, options)
    assert {c.name for c in result.checks} - {"near-optimal on SST-2 (the paper's data point)"} == EXPECTED[name]
    assert all(math.isfinite(c.value) for c in result.checks)
    if name != "mds-parameters":
        assert any(key.startswith("SST-2") for key in result.data["corpora"])
    if name == "alibi-rank1":  # the paper's own data point, with its own verdict
        assert "near-optimal on SST-2 (the paper's data point)" in {c.name for c in result.checks}
