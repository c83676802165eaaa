"""Numbers that must not lie: scores of scaled tables, and gates that cannot be evaluated.

A position table scaled by c gets the same scale-free scores as the table itself for every c in
[1e-300, 1e300] (no square over- or underflows on the way), the raw quantities move by c (or c^2
in the residual) and are inf/null with a note only when the true value is beyond float64, and a
``--fail-above`` gate fails in every format for every c. A score that is NaN or None (all
distances tied) never passes a gate. Every run goes through the sandbox harness.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from helpers import SCALE_FREE

from geoanalyze.results import Gate, crossed

from .harness import Run, Sandbox

SCALES = (1e-300, 1e-200, 1e-160, 1e-10, 1e10, 1e160, 1e200, 1e300)
COMMON = ("--dataset", "drift.txt", "-t", "whitespace", "--compare", "", "--null-draws", "2")


def table() -> np.ndarray:
    """A fixed table of 64 positions (drift.txt has 64), 8 columns, entries of order 1."""
    return np.random.default_rng(7).standard_normal((64, 8))


def scores_of(run: Run) -> dict[str, Any]:
    document = json.loads(run.stdout)
    (scores,) = document["scores"].values()
    return {"scores": scores, "gate": document["gate"]}


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


@pytest.fixture
def reference(sandbox: Sandbox) -> dict[str, Any]:
    sandbox.copy_sample("drift.txt")
    np.save(sandbox.path("t1.npy"), table())
    run = sandbox.run("stress", "file:t1.npy", *COMMON, "-f", "json")
    assert run.code == 0, str(run)
    return scores_of(run)["scores"]


@pytest.mark.parametrize("scale", SCALES)
def test_scaled_table_scores_as_the_table(sandbox: Sandbox, reference: dict[str, Any], scale: float) -> None:
    np.save(sandbox.path("scaled.npy"), table() * scale)
    run = sandbox.run("stress", "file:scaled.npy", *COMMON, "-f", "json")
    assert run.code == 0 and not run.errors, str(run)
    scores = scores_of(run)["scores"]
    for key in SCALE_FREE:
        assert close(scores[key], reference[key]), (key, scores[key], reference[key])
    assert close(scores["separation"], reference["separation"] * scale)
    true_stress_big = scale > 1e150  # sum (E - D)^2 ~ scale^2: beyond float64 from about 1e154 on
    if true_stress_big:
        assert scores["stress"] is None, scores["stress"]
        assert "raw stress is beyond float64's range" in run.stderr, run.stderr
    else:
        assert scores["stress"] is not None and math.isfinite(scores["stress"])
        if scale < 1:
            assert close(scores["stress"], 1.0, rel=1e-6)  # E ~ 0: all of D is residual
    # Never a perfect-looking value that the unscaled table does not have.
    assert scores["scaled_stress"] > 0.01


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("fmt", ["json", "table", "markdown"])
def test_scaled_table_fails_the_gate_in_every_format(sandbox: Sandbox, scale: float, fmt: str) -> None:
    sandbox.copy_sample("drift.txt")
    np.save(sandbox.path("scaled.npy"), table() * scale)
    run = sandbox.run("stress", "file:scaled.npy", *COMMON, "--fail-above", "scaled_stress=0.01", "-f", fmt)
    assert run.code == 1, str(run)
    assert len(run.errors) == 1 and "threshold crossed" in run.errors[0] and "scaled_stress" in run.errors[0]
    if fmt == "json":
        assert scores_of(run)["gate"]["passed"] is False
    elif fmt == "markdown":
        assert "Gate FAILED" in run.stdout
    else:
        assert "gate failed" in run.stdout


@pytest.mark.parametrize("scale", [1e-300, 1.0, 1e300])
def test_scaled_safetensors_table_scores_as_the_npy(sandbox: Sandbox, reference: dict[str, Any], scale: float) -> None:
    from safetensors.numpy import save_file

    save_file({"position_embeddings": table() * scale}, str(sandbox.path("t.safetensors")))
    run = sandbox.run("stress", "file:t.safetensors", *COMMON, "-f", "json")
    assert run.code == 0, str(run)
    scores = scores_of(run)["scores"]
    for key in SCALE_FREE:
        assert close(scores[key], reference[key]), key


@pytest.mark.parametrize(
    ("dtype", "exact"),
    [("float16", True), ("float32", True), ("int8", True), ("int32", True), ("uint16", True), ("int64", True)],
)
def test_other_real_dtypes_are_read_exactly(sandbox: Sandbox, dtype: str, exact: bool) -> None:
    """Integer and float16/32 tables are read as float64 without loss: they score as their float64 copy."""
    sandbox.copy_sample("drift.txt")
    values = np.round(table() * 20).astype(dtype)
    np.save(sandbox.path("typed.npy"), values)
    np.save(sandbox.path("wide.npy"), values.astype(np.float64))
    typed = scores_of(sandbox.accepted("stress", "file:typed.npy", *COMMON, "-f", "json"))["scores"]
    wide = scores_of(sandbox.accepted("stress", "file:wide.npy", *COMMON, "-f", "json"))["scores"]
    for key in (*SCALE_FREE, "stress", "separation"):
        assert typed[key] == wide[key], key


def test_fortran_order_scores_as_c_order(sandbox: Sandbox, reference: dict[str, Any]) -> None:
    np.save(sandbox.path("f.npy"), np.asfortranarray(table()))
    scores = scores_of(sandbox.accepted("stress", "file:f.npy", *COMMON, "-f", "json"))["scores"]
    for key in (*SCALE_FREE, "stress", "separation"):
        assert scores[key] == reference[key], key


@pytest.mark.parametrize(
    ("metric", "label"),
    [
        ("violation", "monotonicity_violation"),
        ("monotonicity_violation", "monotonicity_violation"),
        ("anchored", "anchored_monotonicity_violation"),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "table", "markdown"])
def test_an_undefined_score_never_passes_a_gate(sandbox: Sandbox, metric: str, label: str, fmt: str) -> None:
    """A constant table: every distance 0, every pair tied, the violation undefined (NaN, null in JSON)."""
    sandbox.copy_sample("drift.txt")
    np.save(sandbox.path("flat.npy"), np.ones((64, 4)))
    run = sandbox.run("stress", "file:flat.npy", *COMMON, "--fail-above", f"{metric}=0.99", "-f", fmt)
    assert run.code == 1, str(run)
    assert len(run.errors) == 1 and label in run.errors[0] and "fails closed" in run.errors[0]
    if fmt == "json":
        document = scores_of(run)
        assert document["scores"][label] is None
        assert document["gate"]["passed"] is False
    elif fmt == "markdown":
        assert "Gate FAILED" in run.stdout
    else:
        assert "gate failed" in run.stdout


def test_a_constant_table_has_the_worst_scaled_stress(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    np.save(sandbox.path("flat.npy"), np.full((64, 4), 1e300))
    scores = scores_of(sandbox.accepted("stress", "file:flat.npy", *COMMON, "-f", "json"))["scores"]
    assert scores["scaled_stress"] == 1.0
    assert scores["stress"] == 1.0  # E = 0: all of D is residual
    assert scores["separation"] == 0.0


def test_the_largest_finite_table_still_scores(sandbox: Sandbox, reference: dict[str, Any]) -> None:
    """Entries at float64's very top: distances overflow (inf, reported null) but the shape is exact."""
    sandbox.copy_sample("drift.txt")
    big = table() / np.abs(table()).max() * np.finfo(np.float64).max
    np.save(sandbox.path("top.npy"), big)
    run = sandbox.accepted("stress", "file:top.npy", *COMMON, "-f", "json")
    scores = scores_of(run)["scores"]
    for key in SCALE_FREE:
        assert close(scores[key], reference[key]), key
    assert scores["stress"] is None


