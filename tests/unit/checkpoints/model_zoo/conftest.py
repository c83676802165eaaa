"""The zoo, built lazily once per session into one folder: an entry's tiny model is built the first time
a test asks for it (the default run builds its subset in seconds; the slow run all of them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import DRIFT_WORDS

from .zoo import build_checkpoint, corpus_tokenizer, full_zoo

CORPUS = DRIFT_WORDS


class Zoo(dict[str, Path]):
    """Entry name -> its saved checkpoint folder, built on first use."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.entries = {entry.name: (index, entry) for index, entry in enumerate(full_zoo())}
        self._tokenizer: Any = None

    def __missing__(self, name: str) -> Path:
        index, entry = self.entries[name]
        if self._tokenizer is None:
            self._tokenizer = corpus_tokenizer(CORPUS)
        folder = build_checkpoint(entry, self.root / f"{index:03d}-{entry.model_type}", self._tokenizer)
        self[name] = folder
        return folder


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Zoo:
    return Zoo(tmp_path_factory.mktemp("zoo"))
