"""A query, key or hidden row flat on the positions it is scored on is left out with a note, never
scored as NaN: the forward pass drops rows flat on every position it reached (checkpoints.hidden.flat_row),
and analysis.scored_flat catches a row that is flat only on the scored subset."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from geoanalyze.analysis import scored_flat
from geoanalyze.geometry.scores import monotonicity_violation


def untied(n: int) -> np.ndarray:
    """Target distances with no two pairs tied: |i - j| + a distinct small offset per pair."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    offsets = np.zeros((n, n))
    upper = np.triu_indices(n, 1)
    offsets[upper] = np.arange(len(upper[0])) * 1e-3
    d = np.abs(i - j) + offsets + offsets.T
    np.fill_diagonal(d, 0.0)
    return d


def test_a_row_flat_only_on_the_scored_positions_is_left_out_with_a_note() -> None:
    rng = np.random.default_rng(0)
    reached = np.zeros((12, 8))
    reached[8:] = rng.normal(size=(4, 8))  # not flat over every reached position
    notes: list[str] = []
    assert scored_flat(reached[:6], "layer 2's key vectors", notes)  # the scored six are all 0
    assert notes == [
        "layer 2's key vectors are 0 at every position (of the 6 scored), so no pair of positions is ordered: no row"
    ]
    assert not scored_flat(reached, "layer 2's key vectors", notes) and len(notes) == 1
    assert np.isnan(monotonicity_violation(reached[:6], untied(6)))  # what the row would have scored


def test_one_vector_everywhere_is_flat_and_named_so() -> None:
    notes: list[str] = []
    assert scored_flat(np.tile([1.0, -2.0, 3.0], (5, 1)), "layer 1's hidden vectors", notes)
    assert "one and the same vector" in notes[0]


@settings(max_examples=120, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(3, 7), st.integers(1, 3)), elements=st.sampled_from([0.0, 1.0, -1.0, 2.5]))
)
def test_left_out_exactly_where_the_score_would_be_undefined(table: np.ndarray) -> None:
    """The law: scored_flat holds exactly where the monotonicity violation against untied targets is NaN."""
    flat = scored_flat(table, "a row", [])
    assert flat == bool(np.isnan(monotonicity_violation(table, untied(table.shape[0]))))
