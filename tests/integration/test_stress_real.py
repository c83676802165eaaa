"""`geoanalyze stress` on the real all-MiniLM-L6-v2 checkpoint and the real SST-2 files, as a user types it.

Every number checked here is recomputed without geoanalyze: transformers' AutoTokenizer,
per-position collections.Counter, Hellinger distances by brute force over token tables, the
position table and each layer's W_Q / W_K read with safetensors.numpy (no torch), and the
scores of GEOMETRY.md written out from their definitions (monotonicity by brute force over
every pair of position-pairs, not through Kendall's tau).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import PNG_SIGNATURE, Run, geoanalyze, hellinger, position_counters

pytestmark = pytest.mark.integration

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MAX_LENGTH = 512  # the checkpoint's own limit: what the command uses by default
MIN_COUNT = 50
TRAIN_LIMIT = 5000
VALIDATION_ARGS = ("--dataset", "sst2", "--split", "validation", "--min-count", MIN_COUNT, "--max-sequences", 200)
FAST = ("--null-draws", 2, "-f", "json")
REL = 1e-8
TIE_RTOL = 1e-9  # distances closer than this, relative to the largest, are ties


def explain(result: Run) -> str:
    return f"exit {result.code}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr}"


# --- the reference computation (no geoanalyze code) ------------------------------------------


def sst2_sentences(shared_data: Path, split: str) -> list[str]:
    """The sentences of an SST-2 split: the 'sentence' column of an unquoted TSV, blank ones dropped."""
    rows = (shared_data / "sst2" / f"{split}.tsv").read_text(encoding="utf-8").split("\n")
    column = rows[0].split("\t").index("sentence")
    sentences = [row.split("\t")[column] for row in rows[1:] if row]
    return [s for s in sentences if s.strip()]


def hellinger_matrix(counters: list[Counter[int]], kept: list[int]) -> np.ndarray:
    n = len(kept)
    distances = np.zeros((n, n))
    for a in range(n):
        for b in range(a + 1, n):
            distances[a, b] = distances[b, a] = hellinger(counters[kept[a]], counters[kept[b]])
    return distances


def pair_distances(vectors: np.ndarray) -> np.ndarray:
    """||p_i - p_j|| for i < j, row-major over the upper triangle."""
    vectors = np.asarray(vectors, dtype=np.float64)
    n = vectors.shape[0]
    first, second = np.triu_indices(n, k=1)
    return np.sqrt(np.sum((vectors[first] - vectors[second]) ** 2, axis=1))


def tied_sign(values: np.ndarray, tolerance: float) -> np.ndarray:
    """sign(v_a - v_b) for every pair of values, 0 (a tie) where they are within ``tolerance``."""
    difference = values[:, None] - values[None, :]
    return np.where(np.abs(difference) <= tolerance, 0.0, np.sign(difference))


def violation_rate(e: np.ndarray, d: np.ndarray, e_tol: float, d_tol: float) -> float:
    """Brute force over every pair of position-pairs: discordant / (pairs ordered by both E and D).

    Pairs tied in E or in D (within the tolerances) are left out. NaN when no pair is ordered by
    both (position 0 is always [CLS], so its distance to every other position is exactly 1).
    """
    product = tied_sign(e, e_tol) * tied_sign(d, d_tol)
    decided = int((product != 0).sum())
    return float((product < 0).sum() / decided) if decided else float("nan")


def reference_scores(vectors: np.ndarray, distances: np.ndarray) -> dict[str, float]:
    """The scores of GEOMETRY.md, written out from the definitions.

    Values within TIE_RTOL of the largest count as tied (rounding splits the exact ties of
    shift-invariant encodings such as sinusoidal, whose E_ij depends on |i - j| only).
    """
    n = distances.shape[0]
    d = distances[np.triu_indices(n, k=1)]
    e = pair_distances(vectors)
    e_full = np.zeros((n, n))
    e_full[np.triu_indices(n, k=1)] = e
    e_full += e_full.T
    e_tol, d_tol = TIE_RTOL * e.max(), TIE_RTOL * d.max()
    anchored = []
    for anchor in range(n):
        others = [j for j in range(n) if j != anchor]
        anchored.append(violation_rate(e_full[anchor, others], distances[anchor, others], e_tol, d_tol))
    return {
        "stress": float(np.sum((e - d) ** 2) / np.sum(d**2)),
        "scaled_stress": float(1.0 - np.dot(e, d) ** 2 / (np.dot(e, e) * np.dot(d, d))),
        "monotonicity_violation": violation_rate(e, d, e_tol, d_tol),
        # the mean over the anchors whose rate is defined
        "anchored_monotonicity_violation": float(np.nanmean(anchored)),
        "separation": float(e.min()),
        "relative_separation": float(e.min() / np.median(e)),
    }


def sinusoidal(positions: list[int], width: int) -> np.ndarray:
    """PE(i, 2k) = sin(i / 10000^(2k/d)), PE(i, 2k+1) = cos(same)."""
    table = np.zeros((len(positions), width))
    i = np.asarray(positions, dtype=np.float64)[:, None]
    two_k = np.arange(0, width, 2, dtype=np.float64)
    table[:, 0::2] = np.sin(i / 10000.0 ** (two_k / width))
    table[:, 1::2] = np.cos(i / 10000.0 ** (two_k / width))
    return table


def rope(positions: list[int], width: int) -> np.ndarray:
    """r_i = (cos(i theta_k), sin(i theta_k))_{k < d/2}, theta_k = 10000^(-2k/d)."""
    theta = 10000.0 ** (-2.0 * np.arange(width // 2) / width)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * theta[None, :]
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1)


class Reference:
    """Kept positions, their Hellinger matrix and the checkpoint's weights, all computed in the test."""

    def __init__(self, texts: list[str], minilm_path: Path) -> None:
        from safetensors.numpy import load_file

        counters = position_counters(texts, minilm_path, MAX_LENGTH)
        self.totals = [sum(c.values()) for c in counters]
        self.kept = [i for i, total in enumerate(self.totals) if total >= MIN_COUNT]
        self.distances = hellinger_matrix(counters, self.kept)
        self.weights = load_file(str(minilm_path / "model.safetensors"))
        self.table = self.weights["embeddings.position_embeddings.weight"].astype(np.float64)[self.kept]

    def projected(self, layer: int, projection: str) -> np.ndarray:
        """P W^T: the position vectors through layer ``layer``'s (1-based) query or key map, bias left out."""
        weight = self.weights[f"encoder.layer.{layer - 1}.attention.self.{projection}.weight"].astype(np.float64)
        return self.table @ weight.T


