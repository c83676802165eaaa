"""The EΔ experiments: the guarantees pass, the benchmark runs end to end at toy size, bad settings fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO_ROOT, invoke, run_process

from geoanalyze.errors import InputError
from geoanalyze.experiments import ExperimentOptions, run_experiment, write_result
from geoanalyze.experiments.edelta_settings import benchmark_settings

DOC = REPO_ROOT / "docs" / "edelta.md"


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


def test_edelta_guarantees_include_the_zero_gradient_theorem(tmp_path: Path) -> None:
    result = run_experiment("edelta", _options(tmp_path, []))
    zero = {c.name: c for c in result.checks}["zero-gradient"]
    assert zero.passed and zero.value <= 1e-12
    assert result.data["zero_gradient"]["asymmetric"] == pytest.approx(0.25)


def test_reference_protocol_smoke_writes_table_sweeps_figures_and_verdicts(tmp_path: Path) -> None:
    result = run_experiment("edelta-benchmarks", _options(tmp_path, [], preset="smoke"))
    names = [c.name for c in result.checks]
    assert names == [
        "finite",
        "edelta-learns",
        "edelta-leaves-plateau",
        "stability-best",
        "norm-deviation",
        "gate-near-pi",
        "gate-near-pi-multi",
        "init-robustness-near-pi",
        "init-robustness-near-pi-multi",
        "gate-weight",
        "negation-gate",
        "negation-cosine",
    ]
    assert result.checks[0].passed
    data = result.data
    assert data["settings"]["protocol"] == "reference"
    assert set(data["runs"]) == {"gyroscope", "stability", "near-pi", "near-pi-multi"}
    assert set(data["sweeps"]) == {"init-robustness near-pi", "init-robustness near-pi-multi", "gate-weight gyroscope"}
    assert set(data["sweeps"]["gate-weight gyroscope"]) == {"0", "0.05", "0.1", "0.2"}
    assert set(data["sweeps"]["init-robustness near-pi"]) == {"1.5", "0", "-1.5"}
    assert all(len(v) == 1 for v in data["norm_deviation"]["model"].values())
    assert data["plateaus"]["stability"] == pytest.approx(1 / 64, rel=0.2)
    for name in result.figures:
        assert (tmp_path / name).is_file()
    table = result.sections[0]
    assert "protocol `reference`" in table and "**not causal**" in table
    assert "| gyroscope | edelta |" in table and "3.78e-3" in table  # ours beside the paper's
    assert "jpmhc-ref" in result.sections[1] and "Sweeps" in result.sections[2]
    paths = write_result(result, tmp_path)
    assert paths["json"].is_file() and "init-robustness-near-pi" in paths["markdown"].read_text()


SMALL = ["models=gpt,edelta", "tasks=stability,norm-deviation", "sweeps="]


def test_causal_protocol_uses_our_models_and_the_entropy_gate_is_opt_in(tmp_path: Path) -> None:
    causal = run_experiment("edelta-benchmarks", _options(tmp_path / "a", [*SMALL, "protocol=causal"], "smoke"))
    assert "protocol `causal`" in causal.sections[0] and causal.data["settings"]["protocol"] == "causal"
    assert "hybrid" in causal.sections[1] and "ddl-ref" not in causal.sections[1]
    entropy = run_experiment("edelta-benchmarks", _options(tmp_path / "b", [*SMALL, "gate=entropy"], "smoke"))
    assert entropy.data["settings"]["gate"] == "entropy"
    assert benchmark_settings("ci", []).to_dict()["gate"] == "plain"  # the paper's gate unless asked


@pytest.mark.slow
def test_workers_give_the_same_runs(tmp_path: Path) -> None:
    one = run_experiment("edelta-benchmarks", _options(tmp_path / "a", SMALL, "smoke"))
    two = run_experiment("edelta-benchmarks", _options(tmp_path / "b", [*SMALL, "workers=2"], "smoke"))
    for name in ("gpt", "edelta"):  # every record but its wall time
        curves = [
            [{k: v for k, v in r.items() if k != "time_s"} for r in x.data["runs"]["stability"][name][0]["history"]]
            for x in (one, two)
        ]
        assert repr(curves[0]) == repr(curves[1])  # repr: NaN gates (GPT) compare equal
    assert one.data["norm_deviation"] == two.data["norm_deviation"]


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
        (["protocol=paper"], "unknown protocol 'paper'"),
        (["gate=thermo"], "unknown gate 'thermo'"),
        (["sweeps=all"], "unknown sweep 'all'"),
    ],
)
def test_bad_settings_are_one_clear_error(tmp_path: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        run_experiment("edelta-benchmarks", _options(tmp_path, overrides))


def test_guarantees_take_no_overrides_and_paper_preset_asks_for_cuda(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no overrides"):
        run_experiment("edelta", _options(tmp_path, ["steps=3"]))
    # every experiment has a smoke preset now (issue 12); an unknown one is refused with the choices
    with pytest.raises(InputError, match="unknown preset 'quick'; choose one of smoke, ci, paper"):
        run_experiment("edelta", _options(tmp_path, [], preset="quick"))
    paper = benchmark_settings("paper", []).to_dict()
    assert paper["steps"] == 2000 and paper["seeds"] == "42,123,456" and paper["protocol"] == "reference"
    import torch

    if not torch.cuda.is_available():
        options = ExperimentOptions(preset="paper", work_dir=tmp_path, progress=False, overrides=["steps=1"])
        with pytest.raises(InputError, match="cuda"):
            run_experiment("edelta-benchmarks", options)


def _doc_commands() -> list[str]:
    """Every `geoanalyze verify ...` and `bash benchmarks/...` line in docs/edelta.md's code blocks."""
    commands, inside = [], False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and line.startswith(("geoanalyze verify", "bash benchmarks/")):
            commands.append(line.split("  #")[0].strip())
    return commands


