"""Every command's JSON is a result type's to_json(): geoanalyze.<Result>.to_json() built in Python from
the library equals what the command prints with -f json (stress: tests/cli/test_typed_result.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import DRIFT, DRIFT_WORDS, geoanalyze, ok

import geoanalyze as ga
from geoanalyze.corpus.marginals import DEFAULT_MIN_COUNT
from geoanalyze.geometry.mds import mds_encoding


def printed(tmp_path: Path, *args: Any) -> str:
    return ok(geoanalyze(*args, "-f", "json", cwd=tmp_path)).stdout


@pytest.fixture(scope="module")
def counts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("counts")
    ok(geoanalyze("marginals", "--dataset", DRIFT, "-t", "whitespace", "-o", "drift.safetensors", cwd=folder))
    return folder / "drift.safetensors"


def test_marginals(counts_file: Path, tmp_path: Path) -> None:
    counts = ga.PositionalCounts.load(counts_file)
    sources = [{"source": str(counts_file), "from": "counts file"}]
    result = ga.CountsResult.of(counts, sources, [], DEFAULT_MIN_COUNT)
    assert result.to_json() + "\n" == printed(tmp_path, "marginals", "--dataset", counts_file)


def test_distances(counts_file: Path, tmp_path: Path) -> None:
    geometry = ga.position_geometry(
        ga.PositionalCounts.load(counts_file), metric="hellinger", min_count=DEFAULT_MIN_COUNT
    )
    result = ga.DistancesResult.of(geometry, [{"source": str(counts_file), "from": "counts file"}])
    assert result.to_json() + "\n" == printed(tmp_path, "distances", "--dataset", counts_file)
    assert result.noise is geometry.summary and result.warnings == ga.DistancesResult.of(geometry, []).warnings


def test_mds(counts_file: Path, tmp_path: Path) -> None:
    geometry = ga.position_geometry(
        ga.PositionalCounts.load(counts_file), metric="hellinger", min_count=DEFAULT_MIN_COUNT
    )
    about = {"metric": "hellinger", "distance": "naive", "counts": geometry.metadata}
    fitted, curve, encoding = mds_encoding(geometry.matrix("naive"), geometry.positions, dim=16, rank=2, metadata=about)
    result = ga.MdsResult.of(
        fitted, curve, encoding, geometry.positions, [{"source": str(counts_file), "from": "counts file"}]
    )
    cli = printed(tmp_path, "mds", "--dataset", counts_file, "--rank", "2", "--width", "16")
    assert result.to_json() + "\n" == cli
    assert "partial" not in json.loads(cli)  # what the table says of the eigensolver, not in the JSON


def test_datasets_list(tmp_path: Path) -> None:
    result = ga.DatasetsResult.of(None)
    assert result.to_json() + "\n" == printed(tmp_path, "datasets", "list")
    assert result.datasets[-1].name == "synthetic" and result.datasets[0].hub_name != "-"


def test_encodings_list(tmp_path: Path) -> None:
    from geoanalyze.encodings import list_encodings

    assert ga.EncodingsResult(tuple(list_encodings())).to_json() + "\n" == printed(tmp_path, "encodings", "list")


def test_report(tmp_path: Path) -> None:
    from geoanalyze.report.page import build_report

    cli = json.loads(
        printed(
            tmp_path,
            "report",
            "rope:d=16",
            "--dataset",
            DRIFT_WORDS,
            "--null-draws",
            3,
            "--compare",
            "sinusoidal",
            "-o",
            "page.md",
            "--fail-above",
            "scaled=0.9",
        )
    )
    result = ga.score("rope:d=16", dataset=str(DRIFT_WORDS), null_draws=3, compare="sinusoidal")
    page = build_report([result], tmp_path / "py_files", "title", gate=ga.Gate({"scaled_stress": 0.9}))
    assert isinstance(page, ga.ReportPage)
    assert json.loads(page.to_json(cli["run"], cli["report"])) == cli


def test_track(minilm_path: Path, tmp_path: Path) -> None:
    from geoanalyze.tracking import find_series, track

    first, second = tmp_path / "base", tmp_path / "tuned"
    for folder in (first, second):
        folder.mkdir()
        for file in minilm_path.iterdir():
            if file.is_file():
                os.link(file, folder / file.name)
    cli = json.loads(printed(tmp_path, "track", first, second, "--dataset", DRIFT_WORDS, "--order", "given"))
    options = ga.StressOptions(dataset=str(DRIFT_WORDS), layers="none", compare=())
    result = track(find_series([str(first), str(second)], None, "given"), options)
    assert isinstance(result, ga.TrackResult)
    document = json.loads(result.to_json(run=cli["run"]))
    for record in (*document["records"], *cli["records"]):
        record.pop("seconds")  # wall-clock time of each checkpoint's scoring
    assert document == cli
