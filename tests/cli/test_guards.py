"""Inputs that would give wrong numbers or half-written outputs are refused up front (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import DRIFT, DRIFT_WORDS, geoanalyze, refused

#: two null draws (the fewest), printed as JSON
QUICK_JSON = ("--null-draws", 2, "-f", "json")


def test_synthetic_specs_count_whole_words_in_stress(tmp_path: Path) -> None:
    synthetic = ("--dataset", "synthetic:drift,n=300,length=16,vocab=50", "--min-count", 50, "--compare", "")
    result = geoanalyze("stress", "rope:d=16", *synthetic, *QUICK_JSON, cwd=tmp_path)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["dataset"]["tokenizer"] == "whitespace"
    assert len(document["positions"]) == 16  # the generator's 16 positions, not BERT word-pieces


def test_a_distances_file_cannot_be_recounted_but_can_be_filtered(tmp_path: Path) -> None:
    distances = tmp_path / "d.safetensors"
    assert geoanalyze("distances", DRIFT, "-t", "whitespace", "-o", distances, cwd=tmp_path).code == 0
    refused(geoanalyze("mds", distances, "-t", "char", cwd=tmp_path), "--tokenizer")
    refused(geoanalyze("mds", distances, "--max-length", "10", cwd=tmp_path), "--max-length")
    refused(geoanalyze("mds", distances, "--min-count", "5000", cwd=tmp_path), "min-count")
    result = geoanalyze("mds", distances, "--min-count", "2000", "-f", "json", cwd=tmp_path)
    assert result.code == 0 and len(json.loads(result.stdout)["positions"]) == 64  # N_i = 2000 everywhere


def test_an_mds_file_from_other_counts_is_not_scored_at_shifted_positions(tmp_path: Path) -> None:
    pe = tmp_path / "pe.safetensors"
    made = geoanalyze("mds", DRIFT, "-t", "whitespace", "--rank", "4", "-o", pe, cwd=tmp_path)
    assert made.code == 0, made.stderr
    result = geoanalyze(
        "stress", f"mds:{pe}", "--dataset", DRIFT_WORDS, "--compare", "", "--null-draws", "2", cwd=tmp_path
    )
    refused(result, "rebuild it")


def test_a_checkpoint_is_not_scored_with_a_foreign_tokenizer(tmp_path: Path, minilm_path: Path) -> None:
    result = geoanalyze("stress", minilm_path, "--dataset", DRIFT_WORDS, "-t", "whitespace", cwd=tmp_path)
    refused(result, "whitespace")


def test_mds_into_a_checkpoint_needs_the_models_positions(tmp_path: Path, minilm_path: Path) -> None:
    for extra in (["--no-special-tokens"], ["-t", "whitespace"]):
        out = tmp_path / f"copy{len(extra)}"
        result = geoanalyze(
            "mds",
            DRIFT_WORDS,
            *extra,
            "--rank",
            "8",
            "--into-checkpoint",
            minilm_path,
            "--checkpoint-output",
            out,
            cwd=tmp_path,
        )
        refused(result)
        assert not out.exists()


def test_report_checks_every_target_before_writing(tmp_path: Path) -> None:
    result = geoanalyze(
        "report",
        "sinusoidal:d=16",
        str(tmp_path / "no-such-checkpoint"),
        "--dataset",
        DRIFT_WORDS,
        "-o",
        tmp_path / "r.md",
        cwd=tmp_path,
    )
    assert result.code == 2, result.stderr
    assert not (tmp_path / "r.md").exists()
    assert not (tmp_path / "r_files").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r_files")]


@pytest.mark.parametrize(
    "args",
    [
        ("stress", "rope:d=16", "--dataset", DRIFT_WORDS, "--plot-dir", "afile"),
        ("stress", "rope:d=16", "--dataset", DRIFT_WORDS, "-o", "afolder.json"),
        ("distances", DRIFT, "-t", "whitespace", "--heatmap", "afolder.png"),
        ("stress", "rope:d=1e12", "--dataset", DRIFT_WORDS),
        ("stress", "alibi:heads=1e9", "--dataset", DRIFT_WORDS),
        ("stress", "rope:d=16", "--dataset", DRIFT_WORDS, "--compare", "random:seed=-1"),
        ("stress", "rope:d=16", "--dataset", DRIFT_WORDS, "--compare", "sinusoidal:base=0"),
        ("stress", "rope:d=16", "--dataset", DRIFT_WORDS, "--compare", "mds:rank=3,foo=2"),
        ("marginals", "synthetic:shift,kappa=nan"),
    ],
    ids=[
        "plot-dir is a file",
        "-o is a folder",
        "heatmap is a folder",
        "huge d",
        "huge heads",
        "negative seed",
        "base 0",
        "unknown mds key",
        "nan option",
    ],
)
def test_bad_outputs_and_specs_are_refused_before_any_work(tmp_path: Path, args: tuple[Any, ...]) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "afolder.json").mkdir()
    (tmp_path / "afolder.png").mkdir()
    refused(geoanalyze(*args, cwd=tmp_path))


def test_compare_keeps_multi_parameter_specs(tmp_path: Path) -> None:
    compared = ("--compare", "alibi:heads=8,head=2,rope:d=8,base=100")
    result = geoanalyze("stress", "rope:d=16", "--dataset", DRIFT_WORDS, *compared, *QUICK_JSON, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert set(json.loads(result.stdout)["scores"]) == {"rope:d=16", "alibi:heads=8,head=2", "rope:d=8,base=100"}


def test_non_finite_numpy_values_become_null() -> None:
    from geoanalyze.io import to_jsonable

    assert to_jsonable({"a": np.float64("nan"), "b": [np.float32("inf")]}) == {"a": None, "b": [None]}


def test_alibi_heads_come_from_any_config_spelling(tmp_path: Path) -> None:
    """MPT names its heads n_heads and its ALiBi switch attn_config.alibi: 32 slopes 2^(-8h/32)."""
    from geoanalyze.checkpoints import load_checkpoint

    mpt = {
        "model_type": "mpt",
        "architectures": ["MPTForCausalLM"],
        "n_heads": 32,
        "d_model": 64,
        "n_layers": 1,
        "attn_config": {"alibi": True},
    }
    (tmp_path / "mpt").mkdir()
    (tmp_path / "mpt" / "config.json").write_text(json.dumps(mpt))
    mechanism = load_checkpoint(str(tmp_path / "mpt")).mechanism
    assert mechanism.kind == "alibi"
    np.testing.assert_allclose(sorted(mechanism.alibi_slopes), sorted(2.0 ** (-8.0 * np.arange(1, 33) / 32)), rtol=1e-6)
