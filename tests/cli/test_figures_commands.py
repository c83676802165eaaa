"""Every figure the commands draw passes a reviewer's read, checked through matplotlib's objects.

Each command runs as a user runs it (in-process, real corpora and the packaged MiniLM), inside
geoanalyze.plotting.recording(), which hands back each Figure that plotting.save wrote; the
reviewer's rules are geoanalyze.plotting.audit's (each shown to catch its fault in
tests/unit/test_figures_style.py): no two series of a panel alike in colour, marker and line style,
no series of one point drawn as a line only, labelled axes and colour bars, every image on its own
scale without a grid over it, no staging folder named anywhere. `verify all --preset smoke` (every
experiment's figures, and its records for staging paths) is the slow test at the end.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import DRIFT_WORDS, SAMPLES, invoke, ok

from geoanalyze import plotting

TINY_TRAINING = [
    *("model.d_model=32", "model.n_layers=1", "model.n_heads=4", "model.d_ff=64", "model.n_positions=16"),
    *("order_length=12", "batch_size=16", "steps=6", "eval_every=6", "eval_batches=1", "warmup_steps=1"),
]


FAST = ("--null-draws", 2, "--max-sequences", 48)  # a short forward pass (every projection kept), 2 random tables


def run_recording(commands: dict[str, list[Any]], folder: Path) -> dict[str, Any]:
    """{"<command>/<file name>": Figure} of what each command drew, run in ``folder``."""
    figures: dict[str, Any] = {}
    for command, args in commands.items():
        with plotting.recording() as saved:
            ok(invoke([str(a) for a in args], cwd=folder))
        # a single PNG is staged as its hidden sibling (.<name>.<random>.tmp), a folder's PNGs in a staged folder
        figures |= {f"{command}/{re.match(r'[.]?(.+?[.]png)', Path(path).name)[1]}": f for path, f in saved}  # type: ignore[index]
    return figures


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What distances --heatmap, mds --plot (of a counts file) and train draw: the cheap commands."""
    commands = {
        "distances": ["distances", SAMPLES / "drift.txt", "-t", "whitespace", "--heatmap", "distances.png"],
        "marginals": ["marginals", DRIFT_WORDS, "-o", "drift-words-counts.safetensors"],
        "mds": ["mds", "drift-words-counts.safetensors", "--rank", "4", "--plot", "mds-plot.png"],
        "train": ["train", "-o", "run", "--pe", "rope", *[a for s in TINY_TRAINING for a in ("--set", s)]],
    }
    return run_recording(commands, tmp_path_factory.mktemp("figures"))


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What stress --plot-dir (MiniLM, two layers) and report (two encodings) draw."""
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    commands = {
        "stress": ["stress", minilm, "--dataset", DRIFT_WORDS, "--compare", "sinusoidal", "--layers", "0,6",
                   *FAST, "--plot-dir", "stress"],
        "report": ["report", "rope:d=32", "sinusoidal", "--dataset", SAMPLES / "drift.txt", "-t", "whitespace",
                   "--null-draws", 2, "-o", "report.md"],
    }  # fmt: skip
    return run_recording(commands, tmp_path_factory.mktemp("analysed"))


def texts(figure: Any) -> list[str]:
    from matplotlib.text import Text

    return [text.get_text() for text in figure.findobj(Text) if text.get_text()]


def no_problems(drawn: dict[str, Any]) -> None:
    problems = {name: plotting.audit(figure) for name, figure in drawn.items()}
    assert {name: found for name, found in problems.items() if found} == {}


def test_every_figure_of_distances_mds_and_train_passes_the_reviewers_read(drawn: dict[str, Any]) -> None:
    assert set(drawn) == {"distances/distances.png", "mds/mds-plot.png", "train/training.png"}
    no_problems(drawn)


@pytest.mark.slow
def test_every_figure_of_stress_and_report_passes_the_reviewers_read(analysed: dict[str, Any]) -> None:
    expected = {"hellinger.png", "mds.png", "shepard.png", "null.png", "layers.png"}
    assert {Path(name).name for name in analysed if name.startswith("stress/")} == expected
    assert sum(name.startswith("report/") for name in analysed) >= 4 * 2  # two targets' figures
    no_problems(analysed)


@pytest.mark.slow
def test_the_five_projections_of_the_layer_figure_have_five_colours(analysed: dict[str, Any]) -> None:
    """The issue's layers.png: P·W_Q drawn as query and P·W_K as key (same colour, marker and line)."""
    for axis in analysed["stress/layers.png"].axes:
        styles = {line.get_label(): (line.get_color(), line.get_marker(), line.get_linestyle()) for line in axis.lines}
        projections = {name: styles[name] for name in ("query", "key", "P·W_Q", "P·W_K", "hidden")}
        assert len({colour for colour, _, _ in projections.values()}) == 5
        assert len({marker for _, marker, _ in projections.values()}) == 5


