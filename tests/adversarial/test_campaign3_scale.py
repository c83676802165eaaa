"""Campaign 3, corpora at the edges of size and outputs beside their inputs: one text, texts of
one token, a vocabulary of one word, every text longer than --max-length, 200,000 tiny texts in
bounded time; a figure folder that is also the result's folder, outputs inside a folder corpus;
a training corpus given to the task that reads none (``train --task order --dataset x``)."""

from __future__ import annotations

import json
import time

import pytest

from .harness import Sandbox

WS = ["-t", "whitespace"]
QUICK = ["--compare", "", "--null-draws", "2"]


def test_one_text_is_one_sequence(sandbox: Sandbox) -> None:
    sandbox.write("one.txt", "a b c d e f g h\n")
    report = json.loads(sandbox.accepted("marginals", "one.txt", *WS, "-f", "json").stdout)
    assert report["n_sequences"] == 1 and report["totals"] == [1] * 8


@pytest.mark.parametrize("command", ["distances", "stress"])
def test_one_text_is_too_few_with_the_count_that_would_do(sandbox: Sandbox, command: str) -> None:
    sandbox.write("one.txt", "a b c d e f g h\n")
    args = ["rope:d=16", "--dataset", "one.txt", *WS, *QUICK] if command == "stress" else ["one.txt", *WS]
    sandbox.refused(command, *args, words=("--min-count to 1",))


@pytest.mark.parametrize("command", ["distances", "mds", "stress"])
def test_texts_of_one_token_hold_one_position(sandbox: Sandbox, command: str) -> None:
    sandbox.write("tok.txt", "a\n" * 300)
    args = ["rope:d=16", "--dataset", "tok.txt", *WS, *QUICK] if command == "stress" else ["tok.txt", *WS]
    sandbox.refused(command, *args, words=("1 position", "need 2"))


def test_a_vocabulary_of_one_word_has_zero_distances(sandbox: Sandbox) -> None:
    sandbox.write("v1.txt", "w w w w w w w w\n" * 300)
    report = json.loads(sandbox.accepted("distances", "v1.txt", *WS, "-f", "json").stdout)
    assert report["positions"] == list(range(8))
    assert json.loads(sandbox.accepted("marginals", "v1.txt", *WS, "-f", "json").stdout)["vocab_size"] >= 1


def test_mds_of_a_vocabulary_of_one_word_says_the_distances_are_zero(sandbox: Sandbox) -> None:
    sandbox.write("v1.txt", "w w w w w w w w\n" * 300)
    sandbox.refused("mds", "v1.txt", *WS, words=("all zero",))


def test_stress_of_a_vocabulary_of_one_word_says_undefined(sandbox: Sandbox) -> None:
    sandbox.write("v1.txt", "w w w w w w w w\n" * 300)
    sandbox.refused("stress", "rope:d=16", "--dataset", "v1.txt", *WS, *QUICK, words=("0", "undefined"))


@pytest.mark.parametrize("length", [4, 16])
def test_every_text_longer_than_max_length_is_cut_there(sandbox: Sandbox, length: int) -> None:
    sandbox.copy_sample("drift.txt")
    report = json.loads(sandbox.accepted("marginals", "drift.txt", *WS, "--max-length", length, "-f", "json").stdout)
    assert report["n_positions"] == length and report["totals"] == [2000] * length


def test_200000_tiny_texts_count_in_bounded_time(sandbox: Sandbox) -> None:
    sandbox.write("many.txt", "a b\n" * 200_000)
    start = time.perf_counter()
    report = json.loads(sandbox.accepted("marginals", "many.txt", *WS, "-f", "json").stdout)
    assert report["n_sequences"] == 200_000 and report["totals"] == [200_000, 200_000]
    assert time.perf_counter() - start < 30


@pytest.mark.slow  # draws four figures (8 s)
def test_figures_in_the_folder_of_the_result(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.write("out/keep.txt", "mine\n")
    sandbox.accepted(
        "stress", "rope:d=16", "--dataset", "drift.txt", *WS, *QUICK, "-o", "out/s.json", "--plot-dir", "out"
    )
    names = sorted(p.name for p in sandbox.path("out").iterdir())
    assert "s.json" in names and "keep.txt" in names and any(n.endswith(".png") for n in names)
    assert sandbox.path("out/keep.txt").read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize(
    "args",
    [
        ["marginals", "corp", *WS, "-o", "corp/c.safetensors"],
        ["stress", "rope:d=16", "--dataset", "corp", *WS, *QUICK, "-o", "corp/s.json"],
        ["stress", "rope:d=16", "--dataset", "corp", *WS, *QUICK, "--plot-dir", "corp/plots"],
        ["report", "rope:d=16", "--dataset", "corp", *WS, *QUICK, "-o", "corp/r.md"],
        ["distances", "corp", *WS, "--heatmap", "corp/h.png"],
    ],
    ids=["marginals", "stress-output", "stress-plot-dir", "report", "distances-heatmap"],
)
def test_an_output_inside_a_folder_corpus_is_refused(sandbox: Sandbox, args: list[str]) -> None:
    """Written there, the next run of the folder would read it (a .txt) or the folder changes."""
    sandbox.copy_sample("drift.txt", "corp/a.txt")
    sandbox.refused(*args, words=("corp", "inside"))


@pytest.mark.parametrize("how", [["--dataset", "drift.txt"], ["--set", "dataset=drift.txt"]], ids=["option", "set"])
def test_a_dataset_for_a_task_that_reads_none_is_refused(sandbox: Sandbox, how: list[str]) -> None:
    """Once ignored (exit 0): the run looked like one on drift.txt."""
    sandbox.copy_sample("drift.txt")
    sandbox.refused("train", "--task", "order", "--steps", "1", *how, "-o", "run", words=("--dataset", "task order"))


@pytest.mark.slow  # one training step of mlm (9 s)
def test_a_dataset_for_a_task_that_reads_it_still_trains(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.accepted(
        "train",
        "-p",
        "smoke",
        "--task",
        "mlm",
        "--dataset",
        "drift.txt",
        "--steps",
        "1",
        "--set",
        "tokenizer=whitespace",
        "--eval-split",
        "none",
        "-o",
        "run",
    )
    assert sandbox.path("run/metrics.jsonl").is_file()
