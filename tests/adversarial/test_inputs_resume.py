"""``train --resume`` of a corrupted or incomplete checkpoint: exit 2 naming the file and the fix,
nothing in the run folder changed. The checkpoint is a real one, from a seconds-long run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .harness import Sandbox, invoke

#: scores an encoding beside the trained model in ./run (whose files the cases damage)
COMPARE_TRAINED_MODEL = [
    *("stress", "rope:d=16", "--dataset", "drift.txt", "-t", "whitespace"),
    *("--null-draws", "2", "--compare", "model:run"),
]

TINY = [
    "--task",
    "order",
    "--pe",
    "rope",
    "--set",
    "eval_every=2",
    "--set",
    "eval_batches=1",
    "--set",
    "batch_size=4",
    "--set",
    "model.n_layers=1",
    "--set",
    "model.d_model=16",
    "--set",
    "model.d_ff=32",
    "--set",
    "model.n_heads=2",
    "--set",
    "model.n_positions=32",
    "--set",
    "order_length=8",
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trained")
    result = invoke(["train", "-o", "run", "--steps", "2", *TINY], root)
    assert result.code == 0, str(result)
    return root / "run"


def _state(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        path = run / "checkpoint" / "trainer.json"
        document = json.loads(path.read_text())
        change(document)
        path.write_text(json.dumps(document))

    return tamper


def _write(name: str, content: bytes | str) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        path = run / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return tamper


def _cut(name: str, keep: int) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        path = run / name
        path.write_bytes(path.read_bytes()[:keep])

    return tamper


def _remove(name: str) -> Callable[[Path], None]:
    return lambda run: (run / name).unlink()


def _optimizer_tensors(tensors: Callable[[], dict]) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        from safetensors.torch import save_file

        save_file(tensors(), str(run / "checkpoint" / "optimizer.safetensors"))

    return tamper


def _zeros(*shape: int) -> Callable[[], dict]:
    def make() -> dict:
        import torch

        return {"0.exp_avg": torch.zeros(*shape), "0.exp_avg_sq": torch.zeros(*shape)}

    return make


def _group(key: str, value: object) -> Callable[[dict], None]:
    return lambda d: d["optimizer"]["param_groups"][0].__setitem__(key, value)


CASES: list[tuple[str, Callable[[Path], None], tuple[str, ...]]] = [
    ("no-optimizer-file", _remove("checkpoint/optimizer.safetensors"), ("optimizer.safetensors",)),
    ("no-model-weights", _remove("checkpoint/model.safetensors"), ("model.safetensors",)),
    ("no-model-config", _remove("checkpoint/config.json"), ("config.json",)),
    ("optimizer-cut", _cut("checkpoint/optimizer.safetensors", 1000), ("optimizer.safetensors",)),
    ("optimizer-garbage", _write("checkpoint/optimizer.safetensors", b"garbage"), ("optimizer.safetensors",)),
    ("model-cut", _cut("checkpoint/model.safetensors", 1000), ("model.safetensors",)),
    ("state-not-json", _write("checkpoint/trainer.json", "{nope"), ("trainer.json",)),
    ("state-a-list", _write("checkpoint/trainer.json", "[1, 2]"), ("checkpoint",)),
    ("state-not-utf8", _write("checkpoint/trainer.json", b"\xff\xfe{}"), ("trainer.json",)),
    ("state-empty", _write("checkpoint/trainer.json", ""), ("trainer.json",)),
    ("state-nested-too-deep", _write("checkpoint/trainer.json", "[" * 100_000 + "]" * 100_000), ("trainer.json",)),
    ("step-a-string", _state(lambda d: d.__setitem__("step", "four")), ("trainer.json", "step")),
    ("step-negative", _state(lambda d: d.__setitem__("step", -3)), ("trainer.json", "step")),
    ("step-a-float", _state(lambda d: d.__setitem__("step", 2.5)), ("trainer.json", "step")),
    ("step-a-bool", _state(lambda d: d.__setitem__("step", True)), ("trainer.json", "step")),
    ("step-missing", _state(lambda d: d.pop("step")), ("trainer.json", "step")),
    ("time-a-string", _state(lambda d: d.__setitem__("time_s", "x")), ("trainer.json", "time_s")),
    ("metrics-a-list", _state(lambda d: d.__setitem__("metrics", [1])), ("trainer.json", "metrics")),
    ("config-missing", _state(lambda d: d.pop("config")), ("trainer.json", "config")),
    ("config-a-string", _state(lambda d: d.__setitem__("config", "x")), ("trainer.json", "config")),
    ("optimizer-missing", _state(lambda d: d.pop("optimizer")), ("trainer.json", "optimizer")),
    ("groups-a-string", _state(lambda d: d["optimizer"].__setitem__("param_groups", "x")), ("param_groups",)),
    ("groups-empty", _state(lambda d: d["optimizer"].__setitem__("param_groups", [])), ("param_groups",)),
    ("scalars-a-list", _state(lambda d: d["optimizer"].__setitem__("scalars", [1])), ("scalars",)),
    ("lr-a-string", _state(_group("lr", "x")), ("lr",)),
    ("betas-wrong", _state(_group("betas", [0.9])), ("betas",)),
    ("params-strings", _state(_group("params", ["a"])), ("params",)),
    ("optimizer-other-shape", _optimizer_tensors(_zeros(3)), ("optimizer.safetensors", "0.exp_avg")),
    ("metrics-log-binary", _write("metrics.jsonl", b"\xff\xfe\x00garbage\n"), ("metrics.jsonl", "line 1")),
    ("metrics-log-nul", _write("metrics.jsonl", b'{"step": 2}\n\x00\x00\x00\n'), ("metrics.jsonl", "line 2")),
    ("model-config-a-list", _write("checkpoint/config.json", "[1]"), ("config.json",)),
    ("model-config-not-json", _write("checkpoint/config.json", "{"), ("config.json",)),
]


@pytest.mark.parametrize(("tamper", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_damaged_checkpoint_is_refused_on_resume(
    sandbox: Sandbox, trained: Path, tamper: Callable[[Path], None], words: tuple[str, ...]
) -> None:
    run = sandbox.path("run")
    shutil.copytree(trained, run)
    tamper(run)
    sandbox.refused("train", "-o", "run", "--resume", "--steps", "4", *TINY, words=words)


def test_a_checkpoint_of_another_model_is_refused(sandbox: Sandbox, trained: Path) -> None:
    shutil.copytree(trained, sandbox.path("run"))
    other = [arg.replace("model.d_model=16", "model.d_model=32") for arg in TINY]
    sandbox.refused("train", "-o", "run", "--resume", "--steps", "4", *other, words=("d_model",))


def test_a_checkpoint_of_another_task_is_refused(sandbox: Sandbox, trained: Path) -> None:
    shutil.copytree(trained, sandbox.path("run"))
    sandbox.refused("train", "-o", "run", "--resume", "--steps", "4", "--task", "mlm", words=("task",))


def test_an_intact_checkpoint_resumes(sandbox: Sandbox, trained: Path) -> None:
    shutil.copytree(trained, sandbox.path("run"))
    invoke(["train", "-o", "run", "--resume", "--steps", "4", *TINY], sandbox.root)
    lines = sandbox.path("run/metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [2, 4]


# --- a model: run whose config.json is malformed (checked before the model is built) ----------

MODEL_CONFIGS = [
    ("positions-1e9", {"n_positions": 10**9}, "n_positions"),
    ("width-1e8", {"d_model": 10**8}, "d_model"),
    ("table-too-large", {"n_positions": 10**6, "d_model": 4096}, "n_positions x d_model"),
    ("positions-negative", {"n_positions": -5}, "n_positions"),
    ("positions-zero", {"n_positions": 0}, "n_positions"),
    ("positions-a-float", {"n_positions": 32.0}, "n_positions"),
    ("positions-a-string", {"n_positions": "32"}, "n_positions"),
    ("layers-a-bool", {"n_layers": True}, "n_layers"),
    ("heads-zero", {"n_heads": 0}, "n_heads"),
    ("vocab-1e12", {"vocab_size": 10**12}, "vocab_size"),
    ("dropout-nan", {"dropout": float("nan")}, "dropout"),
    ("rope-base-infinite", {"rope_base": float("inf")}, "rope_base"),
    ("unknown-key", {"bogus": 1}, "bogus"),
    ("pe-a-number", {"pe": 5}, "pe"),
]


@pytest.mark.parametrize(("changes", "word"), [c[1:] for c in MODEL_CONFIGS], ids=[c[0] for c in MODEL_CONFIGS])
def test_a_malformed_model_config_is_refused_before_building(
    sandbox: Sandbox, trained: Path, changes: dict, word: str
) -> None:
    shutil.copytree(trained, sandbox.path("run"))
    config = sandbox.path("run/checkpoint/config.json")
    config.write_text(json.dumps({**json.loads(config.read_text()), **changes}))
    sandbox.copy_sample("drift.txt")
    sandbox.refused(
        *COMPARE_TRAINED_MODEL,
        words=("config.json", word),
    )


def test_a_model_config_that_is_not_an_object(sandbox: Sandbox, trained: Path) -> None:
    shutil.copytree(trained, sandbox.path("run"))
    sandbox.path("run/checkpoint/config.json").write_text("[32, 16]")
    sandbox.copy_sample("drift.txt")
    sandbox.refused(
        *COMPARE_TRAINED_MODEL,
        words=("config.json", "object"),
    )
