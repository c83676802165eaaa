"""Fixtures of the corpus unit tests: the real reference tokenizer, real corpus slices, an empty HF cache."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def reference_tokenizer(minilm_path: Path) -> Any:
    """transformers' own tokenizer of the packaged checkpoint: the independent reference."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_path))


@pytest.fixture(scope="session")
def sst2_sentences(shared_data: Path) -> list[str]:
    """The first 300 SST-2 train sentences, read without geoanalyze (GLUE TSV: no quoting)."""
    lines = (shared_data / "sst2" / "train.tsv").read_text(encoding="utf-8").split("\n")
    assert lines[0].split("\t") == ["sentence", "label"]
    return [line.split("\t")[0] for line in lines[1:301]]


@pytest.fixture(scope="session")
def imdb_reviews(shared_data: Path) -> list[str]:
    """All 25,000 IMDB train reviews, read without geoanalyze."""
    with gzip.open(shared_data / "imdb" / "train.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


@pytest.fixture
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every Hugging Face cache at an empty folder, so nothing can be found offline.

    The environment variables cover fresh imports; the module constants cover libraries that
    were imported (and read the environment) earlier in the session.
    """
    root = tmp_path / "hf-home"
    root.mkdir()
    monkeypatch.setenv("HF_HOME", str(root))
    monkeypatch.setenv("HF_HUB_CACHE", str(root / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(root / "datasets"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(root))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(root / "hub"))
    try:
        import datasets.config
    except ImportError:  # pragma: no cover - datasets is a dependency
        return root
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", root / "datasets")
    return root
