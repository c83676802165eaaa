"""mds_encoding: what `geoanalyze mds` writes, as classical_mds, stress_curve and low_rank_encoding compose."""

from __future__ import annotations

import numpy as np
import pytest

from geoanalyze.geometry import mds as mds_module
from geoanalyze.geometry.mds import classical_mds, low_rank_encoding, mds_encoding, stress_curve


def chords(n: int, seed: int = 0) -> np.ndarray:
    """Distances between n random points of a 6-dimensional space."""
    points = np.random.default_rng(seed).standard_normal((n, 6))
    return np.sqrt(np.square(points[:, None, :] - points[None, :, :]).sum(axis=-1))


def test_it_is_the_composition_it_names() -> None:
    d, positions = chords(30), np.arange(5, 35)
    fitted, curve, encoding = mds_encoding(d, positions, dim=8, rank=3, basis="identity", scale=2.0, metadata={"a": 1})
    reference = classical_mds(d)
    assert np.array_equal(fitted.eigenvalues_, reference.eigenvalues_)
    assert curve == stress_curve(reference.embedding_, d)
    expected = low_rank_encoding(reference, positions, dim=8, rank=3, basis="identity", scale=2.0)
    assert np.array_equal(encoding.A, expected.A) and np.array_equal(encoding.W, expected.W)
    assert list(encoding.metadata) == ["a", "effective_rank", "rank", "dim", "basis", "seed", "scale", "stress"]
    assert encoding.metadata["effective_rank"] == reference.effective_rank_ == 6
    assert encoding.metadata["stress"] == stress_curve(encoding.A, d, ranks=[3])[3]


def test_the_width_defaults_to_the_rank_then_to_every_positive_dimension() -> None:
    d = chords(20)
    assert mds_encoding(d, np.arange(20), rank=4)[2].dim == 4
    _, _, encoding = mds_encoding(d, np.arange(20))
    assert (encoding.rank, encoding.dim) == (6, 6)


def test_only_the_top_eigenpairs_from_partial_from_on_when_a_size_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mds_module, "PARTIAL_FROM", 16)  # n = 40 >= PARTIAL_FROM: as n >= 2048 does
    d = chords(40)
    whole = mds_encoding(d, np.arange(40))[0]  # nothing asked: every eigenpair, for every rank's stress
    assert not whole.partial_ and whole.embedding_.shape[1] == 6 and len(whole.eigenvalues_) == 40
    lanczos = mds_encoding(d, np.arange(40), dim=3)[0]  # at most n / 8: Lanczos, the top 3 only
    assert lanczos.partial_ and lanczos.eigenvalues_.shape == (3,)
    subset = mds_encoding(d, np.arange(40), dim=6, rank=6)[0]  # above n / 8: every eigenvalue, top vectors
    assert not subset.partial_ and len(subset.eigenvalues_) == 40 and subset.embedding_.shape[1] == 6
    full = mds_encoding(d, np.arange(40), dim=3, method="full")[0]
    assert not full.partial_ and full.embedding_.shape[1] == 6
    np.testing.assert_allclose(lanczos.eigenvalues_, whole.eigenvalues_[:3], rtol=1e-9)
