"""``mds --scale`` writes what float32 (the type of a PE file) holds, or refuses (issue 22): was
``--scale 1e40`` 402 of 512 entries inf, ``1e-44`` a table that scores 0.0328 instead of 0.0384,
``1e-320`` zeros. And MDS of distances that are all zero says so (was "--dim must be at least 1")."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import load_file

from geoanalyze.geometry.scores import embedding_distances, scaled_stress

from .harness import Sandbox

CORPUS = ("-t", "whitespace", "--no-cache")


@pytest.mark.parametrize(
    ("scale", "words"),
    [
        ("1e40", ("exceeds float32's range", "inf", "lower --scale", "at most")),
        ("1e39", ("exceeds float32's range", "lower --scale")),
        ("1e-44", ("below", "float32", "raise --scale", "at least")),
        ("1e-320", ("below", "float32", "raise --scale")),
    ],
)
def test_a_scale_float32_cannot_hold_is_refused_before_writing(
    sandbox: Sandbox, scale: str, words: tuple[str, ...]
) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused("mds", "drift.txt", *CORPUS, "--scale", scale, "-o", "pe.safetensors", words=words)


def test_the_scale_the_refusal_names_is_written(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    line = sandbox.refused("mds", "drift.txt", *CORPUS, "--scale", "1e40", "-o", "pe.safetensors").errors[0]
    suggested = line.split("at most ")[1].split()[0]
    sandbox.accepted("mds", "drift.txt", *CORPUS, "--scale", suggested, "-o", "pe.safetensors")
    assert np.isfinite(load_file(str(sandbox.path("pe.safetensors")))["position_embeddings"]).all()


@pytest.mark.parametrize("scale", [1e30, 1e-30, 1.0])
def test_a_scale_inside_float32_keeps_the_tables_shape(sandbox: Sandbox, scale: float) -> None:
    """The file at ``scale``, divided by it, is the unit-scale table to float32's rounding, so it scores
    as the unit table does (scaled stress is scale-free)."""
    sandbox.copy_sample("drift.txt")
    sandbox.accepted("mds", "drift.txt", *CORPUS, "-o", "unit.safetensors")
    sandbox.accepted("mds", "drift.txt", *CORPUS, "--scale", repr(scale), "-o", "scaled.safetensors")
    unit = load_file(str(sandbox.path("unit.safetensors")))["position_embeddings"].astype(np.float64)
    scaled = load_file(str(sandbox.path("scaled.safetensors")))["position_embeddings"].astype(np.float64)
    assert np.isfinite(scaled).all()
    largest = np.abs(unit).max()
    np.testing.assert_allclose(scaled / scale, unit, rtol=0, atol=4 * np.finfo(np.float32).eps * largest)
    target = embedding_distances(unit)
    assert scaled_stress(scaled, target) == pytest.approx(scaled_stress(unit, target), abs=1e-6)


def test_mds_of_distances_that_are_all_zero_says_so(sandbox: Sandbox) -> None:
    # every position holds the same token: every Hellinger distance is 0
    sandbox.write("same.txt", "a a a a\n" * 300)
    sandbox.refused("mds", "same.txt", *CORPUS, words=("all zero", "same distribution"))
    sandbox.refused("mds", "same.txt", *CORPUS, "--dim", "4", "-o", "pe.safetensors", words=("all zero",))
