"""`geoanalyze train` and `geoanalyze verify` as a user runs them: the console script's entry point
(in this process), real files, real exit codes; DDP in real processes started by torchrun."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers import DRIFT, SYNTHETIC_WORDS, TINY_TRAIN, geoanalyze, refused, run_process, stress_json, train_sets
from safetensors.numpy import load_file

TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent))

#: a model and run small enough for seconds on a CPU
TINY = [*TINY_TRAIN, "eval_every=6", "eval_batches=2"]


sets = train_sets


def test_train_writes_metrics_and_a_checkpoint_and_reports_json(tmp_path: Path) -> None:
    result = geoanalyze("train", "-o", "run", "--pe", "rope", *sets(*TINY), "-f", "json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["metrics"]["step"] == 12
    assert document["config"]["model"]["pe"] == "rope"
    assert document["pe_parameters"] == 0 and document["parameters"] > 0
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [6, 12]
    assert (tmp_path / "run" / "checkpoint" / "model.safetensors").is_file()
    # the loss and accuracy curves are drawn beside the metrics
    assert document["figure"] == "run/training.png"
    assert (tmp_path / "run" / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_train_result_to_json_is_the_commands_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """geoanalyze.TrainResult.to_json() is what `geoanalyze train -f json` prints, byte for byte: the
    run the command trained, resumed with nothing left to train, returns it with the same metrics."""
    from geoanalyze import TrainResult
    from geoanalyze.train import resolve_config, train

    result = geoanalyze("train", "-o", "run", "--pe", "rope", *sets(*TINY), "-f", "json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    monkeypatch.chdir(tmp_path)
    run = train(resolve_config("ci", ["model.pe=rope", *TINY]), Path("run"), resume=True, progress=False)
    assert isinstance(run, TrainResult)
    drawn = dataclasses.replace(run, figure=Path("run") / "training.png")
    assert drawn.to_json() + "\n" == result.stdout


def test_train_resumes_with_more_steps(tmp_path: Path) -> None:
    assert geoanalyze("train", "-o", "run", *sets(*TINY), cwd=tmp_path).code == 0
    result = geoanalyze("train", "-o", "run", "--resume", *sets(*TINY, "steps=18"), "-f", "json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [6, 12, 18]


def test_the_trained_positions_go_into_the_stress_scores(tmp_path: Path) -> None:
    run = ["model.n_positions=16", "order_length=16", *TINY[:4], *TINY[6:]]
    assert geoanalyze("train", "-o", "run", "--pe", "learned", *sets(*run), cwd=tmp_path).code == 0
    document = stress_json("model:run", "--dataset", SYNTHETIC_WORDS, "--min-count", "50", "--compare", "", cwd=tmp_path)
    scores = document["scores"]["model:run"]
    assert scores["dim"] == 32  # the learned table's width
    assert 0.0 <= scores["monotonicity_violation"] <= 1.0
    assert scores["separation"] > 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--preset", "huge"], ["unknown preset 'huge'", "ci, paper"]),
        (["--pe", "fourier"], ["unknown pe 'fourier'", "rope"]),
        (["--task", "translation"], ["unknown task 'translation'", "order"]),
        (sets("model.colour=red"), ["unknown setting 'model.colour'", "valid keys"]),
        (sets("steps=many"), ["steps must be an integer", "'many'"]),
        (sets("lr"), ["not key=value"]),
        (["--device", "cuda"], ["CUDA is not available", "cpu"]),
    ],
    ids=["preset", "encoding", "task", "unknown-key", "wrong-type", "not-key-value", "cuda-absent"],
)
def test_bad_training_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: list[str]) -> None:
    if "cuda" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("CUDA is present here, so asking for it is not an error")
    given = {arg.split("=", 1)[0] for arg in args}
    result = geoanalyze("train", "-o", "run", *args, *sets(*(t for t in TINY if t.split("=")[0] not in given)), cwd=tmp_path)
    refused(result, *words)
    assert not (tmp_path / "run").exists()


def test_an_mds_file_that_does_not_fit_the_model_is_refused(tmp_path: Path) -> None:
    mds = tmp_path / "pe.safetensors"
    made = geoanalyze("mds", DRIFT, "-t", "whitespace", "--dim", "24", "-o", mds, cwd=tmp_path)
    assert made.code == 0, made.stderr
    wrong_width = geoanalyze("train", "-o", "a", "--pe", "mds", *sets(*TINY, f"model.pe_file={mds}"), cwd=tmp_path)
    refused(wrong_width, "width d = 24", "d_model 32")
    wide = sets(*TINY, f"model.pe_file={mds}", "model.d_model=24", "model.n_heads=4", "model.n_positions=100", "order_length=100")
    too_long = geoanalyze("train", "-o", "b", "--pe", "mds", *wide, cwd=tmp_path)
    refused(too_long, "no row for position 64")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_resuming_from_another_model_is_refused(tmp_path: Path) -> None:
    assert geoanalyze("train", "-o", "run", "--pe", "learned", *sets(*TINY), cwd=tmp_path).code == 0
    result = geoanalyze("train", "-o", "run", "--resume", "--pe", "rope", *sets(*TINY), cwd=tmp_path)
    refused(result, "pe='learned'", "'rope'")


def test_train_lists_its_keys(tmp_path: Path) -> None:
    result = geoanalyze("train", "--list-keys", "-f", "json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    keys = json.loads(result.stdout)
    assert keys["model.pe"] == "learned" and keys["task"] == "order"


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this Python")
def test_two_cpu_processes_with_gloo_train_what_one_process_trains(tmp_path: Path) -> None:
    """DDP on CPU: 2 processes (gloo) each take half of every batch; without dropout the weights equal one process's."""
    run = sets(*TINY, "model.dropout=0")
    single = geoanalyze("train", "-o", "single", *run, cwd=tmp_path)
    assert single.code == 0, single.stderr
    command = [TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "geoanalyze", "train", "-o", "ddp", *run]
    ddp = run_process(command, cwd=tmp_path, env={"OMP_NUM_THREADS": "1"}, timeout=600)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    one = load_file(str(tmp_path / "single" / "checkpoint" / "model.safetensors"))
    two = load_file(str(tmp_path / "ddp" / "checkpoint" / "model.safetensors"))
    assert one.keys() == two.keys()
    for name in one:
        assert abs(one[name] - two[name]).max() < 1e-5, name
    metrics = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    reference = [json.loads(line) for line in (tmp_path / "single" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [6, 12]  # one process wrote the metrics, once per evaluation
    for got, want in zip(metrics, reference, strict=True):
        assert got["eval_loss"] == pytest.approx(want["eval_loss"], abs=1e-5)
        assert got["train_loss"] == pytest.approx(want["train_loss"], abs=1e-5)


def test_verify_lists_its_experiments(tmp_path: Path) -> None:
    result = geoanalyze("verify", "list", "-f", "json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    names = [e["name"] for e in json.loads(result.stdout)]
    assert {"necessity", "separation", "monotonicity", "mds-training"} <= set(names)


def test_verify_separation_writes_its_record_and_figure(tmp_path: Path, shared_data: Path) -> None:
    quick = sets("steps=20", "eval_every=5", "eval_batches=1", "model.d_model=32", "model.d_ff=64", "limit=2000")
    result = geoanalyze("verify", "separation", "-o", "out", "--data-dir", shared_data, *quick, cwd=tmp_path)
    assert result.code == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    document = json.loads((tmp_path / "out" / "separation.json").read_text())
    assert document["passed"] and {c["name"] for c in document["checks"]} == {
        "min distance > 0",
        "relative separation above the margin",
        "kept through training",
        "control: merged positions fail",
    }
    assert len(document["data"]["runs"]["mlm"]) == 4  # an evaluation every 5 of 20 steps
    assert (tmp_path / "out" / "separation.png").stat().st_size > 1000
    assert (tmp_path / "out" / "separation.md").read_text().startswith("## `separation`")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["telepathy"], ["unknown experiment 'telepathy'", "necessity"]),
        (["necessity", "--preset", "huge"], ["unknown preset 'huge'"]),
        (["necessity", "--device", "tpu"], ["unknown --device 'tpu'"]),
        (["necessity", "-f", "yaml"], ["unknown --format 'yaml'"]),
    ],
    ids=["experiment", "preset", "device", "format"],
)
def test_bad_verify_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: list[str]) -> None:
    refused(geoanalyze("verify", *args, "-o", "out", cwd=tmp_path), *words)
    assert list(tmp_path.iterdir()) == []


def test_the_paper_preset_without_cuda_is_refused_up_front(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is present here")
    refused(geoanalyze("verify", "necessity", "--preset", "paper", "-o", "out", cwd=tmp_path), "GPU", "--device cpu")
    assert list(tmp_path.iterdir()) == []


def test_verify_keeps_earlier_results_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "necessity.json").write_text("{}")
    refused(geoanalyze("verify", "necessity", "-o", "out", cwd=tmp_path), "already holds results", "--force")
    assert (tmp_path / "out" / "necessity.json").read_text() == "{}"


def test_a_bad_setting_fails_before_any_run_and_leaves_nothing(tmp_path: Path) -> None:
    refused(geoanalyze("verify", "necessity", "-o", "out", "--set", "model.colour=red", cwd=tmp_path), "model.colour")
    assert list(tmp_path.iterdir()) == []
