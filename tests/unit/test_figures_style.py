"""The one style module (geoanalyze.plotting) and every figure the package draws, read through
matplotlib's objects.

The reviewer's rules (plotting.audit) are first shown to catch each fault on figures built here with
plain matplotlib; then every drawing function, fed small records shaped like the ones the commands
and experiments pass (a smoke run's single evaluation included), draws a figure the audit passes.
What the commands themselves draw is audited in tests/cli/test_figures_commands.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_rgb

from geoanalyze import plotting
from geoanalyze.plotting import FAMILY_LOOKS, PALETTE, Looks, audit, cycle_look

# Okabe and Ito's eight colours, as published (Wong, Nature Methods 8, 441, 2011), in RGB 0-255
OKABE_ITO = {
    (0, 0, 0), (230, 159, 0), (86, 180, 233), (0, 158, 115), (240, 228, 66), (0, 114, 178), (213, 94, 0), (204, 121, 167),
}  # fmt: skip


def fresh() -> tuple[Any, Any]:
    plt = plotting.pyplot()
    return plt.subplots(layout="constrained")


def clean_figure() -> Any:
    figure, axis = fresh()
    axis.plot([0, 1, 2], [1, 2, 3], color="C0", marker="o", linestyle="-", label="a")
    axis.plot([0, 1, 2], [2, 3, 4], color="C0", marker="s", linestyle="-", label="b")  # differs in marker
    axis.plot([1], [2], color="C1", marker="^", linestyle="none", label="one point")
    axis.set_xlabel("step")
    axis.set_ylabel("loss (nats)")
    axis.legend()
    return figure


def test_a_figure_that_keeps_the_rules_passes() -> None:
    assert audit(clean_figure()) == []


def test_two_series_alike_in_colour_marker_and_line_are_found() -> None:
    figure = clean_figure()
    axis = figure.axes[0]
    axis.plot([0, 1], [5, 6], color="C0", marker="o", linestyle="-", label="c")
    (problem,) = audit(figure)
    assert "'a' and 'c' share colour, marker and line style" in problem


def test_a_series_of_one_point_drawn_as_a_line_only_is_found() -> None:
    figure = clean_figure()
    figure.axes[0].plot([3], [1], color="C2", label="lonely")  # the smoke-run curve that drew nothing
    (problem,) = audit(figure)
    assert "'lonely' is one point drawn as a line" in problem


def test_unlabelled_axes_an_empty_panel_and_a_missing_legend_are_found() -> None:
    plt = plotting.pyplot()
    figure, (left, _right) = plt.subplots(1, 2)
    left.plot([0, 1], [0, 1], label="x", color="C0")
    left.plot([0, 1], [1, 0], label="y", color="C1")
    problems = audit(figure)
    assert any("panel 1" in p and "no x label" in p for p in problems)
    assert any("panel 1" in p and "no y label" in p for p in problems)
    assert any("panel 1" in p and "several series and no legend" in p for p in problems)
    assert any("panel 2" in p and "an empty panel" in p for p in problems)


def test_category_names_on_a_shared_y_axis_stand_for_its_label() -> None:
    plt = plotting.pyplot()
    figure, axes = plt.subplots(1, 2, sharey=True)
    for axis in axes:
        axis.plot([0.1, 0.2], [0, 1], color="C0", marker="o", linestyle="none")
        axis.set_xlabel("score")
    axes[0].set_yticks([0, 1], ["sinusoidal", "rope"])
    assert audit(figure) == []


def test_an_image_needs_a_labelled_colour_bar_no_grid_and_its_own_scale() -> None:
    values = 0.05 + 0.05 * np.random.default_rng(0).random((20, 20))  # corrected distances: ~0.05-0.1
    figure, axis = fresh()
    image = axis.imshow(values, vmin=0.0, vmax=1.0)  # the naive panel's 0-1 scale
    figure.colorbar(image, ax=axis)
    axis.grid(True)
    axis.set_xlabel("position j")
    axis.set_ylabel("position i")
    problems = audit(figure)
    assert any("a colour bar without a label" in p for p in problems)
    assert any("grid lines drawn over an image" in p for p in problems)
    assert any("of a colour scale of 1" in p for p in problems)
    figure, axis = fresh()
    plotting.heatmap(figure, axis, values, "corrected Hellinger distance")
    axis.set_xlabel("position j")
    axis.set_ylabel("position i")
    assert audit(figure) == []


def test_a_text_naming_a_staging_folder_is_found() -> None:
    figure = clean_figure()
    figure.axes[0].set_title("MLM on results/.smoke.12985.partial/mds-training/smoke-corpus.tsv")
    figure.suptitle("run in .run.7.staged")
    problems = audit(figure)
    assert len(problems) == 2 and all("staging folder" in p for p in problems)


# --- the looks ---------------------------------------------------------------------------------------


def test_the_palette_is_okabe_and_ito() -> None:
    assert {tuple(round(255 * c) for c in to_rgb(colour)) for colour in PALETTE} == OKABE_ITO
    looks = [cycle_look(i) for i in range(56)]
    assert len(set(looks)) == 56  # colour, marker and line style cycle with coprime periods
    for attribute in ("colour", "marker"):
        assert len({getattr(look, attribute) for look in looks[:7]}) == 7


NAMES = st.lists(
    st.sampled_from([*FAMILY_LOOKS, "rope:d=64", "mds:rank=2", "lowrank r=4", "gpt", "edelta"]) | st.text(max_size=8),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(NAMES)
def test_no_two_names_of_a_figure_share_a_look_and_families_keep_theirs(names: list[str]) -> None:
    looks = Looks(*names)
    drawn = {name: looks(name) for name in names}
    assert len(set(drawn.values())) == len(drawn)  # one look per name
    assert all(looks(name) == look for name, look in drawn.items())  # the same name: the same look
    for name, look in drawn.items():
        own = plotting.family_look(name)
        rivals = [other for other in drawn if other != name and plotting.family_look(other) == own]
        if own is not None and not rivals:
            assert look == own, name  # sinusoidal is drawn as sinusoidal in every figure
        if own is None:
            assert look not in FAMILY_LOOKS.values()  # and no other name is drawn as sinusoidal


def test_a_series_of_one_point_is_drawn_as_a_point(tmp_path: Path) -> None:
    _, axis = fresh()
    one = plotting.series(axis, [150], [0.5], plotting.family_look("rope"), label="rope")  # type: ignore[arg-type]
    many = plotting.series(axis, [1, 2], [0.5, 0.6], plotting.family_look("rope"), label="rope too")  # type: ignore[arg-type]
    assert one.get_linestyle() == "None" and one.get_marker() == "s"
    assert many.get_linestyle() == "--" and many.get_marker() == "s"


def test_the_heatmap_scale_leaves_out_the_diagonal_and_an_isolated_position() -> None:
    rng = np.random.default_rng(1)
    values = 0.2 + 0.1 * rng.random((12, 12))
    values = (values + values.T) / 2
    values[0, :] = values[:, 0] = 1.0  # [CLS]: shares no token with any other position
    np.fill_diagonal(values, 0.0)
    assert list(plotting.isolated_positions(values)) == [0]
    figure, axis = fresh()
    image = plotting.heatmap(figure, axis, values, "naive Hellinger distance", skip=[0])
    inner = values[1:, 1:][~np.eye(11, dtype=bool)]
    low, high = image.get_clim()
    assert np.percentile(inner, 1) == pytest.approx(low) and np.percentile(inner, 99) == pytest.approx(high)
    assert np.isnan(np.diag(np.ma.filled(image.get_array(), np.nan))).all()  # the diagonal masked
    assert image.colorbar.ax.get_ylabel() == "naive Hellinger distance"
    assert not any(line.get_visible() for line in axis.get_xgridlines())


def test_recording_hands_back_every_saved_figure(tmp_path: Path) -> None:
    with plotting.recording() as saved:
        plotting.save(clean_figure(), tmp_path / "a.png")
    plotting.save(clean_figure(), tmp_path / "b.png")  # outside the block: not recorded
    assert [Path(path).name for path, _ in saved] == ["a.png"]
    assert saved[0][1].axes[0].get_xlabel() == "step"


# --- every drawing function on small records -----------------------------------------------------------


@pytest.fixture(scope="module")
def drift() -> Any:
    from geoanalyze.corpus.sources import resolve_source
    from geoanalyze.corpus.streaming import CountJob, compute_counts
    from geoanalyze.geometry.distances import position_geometry

    counts, _ = compute_counts(resolve_source(str(SAMPLES / "drift.txt")), CountJob(tokenizer="whitespace"))
    return position_geometry(counts)


def passes(figure: Any) -> Any:
    assert audit(figure) == [], audit(figure)
    return figure


def test_the_report_figures_pass(drift: Any, tmp_path: Path) -> None:
    from geoanalyze.analysis import known_distances
    from geoanalyze.geometry.mds import classical_mds, stress_curve
    from geoanalyze.report import figures

    truth = known_distances(drift)
    passes(figures.distance_heatmap(drift, tmp_path / "h.png"))
    passes(figures.distance_heatmap(drift, tmp_path / "h.png", truth=None))
    mds = classical_mds(drift.naive)
    curve = stress_curve(mds.embedding_, drift.naive)
    passes(figures.mds_figure(mds, curve, drift.positions, tmp_path / "m.png", rank=2, truth=truth))
    tables = {name: np.cos(np.outer(drift.positions, np.arange(1, 5)) / k) for k, name in enumerate(("a", "b"), 3)}
    passes(figures.shepard_diagram(tables, drift.naive, tmp_path / "s.png", truth=truth))
    projections = ("query", "key", "P·W_Q", "P·W_K", "hidden")
    for layers in ([0, 3, 6], [2]):  # several layers, and one (a point per projection)
        rows = [
            {"layer": layer, "projection": p, "stress": 1.0 + layer + k, "scaled_stress": 0.1 * (layer + 1) + 0.01 * k}
            for layer in layers
            for k, p in enumerate(projections)
        ]
        references = {
            "null": {"stress": 10.0, "scaled_stress": 0.5},
            "sinusoidal": {"stress": 3.0, "scaled_stress": 0.05},
        }
        figure = passes(figures.layer_figure(rows, tmp_path / "l.png", title="(m on c)", references=references))
        colours = {line.get_color() for line in figure.axes[0].lines}
        assert len(colours) == len(projections) + len(references)  # seven series, seven colours
    for rows in ([{"step": 6, "train_loss": 2.0, "eval_loss": 2.1, "train_accuracy": 0.2, "eval_accuracy": 0.3}],
                 [{"step": s, "train_loss": 2.0 / s, "eval_loss": None, "train_accuracy": 0.1 * s} for s in (1, 2, 3)]):  # fmt: skip
        passes(figures.training_curves(rows, tmp_path / "t.png", subtitle="mlm on drift.txt, pe learned"))


def test_the_experiment_figures_pass_on_a_smoke_runs_records_and_on_longer_ones(tmp_path: Path) -> None:
    from geoanalyze.experiments import edelta_benchmarks, length_generalization, positional_figures, vision_2d
    from geoanalyze.experiments.edelta_runs import Results

    names = ("none", "sinusoidal", "learned", "lowrank", "mds", "rope", "alibi")
    for steps in ([150], [10, 20, 30]):  # a smoke run's one evaluation, and a curve
        runs = {
            n: [{"step": s, "eval_accuracy": 0.5 + 0.01 * k + 0.001 * s} for s in steps] for k, n in enumerate(names)
        }
        positional_figures.curves_figure(
            tmp_path / "c.png", runs, "eval_accuracy", "held-out accuracy", (0.4, 0.6), "order"
        )
        separation = {n: [{"step": s, "separation": 0.1 * k, "relative_separation": 0.2} for s in steps] for k, n in
                      enumerate(("mlm", "order"))}  # fmt: skip
        positional_figures.separation_figure(tmp_path / "s.png", separation)
        history = [{"step": s, "valid_mse": 0.1 / s, "gate": 0.5} for s in steps]
        per_model = {
            m: [{"seed": seed, "history": history, "gate": 0.5} for seed in (0, 1)] for m in ("gpt", "ddl", "edelta")
        }
        runs_by_task = {task: per_model for task in ("gyroscope", "stability")}
        edelta_benchmarks.loss_figure(runs_by_task, tmp_path / "e.png")
        negation = {"edelta": {4: [{"seed": 0, "gate_curve": [[1, 0.2], [2, 0.2], [3, 0.21]]}]}}
        results = Results(runs=runs_by_task, norms={}, negation=negation)
        assert edelta_benchmarks.gate_figure(results, (4,), tmp_path / "g.png")
    length_generalization._ratio_figure({"rope": [1.0, 1.1, 1.2, 1.3], "joformer-fixed": [1.0, 1.2, 1.3, 1.5]}, 8,
                                        tmp_path / "r.png")  # fmt: skip
    vision_2d._accuracy_figure(
        {"none": 0.1, "rope2d": 0.12}, {"none": 0.0, "rope2d": 0.01}, tmp_path / "v.png", "digits"
    )


def test_the_optimality_and_journey_figures_pass(tmp_path: Path) -> None:
    from geoanalyze.experiments import journey, optimality

    def fit(value: float) -> dict[str, float]:
        return {"scaled_stress": value, "lag_violation": value / 2, "relative": value * 3}

    family = [{"roughness": r, "sinusoidal": fit(0.02 + r), "mds rank 1": fit(0.1), "mds rank 2": fit(0.01 + r / 10),
               "mds": fit(0.05 * r), "null": 0.2 - r / 10} for r in (0.0, 0.5, 1.0)]  # fmt: skip
    named = {name: {"sinusoidal": fit(0.08), "mds rank 2": fit(0.01), "null": 0.2} for name in ("drift", "shift")}
    optimality._family_figure(tmp_path / "f.png", family, named, "sinusoidal")
    shift = [{"length": n, "alibi": fit(1e-3 * n), "mds rank 1": fit(2e-3 * n), "mds rank 2": fit(1e-5 * n),
              "null": 0.2, "shift_equivariance": 1.0} for n in (8, 16, 32)]  # fmt: skip
    others = {"drift": {"shift_equivariance": 0.9, "alibi": fit(0.05)}}
    optimality._alibi_figure(tmp_path / "a.png", shift, others)
    journey._figure([(1, 1), (2, 1), (2, 3)], [3.7, 4.4, 5.5], tmp_path / "j.png")


@pytest.fixture(autouse=True)
def every_saved_figure_passes() -> Any:
    """Whatever a test here saves through plotting.save is audited too (the experiments' functions
    return no figure)."""
    with plotting.recording() as saved:
        yield
    for path, figure in saved:
        assert audit(figure) == [], (path, audit(figure))


def test_a_records_paths_inside_the_staged_folder_are_relative_to_it(tmp_path: Path, monkeypatch: Any) -> None:
    """What mds-training's title and record name: smoke-corpus.tsv, not results/.smoke.123.partial/..."""
    from geoanalyze.experiments.positional import in_folder

    monkeypatch.chdir(tmp_path)
    staged = Path(".results.123.partial") / "mds-training"
    config = {"dataset": str(staged / "smoke-corpus.tsv"), "model": {"pe_file": str((staged / "pe.st").absolute())},
              "task": "mlm", "files": [str(staged / "a" / "b.txt"), "sst2"], "steps": 10, "note": ""}  # fmt: skip
    assert in_folder(config, staged) == {
        "dataset": "smoke-corpus.tsv", "model": {"pe_file": "pe.st"}, "task": "mlm", "files": ["a/b.txt", "sst2"],
        "steps": 10, "note": "",
    }  # fmt: skip
    assert in_folder(str(tmp_path.parent / "elsewhere.tsv"), staged) == str(tmp_path.parent / "elsewhere.tsv")
