"""Checkpoint configs as users meet them (issues 21 and 22), run as a user types the command:

- valid configs that the config checks used to refuse: sizes in nested encoder/decoder configs
  (T5Gemma), a per-layer intermediate_size list (Gemma 3n), a loss weight of 0.0 (Bailing-hybrid);
  a sinusoidal table computed, not stored (Marian);
- bad values inside those nested configs and lists, refused with the field named;
- a ``quantization_config`` whose backend is not installed: exit 2 naming the package (``report``
  still writes its page); one whose backend is present goes on as transformers loads it;
- a position table in two weight files: refused naming both files.

Each checkpoint is a tiny random-weight model of the model zoo (tests/unit/checkpoints/model_zoo/zoo.py),
built once for the module.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from .harness import REPO_ROOT, Sandbox

WORDS = "drift-words.txt"
QUICK = ("--null-draws", "2", "--compare", "", "--max-sequences", "32")


def _zoo() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_zoo_for_configs", REPO_ROOT / "tests/unit/checkpoints/model_zoo/zoo.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Zoo name -> its checkpoint folder, for the names the cases use."""
    zoo = _zoo()
    tokenizer = zoo.corpus_tokenizer(REPO_ROOT / "sample_corpora" / WORDS)
    entries = {entry.name: entry for entry in zoo.full_zoo()}
    root = tmp_path_factory.mktemp("configs")
    names = ("BERT", "Llama", "t5gemma", "gemma3n_text", "bailing_hybrid", "marian")
    return {name: zoo.build_checkpoint(entries[name], root / name.replace(" ", "-"), tokenizer) for name in names}


def _copy(sandbox: Sandbox, source: Path, **changes: Any) -> str:
    """The checkpoint copied into the sandbox as ./ckpt, its config.json changed (``...`` removes a key)."""
    shutil.copytree(source, sandbox.path("ckpt"))
    config_file = sandbox.path("ckpt/config.json")
    config = json.loads(config_file.read_text())
    for key, value in changes.items():
        if value is ...:
            config.pop(key, None)
        else:
            config[key] = value
    config_file.write_text(json.dumps(config))
    return "./ckpt"


def _mechanism(sandbox: Sandbox, target: str) -> dict[str, Any]:
    sandbox.copy_sample(WORDS)
    result = sandbox.accepted("stress", target, "--dataset", WORDS, *QUICK, "--layers", "none", "-f", "json")
    return json.loads(result.stdout)["checkpoint"]["position_mechanism"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("t5gemma", "rope"), ("gemma3n_text", "rope"), ("bailing_hybrid", "rope"), ("marian", "fixed")],
)
def test_valid_configs_are_read_not_refused(sandbox: Sandbox, built: dict[str, Path], name: str, kind: str) -> None:
    config = json.loads((built[name] / "config.json").read_text())
    if name == "t5gemma":
        assert "hidden_size" not in config and isinstance(config["encoder"]["hidden_size"], int)
    if name == "gemma3n_text":
        assert isinstance(config["intermediate_size"], list)
    if name == "bailing_hybrid":
        config["mtp_loss_scaling_factor"] = 0.0  # a loss weight: legitimately 0, never read by geoanalyze
    target = _copy(sandbox, built[name], **config)
    assert _mechanism(sandbox, target)["kind"] == kind


def test_a_computed_sinusoidal_table_is_not_looked_for_in_the_weights(sandbox: Sandbox, built: dict[str, Path]) -> None:
    """Marian's sinusoidal table is computed, and MarianMTModel does not save it (_keys_to_ignore_on_save):
    a checkpoint without it is analysed, its position row the table the model computes."""
    from safetensors.numpy import load_file, save_file

    target = _copy(sandbox, built["marian"])
    weights = sandbox.path("ckpt/model.safetensors")
    tensors = load_file(str(weights))
    save_file({k: v for k, v in tensors.items() if "embed_positions" not in k}, str(weights))
    sandbox.copy_sample(WORDS)
    result = sandbox.accepted("stress", target, "--dataset", WORDS, *QUICK, "--max-length", "32", "-f", "json")
    document = json.loads(result.stdout)
    assert document["checkpoint"]["position_mechanism"]["kind"] == "fixed"
    assert document["checkpoint"]["rows"]["position"].startswith("measured")


