"""The zoo, built once per session into one folder (seconds for its 59 tiny models)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import DRIFT_WORDS

from .zoo import ZOO, build_checkpoint, corpus_tokenizer

CORPUS = DRIFT_WORDS


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Entry name -> its saved checkpoint folder."""
    root = tmp_path_factory.mktemp("zoo")
    tokenizer = corpus_tokenizer(CORPUS)
    return {
        entry.name: build_checkpoint(entry, root / f"{index:02d}-{entry.model_type}", tokenizer)
        for index, entry in enumerate(ZOO)
    }
