"""`--positions` as a user types it: stress, distances and mds on a chosen position set (issue 34).

The corpus is the synthetic drift (its counts made in the run, no file needed); the null is kept to
two draws, so the runs are quick. Bad specs end with exit code 2, one ``error:`` line and nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import files_under, geoanalyze, ok, refused

LONG = ("--dataset", "synthetic:drift,length=2048,n=48,vocab=64", "--max-length", 2048, "--min-count", 16)
SHORT = ("--dataset", "synthetic:drift,length=256,n=48,vocab=32", "--max-length", 256, "--min-count", 16)
FAST = ("--null-draws", 2, "--compare", "sinusoidal")


@pytest.fixture(scope="module")
def log_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("positions-log")
    run = geoanalyze("stress", "rope:d=64", *LONG, *FAST, "--positions", "log:64", "-f", "json", cwd=folder)
    return json.loads(ok(run).stdout)


def test_stress_on_log_buckets_names_each_scored_positions_bucket(log_run: dict[str, Any]) -> None:
    chosen = log_run["position_set"]
    assert chosen["spec"] == "log:64"
    buckets, positions = np.array(chosen["buckets"]), np.array(log_run["positions"])
    assert buckets.shape == (len(positions), 2) == (64, 2)  # every bucket holds 48 sequences at least
    assert np.all((buckets[:, 0] <= positions) & (positions < buckets[:, 1]))
    assert buckets[0, 0] == 0 and buckets[-1, 1] == 2048 and np.array_equal(buckets[1:, 0], buckets[:-1, 1])
    assert buckets[:8].tolist() == [[i, i + 1] for i in range(8)]  # the first buckets are single positions
    assert (buckets[-1, 1] - buckets[-1, 0]) > 100  # the last pools many
    assert set(log_run["scores"]) == {"rope:d=64", "sinusoidal"}


def test_the_table_says_which_set_was_scored(tmp_path: Path) -> None:
    run = ok(geoanalyze("stress", "rope:d=64", *SHORT, *FAST, "--positions", "stride:4", cwd=tmp_path))
    assert "positions scored" in run.stdout and "stride:4: 64 scored" in run.stdout


def test_positions_all_is_todays_output_byte_for_byte(tmp_path: Path) -> None:
    plain = ok(geoanalyze("stress", "rope:d=64", *SHORT, *FAST, "-f", "json", cwd=tmp_path)).stdout
    chosen = ok(geoanalyze("stress", "rope:d=64", *SHORT, *FAST, "-f", "json", "--positions", "all", cwd=tmp_path))
    mine, theirs = json.loads(chosen.stdout), json.loads(plain)
    assert mine.pop("run")["command"] != theirs.pop("run")["command"]  # the run record quotes the command line
    assert json.dumps(mine) == json.dumps(theirs)
    assert "position_set" not in theirs
    table = ok(geoanalyze("distances", *SHORT, cwd=tmp_path)).stdout
    assert "positions scored" not in table


def test_stride_scores_those_positions(tmp_path: Path) -> None:
    run = ok(geoanalyze("stress", "rope:d=64", *SHORT, *FAST, "--positions", "stride:8", "-f", "json", cwd=tmp_path))
    document = json.loads(run.stdout)
    assert document["positions"] == list(range(0, 256, 8))
    assert document["position_set"]["buckets"] == [[p, p + 1] for p in range(0, 256, 8)]


def test_distances_and_mds_take_the_set(tmp_path: Path) -> None:
    distances = json.loads(
        ok(geoanalyze("distances", *SHORT, "--positions", "log:16", "-f", "json", cwd=tmp_path)).stdout
    )
    assert distances["position_set"]["spec"] == "log:16" and len(distances["positions"]) == 16
    mds = json.loads(ok(geoanalyze("mds", *SHORT, "--positions", "range:10-50", "-f", "json", cwd=tmp_path)).stdout)
    assert mds["positions"] == list(range(10, 50)) and mds["n_positions"] == 40
    assert mds["position_set"]["spec"] == "range:10-50"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("log:0", "at least 2 buckets"),
        ("log:-3", "at least 2 buckets"),
        ("stride:0", "stride K of at least 1"),
        ("log:abc", "not a whole number"),
        ("log:1e9", "the corpus reaches 256 positions"),
        ("range:0-9999", "the corpus reaches 256 positions"),
        ("buckets", "not a position set"),
        ("", "is empty"),
    ],
)
@pytest.mark.parametrize("command", ["stress", "distances"])
def test_a_hostile_spec_is_one_error_line_exit_2_and_nothing_written(
    tmp_path: Path, command: str, spec: str, says: str
) -> None:
    before = files_under(tmp_path)
    args = ("rope:d=64", *SHORT, *FAST, "-o", "out.json") if command == "stress" else (*SHORT, "-o", "d.safetensors")
    result = geoanalyze(command, *args, "--positions", spec, cwd=tmp_path)
    refused(result)
    assert says in result.stderr and result.stdout == ""
    assert files_under(tmp_path) == before


def test_mds_refuses_a_set_it_cannot_honour(tmp_path: Path) -> None:
    ok(geoanalyze("distances", *SHORT, "-o", "d.safetensors", cwd=tmp_path))
    result = geoanalyze("mds", "d.safetensors", "--min-count", 16, "--positions", "log:8", cwd=tmp_path)
    refused(result)
    assert "give its counts or corpus" in result.stderr
    bootstrap = geoanalyze("stress", "rope:d=64", *SHORT, *FAST, "--bootstrap", 4, "--positions", "log:8", cwd=tmp_path)
    refused(bootstrap)
    assert "--positions all" in bootstrap.stderr


@pytest.mark.parametrize("command", ["report", "track"])
def test_report_and_track_take_the_option(tmp_path: Path, command: str) -> None:
    assert "--positions" in ok(geoanalyze(command, "--help", cwd=tmp_path)).stdout
