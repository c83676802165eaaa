"""Verdicts that say only what the data support: every score against its null, as a user types it.

- `stress random:d=384` on drift-words is indistinguishable from random in every aspect, and
  `sinusoidal:d=384` is better in shape and order (the corpus drifts steadily with position);
- the real MiniLM on SST-2 is not better than random in shape, and the table says so in words,
  with the line that shape cannot separate encodings on this corpus;
- `--fail-if ASPECT=CATEGORY` gates on the categories; bad values are exit 2 naming the valid ones;
- a layer summary ranks by scale-free scores only;
- `report` gives a target the numbers `stress` gives it on the same inputs, at the width it states.
"""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from helpers import invoke

DRIFT_WORDS = str(helpers.DRIFT_WORDS)
ASPECTS = ("shape", "order", "local_order", "lag", "separation")


def run_json(*args: str, cwd: Path, code: int = 0) -> dict:
    run = invoke([*args, "-f", "json"], cwd=cwd)
    assert run.code == code, run
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def random_384(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_json("stress", "random:d=384", "--dataset", DRIFT_WORDS, cwd=tmp_path_factory.mktemp("r"))


@pytest.fixture(scope="module")
def sinusoidal_384(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_json("stress", "sinusoidal:d=384", "--dataset", DRIFT_WORDS, cwd=tmp_path_factory.mktemp("s"))


def test_a_random_table_is_indistinguishable_from_random(random_384: dict) -> None:
    verdict = random_384["verdict"]
    assert verdict["shape"] == "indistinguishable"
    assert all(verdict[aspect] == "indistinguishable" for aspect in ASPECTS), verdict
    assert verdict["null_draws"] == 39 and verdict["alpha"] == 0.05
    assert verdict["sentence"] == random_384["summary"]["verdict"]
    assert verdict["sentence"].endswith(
        "no better than random in shape (indistinguishable), order (indistinguishable), local order "
        "(indistinguishable), lag (indistinguishable) and separation (indistinguishable)"
    )


def test_sinusoidal_is_better_in_shape_and_order_on_a_drifting_corpus(sinusoidal_384: dict) -> None:
    verdict = sinusoidal_384["verdict"]
    assert verdict["shape"] == "better" and verdict["order"] == "better" and verdict["lag"] == "better"
    assert verdict["not_ranked"] == []
    target = sinusoidal_384["scores"]["sinusoidal:d=384"]
    null = target["null"]["scaled_stress"]
    # better than every one of the 39 draws, with the rank and the effect size to say by how much
    assert null["rank"] == 1 and null["p_better"] == pytest.approx(1 / 40) and null["effect"] > 0
    assert target["scaled_stress"] < null["low"]
    assert set(target["categories"]) == set(ASPECTS)
    discriminability = sinusoidal_384["discriminability"]
    assert all(entry["discriminates"] for entry in discriminability["aspects"].values())
    # every table of the same width is held against the same 39 random tables
    same_width = [s["null"]["scaled_stress"] for s in sinusoidal_384["scores"].values() if s["dim"] == 384]
    assert len({(n["mean"], n["sd"]) for n in same_width}) == 1


@pytest.fixture(scope="module")
def minilm_sst2(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path, shared_data: Path) -> dict:
    cwd = tmp_path_factory.mktemp("m")
    args = ["stress", str(minilm_path), "--dataset", "sst2", "--data-dir", str(shared_data), "--layers", "none"]
    table = invoke(args, cwd=cwd)
    assert table.code == 0, table
    return {"json": run_json(*args, cwd=cwd), "table": table.stdout, "args": args, "cwd": cwd}


@pytest.mark.integration
def test_minilm_on_sst2_is_not_better_than_random_in_shape_and_says_so(minilm_sst2: dict) -> None:
    document, table = minilm_sst2["json"], " ".join(minilm_sst2["table"].split())
    assert document["verdict"]["shape"] != "better"
    assert document["verdict"]["shape"] == "worse"  # 0.221 against random tables near 0.055
    assert document["verdict"]["order"] == "better"
    assert "no better than random in shape (worse)" in table
    # sinusoidal is as good as random in shape on SST-2: the corpus cannot rank shapes, and says so
    assert document["scores"]["sinusoidal"]["categories"]["shape"] == "indistinguishable"
    shape = document["discriminability"]["aspects"]["shape"]
    assert shape["discriminates"] is False and "sinusoidal" in shape["reason"]
    assert document["verdict"]["not_ranked"] == ["shape"]
    assert "cannot decide: shape (scaled) cannot separate encodings on this corpus" in table
    assert "best standard encoding" not in table  # no ranking on a score that cannot separate encodings
    assert document["summary"]["limits"] and document["summary"]["limits"][0].startswith("shape (scaled)")


@pytest.mark.integration
def test_fail_if_gates_on_the_category(minilm_sst2: dict) -> None:
    args, cwd = minilm_sst2["args"], minilm_sst2["cwd"]
    failed = invoke([*args, "--fail-if", "shape=not-better"], cwd=cwd)
    assert failed.code == 1, failed
    assert failed.errors == ["error: threshold crossed: shape is worse than random"]
    assert "gate failed: shape is worse than random" in failed.stdout
    passed = invoke([*args, "--fail-if", "order=not-better", "-f", "json"], cwd=cwd)
    assert passed.code == 0, passed
    assert json.loads(passed.stdout)["gate"] == {
        "thresholds": {},
        "conditions": {"order": "not-better"},
        "crossed": [],
        "passed": True,
    }


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        (
            ["--fail-if", "shapes=worse"],
            "--fail-if: unknown aspect 'shapes'; choose one of shape, order, local_order, lag, separation",
        ),
        (
            ["--fail-if", "shape=bad"],
            "unknown category 'bad'; choose one of better, indistinguishable, worse, not-better, not-worse",
        ),
        (["--fail-if", "shape"], "write ASPECT=CATEGORY, e.g. shape=worse"),
        (["--fail-if", "shape=worse", "--fail-if", "shape=better"], "--fail-if shape is given twice"),
        (
            ["--fail-if", "order=worse", "--null-draws", "8"],
            "--fail-if needs at least 39 null draws to decide a category (the two-sided 5% rank test), got "
            "--null-draws 8; use --null-draws 39 or more",
        ),
    ],
)
def test_bad_fail_if_is_one_line_and_exit_2(tmp_path: Path, gate: list[str], message: str) -> None:
    run = invoke(["stress", "rope:d=16", "--dataset", DRIFT_WORDS, *gate], cwd=tmp_path)
    assert run.code == 2, run
    assert len(run.errors) == 1 and message in run.errors[0], run
    assert list(tmp_path.iterdir()) == []


