"""sample_corpora/README.md's commands regenerate the sample corpora: the texts byte for byte, the
marginals to 1e-12 (what the README says holds)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
from helpers import SAMPLES, invoke, ok

README = SAMPLES / "README.md"


def commands() -> list[list[str]]:
    block = re.search(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert block is not None
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_commands_regenerate_the_samples(tmp_path: Path) -> None:
    written: set[str] = set()
    for words in commands():
        assert words[:3] == ["geoanalyze", "datasets", "synthesize"] and words[-2:] == [
            "--output-dir",
            "sample_corpora",
        ]
        ok(invoke([*words[1:-1], tmp_path], cwd=tmp_path))
    for path in sorted(tmp_path.iterdir()):
        written.add(path.name)
        shipped = SAMPLES / path.name
        if path.suffix == ".txt":
            assert path.read_bytes() == shipped.read_bytes(), path.name
        else:
            again, original = np.load(path), np.load(shipped)
            assert again.dtype == original.dtype == np.float64 and again.shape == original.shape
            np.testing.assert_allclose(again, original, rtol=1e-12, atol=0)
    assert written == {p.name for p in SAMPLES.iterdir() if p.suffix in (".txt", ".npy")}
