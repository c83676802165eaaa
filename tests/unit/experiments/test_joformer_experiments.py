"""JoFormer's experiments: the algebra checks, length generalization and the digits ViT (smoke and CI scale)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from geoanalyze.errors import InputError
from geoanalyze.experiments import ExperimentOptions, run_experiment, write_result
from geoanalyze.experiments.joformer_shared import block_perplexity
from geoanalyze.experiments.length_generalization import MULTIPLIERS
from geoanalyze.experiments.vision_2d import _vision_settings, load_digits_split

TINY_LM = [
    "model.d_model=16",
    "model.n_heads=2",
    "model.n_layers=1",
    "model.d_ff=32",
    "max_length=8",
    "model.n_positions=8",
    "steps=3",
    "eval_every=3",
    "eval_batches=1",
    "batch_size=4",
    "split=train",
]


def options(tmp_path: Path, **extra: object) -> ExperimentOptions:
    work = tmp_path / "work"
    work.mkdir()
    return ExperimentOptions(work_dir=work, progress=False, device="cpu", **extra)  # type: ignore[arg-type]


def test_journey_checks_all_pass(tmp_path: Path) -> None:
    result = run_experiment("journey", options(tmp_path))
    names = {c.name for c in result.checks}
    assert {
        "associativity",
        "path-independence",
        "path-dependence",
        "flat-regime",
        "equivariance",
        "dft",
        "norms",
    } <= names
    assert result.passed, [c for c in result.checks if not c.passed]
    assert all((tmp_path / "work" / name).is_file() for name in result.figures)
    paths = write_result(result, tmp_path / "work")
    assert json.loads(paths["json"].read_text())["passed"] is True


def test_length_generalization_smoke(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    corpus.write_text("\n".join("".join(rng.choice(list("abcd "), 50)) for _ in range(60)), encoding="utf-8")
    result = run_experiment("length-generalization", options(tmp_path, overrides=[f"dataset={corpus}", *TINY_LM]))
    ratios = result.data["ratio"]
    assert set(ratios) == {"rope", "joformer-fixed", "joformer-learned", "joformer-projected"}
    assert all(len(r) == len(MULTIPLIERS) and r[0] == 1.0 and all(math.isfinite(x) for x in r) for r in ratios.values())
    assert {c.name for c in result.checks} == {"finite", "projected-vs-rope", "fixed-vs-rope"}
    assert result.checks[0].passed
    assert (tmp_path / "work" / "length_generalization.png").is_file()


def test_block_perplexity_of_a_uniform_model_is_the_vocabulary() -> None:
    import torch

    class Uniform(torch.nn.Module):
        def forward(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"logits": torch.zeros(*ids.shape, 7)}

    stream = np.arange(100) % 7
    assert block_perplexity(Uniform(), stream, 8, 64, "cpu") == pytest.approx(7.0)
    with pytest.raises(InputError, match="cannot cut"):
        block_perplexity(Uniform(), stream, 8, 60, "cpu")


def test_vision_smoke(tmp_path: Path) -> None:
    overrides = ["steps=3", "seeds=1", "model.d_model=16", "model.n_layers=1", "model.d_ff=16"]
    result = run_experiment("vision-2d", options(tmp_path, overrides=overrides))
    assert set(result.data["mean"]) == {
        "none",
        "rope2d",
        "rope2d-learned",
        "joformer-fixed",
        "joformer-learned",
        "dense",
    }
    assert all(0.0 <= a <= 1.0 for a in result.data["mean"].values())
    assert {c.name for c in result.checks} == {
        "learns",
        "positions-matter",
        "v-rotation-vs-2d-rope",
        "synergy",
        "dense-vs-axial",
    }
    assert set(result.data["gains"]) == {"learned frequencies alone", "value rotation alone", "both"}
    assert (tmp_path / "work" / "vision_2d.png").is_file()


def test_vision_data_and_settings() -> None:
    x_train, _, x_test, y_test = load_digits_split(0)
    assert x_train.shape[1:] == (1, 8, 8) and len(x_train) + len(x_test) == 1797
    assert x_train.min() >= 0.0 and x_train.max() <= 1.0
    assert set(np.unique(y_test)) == set(range(10))
    settings = _vision_settings("ci", ["steps=7", "model.d_model=32"])
    assert settings.steps == 7 and settings.model["d_model"] == 32 and settings.model["n_layers"] == 2
    with pytest.raises(InputError, match="unknown setting"):
        _vision_settings("ci", ["colour=red"])
    with pytest.raises(InputError, match="CIFAR-100 not found"):
        from geoanalyze.experiments.vision_2d import load_cifar100

        load_cifar100("/nonexistent")


@pytest.mark.slow
def test_length_generalization_ci(tmp_path: Path, shared_data: Path) -> None:
    from test_positional_experiments import committed_verdicts

    result = run_experiment("length-generalization", options(tmp_path, data_dir=str(shared_data)))
    # fixed-vs-rope fails over 3 seeds (a finding); every verdict must be the committed record's
    verdicts = {c.name: c.passed for c in result.checks}
    assert verdicts == committed_verdicts("length-generalization"), [(c.name, c.value, c.detail) for c in result.checks]
    assert verdicts["finite"] and verdicts["projected-vs-rope"]


@pytest.mark.slow
def test_vision_2d_ci(tmp_path: Path) -> None:
    result = run_experiment("vision-2d", options(tmp_path))
    # the paper's comparisons (synergy, value rotation over 2D-RoPE, dense worse) are superiority tests
    # over 3 seeds: their verdicts are findings, not requirements
    findings = {"synergy", "v-rotation-vs-2d-rope", "dense-vs-axial"}
    failed = [(c.name, c.value, c.detail) for c in result.checks if not c.passed and c.name not in findings]
    assert not failed, failed


# --- JoFormer as published, and the vocabulary table ------------------------------------------------


def test_value_path_deviations_are_round_off() -> None:
    from geoanalyze.experiments.joformer_reference import value_path_deviations

    deviations = value_path_deviations(seed=4)
    assert set(deviations) == {"attention", "ssm", "joformer", "reference per-token", "reference fixed"}
    assert max(deviations.values()) < 1e-12


def test_joformer_reference_smoke(tmp_path: Path, shared_data: Path) -> None:
    overrides = ["steps=3", "eval_blocks=4", "n_embed=16", "n_layers=1"]
    result = run_experiment("joformer-reference", options(tmp_path, overrides=overrides, data_dir=str(shared_data)))
    assert [c.name for c in result.checks][:2] == ["value-path formula", "finite"]
    assert result.checks[0].passed and result.checks[1].passed
    assert len(result.data["results"]) == 8


def test_a_trained_bpe_loads_as_the_project_tokenizer(tmp_path: Path) -> None:
    from geoanalyze.corpus.tokenize import get_tokenizer
    from geoanalyze.experiments.lm_vocab import train_bpe

    texts = ["the movie was good", "the film was bad", "a good film, a bad movie"] * 20
    folder = train_bpe(texts, 300, tmp_path / "bpe")
    tokenizer = get_tokenizer(str(folder), add_special_tokens=False)
    ids = tokenizer.encode_batch(["the film was good"])[0]
    assert 0 < len(ids) < 18 and tokenizer.vocab_size <= 300


@pytest.mark.slow
def test_lm_vocab_smoke(tmp_path: Path, shared_data: Path) -> None:
    overrides = ["vocabs=300,600", "tokenizer_texts=200", "train_texts=200", "eval_blocks=4", "steps=3", "eval_every=3"]
    result = run_experiment("lm-vocab", options(tmp_path, overrides=overrides, data_dir=str(shared_data)))
    assert {c.name for c in result.checks} == {"finite", "projected below RoFormer"}
    assert result.checks[0].passed
    assert set(result.data["perplexity"]) == {300, 600}
