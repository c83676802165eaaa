"""Scores against position (geometry/windows.py): the windows, their scores, their tests, the verdict, the figure."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.corpus.synthetic import drift_marginals
from geoanalyze.encodings import get_encoding
from geoanalyze.errors import InputError
from geoanalyze.geometry.distances import hellinger_distances
from geoanalyze.geometry.scores import scaled_stress
from geoanalyze.geometry.windows import (
    MIN_POSITIONS,
    WindowScores,
    plan_windows,
    score_windows,
    window_count,
    window_edges,
    window_members,
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 5000), min_size=1, max_size=300, unique=True),
    st.integers(2, 64),
)
def test_windows_partition_the_positions(values: list[int], count: int) -> None:
    positions = np.sort(np.asarray(values))
    edges = window_edges(positions, count)
    assert np.all(np.diff(edges) > 0) and edges[0] == positions[0] and edges[-1] == positions[-1] + 1
    assert edges.size - 1 <= count
    members = window_members(positions, edges)
    assert len(members) == edges.size - 1
    joined = np.concatenate(members)
    assert sorted(joined.tolist()) == list(range(positions.size))  # each position in exactly one window
    for j, member in enumerate(members):
        assert np.all((positions[member] >= edges[j]) & (positions[member] < edges[j + 1]))


@pytest.fixture(scope="module")
def drift() -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Exact Hellinger distances of a synthetic drift of 512 positions, and rope / random tables on them."""
    positions = np.arange(512)
    distances = hellinger_distances(drift_marginals(512, 128, np.random.default_rng(0)))
    tables = {spec: get_encoding(spec).vectors(positions) for spec in ("rope:d=64,base=10000", "random:d=64")}
    return positions, distances, tables


def test_window_score_is_the_dense_score_of_its_positions(drift) -> None:
    positions, distances, tables = drift
    found = score_windows(tables, positions, lambda rows: distances[np.ix_(rows, rows)], 6, draws=199)
    windows = plan_windows(positions, 6, seed=0)
    for name, table in tables.items():
        for j, window in enumerate(windows):
            rows = window.rows  # the members, or their seeded sample past the limit (256)
            score = found[name].scores[j]
            if rows.size < MIN_POSITIONS:
                assert math.isnan(score) and found[name].categories[j] == "undecided"
                continue
            assert score == pytest.approx(scaled_stress(table[rows], distances[np.ix_(rows, rows)]), abs=1e-12)


def test_a_large_window_is_scored_on_a_seeded_sample(drift) -> None:
    positions, distances, tables = drift
    first = score_windows(tables, positions, lambda rows: distances[np.ix_(rows, rows)], 4, draws=99, limit=40)
    again = score_windows(tables, positions, lambda rows: distances[np.ix_(rows, rows)], 4, draws=99, limit=40)
    assert max(first["random:d=64"].scored) == 40 < max(first["random:d=64"].positions)
    assert first["random:d=64"].to_dict() == again["random:d=64"].to_dict()


def test_random_is_better_in_no_window_and_rope_is_in_the_early_ones(drift) -> None:
    positions, distances, tables = drift
    found = score_windows(tables, positions, lambda rows: distances[np.ix_(rows, rows)], 6, draws=999, limit=128)
    rope, random = found["rope:d=64,base=10000"], found["random:d=64"]
    assert "better" not in random.categories
    assert "in no window" in random.verdict()
    decided = [c for c in rope.categories if c != "undecided"]
    assert decided[:2] == ["better", "better"]
    assert rope.tests == 2 * sum(size >= MIN_POSITIONS for size in rope.positions)
    assert all(p >= 0.05 for p, c in zip(random.p_adjusted, random.categories, strict=True) if c != "undecided")


def verdict_of(categories: tuple[str, ...]) -> str:
    n = len(categories)
    return WindowScores(
        "enc", tuple(range(0, 10 * n, 10)), tuple(range(10, 10 * n + 10, 10)), (10,) * n, (10,) * n,
        (0.1,) * n, (0.2,) * n, (0.9,) * n, (0.01,) * n, (0.02,) * n, categories, 999, n,
        0,
    ).verdict()  # fmt: skip


def test_the_verdict_says_where_the_geometry_stops_being_better() -> None:
    assert "better than random in every window" in verdict_of(("better",) * 3)
    assert "in no window" in verdict_of(("indistinguishable",) * 3)
    line = verdict_of(("better", "better", "indistinguishable", "worse"))
    assert "better than random up to position 20 (window [20, 30)); from there on it is not" in line
    assert "Holm over 4 tests" in line
    assert "cannot decide past 20" in verdict_of(("better", "better", "undecided"))
    assert "cannot decide" in verdict_of(("undecided", "undecided"))
    assert "not better than random in its first decided window [0, 10)" in verdict_of(("indistinguishable", "better"))


@pytest.mark.parametrize("setting", ["0", "1", "-1", "", "twelve", "65", "1.5"])
def test_hostile_window_settings_are_refused(setting: str) -> None:
    with pytest.raises(InputError, match="--windows"):
        window_count(setting, 5000)


def test_auto_is_on_only_past_1024_positions() -> None:
    assert window_count("auto", 1024) == 0 and window_count("auto", 1025) == 12
    assert window_count("none", 10**6) == 0 and window_count("7", 10) == 7


def test_the_figure_draws_one_line_per_table_with_the_training_length(drift, tmp_path: Path) -> None:
    import matplotlib.image

    from geoanalyze.report.figures import window_figure, window_lines

    positions, distances, tables = drift
    found = score_windows(tables, positions, lambda rows: distances[np.ix_(rows, rows)], 6, draws=199)
    found = {name: WindowScores(**{**vars(w), "training_length": 64}) for name, w in found.items()}
    path = tmp_path / "windows.png"
    figure = window_figure(found, path)
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 600
    lines = window_lines(found)
    assert list(lines) == list(tables)
    for name, line in lines.items():
        np.testing.assert_array_equal(line["y"], np.asarray(found[name].scores))
        assert line["filled"].tolist() == [c == "better" for c in found[name].categories]
    axis = figure.axes[0]
    assert axis.get_xscale() == "log" and axis.get_xlabel() and axis.get_ylabel() and axis.get_title()
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert {*tables, "training length 64"} <= set(labels)
    assert any(list(line.get_xdata()) == [64, 64] for line in axis.get_lines())


@pytest.mark.parametrize("which", ["naive", "corrected"])
def test_a_window_d_from_its_own_counts_equals_the_dense_slice(drift_counts, which: str) -> None:
    """Past the dense limit a window's D comes from counts.select of its positions: the same entries."""
    from geoanalyze.geometry.distances import position_geometry
    from geoanalyze.geometry.windows import window_distances

    geometry = position_geometry(drift_counts, min_count=1)
    rows = np.array([0, 3, 4, 9, len(geometry.positions) - 1])
    dense = window_distances(geometry.matrix(which), drift_counts, geometry.positions, which)(rows)
    own = window_distances(None, drift_counts, geometry.positions, which)(rows)
    np.testing.assert_allclose(own, dense, atol=1e-12)
