"""`track --plot-dir FOLDER`: the figure goes into a folder as every other command's do (the old
`--plot FILE.png` is a hidden alias, held by test_track.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import DRIFT_WORDS, invoke, ok


def test_plot_dir_receives_track_png_and_the_json_names_it(minilm_path: Path, tmp_path: Path) -> None:
    run = ok(
        invoke(
            ["track", minilm_path, "--dataset", DRIFT_WORDS, "--order", "given", "-f", "json", "--plot-dir", "figs"],
            cwd=tmp_path,
        )
    )
    assert (tmp_path / "figs" / "track.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads(run.stdout)["figure"] == str(Path("figs") / "track.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figs"]
