"""`geoanalyze track`: a series of real checkpoints (copies of the packaged MiniLM, one made worse on
purpose) scored step by step against the drift-words sample corpus, and the baseline gate for CI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import DRIFT_WORDS, invoke, linked_copy, ok, refused

CORPUS = ["--dataset", str(DRIFT_WORDS)]


def shuffled_copy(source: Path, target: Path, seed: int = 0) -> Path:
    """MiniLM with its position table's rows permuted: the same vectors, the positions' order lost."""
    from safetensors.numpy import load_file, save_file

    linked_copy(source, target)
    (target / "model.safetensors").unlink()
    tensors = load_file(str(source / "model.safetensors"))
    name = "embeddings.position_embeddings.weight"
    tensors[name] = tensors[name][np.random.default_rng(seed).permutation(tensors[name].shape[0])]
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


@pytest.fixture(scope="module")
def trainer_output(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    """A Trainer output folder: checkpoint-10, -100 and -1000, each with its trainer_state.json."""
    folder = tmp_path_factory.mktemp("trainer") / "out"
    for step in (1000, 10, 100):
        checkpoint = linked_copy(minilm_path, folder / f"checkpoint-{step}")
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return folder


@pytest.fixture(scope="module")
def worse(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    return shuffled_copy(minilm_path, tmp_path_factory.mktemp("worse") / "shuffled")


def test_a_trainer_folder_is_scored_in_step_order(trainer_output: Path, tmp_path: Path) -> None:
    run = ok(invoke(["track", trainer_output, *CORPUS, "-f", "json", "--plot", "track.png"], cwd=tmp_path))
    document = json.loads(run.stdout)
    records = document["records"]
    assert [r["step"] for r in records] == [10, 100, 1000]
    assert all(r["error"] is None for r in records)
    first = records[0]["position"]
    assert set(first["categories"]) == {"shape", "order", "local_order", "lag", "separation"}
    assert first["categories"]["order"] == "better"  # MiniLM's table carries the corpus's position order
    # the same weights at every step, the same shuffles: the same scores and categories
    assert all(r["position"] == first for r in records)
    assert (tmp_path / "track.png").read_bytes()[:4] == b"\x89PNG"
    assert document["figure"] == "track.png"


def test_the_figure_has_every_score_against_step_on_a_log_axis_with_the_null_band(
    trainer_output: Path, tmp_path: Path
) -> None:
    from geoanalyze.analysis import StressOptions
    from geoanalyze.tracking import find_series, track
    from geoanalyze.tracking.figures import draw_track

    result = track(find_series([str(trainer_output)]), StressOptions(str(DRIFT_WORDS), layers="none"))
    figure = draw_track(result, tmp_path / "f.png")
    axes = figure.axes
    assert [axis.get_title() for axis in axes] == ["scaled", "violation", "anchored", "lag viol.", "rel. sep."]
    violation = axes[1]
    assert violation.get_xscale() == "log"  # steps 10 .. 1000 span two decades
    (line,) = violation.get_lines()
    assert list(line.get_xdata()) == [10, 100, 1000]
    assert list(line.get_ydata()) == [r.position.observed["monotonicity_violation"] for r in result.records]
    assert not violation.patches  # no band where the test's statistic is not the score itself
    (band,) = axes[0].patches  # scaled stress: the first position row's shuffles' range, shaded
    low, high = result.band("scaled_stress")
    ys = [band.get_y(), band.get_y() + band.get_height()] if hasattr(band, "get_height") else band.get_xy()[:, 1]
    assert low < high
    assert np.allclose([min(ys), max(ys)], [low, high])
    page = result.to_markdown("f.png")
    assert "| step | checkpoint | scaled | violation | anchored | lag viol. | rel. sep. | null |" in page
    assert page.count("| ++++ |") == 3 and "![scores against step](f.png)" in page


def test_a_checkpoint_made_worse_fails_the_baseline_and_an_identical_one_passes(
    minilm_path: Path, worse: Path, tmp_path: Path
) -> None:
    same = linked_copy(minilm_path, tmp_path / "same")
    gate = ["--fail-if-worse", "order", "--fail-if-worse", "lag=0.01"]
    passed = ok(invoke(["track", "--baseline", minilm_path, same, *CORPUS, *gate, "-f", "json"], cwd=tmp_path))
    comparison = json.loads(passed.stdout)["comparison"]
    assert comparison["crossed"] == []
    assert all(entry["change"] == 0 for entry in comparison["scores"])
    failed = invoke(["track", "--baseline", minilm_path, worse, *CORPUS, *gate, "-f", "json"], cwd=tmp_path)
    assert failed.code == 1, str(failed)
    assert failed.errors == [failed.stderr.strip().splitlines()[-1]]
    assert "worse than the baseline" in failed.errors[0] and "violation" in failed.errors[0]
    comparison = json.loads(failed.stdout)["comparison"]
    assert comparison["crossed"] == ["monotonicity_violation", "lag_violation"]
    order = next(e for e in comparison["scores"] if e["score"] == "monotonicity_violation")
    assert order["candidate"] > 0.45 > order["baseline"]  # a shuffled table orders like chance
    assert order["beyond_null_spread"] and order["worse_by"] > order["tolerance"] == order["null_spread"]


def test_a_checkpoint_that_fails_to_load_is_a_row_and_the_others_are_scored(
    trainer_output: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "series"
    for checkpoint in trainer_output.iterdir():
        linked_copy(checkpoint, folder / checkpoint.name)
    (folder / "checkpoint-100" / "model.safetensors").unlink()
    (folder / "checkpoint-100" / "model.safetensors").write_bytes(b"not a safetensors file")
    run = invoke(["track", folder, *CORPUS, "-f", "json"], cwd=tmp_path)
    assert run.code == 1, str(run)
    records = json.loads(run.stdout)["records"]
    assert [r["step"] for r in records] == [10, 100, 1000]
    assert records[0]["position"] is not None and records[2]["position"] is not None
    assert records[1]["position"] is None and "model.safetensors" in records[1]["error"]
    assert "1 of 3 checkpoints could not be scored" in run.errors[0]


def test_checkpoints_of_different_models_are_refused_naming_the_first_that_differs(
    minilm_path: Path, tmp_path: Path
) -> None:
    linked_copy(minilm_path, tmp_path / "checkpoint-1")
    other = linked_copy(minilm_path, tmp_path / "checkpoint-2")
    (other / "config.json").unlink()
    config = json.loads((minilm_path / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 5}))
    run = invoke(["track", tmp_path / "checkpoint-1", other, *CORPUS], cwd=tmp_path)
    refused(run, "checkpoint-2 differs from", "layers", "5")


def test_a_series_without_steps_is_refused_unless_the_order_is_given(minilm_path: Path, tmp_path: Path) -> None:
    first, second = linked_copy(minilm_path, tmp_path / "base"), linked_copy(minilm_path, tmp_path / "tuned")
    refused(invoke(["track", first, second, *CORPUS], cwd=tmp_path), "cannot order", "--order given")
    run = ok(invoke(["track", first, second, *CORPUS, "--order", "given", "-f", "json"], cwd=tmp_path))
    assert [r["checkpoint"] for r in json.loads(run.stdout)["records"]] == [str(first), str(second)]


def test_hub_revisions_are_read_from_the_cache(minilm_path: Path, tmp_path: Path, monkeypatch) -> None:
    """--revisions: each revision's snapshot of one hub model, as the HF cache lays it out."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    repo = cache / "models--someone--tiny"
    for index, revision in enumerate(("step20", "step3")):
        commit = f"{index + 1:040x}"
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / revision).write_text(commit)
        linked_copy(minilm_path, repo / "snapshots" / commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    run = ok(invoke(["track", "someone/tiny", "--revisions", "step20,step3", *CORPUS, "-f", "json"], cwd=tmp_path))
    records = json.loads(run.stdout)["records"]
    assert [(r["step"], r["checkpoint"]) for r in records] == [(3, "someone/tiny@step3"), (20, "someone/tiny@step20")]
    assert all(r["position"] is not None for r in records)


@pytest.mark.slow
def test_layer_rows_come_from_one_cached_forward_pass_per_checkpoint(trainer_output: Path, tmp_path: Path) -> None:
    args = ["track", trainer_output / "checkpoint-10", *CORPUS, "--layers", "0,1", "--max-sequences", "40"]
    first = ok(invoke([*args, "-f", "json"], cwd=tmp_path))
    (record,) = json.loads(first.stdout)["records"]
    rows = {(row["layer"], row["projection"]) for row in record["layers"]}
    assert {(0, "hidden"), (1, "query"), (1, "key"), (1, "hidden"), (1, "P·W_Q")} <= rows
    assert all(set(row["categories"]) >= {"order", "lag"} for row in record["layers"])
    cache = Path(os.environ["GEOANALYZE_CACHE_DIR"]) / "centroids"
    entries = set(cache.iterdir())
    again = ok(invoke([*args, "-f", "json"], cwd=tmp_path))
    assert set(cache.iterdir()) == entries  # read from the cache, not computed again
    assert json.loads(again.stdout)["records"][0]["layers"] == record["layers"]


def test_bad_options_fail_before_any_work(minilm_path: Path, tmp_path: Path) -> None:
    refused(invoke(["track", minilm_path, *CORPUS, "--fail-if-worse", "order"], cwd=tmp_path), "--baseline")
    refused(invoke(["track", minilm_path, *CORPUS, "--order", "random"], cwd=tmp_path), "--order")
    refused(
        invoke(["track", "--baseline", minilm_path, minilm_path, *CORPUS, "--fail-if-worse", "x"], cwd=tmp_path), "x"
    )
    refused(invoke(["track", tmp_path, *CORPUS], cwd=tmp_path), "holds no checkpoint")
    refused(invoke(["track", minilm_path, *CORPUS, "--plot", "a.jpg"], cwd=tmp_path), ".png")
    (tmp_path / "a-file").write_text("")
    refused(invoke(["track", minilm_path, *CORPUS, "--plot-dir", "a-file"], cwd=tmp_path), "--plot-dir")
    (tmp_path / "a-file").unlink()
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_an_interrupted_series_keeps_the_forward_passes_it_finished(trainer_output: Path, tmp_path: Path) -> None:
    from geoanalyze.analysis import StressOptions
    from geoanalyze.tracking import find_series, track

    cache = tmp_path / "cache"
    options = StressOptions(str(DRIFT_WORDS), layers="1", max_sequences=24)
    members = find_series([str(trainer_output)])

    def interrupt(record: object) -> None:
        raise KeyboardInterrupt

    os.environ["GEOANALYZE_CACHE_DIR"], saved = str(cache), os.environ["GEOANALYZE_CACHE_DIR"]
    try:
        with pytest.raises(KeyboardInterrupt):
            track(members, options, on_record=interrupt)
        assert len(list((cache / "centroids").iterdir())) == 1  # the first checkpoint's pass, kept
        result = track(members, options)
        assert len(list((cache / "centroids").iterdir())) == 3
    finally:
        os.environ["GEOANALYZE_CACHE_DIR"] = saved
    assert all(record.layers for record in result.records)


def test_a_checkpoint_with_another_tokenizer_is_refused(minilm_path: Path, tmp_path: Path) -> None:
    """One token renamed in tokenizer.json and vocab.txt: another vocabulary, another corpus geometry."""
    linked_copy(minilm_path, tmp_path / "checkpoint-1")
    other = linked_copy(minilm_path, tmp_path / "checkpoint-2")
    for name in ("tokenizer.json", "vocab.txt"):
        text = (minilm_path / name).read_text(encoding="utf-8")
        (other / name).unlink()
        (other / name).write_text(text.replace("[unused1]", "[renamed]"), encoding="utf-8")
    run = invoke(["track", tmp_path / "checkpoint-1", other, *CORPUS], cwd=tmp_path)
    refused(run, "checkpoint-2 differs from", "tokenizer vocabulary")


def test_two_series_side_by_side_in_one_table_and_one_figure(
    trainer_output: Path, minilm_path: Path, tmp_path: Path
) -> None:
    """Two runs (one with its positions shuffled at every step) compared as two series (--series):
    one JSON, one table with a series column, one figure with a line per series and row; without
    --series the shared steps are refused with advice that leads to this."""
    other = tmp_path / "shuffled-run"
    for step in (10, 100):
        checkpoint = shuffled_copy(minilm_path, other / f"checkpoint-{step}")
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    first, second = str(trainer_output), str(other)
    refused(invoke(["track", first, second, *CORPUS], cwd=tmp_path), "both step 10", "--series")
    args = ["track", first, second, "--series", *CORPUS, "--null-draws", "2"]
    run = ok(invoke([*args, "-f", "json", "--plot", "both.png"], cwd=tmp_path))
    records = json.loads(run.stdout)["records"]
    assert [(r["series"], r["step"]) for r in records] == [
        (first, 10),
        (first, 100),
        (first, 1000),
        (second, 10),
        (second, 100),
    ]
    shuffled = [r["position"]["monotonicity_violation"] for r in records if r["series"] == second]
    original = [r["position"]["monotonicity_violation"] for r in records if r["series"] == first]
    assert min(shuffled) > max(original)  # each series its own rows, not one mixed series

    from geoanalyze.analysis import StressOptions
    from geoanalyze.tracking import find_several, track
    from geoanalyze.tracking.figures import draw_track

    result = track(find_several([first, second]), StressOptions(str(DRIFT_WORDS), layers="none", null_draws=2))
    figure = draw_track(result, tmp_path / "f.png")
    labels = [line.get_label() for line in figure.axes[1].lines]
    assert labels == [f"{first}: position", f"{second}: position"]
    assert figure.axes[1].lines[0].get_color() != figure.axes[1].lines[1].get_color()
    assert f"{first} vs {second}" in figure.get_suptitle()

    markdown = ok(invoke([*args, "-f", "markdown"], cwd=tmp_path)).stdout
    assert "2 series" in markdown and "| series | step |" in markdown
    refused(invoke(["track", first, "--series", *CORPUS], cwd=tmp_path), "--series compares two or more sources")


@pytest.mark.integration
def test_track_and_its_baseline_say_which_aspects_the_corpus_cannot_rank(
    minilm_path: Path, shared_data: Path, tmp_path: Path
) -> None:
    """SST-2 validation's naive distance is mostly noise (0.76): the D-based aspects cannot rank tables there.
    stress says so, and so do track's table, its Markdown and the --baseline comparison (issue 31, point 4)."""
    same = linked_copy(minilm_path, tmp_path / "same")
    corpus = ["--dataset", "sst2", "--split", "validation", "--data-dir", str(shared_data)]
    table = ok(invoke(["track", "--baseline", minilm_path, same, *corpus], cwd=tmp_path)).stdout
    flat = " ".join(table.split())
    for words in ("shape (scaled)", "order (violation)", "local order (anchored)"):
        assert f"cannot decide: {words} cannot separate encodings on this corpus" in flat
    assert "its change says nothing about which table is better" in flat
    document = json.loads(ok(invoke(["track", "--baseline", minilm_path, same, *corpus, "-f", "json"], cwd=tmp_path)).stdout)
    assert set(document["comparison"]["not_ranked"]) == {
        "scaled_stress",
        "monotonicity_violation",
        "anchored_monotonicity_violation",
    }
    markdown = ok(invoke(["track", minilm_path, same, "--order", "given", *corpus, "-f", "markdown"], cwd=tmp_path)).stdout
    assert markdown.count("**Cannot decide:**") == 3
    # on drift-words every aspect is ranked: no such line
    assert "cannot decide" not in ok(invoke(["track", "--baseline", minilm_path, same, *CORPUS], cwd=tmp_path)).stdout


def test_a_separation_gate_without_a_tolerance_is_refused_in_one_line(minilm_path: Path, tmp_path: Path) -> None:
    """Relative separation has no shuffle test, so no null spread to default to: --fail-if-worse separation
    needs a tolerance (exit 2, one line, before any corpus work); with one it gates as the others do."""
    same = linked_copy(minilm_path, tmp_path / "same")
    refused = invoke(["track", "--baseline", minilm_path, same, *CORPUS, "--fail-if-worse", "separation"], cwd=tmp_path)
    assert refused.code == 2, refused
    assert refused.errors == [
        "error: --fail-if-worse separation: relative separation has no shuffle spread to default to; "
        "give a tolerance, e.g. separation=0.05"
    ]
    gated = ["--fail-if-worse", "separation=0.05", "-f", "json"]
    document = json.loads(ok(invoke(["track", "--baseline", minilm_path, same, *CORPUS, *gated], cwd=tmp_path)).stdout)
    (change,) = [c for c in document["comparison"]["scores"] if c["score"] == "relative_separation"]
    assert change["null_spread"] is None and change["tolerance"] == 0.05 and change["failed"] is False