# --- the gate itself: values the JSON or a library caller may hold ------------------------------


def _result(value: Any, metric: str = "scaled_stress") -> dict[str, Any]:
    return {"target": "t", "scores": {"t": {metric: value}}, "noise": {"noise_fraction": value}}


@pytest.mark.parametrize(
    "value",
    [None, float("nan"), float("inf"), "0.001", [0.001], {"v": 0.0}, True, np.float32("nan")],
    ids=["None", "nan", "inf", "string", "list", "dict", "bool", "float32-nan"],
)
@pytest.mark.parametrize("metric", ["scaled_stress", "noise_fraction"])
def test_gate_fails_closed_on_values_that_are_not_numbers(value: Any, metric: str) -> None:
    result = _result(value, metric)
    lines = crossed(result, {metric: 0.5})
    assert len(lines) == 1 and metric in lines[0]
    judged = Gate({metric: 0.5}).judge(result)
    assert judged is not None and judged.to_dict()["passed"] is False


def test_gate_fails_closed_on_a_missing_score() -> None:
    judged = Gate({"scaled_stress": 0.5}).judge({"target": "t", "scores": {}, "noise": {}})
    assert judged is not None and judged.to_dict()["passed"] is False


def test_gate_fails_closed_on_a_nan_threshold() -> None:
    assert crossed(_result(0.1), {"scaled_stress": float("nan")})