def test_fail_if_a_random_table_is_not_better(tmp_path: Path) -> None:
    run = invoke(["stress", "random:d=64", "--dataset", DRIFT_WORDS, "--fail-if", "order=not-better"], cwd=tmp_path)
    assert run.code == 1, run
    assert run.errors == ["error: threshold crossed: order is indistinguishable from random"]
    fine = invoke(["stress", "rope:d=64", "--dataset", DRIFT_WORDS, "--fail-if", "order=not-better"], cwd=tmp_path)
    assert fine.code == 0, fine
    assert "gate passed: fail if order not-better" in fine.stdout


def test_too_few_draws_decide_nothing_and_say_so(tmp_path: Path) -> None:
    document = run_json("stress", "rope:d=16", "--dataset", DRIFT_WORDS, "--null-draws", "8", cwd=tmp_path)
    assert {document["verdict"][aspect] for aspect in ASPECTS} == {"undecided"}
    assert document["verdict"]["sentence"].endswith(
        "with 8 null draws no aspect can be told from random (the rank test needs at least 39: --null-draws 39)"
    )


@pytest.mark.integration
def test_layer_summaries_rank_by_scale_free_scores_only(minilm_path: Path, tmp_path: Path) -> None:
    args = ["stress", str(minilm_path), "--dataset", DRIFT_WORDS, "--layers", "0,1", "--max-sequences", "64"]
    run = invoke(args, cwd=tmp_path)
    assert run.code == 0, run
    summaries = [line for line in run.stdout.splitlines() if "lowest scaled stress at layer" in line]
    assert summaries and not any("stress peaks" in line for line in run.stdout.splitlines())
    # in table order, not ASCII order
    assert [line.split(":")[0] for line in summaries] == ["P·W_Q", "P·W_K", "query", "key", "hidden"]
    document = run_json(*args, cwd=tmp_path)
    for row in document["layers"]:
        assert set(row["categories"]) == set(ASPECTS)
        assert row["null"]["scaled_stress"]["category"] == row["categories"]["shape"]
    assert "better_layers" in document["peaks"]["hidden"]