def assert_scores_match(actual: dict[str, Any], expected: dict[str, float], names: tuple[str, ...]) -> None:
    for name in names:
        assert actual[name] == pytest.approx(expected[name], rel=REL, abs=0.0), name


ALL_SCORES = (
    "stress",
    "scaled_stress",
    "monotonicity_violation",
    "anchored_monotonicity_violation",
    "separation",
    "relative_separation",
)
LAYER_SCORES = ("stress", "scaled_stress", "monotonicity_violation")


# --- the validation split, all layers, figures -------------------------------------------------


@pytest.fixture(scope="module")
def validation_reference(shared_data: Path, minilm_path: Path) -> Reference:
    texts = sst2_sentences(shared_data, "validation")
    assert len(texts) == 872
    return Reference(texts, minilm_path)


@pytest.fixture(scope="module")
def validation_run(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    """The command exactly as a user types it: (its folder, the JSON it printed, stderr)."""
    folder = tmp_path_factory.mktemp("stress-validation")
    args = (*VALIDATION_ARGS, "--data-dir", shared_data, "-f", "json", "-o", "out.json", "--plot-dir", "figs")
    result = geoanalyze("stress", MODEL, *args, cwd=folder)
    assert result.code == 0, explain(result)
    assert "Traceback" not in result.stderr
    return folder, json.loads(result.stdout), result.stderr




def test_json_has_the_documented_keys(validation_run: tuple[Path, dict[str, Any], str], shared_data: Path) -> None:
    folder, document, _ = validation_run
    assert json.loads((folder / "out.json").read_text(encoding="utf-8")) == document
    for key in ("target", "dataset", "positions", "noise", "scores", "layers", "peaks", "checkpoint"):
        assert key in document, key
    assert document["target"] == MODEL
    assert document["kind"] == "checkpoint"
    dataset = document["dataset"]
    assert dataset["split"] == "validation"
    assert Path(dataset["location"]).resolve() == (shared_data / "sst2" / "validation.tsv").resolve()
    assert dataset["max_length"] == MAX_LENGTH
    assert document["checkpoint"]["layers"] == 6
    assert document["checkpoint"]["hidden_size"] == 384
    assert document["checkpoint"]["architecture"] == "BertModel"
    noise = document["noise"]
    assert 0.0 <= noise["noise_fraction"] <= 1.0
    assert noise["snr"] > 0
    assert list(document["scores"]) == [MODEL, "sinusoidal", "rope", "alibi", "mds", "random"]
    for name, scores in document["scores"].items():
        for key in ("stress", "scaled_stress", "monotonicity_violation", "separation", "null", "dim"):
            assert key in scores, (name, key)
        for key in ("scaled_stress", "monotonicity_violation", "anchored_monotonicity_violation", "lag_violation"):
            null = scores["null"][key]
            assert set(null) >= {"mean", "sd", "z", "beats", "p", "p_adjusted", "category"}, (name, key)
            assert null["sd"] > 0 and 0.0 <= null["beats"] <= 1.0
        # The null shuffles the positions: the rank discordance of a shuffled table is chance, 0.5.
        assert scores["null"]["monotonicity_violation"]["mean"] == pytest.approx(0.5, abs=0.05)


def test_positions_and_target_scores_equal_an_independent_computation(
    validation_run: tuple[Path, dict[str, Any], str], validation_reference: Reference
) -> None:
    _, document, _ = validation_run
    ref = validation_reference
    assert document["positions"] == ref.kept
    assert len(ref.kept) >= 3 and ref.kept == list(range(len(ref.kept)))  # N_i only falls with i
    left_out = [i for i, total in enumerate(ref.totals) if total < MIN_COUNT]
    assert document["left_out"]["count"] == len(left_out)
    assert document["left_out"]["min_count"] == MIN_COUNT

    target = document["scores"][MODEL]
    assert target["dim"] == 384
    assert_scores_match(target, reference_scores(ref.table, ref.distances), ALL_SCORES)


def test_compared_encodings_equal_an_independent_computation(
    validation_run: tuple[Path, dict[str, Any], str], validation_reference: Reference
) -> None:
    _, document, _ = validation_run
    ref = validation_reference
    scores = document["scores"]
    # Sinusoidal at the checkpoint's width: its E_ij depends on |i - j| only (ties in exact arithmetic).
    expected = reference_scores(sinusoidal(ref.kept, 384), ref.distances)
    assert scores["sinusoidal"]["dim"] == 384
    assert_scores_match(scores["sinusoidal"], expected, ALL_SCORES)
    assert scores["rope"]["dim"] == 384
    assert_scores_match(scores["rope"], reference_scores(rope(ref.kept, 384), ref.distances), ALL_SCORES)
    # The naive Hellinger matrix is exactly Euclidean: its full-rank MDS reproduces it.
    assert scores["mds"]["stress"] < 1e-12
    assert scores["mds"]["scaled_stress"] < 1e-12
    assert scores["mds"]["dim"] <= len(ref.kept) - 1
    assert scores["random"]["monotonicity_violation"] == pytest.approx(0.5, abs=0.06)


def test_layers_hold_query_key_and_hidden_rows(
    validation_run: tuple[Path, dict[str, Any], str], validation_reference: Reference
) -> None:
    _, document, _ = validation_run
    rows = document["layers"]
    keys = [(row["layer"], row["projection"]) for row in rows]
    assert len(keys) == len(set(keys))
    for projection in ("P·W_Q", "P·W_K", "query", "key"):  # the table through W_Q/W_K; the captured q/k
        assert sorted(k for k in keys if k[1] == projection) == [(layer, projection) for layer in range(1, 7)]
    assert sorted(k for k in keys if k[1] == "hidden") == [(layer, "hidden") for layer in range(7)]
    assert len(rows) == 4 * 6 + 7
    for row in rows:
        assert set(row) >= {"layer", "projection", *LAYER_SCORES}
        assert row["stress"] > 0 and 0.0 <= row["scaled_stress"] <= 1.0
        assert 0.0 <= row["monotonicity_violation"] <= 1.0
        if row["projection"] in ("hidden", "query", "key"):
            assert 3 <= row["positions_used"] <= len(validation_reference.kept)
    # Peaks: the layer of highest stress and of lowest scaled stress, per projection.
    for projection in ("P·W_Q", "P·W_K", "query", "key", "hidden"):
        chosen = [row for row in rows if row["projection"] == projection]
        peak = document["peaks"][projection]
        assert peak["peak_stress"] == max(row["stress"] for row in chosen)
        assert peak["peak_stress_layer"] == max(chosen, key=lambda row: row["stress"])["layer"]
        assert peak["best_scaled_stress"] == min(row["scaled_stress"] for row in chosen)
        assert peak["best_scaled_stress_layer"] == min(chosen, key=lambda row: row["scaled_stress"])["layer"]


@pytest.mark.parametrize("layer", range(1, 7))
def test_projected_stress_equals_p_times_w_transposed(
    validation_run: tuple[Path, dict[str, Any], str], validation_reference: Reference, layer: int
) -> None:
    _, document, _ = validation_run
    ref = validation_reference
    rows = {(row["layer"], row["projection"]): row for row in document["layers"]}
    for projection, label in (("query", "P·W_Q"), ("key", "P·W_K")):
        expected = reference_scores(ref.projected(layer, projection), ref.distances)
        assert_scores_match(rows[(layer, label)], expected, LAYER_SCORES)


def test_figures_are_pngs(validation_run: tuple[Path, dict[str, Any], str]) -> None:
    folder, document, _ = validation_run
    figures = document["figures"]
    assert len(figures) == 5  # heatmap, MDS, Shepard diagram, null, layers
    names = set()
    for path in figures.values():
        file = folder / path
        assert file.parent == folder / "figs"
        assert file.read_bytes()[:8] == PNG_SIGNATURE
        assert file.stat().st_size > 1000
        names.add(file.name)
    assert names == {"hellinger.png", "mds.png", "shepard.png", "null.png", "layers.png"}
    assert sorted(p.name for p in (folder / "figs").iterdir()) == sorted(names)


def test_fail_above_exits_1_and_still_prints_the_json(
    validation_run: tuple[Path, dict[str, Any], str], shared_data: Path, tmp_path: Path
) -> None:
    _, document, _ = validation_run
    common = ("stress", MODEL, *VALIDATION_ARGS, "--data-dir", shared_data, "-f", "json")
    crossed = geoanalyze(*common, "--fail-above", "stress=0.0001", "-o", "crossed.json", cwd=tmp_path)
    assert crossed.code == 1, explain(crossed)
    assert "Traceback" not in crossed.stderr
    errors = [line for line in crossed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "stress" in errors[0], crossed.stderr
    printed = json.loads(crossed.stdout)
    assert json.loads((tmp_path / "crossed.json").read_text(encoding="utf-8")) == printed
    # The same analysis (the warm run, from the cache) as the first run.
    assert printed["scores"][MODEL] == document["scores"][MODEL]
    assert printed["layers"] == document["layers"]

    passed = geoanalyze(*common, "--fail-above", "stress=1e9", cwd=tmp_path)
    assert passed.code == 0, explain(passed)
    assert json.loads(passed.stdout)["scores"][MODEL]["stress"] == document["scores"][MODEL]["stress"]


# --- the train split, a --limit, no layers ---------------------------------------------------


def test_train_with_limit_and_no_layers(shared_data: Path, minilm_path: Path, tmp_path: Path) -> None:
    train = ("--dataset", "sst2", "--split", "train", "--data-dir", shared_data, "--limit", TRAIN_LIMIT)
    result = geoanalyze("stress", MODEL, *train, "--min-count", MIN_COUNT, "--layers", "none", *FAST, cwd=tmp_path)
    assert result.code == 0, explain(result)
    document = json.loads(result.stdout)
    texts = sst2_sentences(shared_data, "train")[:TRAIN_LIMIT]
    ref = Reference(texts, minilm_path)
    assert document["dataset"]["split"] == "train"
    assert document["dataset"]["limit"] == TRAIN_LIMIT
    assert document["positions"] == ref.kept
    assert document["layers"] == []
    assert document["peaks"] == {}
    assert_scores_match(document["scores"][MODEL], reference_scores(ref.table, ref.distances), ALL_SCORES)
    assert not any(name.startswith("figures") for name in document)
    assert os.listdir(tmp_path) == []  # no -o, no --plot-dir: nothing written
