"""stress --windows: scores against position in the JSON and the figure, and hostile settings refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import PNG_SIGNATURE, geoanalyze, ok, refused


def windowed(tmp_path: Path, length: int, windows: int, original: int) -> None:
    spec = f"rope:d=128,base=10000,scaling=yarn,factor=4,original={original}"
    run = ok(
        geoanalyze(
            "stress", spec, "--dataset", f"synthetic:drift,length={length},n=64,vocab=256", "--max-length", length,
            "--min-count", 32, "--windows", windows, "--compare", "random", "-f", "json", "--plot-dir", "figs",
            cwd=tmp_path,
        )
    )  # fmt: skip
    document = json.loads(run.stdout)
    mine = document["windows"][spec]
    assert mine["training_length"] == original and 2 <= len(mine["windows"]) <= windows
    assert {"start", "end", "scaled_stress", "p_adjusted", "category"} <= set(mine["windows"][0])
    assert mine["verdict"].startswith(("the geometry of", "the data cannot decide"))
    assert (tmp_path / "figs" / "windows.png").read_bytes().startswith(PNG_SIGNATURE)


def test_windows_fill_the_json_and_draw_the_figure(tmp_path: Path) -> None:
    windowed(tmp_path, 256, 4, 64)


@pytest.mark.slow
def test_done_when_yarn_at_8192_positions(tmp_path: Path) -> None:
    windowed(tmp_path, 8192, 12, 4096)


@pytest.mark.parametrize("setting", ["0", "-1", "bogus", "99"])
def test_hostile_windows_exit_2(tmp_path: Path, setting: str) -> None:
    run = geoanalyze("stress", "rope:d=8", "--dataset", "synthetic:drift,length=64,n=64,vocab=32",
                     "--windows", setting, cwd=tmp_path)  # fmt: skip
    refused(run, "--windows")


@pytest.mark.parametrize(
    "spec", ["rope:d=8,scaling=bogus,factor=2", "rope:d=8,scaling=linear,factor=0", "rope:d=8,scaling=linear,factor=-1",
             "rope:d=8,scaling=yarn,factor=2,original=0"],
)  # fmt: skip
def test_hostile_scaling_specs_exit_2(tmp_path: Path, spec: str) -> None:
    refused(geoanalyze("stress", spec, "--dataset", "synthetic:drift,length=64,n=64,vocab=32", cwd=tmp_path), "rope")