def test_the_heatmaps_are_on_their_own_scales_with_the_diagonal_masked(drawn: dict[str, Any]) -> None:
    figure = drawn["distances/distances.png"]
    naive, corrected = (axis.images[0] for axis in figure.axes if axis.images)
    assert naive.get_clim() != corrected.get_clim()
    for image in (naive, corrected):
        values = np.ma.filled(image.get_array(), np.nan)
        assert np.isnan(np.diag(values)).all()
        assert image.colorbar.ax.get_ylabel().endswith("Hellinger distance")
    signal = next(axis for axis in figure.axes if axis.get_title().startswith("signal vs noise"))
    anchor = next(line for line in signal.lines if line.get_label().startswith("naive d(i, "))
    at = int(anchor.get_label().split(", ")[1].rstrip(")"))
    ys = np.asarray(anchor.get_ydata())
    assert np.isnan(ys[list(anchor.get_xdata()).index(at)])  # no spike to d(anchor, anchor) = 0


@pytest.mark.slow
def test_the_shepard_diagram_draws_the_cls_pairs_apart(analysed: dict[str, Any]) -> None:
    (axis,) = analysed["stress/shepard.png"].axes
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert any(label.startswith("pairs with position 0") for label in labels)  # [CLS] (and [SEP]) marked apart


def test_titles_name_the_corpus_not_a_counts_file(drawn: dict[str, Any]) -> None:
    assert "drift-words.txt" in drawn["mds/mds-plot.png"].get_suptitle()
    assert "counts.safetensors" not in " ".join(texts(drawn["mds/mds-plot.png"]))
    assert "drift.txt" in drawn["distances/distances.png"].get_suptitle()
    assert drawn["train/training.png"].get_suptitle().startswith("order on synthetic 12-token sequences, pe rope")


@pytest.mark.slow
def test_every_smoke_experiment_figure_passes_and_no_record_names_a_staging_folder(tmp_path: Path) -> None:
    with plotting.recording() as saved:
        ok(invoke(["verify", "all", "--preset", "smoke", "-o", "results", "-f", "json"], cwd=tmp_path))
    names = {Path(path).name for path, _ in saved}
    for figure in ("edelta_loss_curves.png", "edelta_gate.png", "necessity-accuracy.png", "mds-training.png"):
        assert figure in names
    problems = {path: plotting.audit(figure) for path, figure in saved}
    assert {path: found for path, found in problems.items() if found} == {}
    records = [tmp_path / "results" / "summary.json", *(tmp_path / "results").glob("*/*.json")]
    for record in records:
        text = record.read_text(encoding="utf-8")
        assert ".partial" not in text and ".staged" not in text, record
    mds_training = json.loads((tmp_path / "results" / "mds-training" / "mds-training.json").read_text())
    assert mds_training["data"]["config"]["dataset"] == "smoke-corpus.tsv"  # relative to the experiment's folder
