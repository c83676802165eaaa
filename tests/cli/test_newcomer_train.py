"""train --split / --eval-split: evaluating on the split trained on is refused unless asked for;
the smoke preset; a preset that asks for CUDA says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DRIFT_WORDS, geoanalyze, refused

from geoanalyze.train.config import PRESETS

#: a model and run small enough for a second or two (the ci model, 2 steps)
TINY = ["--set", "steps=2", "--set", "eval_every=2", "--set", "eval_batches=1", "--set", "batch_size=4"]


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    """sst2 with train and validation, wikitext2 with validation only, as in ../shared/data."""
    lines = [line for line in DRIFT_WORDS.read_text(encoding="utf-8").splitlines() if line.strip()][:60]
    (tmp_path / "data" / "sst2").mkdir(parents=True)
    for split in ("train", "validation"):
        rows = "".join(f"{line}\t{i % 2}\n" for i, line in enumerate(lines))
        (tmp_path / "data" / "sst2" / f"{split}.tsv").write_text("sentence\tlabel\n" + rows, encoding="utf-8")
    (tmp_path / "data" / "wikitext2").mkdir()
    (tmp_path / "data" / "wikitext2" / "validation.tokens").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path / "data"


MLM = ["train", "--task", "mlm", "--set", "max_length=16", "--set", "model.n_positions=16"]


@pytest.mark.parametrize(
    "how",
    [
        ["--split", "validation"],
        ["--set", "split=validation"],
        ["--split", "train", "--eval-split", "train"],
        ["--set", "eval_split=train"],
    ],
    ids=["--split validation", "--set split=validation", "--eval-split train", "--set eval_split=train"],
)
def test_evaluating_on_the_training_split_is_refused(tmp_path: Path, data: Path, how: list[str]) -> None:
    run = geoanalyze(*MLM, "--dataset", "sst2", "--data-dir", data, *how, "-o", "run", cwd=tmp_path)
    refused(run, "train and evaluate on split", "--eval-split", "--allow-eval-on-train")
    assert not (tmp_path / "run").exists()


def test_a_local_split_alone_trains_with_its_last_tenth_held_out(tmp_path: Path, data: Path) -> None:
    # wikitext2 holds only validation here: the error names --split, which train now takes
    first = refused(geoanalyze(*MLM, "--dataset", "wikitext2", "--data-dir", data, "-o", "run", cwd=tmp_path))
    assert "pass --split validation" in first
    run = geoanalyze(
        *MLM, "--dataset", "wikitext2", "--data-dir", data, "--split", "validation", "--eval-split", "none",
        *TINY, "-f", "json", "--output-dir", "run", cwd=tmp_path,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    config = json.loads(run.stdout)["config"]
    assert (config["split"], config["eval_split"]) == ("validation", None)


def test_evaluating_on_the_training_split_on_purpose(tmp_path: Path, data: Path) -> None:
    run = geoanalyze(
        *MLM, "--dataset", "sst2", "--data-dir", data, "--split", "validation", "--allow-eval-on-train",
        *TINY, "-f", "json", "--output-dir", "run", cwd=tmp_path,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["config"]["eval_split"] == "validation"


def test_a_file_corpus_holds_out_its_texts_whatever_the_splits(tmp_path: Path) -> None:
    run = geoanalyze(*MLM, "--dataset", DRIFT_WORDS, "--split", "validation", *TINY, "-o", "run", cwd=tmp_path)
    assert run.code == 0, run.stderr


def test_the_smoke_preset_is_listed_and_runs(tmp_path: Path) -> None:
    assert "smoke" in PRESETS
    help_text = geoanalyze("train", "--help", cwd=tmp_path).stdout
    for name in PRESETS:
        assert name in help_text, name
    run = geoanalyze("train", "--preset", "smoke", "--output-dir", "run", "-f", "json", cwd=tmp_path)
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["metrics"]["step"] == PRESETS["smoke"]["steps"]


def test_the_paper_preset_names_itself_when_cuda_is_missing(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is present here")
    line = refused(geoanalyze("train", "--preset", "paper", "-o", "run", cwd=tmp_path), "--device cpu")
    assert line.startswith("error: the paper preset asks for device cuda")
    asked = refused(geoanalyze("train", "--device", "cuda", "-o", "run", cwd=tmp_path))
    assert "preset" not in asked and "cuda" in asked
    assert list(tmp_path.iterdir()) == []


def test_train_pe_mds_names_the_setting_and_the_docs_commands_run(tmp_path: Path) -> None:
    """`train --pe mds` without its file names --set model.pe_file=PATH; docs/training.md's two
    commands (mds, then train with that setting) run as written."""
    import re
    import shlex

    from helpers import REPO_ROOT, ok

    missing = geoanalyze("train", "--output-dir", "r", "--task", "order", "--pe", "mds", cwd=tmp_path)
    refused(missing, "pe 'mds' needs its PE file: pass --set model.pe_file=PATH")
    assert not (tmp_path / "r").exists()
    page = (REPO_ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "--pe mds" in b]
    (tmp_path / "sample_corpora").symlink_to(REPO_ROOT / "sample_corpora")
    for line in block.strip().splitlines():
        ok(geoanalyze(*shlex.split(line)[1:], cwd=tmp_path))
    config = json.loads((tmp_path / "runs" / "order-mds" / "checkpoint" / "config.json").read_text(encoding="utf-8"))
    assert config["pe"] == "mds" and config["pe_file"] and config["n_positions"] == 48
