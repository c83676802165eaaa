"""Fixtures of the adversarial suite (see harness.py for what every case checks)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .harness import Sandbox


@pytest.fixture(autouse=True)
def _quiet_progress() -> None:
    """Plain progress lines would be stderr lines besides the one error line."""
    os.environ["GEOANALYZE_PROGRESS_SECONDS"] = "100000"


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    root = tmp_path / "sandbox"
    root.mkdir()
    return Sandbox(root)


@pytest.fixture
def home(sandbox: Sandbox) -> Path:
    """A $HOME beside the sandbox (set for each run through ``env``), empty but for what a case puts there."""
    folder = sandbox.root.parent / "home"
    folder.mkdir()
    return folder
