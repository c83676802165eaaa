"""The scaling path as a user meets it: GEOANALYZE_DENSE_LIMIT forces it on a small corpus, so it runs fast.

Past the dense limit `stress` scores a seeded sample of the kept positions and prints each score's standard
error; `distances` and `mds` refuse the n x n matrix with one line naming its size and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import files_under, geoanalyze, ok, refused

CORPUS = ("--dataset", "synthetic:drift,length=96,n=64,vocab=64", "--max-length", 96, "--min-count", 32)
STRESS = ("stress", "rope:d=32", *CORPUS, "--null-draws", 2, "--compare", "sinusoidal,mds")
ERRORS = {"stress", "scaled_stress", "monotonicity_violation", "anchored_monotonicity_violation", "lag_violation"}


def limited(limit: str) -> dict[str, str]:
    return {"GEOANALYZE_DENSE_LIMIT": limit}


def test_stress_past_the_limit_scores_a_seeded_sample(tmp_path: Path) -> None:
    document = json.loads(ok(geoanalyze(*STRESS, "-f", "json", cwd=tmp_path, env=limited("40"))).stdout)
    assert document["sample"] == {"positions": 40, "of": 96, "seed": 0, "dense_limit": 40, "jackknife_groups": 10}
    positions = document["positions"]
    assert len(positions) == 40 and positions == sorted(set(positions)) and set(positions) <= set(range(96))
    for name, scores in document["scores"].items():
        assert set(scores["standard_errors"]) == ERRORS, name
        assert all(value >= 0 for value in scores["standard_errors"].values())
    again = json.loads(ok(geoanalyze(*STRESS, "-f", "json", cwd=tmp_path, env=limited("40"))).stdout)
    assert again["positions"] == positions and again["scores"] == document["scores"]
    other = json.loads(ok(geoanalyze(*STRESS, "-f", "json", "--seed", 1, cwd=tmp_path, env=limited("40"))).stdout)
    assert other["positions"] != positions and other["sample"]["seed"] == 1


def test_the_table_says_the_scaling_path_was_used(tmp_path: Path) -> None:
    table = ok(geoanalyze(*STRESS, cwd=tmp_path, env=limited("40"))).stdout
    assert "scored on 40 of 96 positions (seed 0), ± = SE" in table
    assert "positions kept        96 (min-count 32)" in table
    assert table.count(" ± ") >= 2 * len(ERRORS)


def test_within_the_limit_the_dense_path_is_unchanged(tmp_path: Path) -> None:
    dense = ok(geoanalyze(*STRESS, "-f", "json", cwd=tmp_path)).stdout
    assert '"sample"' not in dense and "standard_errors" not in dense
    assert len(json.loads(dense)["positions"]) == 96
    for limit in ("96", "99999999999", ""):
        assert ok(geoanalyze(*STRESS, "-f", "json", cwd=tmp_path, env=limited(limit))).stdout == dense, limit


@pytest.mark.parametrize("limit", ["0", "-1", "2", "abc", "1.5", "4O96"])
def test_a_malformed_limit_is_refused(tmp_path: Path, limit: str) -> None:
    refused(geoanalyze(*STRESS, cwd=tmp_path, env=limited(limit)), "GEOANALYZE_DENSE_LIMIT", "integer >= 3")


@pytest.mark.parametrize("command", ["distances", "mds"])
def test_an_n_by_n_output_past_the_limit_is_refused(tmp_path: Path, command: str) -> None:
    before = files_under(tmp_path)
    output = tmp_path / ("d.safetensors" if command == "distances" else "pe.safetensors")
    line = refused(
        geoanalyze(command, *CORPUS, "-o", output, cwd=tmp_path, env=limited("40")),
        "96 kept positions exceed the dense limit of 40",
        "GB",
        "--positions log:N or stride:K",
    )
    assert "would be 0.000147 GB" in line
    assert files_under(tmp_path) == before


def test_windows_past_the_limit_cover_every_kept_position_not_only_the_sample(tmp_path: Path) -> None:
    """Past the dense limit the windows span every kept position (their first starts at the first kept one,
    not at the sample's), and each window's scaled stress equals one computed by hand from that window's
    own counts and the encoding drawn at its positions."""
    from geoanalyze.corpus.marginals import PositionalCounts
    from geoanalyze.encodings import get_encoding
    from geoanalyze.geometry.distances import position_geometry
    from geoanalyze.geometry.scores import scaled_stress
    from geoanalyze.geometry.windows import plan_windows

    run = geoanalyze(*STRESS, "--windows", 4, "-f", "json", cwd=tmp_path, env=limited("40"))
    document = json.loads(ok(run).stdout)
    assert document["sample"]["positions"] == 40
    windows = document["windows"]["rope:d=32"]["windows"]
    assert windows[0]["start"] == 0 and windows[-1]["end"] == 96  # every one of the 96 positions is kept
    ok(geoanalyze("marginals", *CORPUS[:4], "-o", "counts.safetensors", cwd=tmp_path))  # the same counts, on disk
    counts = PositionalCounts.load(tmp_path / "counts.safetensors")
    kept = counts.kept_positions(32)
    for planned, shown in zip(plan_windows(kept, 4, seed=0), windows, strict=True):
        assert (planned.start, planned.end) == (shown["start"], shown["end"])
        if planned.members.size < 8:
            continue
        positions = kept[planned.rows]
        target = position_geometry(counts.select(positions), min_count=1).matrix("naive")
        table = get_encoding("rope:d=32").vectors(positions)
        assert shown["scaled_stress"] == pytest.approx(scaled_stress(table, target), rel=1e-9)
