"""The figures, read through matplotlib's own objects: labels, marks, reference lines, colours."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from geoanalyze import plotting as style
from geoanalyze.encodings import get_encoding
from geoanalyze.geometry.mds import classical_mds, stress_curve
from geoanalyze.report.figures import layer_figure, mds_figure, shepard_diagram

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def lag_distances() -> np.ndarray:
    """A Euclidean target: positions on a gently curved line (its full-rank MDS fits to round-off)."""
    i = np.arange(30, dtype=float)
    points = np.stack([i, 0.02 * i**2], axis=1)
    return np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1)) / 30


def test_mds_figure_marks_the_rank_labels_the_map_and_skips_round_off(tmp_path: Path, lag_distances: np.ndarray) -> None:
    result = classical_mds(lag_distances)
    curve = stress_curve(result.embedding_, lag_distances)
    assert min(curve.values()) < 1e-20  # the full-rank point that used to squash the log axis
    figure = mds_figure(result, curve, np.arange(30), tmp_path / "mds.png", rank=1, subtitle="lag on toy")
    assert (tmp_path / "mds.png").read_bytes()[:8] == PNG
    spectrum, stress, cloud = figure.axes[:3]
    # no round-off eigenvalue drawn as "negative": a rank-2 configuration has exactly 2 bars
    assert len(spectrum.patches) == 2
    assert "negative (non-Euclidean part)" not in [t.get_text() for t in spectrum.get_legend().get_texts()]
    plotted = stress.lines[0].get_ydata()
    assert min(plotted) > 1e-12 * max(plotted)
    assert any(line.get_xdata()[0] == 1 and line.get_linestyle() == "--" for line in stress.lines[1:])
    assert cloud.get_xlabel() == "MDS coordinate 1" and cloud.get_ylabel() == "MDS coordinate 2"
    assert figure._suptitle.get_text() == "lag on toy"


def test_shepard_draws_identical_encodings_once_with_both_names_and_fixed_colours(
    tmp_path: Path, lag_distances: np.ndarray
) -> None:
    positions = np.arange(30)
    tables = {name: get_encoding(name).vectors(positions) for name in ("sinusoidal:d=16", "rope:d=16", "random:d=16")}
    figure = shepard_diagram(tables, lag_distances, tmp_path / "s.png", subtitle="x on y")
    axis = figure.axes[0]
    labels = [t.get_text() for t in axis.get_legend().get_texts()]
    assert labels == ["sinusoidal:d=16 = rope:d=16", "random:d=16"]
    colours = [tuple(np.round(c.get_facecolor()[0][:3], 3)) for c in axis.collections]
    from matplotlib.colors import to_rgb

    assert colours == [tuple(np.round(to_rgb(style.colour("sinusoidal")), 3)), tuple(np.round(to_rgb(style.colour("random")), 3))]
    assert "x on y" in axis.get_title()


def test_layer_figure_has_axis_labels_and_reference_lines(tmp_path: Path) -> None:
    layers = [
        {"layer": layer, "projection": projection, "stress": 1.0 + layer, "scaled_stress": 0.1 * (layer + 1)}
        for layer in range(3)
        for projection in ("query", "hidden")
    ]
    references = {"null": {"stress": 10.0, "scaled_stress": 0.5}, "sinusoidal": {"stress": 3.0, "scaled_stress": 0.05}}
    figure = layer_figure(layers, tmp_path / "l.png", title="(m on c)", references=references)
    raw, scaled = figure.axes[:2]
    assert raw.get_ylabel() == "stress (log scale)" and scaled.get_ylabel() == "scaled stress"
    assert raw.get_xlabel() == scaled.get_xlabel() == "layer (0 = embeddings)"
    for axis, key in ((raw, "stress"), (scaled, "scaled_stress")):
        flat = {line.get_label(): line.get_ydata()[0] for line in axis.lines if line.get_linestyle() == "--"}
        assert flat == {name: values[key] for name, values in references.items()}
    assert "(m on c)" in raw.get_title()


def test_one_encoding_keeps_its_colour_everywhere() -> None:
    assert style.colour("sinusoidal") == style.colour("sinusoidal:d=64")
    assert style.colour("rope:d=8") != style.colour("sinusoidal")
    assert style.colour("something-else", 0) != style.colour("something-else", 1)


def test_training_curves_plot_loss_and_accuracy_against_step(tmp_path: Path) -> None:
    from geoanalyze.report.figures import training_curves

    rows = [
        {"step": 6, "train_loss": 2.0, "eval_loss": 2.1, "train_accuracy": 0.2, "eval_accuracy": 0.25},
        {"step": 12, "train_loss": 1.0, "eval_loss": None, "train_accuracy": 0.6, "eval_accuracy": 0.55},
    ]
    figure = training_curves(rows, tmp_path / "t.png", subtitle="order, pe rope")
    loss, accuracy = figure.axes[:2]
    assert (loss.get_xlabel(), loss.get_ylabel()) == ("step", "loss")
    assert (accuracy.get_xlabel(), accuracy.get_ylabel()) == ("step", "accuracy")
    curves = {line.get_label(): list(line.get_ydata()) for line in loss.lines}
    assert curves == {"train": [2.0, 1.0], "eval": [2.1]}  # a missing (diverged) value is left out
    assert (tmp_path / "t.png").read_bytes()[:8] == PNG
