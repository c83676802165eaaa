"""stress --windows: scores against position in the JSON and the figure, and hostile settings refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import PNG_SIGNATURE, geoanalyze, ok, refused


def windowed(tmp_path: Path, spec: str, length: int, windows: int, *figures: str) -> dict:
    """stress SPEC on a synthetic drift of ``length`` positions with --windows: its JSON's windows of SPEC."""
    run = ok(
        geoanalyze(
            "stress", spec, "--dataset", f"synthetic:drift,length={length},n=64,vocab=256", "--max-length", length,
            "--min-count", 32, "--windows", windows, "--compare", "random", "-f", "json", *figures, cwd=tmp_path,
        )
    )  # fmt: skip
    mine = json.loads(run.stdout)["windows"][spec]
    assert 2 <= len(mine["windows"]) <= windows
    assert {"start", "end", "scaled_stress", "p_adjusted", "category"} <= set(mine["windows"][0])
    assert mine["verdict"].startswith(("the geometry of", "the data cannot decide"))
    return mine


def test_windows_fill_the_json(tmp_path: Path) -> None:
    """The fast twin (plain rope: a scaling spec imports transformers, seconds on its own)."""
    mine = windowed(tmp_path, "rope:d=16", 64, 3)
    assert mine["training_length"] is None


@pytest.mark.slow
@pytest.mark.parametrize(("length", "windows", "original"), [(256, 4, 64), (8192, 12, 4096)])
def test_done_when_a_yarn_spec_draws_the_figure(tmp_path: Path, length: int, windows: int, original: int) -> None:
    """The issue's done-when at 8192 positions (it needs the scaling path past the dense limit), and a small twin."""
    spec = f"rope:d=128,base=10000,scaling=yarn,factor=4,original={original}"
    mine = windowed(tmp_path, spec, length, windows, "--plot-dir", "figs")
    assert mine["training_length"] == original
    assert (tmp_path / "figs" / "windows.png").read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize("setting", ["0", "-1", "bogus", "99"])
def test_hostile_windows_exit_2(tmp_path: Path, setting: str) -> None:
    run = geoanalyze("stress", "rope:d=8", "--dataset", "synthetic:drift,length=64,n=64,vocab=32",
                     "--windows", setting, cwd=tmp_path)  # fmt: skip
    refused(run, "--windows")


@pytest.mark.parametrize(
    "spec", ["rope:d=8,scaling=bogus,factor=2", "rope:d=8,scaling=linear,factor=0", "rope:d=8,scaling=linear,factor=-1",
             "rope:d=8,scaling=yarn,factor=2,original=0"],
)  # fmt: skip
def test_hostile_scaling_specs_exit_2(tmp_path: Path, spec: str) -> None:
    refused(geoanalyze("stress", spec, "--dataset", "synthetic:drift,length=64,n=64,vocab=32", cwd=tmp_path), "rope")


@pytest.mark.slow
def test_a_checkpoint_shows_its_rope_scaling_and_training_length(tmp_path: Path) -> None:
    """A tiny Llama (random weights) whose config sets yarn: the target's legend line names the scaling, and
    its windows carry the config's original_max_position_embeddings as the training length."""
    from helpers import DRIFT_WORDS
    from transformers import AutoModel, LlamaConfig
    from unit.checkpoints.model_zoo.zoo import corpus_tokenizer

    tokenizer = corpus_tokenizer(DRIFT_WORDS)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 128},
    )  # fmt: skip
    AutoModel.from_config(config).eval().save_pretrained(str(tmp_path / "llama"))
    tokenizer.save_pretrained(str(tmp_path / "llama"))
    common = ("--dataset", DRIFT_WORDS, "--layers", "none", "--windows", 4, "--compare", "random", "--min-count", 10)
    table = ok(geoanalyze("stress", "llama", *common, cwd=tmp_path)).stdout
    assert "RoPE scaled by its config: yarn (attention scaling" in " ".join(table.split())
    document = json.loads(ok(geoanalyze("stress", "llama", *common, "-f", "json", cwd=tmp_path)).stdout)
    assert document["windows"]["llama"]["training_length"] == 128
    assert document["windows"]["random"]["training_length"] is None
