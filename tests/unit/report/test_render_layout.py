"""The terminal layout of result tables: one style, no trailing spaces, score tables that fit.

Laws held for any table of scores (hypothesis): laid out in a width, no line is wider, no line ends
in a space, and reading the cells back (columns two or more spaces apart) gives every value of
every row exactly where it was, one row per encoding or transposed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import rule_tables
from hypothesis import given, settings
from hypothesis import strategies as st

from geoanalyze.report.render import _rstrip, grid_table, key_value_table, rendered
from geoanalyze.report.stress import fitted_tables, layout_width
from geoanalyze.results import display_path, fmt, shown_score

LABELS = ["d", "scaled", "violation", "anchored", "lag viol.", "rel. sep.", "stress", "null"]


def read_back(text: str) -> dict[str, list[str]]:
    """name -> its cells, from the tables in ``text`` (wide or transposed, in one or more parts)."""
    found: dict[str, list[str]] = {}
    for header, *body in rule_tables(text):
        if header[0] == "encoding":
            found.update({row[0]: row[1:] for row in body})
        else:
            for j, name in enumerate(header[1:], start=1):
                found[name] = [row[j] for row in body]
    return found


scores = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.floats(min_value=0, max_value=1e-10),
    st.none(),
)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz:=,[]/0123456789", min_size=1, max_size=20).filter(
    lambda name: name.strip() == name
)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            names, st.integers(1, 4096), st.lists(scores, min_size=6, max_size=6), st.sampled_from(["+-=?+", "====="])
        ),
        min_size=1,
        max_size=12,
        unique_by=lambda row: row[0],
    ),
    width=st.integers(min_value=40, max_value=200),
)
def test_a_score_table_fits_any_width_and_keeps_every_cell(rows: list, width: int) -> None:
    table = [[name, d, *[shown_score(v) for v in values], null] for name, d, values, null in rows]
    text = rendered(*fitted_tables("scores", ["encoding", *LABELS], table, width), width=width)
    for line in text.splitlines():
        assert len(line) <= width, (width, line)
        assert line == line.rstrip()
    expected = {str(row[0]): [fmt(cell) for cell in row[1:]] for row in table}
    assert read_back(text) == expected


def test_the_wide_layout_is_kept_when_it_fits() -> None:
    table = [["sinusoidal", 384, 0.08012, 0.09528, 0.04678, 0.002467, 0.2765, 365.2, "++++-"]]
    header = ["encoding", *LABELS]
    wide = layout_width(header, table)
    assert "encoding" in rendered(*fitted_tables("t", header, table, wide), width=wide).splitlines()[1]
    narrow = rendered(*fitted_tables("t", header, table, wide - 1), width=wide - 1)
    assert narrow.splitlines()[1].split() == ["score", "sinusoidal"]


def test_one_style_text_left_numbers_right_no_trailing_space() -> None:
    text = rendered(grid_table("things", ["name", "what", "n"], [["a", "short", 1], ["bb", "a longer text", 100]]))
    lines = text.splitlines()
    assert lines[0] == "things"
    assert lines[1] == "name  what             n"
    assert set(lines[2]) == {"─"}
    assert lines[3:] == ["a     short            1", "bb    a longer text  100"]
    kv = rendered(key_value_table("about", [("corpus", "x.txt"), ("positions kept", 50)]))
    assert kv.splitlines() == ["about", "corpus          x.txt", "positions kept  50"]


def test_trailing_spaces_go_and_style_codes_stay() -> None:
    assert _rstrip("abc   \n") == "abc\n"
    assert _rstrip("\x1b[1mabc\x1b[0m   \x1b[2m  \x1b[0m\n") == "\x1b[1mabc\x1b[0m\x1b[2m\x1b[0m\n"
    assert _rstrip("   \n") == "\n"
    assert _rstrip("a b") == "a b"


def test_a_long_title_folds_to_the_width_not_to_the_table() -> None:
    title = "stress of sentence-transformers/all-MiniLM-L6-v2 on drift-words.txt"
    text = rendered(key_value_table(title, [("d", 1)]), width=80)
    assert text.splitlines()[0] == title
    short = rendered(key_value_table(title, [("d", 1)]), width=40)
    assert all(len(line) <= 40 for line in short.splitlines())


@pytest.mark.parametrize(
    ("where", "shown"),
    [
        ("work/data/x.txt", "data/x.txt"),
        ("shared/data/x.txt", "../shared/data/x.txt"),
        ("a/b/c/d/x.txt", "b/c/d/x.txt"),
    ],
)
def test_paths_are_shown_from_the_working_directory(
    where: str, shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "a").mkdir()
    cwd = tmp_path / ("a" if where.startswith("a/") else "work")
    monkeypatch.chdir(cwd)
    assert display_path(tmp_path / where) == shown
    assert display_path(shown) == shown  # a relative path is shown as given


def test_a_path_far_from_the_working_directory_stays_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tmp_path / "1" / "2" / "3" / "4"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    target = str(tmp_path / "x" / "y.txt")
    shown = display_path(target)
    assert shown == target or shown.startswith("~/"), shown
    assert os.path.isabs(shown) or shown.startswith("~/")
