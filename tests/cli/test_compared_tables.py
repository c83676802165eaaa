"""What a spec target is compared with (issue 31, point 9): the standard encodings at the target's
own width (an mds:<file> written at width 64 is compared at 64, as --help says), and never the
target itself under another name (rope beside rope:d=64)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import DRIFT_WORDS, geoanalyze, ok

FAST = ("--null-draws", 2, "--layers", "none")


def scored(tmp_path: Path, *args: object) -> tuple[dict[str, dict[str, object]], str]:
    run = ok(geoanalyze("stress", *args, "--dataset", DRIFT_WORDS, *FAST, "-f", "json", cwd=tmp_path))
    return json.loads(run.stdout)["scores"], run.stderr


def test_a_pe_file_target_is_compared_at_its_own_width(tmp_path: Path) -> None:
    ok(geoanalyze("mds", "--dataset", DRIFT_WORDS, "--width", 64, "--output", "pe.safetensors", cwd=tmp_path))
    scores, _ = scored(tmp_path, "mds:pe.safetensors", "--compare", "sinusoidal,rope,random,mds")
    assert {name: entry["dim"] for name, entry in scores.items() if name != "mds"} == {
        "mds:pe.safetensors": 64,
        "sinusoidal": 64,
        "rope": 64,
        "random": 64,
    }
    wider, _ = scored(tmp_path, "mds:pe.safetensors", "--compare", "sinusoidal", "--width", 128)
    assert wider["sinusoidal"]["dim"] == 128  # --width still chooses


def test_a_spec_target_is_not_compared_with_itself(tmp_path: Path) -> None:
    scores, stderr = scored(tmp_path, "rope:d=64", "--compare", "sinusoidal,rope,rope:d=32")
    assert list(scores) == ["rope:d=64", "sinusoidal", "rope:d=32"]
    assert "note: rope is the target's own table at this width; left out of the comparison" in stderr