NESTED_BAD = [
    ("t5gemma", lambda c: c["encoder"].update(hidden_size=-4), "encoder.hidden_size"),
    ("t5gemma", lambda c: c["decoder"].update(rope_theta="abc"), "decoder.rope_theta"),
    ("gemma3n_text", lambda c: c.update(intermediate_size=[64, "wide", 64, 64]), "intermediate_size"),
    ("gemma3n_text", lambda c: c.update(intermediate_size=[64, 0, 64, 64]), "intermediate_size"),
    ("Llama", lambda c: c.update(partial_rotary_factor=-0.5), "partial_rotary_factor"),
]


@pytest.mark.parametrize(("name", "edit", "word"), NESTED_BAD, ids=[case[2] for case in NESTED_BAD])
def test_bad_values_in_nested_configs_and_lists_are_refused(
    sandbox: Sandbox, built: dict[str, Path], name: str, edit: Any, word: str
) -> None:
    config = json.loads((built[name] / "config.json").read_text())
    edit(config)
    target = _copy(sandbox, built[name], **config)
    sandbox.copy_sample(WORDS)
    sandbox.refused("stress", target, "--dataset", WORDS, *QUICK, "--layers", "none", words=(word,))


QUANTIZED = [
    ("bitsandbytes", {"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes"),
    ("gptq", {"quant_method": "gptq", "bits": 4}, "optimum"),
    ("awq", {"quant_method": "awq", "bits": 4}, "gptqmodel"),
]


@pytest.mark.parametrize(("method", "quantization", "package"), QUANTIZED, ids=[case[0] for case in QUANTIZED])
def test_a_quantized_checkpoint_without_its_backend_names_the_package(
    sandbox: Sandbox, built: dict[str, Path], method: str, quantization: dict[str, Any], package: str
) -> None:
    pytest.importorskip("transformers")
    if importlib.util.find_spec(package.split(">")[0]) is not None:
        pytest.skip(f"{package} is installed here")
    target = _copy(sandbox, built["Llama"], quantization_config=quantization)
    sandbox.copy_sample(WORDS)
    sandbox.refused("stress", target, "--dataset", WORDS, *QUICK, words=(method, package, "install"))


def test_report_writes_its_page_past_a_quantized_checkpoint_without_its_backend(
    sandbox: Sandbox, built: dict[str, Path]
) -> None:
    if importlib.util.find_spec("bitsandbytes") is not None:
        pytest.skip("bitsandbytes is installed here")
    target = _copy(sandbox, built["Llama"], quantization_config=QUANTIZED[0][1])
    sandbox.copy_sample(WORDS)
    result = sandbox.run("report", target, "--dataset", WORDS, *QUICK, "-o", "page.md")
    assert result.code in (1, 2), str(result)
    page = sandbox.path("page.md").read_text()
    assert "not analysed" in page and "bitsandbytes" in page


def test_a_quantization_transformers_can_load_here_goes_on(sandbox: Sandbox, built: dict[str, Path]) -> None:
    """FP8 needs no package beyond torch (on a CPU transformers dequantizes): the checkpoint is analysed."""
    target = _copy(sandbox, built["Llama"], quantization_config={"quant_method": "fp8", "weight_block_size": None})
    assert _mechanism(sandbox, target)["kind"] == "rope"


def _split(folder: Path, prefixes: tuple[str, str]) -> None:
    """model.safetensors as two files that both hold the position table (under the given prefixes)."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    table = "embeddings.position_embeddings.weight"
    first = {prefixes[0] + k: v for k, v in tensors.items() if k == table or k.startswith("embeddings.")}
    second = {prefixes[1] + k: v for k, v in tensors.items() if not k.startswith("embeddings.") or k == table}
    save_file(first, str(folder / "model-00001-of-00002.safetensors"))
    save_file(second, str(folder / "model-00002-of-00002.safetensors"))


@pytest.mark.parametrize("prefixes", [("", ""), ("bert.", "roberta.")], ids=["same-name", "two-models"])
def test_a_position_table_in_two_files_names_both(
    sandbox: Sandbox, built: dict[str, Path], prefixes: tuple[str, str]
) -> None:
    target = _copy(sandbox, built["BERT"])
    _split(sandbox.path("ckpt"), prefixes)
    sandbox.copy_sample(WORDS)
    sandbox.refused(
        "stress",
        target,
        "--dataset",
        WORDS,
        *QUICK,
        "--layers",
        "none",
        words=("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"),
    )
