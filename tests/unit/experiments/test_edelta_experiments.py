"""The EΔ experiments: the guarantees pass, the benchmark runs end to end at toy size, bad settings fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from geoanalyze.errors import InputError
from geoanalyze.experiments import ExperimentOptions, run_experiment, write_result
from geoanalyze.experiments.edelta import resolve_settings

TINY = [
    "models=gpt,edelta",
    "tasks=gyroscope,stability,norm-deviation,negation",
    "n_embd=16",
    "length=6",
    "n_train=8",
    "n_valid=4",
    "steps=2",
    "batch_size=4",
    "warmup_steps=1",
    "eval_every=2",
    "negation_models=ddl,edelta",
    "negation_sizes=4",
    "negation_steps=3",
]


def _options(tmp_path: Path, overrides: list[str], preset: str = "ci", seed: int = 0) -> ExperimentOptions:
    return ExperimentOptions(
        preset=preset, work_dir=tmp_path, seed=seed, device="cpu", overrides=overrides, progress=False
    )


def test_edelta_guarantees_all_pass(tmp_path: Path) -> None:
    result = run_experiment("edelta", _options(tmp_path, []))
    failed = [(c.name, c.value, c.detail) for c in result.checks if not c.passed]
    assert not failed
    names = {c.name for c in result.checks}
    assert {"cayley-orthogonal", "cayley-det", "householder-det", "hybrid-endpoints", "deep-norm", "sinkhorn"} <= names


def test_benchmarks_smoke_writes_table_figures_and_verdicts(tmp_path: Path) -> None:
    result = run_experiment("edelta-benchmarks", _options(tmp_path, TINY))
    names = [c.name for c in result.checks]
    assert names == ["finite", "negation-gate", "negation-cosine"]
    assert result.checks[0].passed
    assert set(result.data["parameters"]) == {"gpt", "edelta"}
    assert set(result.data["runs"]) == {"gyroscope", "stability"}
    assert len(result.data["norm_deviation"]["trained"]["edelta"]) == 1
    assert 0 < result.data["negation"]["edelta"]["4"][0]["gate"] < 1
    for name in result.figures:
        assert (tmp_path / name).is_file()
    assert "edelta_loss_curves.png" in result.figures and "edelta_gate.png" in result.figures
    table = result.sections[0]
    assert "| gyroscope | edelta |" in table and "3.78e-3" in table  # ours beside the paper's
    paths = write_result(result, tmp_path)
    assert paths["json"].is_file() and "negation-gate" in paths["markdown"].read_text()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["epochs=3"], "valid keys"),
        (["steps"], "valid keys"),
        (["steps=many"], "must be a int"),
        (["models=gpt,resnet"], "unknown model 'resnet'"),
        (["tasks=negation,parity"], "unknown task 'parity'"),
        (["negation_models=mhc"], "unknown negation model 'mhc'"),
        (["seeds=1,x"], "comma-separated integers"),
    ],
)
def test_bad_settings_are_one_clear_error(tmp_path: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        run_experiment("edelta-benchmarks", _options(tmp_path, overrides))


def test_guarantees_take_no_overrides_and_paper_preset_asks_for_cuda(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no overrides"):
        run_experiment("edelta", _options(tmp_path, ["steps=3"]))
    assert resolve_settings("paper", [])["steps"] == 2000
    assert resolve_settings("paper", [])["seeds"] == "42,123,456"
    import torch

    if not torch.cuda.is_available():
        options = ExperimentOptions(preset="paper", work_dir=tmp_path, progress=False, overrides=TINY)
        with pytest.raises(InputError, match="cuda"):
            run_experiment("edelta-benchmarks", options)


@pytest.mark.slow
def test_ci_preset_reproduces_the_negation_verdict(tmp_path: Path) -> None:
    result = run_experiment("edelta-benchmarks", _options(tmp_path, [], seed=42))
    checks = {c.name: c for c in result.checks}
    assert checks["finite"].passed
    gate, cosine = checks["negation-gate"], checks["negation-cosine"]
    assert gate.passed, f"gate {gate.value:.3f} did not collapse below 0.1 or above 0.9"
    assert cosine.passed, f"cosine {cosine.value:.3f} < 0.9"
