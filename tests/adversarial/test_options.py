"""Careless option values on every command: refused in one line naming the option, before any work.

Each row is a command line a user could type (a typo, an unset variable, a value out of range,
a value of the wrong type); it must exit 2 with one ``error:`` line that names the option (or
the value), leave no file behind and change no input.
"""

from __future__ import annotations

import pytest

from .harness import Sandbox

CORPUS = ["drift.txt", "-t", "whitespace"]
STRESS = ["stress", "rope:d=16", "--dataset", "drift.txt", "-t", "whitespace", "--compare", "", "--null-draws", "2"]

CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    # stress
    ("stress-limit-zero", [*STRESS, "--limit", "0"], ("--limit",)),
    ("stress-limit-negative", [*STRESS, "--limit", "-1"], ("--limit",)),
    ("stress-limit-word", [*STRESS, "--limit", "many"], ("--limit",)),
    ("stress-max-length-zero", [*STRESS, "--max-length", "0"], ("--max-length",)),
    ("stress-max-length-float", [*STRESS, "--max-length", "1.5"], ("--max-length",)),
    ("stress-min-count-zero", [*STRESS, "--min-count", "0"], ("--min-count",)),
    ("stress-distance-typo", [*STRESS, "--distance", "corected"], ("--estimate", "corected")),
    ("stress-layers-word", [*STRESS, "--layers", "some"], ("--layers",)),
    ("stress-layers-negative", [*STRESS, "--layers", "-1"], ("--layers",)),
    ("stress-compare-unknown", [*STRESS[:-4], "--compare", "bogus", "--null-draws", "2"], ("bogus",)),
    ("stress-width-zero", [*STRESS, "--width", "0"], ("--width",)),
    ("stress-width-word", [*STRESS, "--width", "wide"], ("--width",)),
    ("stress-null-draws-one", [*STRESS[:-2], "--null-draws", "1"], ("--null-draws",)),
    ("stress-null-draws-huge", [*STRESS[:-2], "--null-draws", "1000000000"], ("--null-draws",)),
    ("stress-bootstrap-huge", [*STRESS, "--bootstrap", "1000000000"], ("--bootstrap",)),
    ("stress-max-sequences-zero", [*STRESS, "--max-sequences", "0"], ("--max-sequences",)),
    ("stress-seed-word", [*STRESS, "--seed", "abc"], ("--seed",)),
    ("stress-seed-negative", [*STRESS, "--seed", "-1"], ("--seed",)),
    ("stress-bootstrap-negative", [*STRESS, "--bootstrap", "-1"], ("--bootstrap",)),
    ("stress-device-tpu", [*STRESS, "--device", "tpu"], ("--device",)),
    ("stress-dtype-int8", [*STRESS, "--dtype", "int8"], ("--dtype",)),
    ("stress-batch-size-zero", [*STRESS, "--batch-size", "0"], ("--batch-size",)),
    ("stress-format-xml", [*STRESS, "-f", "xml"], ("--format",)),
    ("stress-fail-above-no-value", [*STRESS, "--fail-above", "scaled_stress="], ("--fail-above",)),
    ("stress-fail-above-no-equals", [*STRESS, "--fail-above", "scaled_stress"], ("--fail-above",)),
    ("stress-fail-above-word", [*STRESS, "--fail-above", "scaled_stress=low"], ("--fail-above",)),
    ("stress-fail-above-unknown", [*STRESS, "--fail-above", "bogus=1"], ("bogus",)),
    ("stress-fail-above-nan", [*STRESS, "--fail-above", "scaled_stress=nan"], ("--fail-above",)),
    ("stress-plot-dir-file", [*STRESS, "--plot-dir", "drift.txt"], ("drift.txt",)),
    ("stress-output-suffix", [*STRESS, "-o", "out.txt"], (".json",)),
    ("stress-unknown-spec-key", ["stress", "rope:d=16,bogus=1", "--dataset", *CORPUS], ("bogus",)),
    ("stress-spec-d-zero", ["stress", "rope:d=0", "--dataset", *CORPUS], ("d",)),
    ("stress-spec-d-word", ["stress", "rope:d=wide", "--dataset", *CORPUS], ("d",)),
    ("stress-spec-typo", ["stress", "ropee:d=16", "--dataset", *CORPUS], ("rope",)),
    ("stress-missing-corpus", ["stress", "rope:d=16", "--dataset", "nothere.txt"], ("nothere.txt",)),
    ("stress-extra-argument", [*STRESS, "extra"], ("extra",)),
    # report
    ("report-output-suffix", ["report", "rope:d=16", "--dataset", *CORPUS, "-o", "r.html"], (".md",)),
    ("report-fail-above-unknown", ["report", "rope:d=16", "--dataset", *CORPUS, "--fail-above", "x=1", "-o", "r.md"], ("x",)),
    ("report-format-xml", ["report", "rope:d=16", "--dataset", *CORPUS, "-f", "xml", "-o", "r.md"], ("--format",)),
    ("report-no-target", ["report", "--dataset", *CORPUS, "-o", "r.md"], ("argument",)),
    # marginals
    ("marginals-sample-zero", ["marginals", *CORPUS, "--sample", "0"], ("--sample",)),
    ("marginals-sample-above-one", ["marginals", *CORPUS, "--sample", "1.5"], ("--sample",)),
    ("marginals-sample-nan", ["marginals", *CORPUS, "--sample", "nan"], ("--sample",)),
    ("marginals-workers-zero", ["marginals", *CORPUS, "--workers", "0"], ("--workers",)),
    ("marginals-split-seed-negative", ["marginals", *CORPUS, "--split-seed", "-5"], ("--split-seed",)),
    ("marginals-sample-seed-negative", ["marginals", *CORPUS, "--sample", "0.5", "--sample-seed", "-2"], ("seed",)),
    ("marginals-output-suffix", ["marginals", *CORPUS, "-o", "c.npy"], (".safetensors",)),
    ("marginals-tokenizer-unknown", ["marginals", "drift.txt", "-t", "no-such-tokenizer-xyz"], ("tokenizer",)),
    ("marginals-cluster-garbage", ["marginals", *CORPUS, "--cluster", "not an address"], ("--cluster",)),
    ("marginals-work-dir-file", ["marginals", *CORPUS, "--work-dir", "drift.txt"], ("drift.txt",)),
    ("marginals-format-xml", ["marginals", *CORPUS, "-f", "xml"], ("--format",)),
    ("marginals-no-source", ["marginals"], ("no corpus given",)),
    # distances
    ("distances-metric-typo", ["distances", *CORPUS, "--metric", "helinger"], ("helinger",)),
    ("distances-heatmap-suffix", ["distances", *CORPUS, "--heatmap", "h.jpg"], ("--heatmap",)),
    ("distances-output-suffix", ["distances", *CORPUS, "-o", "d.npy"], (".safetensors",)),
    ("distances-heatmap-is-folder", ["distances", *CORPUS, "--heatmap", "."], ("--heatmap", ".png")),
    # mds
    ("mds-rank-zero", ["mds", *CORPUS, "--rank", "0"], ("--rank",)),
    ("mds-rank-negative", ["mds", *CORPUS, "--rank", "-3"], ("--rank",)),
    ("mds-basis-typo", ["mds", *CORPUS, "--basis", "randm"], ("randm",)),
    ("mds-method-typo", ["mds", *CORPUS, "--method", "fast"], ("fast",)),
    ("mds-scale-zero", ["mds", *CORPUS, "--scale", "0"], ("--scale",)),
    ("mds-scale-nan", ["mds", *CORPUS, "--scale", "nan"], ("--scale",)),
    ("mds-scale-inf", ["mds", *CORPUS, "--scale", "inf"], ("--scale",)),
    ("mds-seed-negative", ["mds", *CORPUS, "--seed", "-1"], ("--seed",)),
    ("mds-plot-suffix", ["mds", *CORPUS, "--plot", "m.svg"], ("--plot",)),
    ("mds-checkpoint-output-alone", ["mds", *CORPUS, "--checkpoint-output", "out"], ("--into-checkpoint",)),
    ("mds-into-missing-checkpoint", ["mds", *CORPUS, "--into-checkpoint", "nothere", "--checkpoint-output", "o"], ("nothere",)),
    # train
    ("train-task-typo", ["train", "--task", "ordr", "--steps", "1", "-o", "run"], ("ordr",)),
    ("train-pe-typo", ["train", "--pe", "rotary", "--steps", "1", "-o", "run"], ("rotary",)),
    ("train-steps-zero", ["train", "--steps", "0", "-o", "run"], ("--steps",)),
    ("train-seed-negative", ["train", "--seed", "-1", "--steps", "1", "-o", "run"], ("seed",)),
    ("train-device-tpu", ["train", "--device", "tpu", "--steps", "1", "-o", "run"], ("tpu",)),
    ("train-set-unknown-key", ["train", "--set", "bogus=1", "--steps", "1", "-o", "run"], ("bogus",)),
    ("train-set-no-equals", ["train", "--set", "steps", "-o", "run"], ("--set",)),
    ("train-set-wrong-type", ["train", "--set", "steps=many", "-o", "run"], ("steps",)),
    ("train-batch-size-huge", ["train", "--set", "batch_size=100000000", "-o", "run"], ("batch_size", "lower")),
    ("train-set-model-key", ["train", "--set", "model.bogus=1", "--steps", "1", "-o", "run"], ("bogus",)),
    ("train-config-missing", ["train", "--config", "nothere.toml", "-o", "run"], ("nothere.toml",)),
    ("train-resume-nothing", ["train", "--resume", "-o", "run"], ("run",)),
    # verify
    ("verify-unknown-experiment", ["verify", "bogus"], ("bogus",)),
    ("verify-set-unknown", ["verify", "edelta", "--set", "bogus=1"], ("override",)),
    ("verify-journey-set-unknown", ["verify", "journey", "--set", "bogus=1"], ("override",)),
    ("verify-lm-vocab-set-unknown", ["verify", "lm-vocab", "--set", "bogus=1", "-o", "out"], ("bogus",)),
    ("verify-seed-negative", ["verify", "journey", "--seed", "-1"], ("seed",)),
    ("verify-device-tpu", ["verify", "journey", "--device", "tpu"], ("--device",)),
    ("verify-format-xml", ["verify", "journey", "-f", "xml"], ("--format",)),
    # datasets
    ("synthesize-kind-typo", ["datasets", "synthesize", "drfit", "-o", "out"], ("drfit",)),
    ("synthesize-n-zero", ["datasets", "synthesize", "drift", "--n", "0", "-o", "out"], ("--n",)),
    ("synthesize-vocab-one", ["datasets", "synthesize", "drift", "--vocab", "1", "-o", "out"], ("--vocab",)),
    ("synthesize-words-typo", ["datasets", "synthesize", "drift", "--words", "gpt9", "-o", "out"], ("--words",)),
    ("synthesize-name-empty", ["datasets", "synthesize", "drift", "--name", "", "-o", "out"], ("--name",)),
    ("synthesize-name-parent", ["datasets", "synthesize", "drift", "--name", "../x", "-o", "out"], ("--name",)),
    ("synthesize-name-slash", ["datasets", "synthesize", "drift", "--name", "a/b", "-o", "out"], ("--name",)),
    ("synthesize-seed-negative", ["datasets", "synthesize", "drift", "--seed", "-1", "-o", "out"], ("seed",)),
    ("datasets-list-data-dir-file", ["datasets", "list", "--data-dir", "drift.txt"], ("drift.txt", "not a folder")),
    ("datasets-list-data-dir-missing", ["datasets", "list", "--data-dir", "nothere"], ("nothere", "does not exist")),
    ("datasets-list-format-xml", ["datasets", "list", "-f", "xml"], ("--format",)),
    ("encodings-list-format-xml", ["encodings", "list", "-f", "xml"], ("--format",)),
    ("unknown-command", ["strss", "rope"], ("strss",)),
]


@pytest.mark.parametrize(("args", "words"), [(args, words) for _, args, words in CASES], ids=[c[0] for c in CASES])
def test_a_careless_option_value_is_refused_naming_it(sandbox: Sandbox, args: list[str], words: tuple[str, ...]) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(*args, words=words)