def test_docs_show_both_protocols_and_the_gpu_script() -> None:
    commands = _doc_commands()
    for needle in (
        "--set protocol=reference",
        "--set protocol=causal",
        "gate=entropy",
        "bash benchmarks/gpu/edelta.sh",
    ):
        assert any(needle in c for c in commands), needle


@pytest.mark.slow
@pytest.mark.parametrize("command", _doc_commands())
def test_every_command_in_the_docs_runs(command: str, tmp_path: Path) -> None:
    """Each command of docs/edelta.md at the smoke preset (the ci and paper presets take minutes to hours)."""
    import sys

    words = command.split()
    if words[0] == "bash":  # the GPU script, on the CPU at the smoke preset
        env = dict(PRESET="smoke", DEVICE="cpu", OUT=str(tmp_path / "gpu"), PYTHON=sys.executable, WORKERS="1")
        done = run_process(["bash", REPO_ROOT / words[1]], env=env, timeout=None)
        assert done.returncode in (0, 1), done.stderr
        assert (tmp_path / "gpu" / "reference" / "edelta-benchmarks.json").is_file()
        return
    args = words[1:]
    if "--preset" in args:
        args[args.index("--preset") + 1] = (
            "smoke" if args[1] == "edelta-benchmarks" else args[args.index("--preset") + 1]
        )
    # The docs' own output folder is redirected here (an option given twice is refused, as it should be).
    for flag in ("-o", "--output-dir"):
        if flag in args:
            del args[args.index(flag) : args.index(flag) + 2]
    result = invoke([*args, "-o", str(tmp_path / "out"), "--device", "cpu"], cwd=tmp_path)
    assert result.code in (0, 1), str(result)  # 1: a verdict failed, as it may at the smoke preset


@pytest.mark.slow
def test_ci_preset_edelta_learns_stability_under_gate_weight_0_1(tmp_path: Path) -> None:
    """The corrected verdict: with L_gate weight 0.1 EΔ leaves the predict-zero plateau (after ~600 steps)
    and ends more than 10x below it within the ci preset's steps (reference protocol, 3 seeds). The
    paper's level (~3,600x, `edelta-learns`) is not reached at this scale."""
    overrides = ["models=edelta", "tasks=stability", "sweeps=", "model_gate_weight=0.1"]
    result = run_experiment("edelta-benchmarks", _options(tmp_path, overrides, seed=42))
    learns = {c.name: c for c in result.checks}["edelta-leaves-plateau"]
    assert learns.passed, learns.detail


@pytest.mark.slow
def test_ci_preset_reproduces_the_negation_verdict(tmp_path: Path) -> None:
    overrides = ["tasks=negation", "sweeps=", "negation_models=edelta", "negation_sizes=500"]
    result = run_experiment("edelta-benchmarks", _options(tmp_path, overrides, seed=42))
    checks = {c.name: c for c in result.checks}
    gate, cosine = checks["negation-gate"], checks["negation-cosine"]
    assert gate.passed, f"gate {gate.value:.3f} did not collapse below 0.1 or above 0.9"
    assert cosine.passed, f"cosine {cosine.value:.3f} < 0.9"