@pytest.mark.integration
def test_report_gives_a_target_the_numbers_stress_gives_it(minilm_path: Path, tmp_path: Path) -> None:
    """A 64-wide table beside a 384-wide checkpoint: report scores it (and its comparisons) at 64, as stress does."""
    import numpy as np

    table = tmp_path / "table.npy"
    np.save(table, np.random.default_rng(0).standard_normal((64, 64)))
    spec = f"file:{table}"
    alone = run_json("stress", spec, "--dataset", DRIFT_WORDS, "--tokenizer", str(minilm_path), cwd=tmp_path)
    run = invoke(
        ["report", str(minilm_path), spec, "--dataset", DRIFT_WORDS, "--layers", "none", "-o", "r.md", "-f", "json"],
        cwd=tmp_path,
    )
    assert run.code == 0, run
    in_report = json.loads(run.stdout)["targets"][1]
    assert in_report["width"] == alone["width"] == 64
    assert in_report["scores"] == alone["scores"]
    assert in_report["verdict"] == alone["verdict"]
    assert "compared width (64)" in in_report["summary"]["legend"][-1]


def test_the_null_figure_draws_each_score_in_its_category(tmp_path: Path) -> None:
    """null.png, read through matplotlib's objects: one panel per aspect, each row's null range as a bar and
    its score as a marker whose shape names the category (distinct per category)."""
    import geoanalyze as ga
    from geoanalyze.geometry.null import ASPECTS as SCORE_OF
    from geoanalyze.report.figures import CATEGORY_STYLE, null_figure

    result = ga.score("rope:d=32", dataset=DRIFT_WORDS, compare=("random",))
    scores = {name: table.to_dict() for name, table in result.scores.items()}  # as the JSON holds them
    figure = null_figure(scores, SCORE_OF, tmp_path / "null.png", not_ranked={"shape": "flat"})
    assert (tmp_path / "null.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    axes = figure.axes
    assert [axis.get_title() for axis in axes] == [
        "shape\n(this corpus cannot rank it)",
        "order",
        "local order",
        "lag",
        "separation",
    ]
    assert len({marker for marker, _ in CATEGORY_STYLE.values()}) == len(CATEGORY_STYLE)
    for axis, (aspect, key) in zip(axes, SCORE_OF.items(), strict=True):
        points = [line for line in axis.get_lines() if line.get_linestyle() == "None"]
        bars = [line for line in axis.get_lines() if line.get_linestyle() != "None"]
        assert len(points) == len(bars) == 2  # rope:d=32 and random
        for line, name in zip(points, scores, strict=True):
            entry = scores[name]
            assert line.get_xdata()[0] == entry[key]
            assert line.get_marker() == CATEGORY_STYLE[entry["categories"][aspect]][0]
        for line, name in zip(bars, scores, strict=True):
            null = scores[name]["null"][key]
            assert list(line.get_xdata()) == [null["low"], null["high"]]
