"""Verdicts that say only what the data support: every score against its null, as a user types it.

The null asks the user's question, "do these vectors carry position?": each table against shuffles
of which position each of its vectors belongs to, Holm-corrected over the run's tests.

- `stress random:d=384` on drift-words is indistinguishable from its shuffles in every tested
  aspect, and `sinusoidal:d=384` is better in shape, order and lag (the corpus drifts steadily with
  position); separation has no category (no shuffle changes it); the JSON names the null;
- the real MiniLM on SST-2 carries position in every tested aspect, and the table says so in words;
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
TESTED = ("shape", "order", "local_order", "lag")


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


def test_a_random_table_is_indistinguishable_from_its_shuffles(random_384: dict) -> None:
    verdict = random_384["verdict"]
    assert all(verdict[aspect] == "indistinguishable" for aspect in TESTED), verdict
    assert verdict["separation"] is None
    assert random_384["null"] == {
        "kind": "permutation",
        "draws": 999,
        "correction": "holm",
        "tests": 20,  # the target and sinusoidal, rope, alibi, mds (random at 384 is the target itself)
        "alpha": 0.05,
        "seed": 0,
    }
    assert verdict["null_draws"] == 999 and verdict["alpha"] == 0.05
    assert verdict["sentence"] == random_384["summary"]["verdict"]
    assert verdict["sentence"].endswith(
        "against 999 shuffles of its positions (Holm over 20 tests), it shows none in shape (indistinguishable), "
        "order (indistinguishable), local order (indistinguishable) and lag (indistinguishable)"
    )


def test_sinusoidal_is_better_in_shape_order_and_lag_on_a_drifting_corpus(sinusoidal_384: dict) -> None:
    verdict = sinusoidal_384["verdict"]
    assert verdict["shape"] == "better" and verdict["order"] == "better" and verdict["lag"] == "better"
    assert verdict["separation"] is None  # no better/worse from a null that cannot change it
    assert verdict["not_ranked"] == []
    target = sinusoidal_384["scores"]["sinusoidal:d=384"]
    null = target["null"]["scaled_stress"]
    # better than every one of the 999 shuffles: the smallest p they can give, and the test's statistic
    # is the scaled stress itself
    assert null["rank"] == 1 and null["p_better"] == pytest.approx(1 / 1000) and null["effect"] > 0
    assert null["observed"] == pytest.approx(target["scaled_stress"], abs=1e-12)
    assert target["scaled_stress"] < null["low"]
    assert null["p_adjusted"] <= 0.05 and null["category"] == "better"
    assert set(target["null"]) == {
        "scaled_stress",
        "monotonicity_violation",
        "anchored_monotonicity_violation",
        "lag_violation",
    }
    assert set(target["categories"]) == set(ASPECTS)
    discriminability = sinusoidal_384["discriminability"]
    assert all(entry["discriminates"] for entry in discriminability["aspects"].values())
    # every table is tested against shuffles of its own vectors: the random table's null differs from the target's
    random = sinusoidal_384["scores"]["random"]["null"]["scaled_stress"]
    assert (random["mean"], random["sd"]) != (null["mean"], null["sd"])


@pytest.fixture(scope="module")
def minilm_sst2(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path, shared_data: Path) -> dict:
    cwd = tmp_path_factory.mktemp("m")
    args = ["stress", str(minilm_path), "--dataset", "sst2", "--data-dir", str(shared_data), "--layers", "none"]
    table = invoke(args, cwd=cwd)
    assert table.code == 0, table
    return {"json": run_json(*args, cwd=cwd), "table": table.stdout, "args": args, "cwd": cwd}


@pytest.mark.integration
def test_minilm_on_sst2_carries_position_in_every_tested_aspect(minilm_sst2: dict) -> None:
    document, table = minilm_sst2["json"], " ".join(minilm_sst2["table"].split())
    assert {document["verdict"][aspect] for aspect in TESTED} == {"better"}
    assert "it carries position in shape, order, local order and lag (better than its shuffles)" in table
    # sinusoidal carries SST-2's position order too, so the corpus ranks every aspect
    assert document["scores"]["sinusoidal"]["categories"]["shape"] == "better"
    assert document["verdict"]["not_ranked"] == []
    assert "best standard encoding" in table
    # the random table is not told apart from its shuffles
    assert {document["scores"]["random"]["categories"][aspect] for aspect in TESTED} == {"indistinguishable"}


@pytest.mark.integration
def test_fail_if_gates_on_the_category(minilm_sst2: dict) -> None:
    args, cwd = minilm_sst2["args"], minilm_sst2["cwd"]
    failed = invoke([*args, "--fail-if", "shape=better"], cwd=cwd)
    assert failed.code == 1, failed
    assert failed.errors == ["error: threshold crossed: shape is better than its position shuffles"]
    assert "gate failed: shape is better than its position shuffles" in failed.stdout
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
            "--fail-if: unknown aspect 'shapes'; choose one of shape, order, local_order, lag",
        ),
        (
            ["--fail-if", "shape=bad"],
            "unknown category 'bad'; choose one of better, indistinguishable, worse, not-better, not-worse",
        ),
        (["--fail-if", "shape"], "write ASPECT=CATEGORY, e.g. shape=worse"),
        (["--fail-if", "shape=worse", "--fail-if", "shape=better"], "--fail-if shape is given twice"),
        (
            ["--fail-if", "order=worse", "--null-draws", "8"],
            "--fail-if needs the shuffles that can decide a category (at least 999, more for many rows), got "
            "--null-draws 8; omit --null-draws",
        ),
        (["--fail-if", "separation=worse"], "--fail-if: unknown aspect 'separation'; choose one of shape, order"),
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
    assert run.errors == ["error: threshold crossed: order is indistinguishable from its position shuffles"]
    fine = invoke(["stress", "rope:d=64", "--dataset", DRIFT_WORDS, "--fail-if", "order=not-better"], cwd=tmp_path)
    assert fine.code == 0, fine
    assert "gate passed: fail if order not-better" in fine.stdout


def test_too_few_draws_decide_nothing_and_say_so(tmp_path: Path) -> None:
    document = run_json("stress", "rope:d=16", "--dataset", DRIFT_WORDS, "--null-draws", "8", cwd=tmp_path)
    assert {document["verdict"][aspect] for aspect in TESTED} == {"undecided"}
    assert document["verdict"]["sentence"].endswith(
        "8 shuffles cannot decide any of the run's 20 tests at 5% after Holm (it needs 999): omit --null-draws"
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
        assert row["categories"]["separation"] is None
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
    """null.png, read through matplotlib's objects: one panel per tested aspect, each row's shuffles' range of
    scaled stress as a bar, and its score as a marker whose shape names the category (distinct per category)."""
    import geoanalyze as ga
    from geoanalyze.geometry.null import ASPECTS as SCORE_OF
    from geoanalyze.report.figures import CATEGORY_STYLE, null_figure

    result = ga.score("rope:d=32", dataset=DRIFT_WORDS, compare=("random",))
    scores = {name: table.to_dict() for name, table in result.scores.items()}  # as the JSON holds them
    tested = {aspect: key for aspect, key in SCORE_OF.items() if aspect != "separation"}
    figure = null_figure(scores, tested, tmp_path / "null.png", not_ranked={"shape": "flat"})
    assert (tmp_path / "null.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    axes = figure.axes
    assert [axis.get_title() for axis in axes] == [
        "shape\n(this corpus cannot rank it)",
        "order",
        "local order",
        "lag",
    ]
    assert len({marker for marker, _ in CATEGORY_STYLE.values()}) == len(CATEGORY_STYLE)
    for axis, (aspect, key) in zip(axes, tested.items(), strict=True):
        points = [line for line in axis.get_lines() if line.get_linestyle() == "None"]
        bars = [line for line in axis.get_lines() if line.get_linestyle() != "None"]
        # rope:d=32 and random; the shuffles' range only where the statistic is the score (scaled stress)
        assert len(points) == 2 and len(bars) == (2 if key == "scaled_stress" else 0)
        for line, name in zip(points, scores, strict=True):
            entry = scores[name]
            assert line.get_xdata()[0] == entry[key]
            assert line.get_marker() == CATEGORY_STYLE[entry["categories"][aspect]][0]
        for line, name in zip(bars, scores if bars else (), strict=True):
            null = scores[name]["null"][key]
            assert list(line.get_xdata()) == [null["low"], null["high"]]


def test_a_verdict_on_a_synthetic_corpus_says_so_beside_it(sinusoidal_384: dict, tmp_path: Path) -> None:
    """The first run scores a synthetic sample: the line after the verdict says the verdict is about it."""
    (caveat,) = sinusoidal_384["summary"]["caveats"]
    assert caveat.startswith("drift-words.txt is a synthetic corpus whose true geometry is known")
    table = invoke(["stress", "rope:d=16", "--dataset", DRIFT_WORDS], cwd=tmp_path)
    lines = table.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verdict:"))
    after = next(i for i, line in enumerate(lines) if line.startswith("about:"))
    assert after > verdict and all(line.startswith("  ") for line in lines[verdict + 1 : after])
    markdown = invoke(["stress", "rope:d=16", "--dataset", DRIFT_WORDS, "-f", "markdown"], cwd=tmp_path).stdout
    assert "**About the corpus:** drift-words.txt is a synthetic corpus" in markdown


@pytest.mark.integration
def test_a_verdict_on_a_real_corpus_has_no_synthetic_caveat(minilm_sst2: dict) -> None:
    assert minilm_sst2["json"]["summary"]["caveats"] == []
    assert "about:" not in minilm_sst2["table"]


def test_layers_png_says_when_the_corpus_cannot_rank_shapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_figures hands the discriminability's decision to layers.png: its scaled-stress panel says the
    corpus cannot rank shapes exactly when the result says so (issue 31, point 4). The real figure is drawn;
    a pass-through records its panel titles."""
    from dataclasses import replace

    import geoanalyze as ga
    from geoanalyze.report import figures
    from geoanalyze.report.stress import write_figures
    from geoanalyze.results import AspectDecision, Discriminability

    drawn: list[list[str]] = []
    real = figures.layer_figure

    def recording(*args: object, **kwargs: object) -> object:
        figure = real(*args, **kwargs)  # type: ignore[arg-type]
        drawn.append([axis.get_title() for axis in figure.axes])
        return figure

    monkeypatch.setattr(figures, "layer_figure", recording)
    result = ga.score(
        "sentence-transformers/all-MiniLM-L6-v2", dataset=DRIFT_WORDS, layers="1", max_sequences=32, compare=()
    )
    assert result.discriminability.aspects["shape"].discriminates is True
    aspects = {**result.discriminability.aspects, "shape": AspectDecision(False, "the naive distance is noise")}
    flat = replace(result, discriminability=Discriminability(result.discriminability.probe, aspects))
    write_figures(result, tmp_path / "ranked")
    write_figures(flat, tmp_path / "flat")
    assert (tmp_path / "flat" / "layers.png").read_bytes()[:4] == b"\x89PNG"
    ranked, not_ranked = drawn
    assert ranked[1] == "scaled stress per layer"
    assert not_ranked[1] == "scaled stress per layer\n(this corpus cannot rank shapes: see the verdict)"