@pytest.mark.parametrize("value", [0.1, np.float32(0.1), np.float64(0.1), 0])
def test_gate_passes_numbers_below_the_threshold(value: Any) -> None:
    assert crossed(_result(value), {"scaled_stress": 0.5}) == []


@pytest.mark.parametrize(
    ("table_values", "threshold"),
    [
        (lambda: table() * 1e300, "scaled=0.01"),
        (lambda: table() * 1e-300, "scaled=0.01"),
        (lambda: np.ones((64, 4)), "violation=0.99"),
    ],
    ids=["1e300-scaled", "1e-300-scaled", "undefined-violation"],
)
def test_report_gate_fails_for_scaled_and_undefined_scores(sandbox: Sandbox, table_values: Any, threshold: str) -> None:
    sandbox.copy_sample("drift.txt")
    np.save(sandbox.path("t.npy"), table_values())
    run = sandbox.run("report", "file:t.npy", *COMMON, "-o", "r.md", "--fail-above", threshold, "-f", "json")
    assert run.code == 1, str(run)
    assert len(run.errors) == 1 and "threshold crossed" in run.errors[0]
    document = json.loads(run.stdout)
    assert document["gate"]["passed"] is False
    assert document["targets"][0]["gate"]["passed"] is False
    assert "Gate FAILED" in sandbox.path("r.md").read_text(encoding="utf-8")


def test_bootstrap_intervals_of_a_scaled_table(sandbox: Sandbox) -> None:
    """The intervals of the scale-free scores are those of the table; raw stress has none (null), no warning."""
    sandbox.copy_sample("drift.txt")
    np.save(sandbox.path("t1.npy"), table())
    np.save(sandbox.path("big.npy"), table() * 1e300)
    plain = json.loads(sandbox.accepted("stress", "file:t1.npy", *COMMON, "--bootstrap", "3", "-f", "json").stdout)
    run = sandbox.accepted("stress", "file:big.npy", *COMMON, "--bootstrap", "3", "-f", "json")
    assert all(line.startswith("note:") for line in run.stderr.splitlines() if line.strip()), run.stderr
    (mine,), (theirs,) = json.loads(run.stdout)["scores"].values(), plain["scores"].values()
    for key in ("scaled_stress", "monotonicity_violation", "lag_violation"):
        for end in ("low", "high", "sd"):
            assert close(mine["bootstrap"][key][end], theirs["bootstrap"][key][end]), (key, end)
    assert mine["bootstrap"]["stress"]["low"] is None


def test_a_checkpoint_with_a_huge_position_table_scores_as_the_original(sandbox: Sandbox, minilm_path: Any) -> None:
    """all-MiniLM-L6-v2 with its float32 position table times 1e30: the same scale-free scores (to the
    float32 rounding of the multiplication), raw stress and separation scaled by 1e60 and 1e30."""
    import shutil

    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    sandbox.copy_sample("drift-words.txt")
    folder = sandbox.path("big")
    shutil.copytree(minilm_path, folder)
    weights = folder / "model.safetensors"
    with safe_open(str(weights), framework="numpy") as handle:
        metadata = handle.metadata()
    tensors = load_file(str(weights))
    (name,) = [key for key in tensors if key.endswith("position_embeddings.weight")]
    tensors[name] = tensors[name] * np.float32(1e30)
    save_file(tensors, str(weights), metadata=metadata)
    args = ("--dataset", "drift-words.txt", "--layers", "none", "--compare", "", "--null-draws", "2", "-f", "json")
    (big,) = json.loads(sandbox.accepted("stress", "big", *args).stdout)["scores"].values()
    (original,) = json.loads(sandbox.accepted("stress", str(minilm_path), *args).stdout)["scores"].values()
    for key in SCALE_FREE:
        if original.get(key) is not None:
            assert close(big[key], original[key], rel=1e-6), (key, big[key], original[key])
    assert close(big["separation"], original["separation"] * 1e30, rel=1e-6)
    assert big["stress"] > 1e50  # about 1e60 x the original: representable, so reported
