"""Errors that name the fix (issue 31, point 8): a refusal says what to type next, and what it says
works. Each case is a natural mistake of a first day; real inputs (the sample corpora, the packaged
MiniLM, a `train` run of the smoke preset)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DRIFT_WORDS, geoanalyze, ok, refused

CHEAP = ("--null-draws", 2, "--layers", "none", "--compare", "sinusoidal")


@pytest.fixture(scope="module")
def run16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `geoanalyze train` run (smoke preset) whose position table has 16 rows."""
    folder = tmp_path_factory.mktemp("train")
    sets = ("--set", "model.n_positions=16", "--set", "max_length=16")
    ok(geoanalyze("train", "--output-dir", "run16", "--preset", "smoke", *sets, cwd=folder))
    return folder


@pytest.mark.parametrize("with_data_dir", [True, False])
def test_a_misspelt_dataset_is_told_the_name(with_data_dir: bool, tmp_path: Path, shared_data: Path) -> None:
    extra = ("--data-dir", shared_data) if with_data_dir else ()
    run = geoanalyze("stress", "rope:d=8", "--dataset", "sts2", *extra, cwd=tmp_path)
    line = refused(run, "did you mean --dataset sst2?")
    assert "leave --data-dir out" not in line  # the advice that led to a second refusal


def test_track_of_a_missing_folder_says_it_is_missing(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    run = geoanalyze("track", "out/nothere", "--dataset", DRIFT_WORDS, cwd=tmp_path)
    line = refused(run, "out/nothere does not exist; check the path")
    assert "--order given" not in line
    bare = refused(geoanalyze("track", "nothere", "--dataset", DRIFT_WORDS, cwd=tmp_path), "does not exist here")
    assert "check the path" in bare


def test_stress_of_a_train_run_is_told_model_prefix(run16: Path) -> None:
    refused(geoanalyze("stress", "run16", "--dataset", DRIFT_WORDS, *CHEAP, cwd=run16), "pass model:run16")


def test_stress_past_the_table_names_max_length_and_that_works(run16: Path) -> None:
    run = geoanalyze("stress", "model:run16", "--dataset", DRIFT_WORDS, *CHEAP, cwd=run16)
    refused(run, "n_positions 16", "--max-length 16")
    scored = ok(geoanalyze("stress", "model:run16", "--dataset", DRIFT_WORDS, *CHEAP, "--max-length", 16, cwd=run16))
    assert "model:run16" in scored.stdout


def test_mds_into_a_hub_checkpoint_resolves_it_as_stress_does(tmp_path: Path, minilm_path: Path) -> None:
    name = "sentence-transformers/all-MiniLM-L6-v2"
    args = ("mds", "--dataset", DRIFT_WORDS, "--into-checkpoint", name, "--checkpoint-output", "mini-mds", "-f", "json")
    run = ok(geoanalyze(*args, cwd=tmp_path))
    assert json.loads(run.stdout)["checkpoint"]["checkpoint"] == "mini-mds"
    assert (tmp_path / "mini-mds" / "model.safetensors").is_file()


def test_stress_without_dataset_says_it_reads_sst2(tmp_path: Path, shared_data: Path) -> None:
    run = ok(geoanalyze("stress", "rope:d=8", "--data-dir", shared_data, "--limit", 200, *CHEAP, cwd=tmp_path))
    assert "note: no --dataset given: the corpus is sst2, the default; pass --dataset to choose it" in run.stderr
    given = ok(geoanalyze("stress", "rope:d=8", "--dataset", DRIFT_WORDS, *CHEAP, cwd=tmp_path))
    assert "no --dataset given" not in given.stderr
