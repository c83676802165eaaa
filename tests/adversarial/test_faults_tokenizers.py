"""Tokenizers are validated on load (issue 22): a checkpoint or ``-t`` folder without tokenizer
files, a tokenizer much smaller than its model's vocabulary, a WordLevel tokenizer without [UNK]
meeting an unknown word, and a ``model_max_length`` that is no integer are one ``error:`` line
with exit 2, naming the files, the numbers or the token; never a run on an empty vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import geoanalyze_process
from tokenizers import Tokenizer, models, pre_tokenizers

from geoanalyze.hub import packaged_minilm_path

from .harness import Sandbox

MINILM = packaged_minilm_path()
needs_minilm = pytest.mark.skipif(MINILM is None, reason="the packaged MiniLM checkpoint is not installed")
WORDS = "alpha beta gamma delta\nbeta alpha delta gamma\n" * 60


def _word_level(folder: Path, vocab: dict[str, int], unk: str | None, config: dict[str, object] | None = None) -> Path:
    """A real fast tokenizer folder: a WordLevel model on whitespace, with its tokenizer_config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    model = models.WordLevel(vocab=vocab, unk_token=unk) if unk is not None else models.WordLevel(vocab=vocab)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    settings = {"tokenizer_class": "PreTrainedTokenizerFast", **(config or {})}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    return folder


def _checkpoint_without_tokenizer(sandbox: Sandbox) -> Path:
    """The packaged MiniLM's config and weights (the weights a link), none of its tokenizer files."""
    assert MINILM is not None
    folder = sandbox.path("ck")
    folder.mkdir()
    (folder / "config.json").write_bytes((MINILM / "config.json").read_bytes())
    (folder / "model.safetensors").symlink_to(MINILM / "model.safetensors")
    return folder


@pytest.mark.slow  # ~20 s: the checkpoint's model is built before its tokenizer is read
@needs_minilm
def test_a_checkpoint_without_tokenizer_files_is_refused_by_stress(sandbox: Sandbox) -> None:
    # was: transformers built a 5-token BertTokenizer, every word [UNK], exit 0 with scaled stress 0.93
    _checkpoint_without_tokenizer(sandbox)
    sandbox.copy_sample("drift.txt")
    run = sandbox.refused(
        "stress",
        "./ck",
        "--dataset",
        "drift.txt",
        "--null-draws",
        "2",
        "--compare",
        "",
        words=("no tokenizer files", "tokenizer.json", "vocab.txt", "--tokenizer"),
    )
    assert "ck" in run.errors[0]


@needs_minilm
def test_a_checkpoint_folder_without_tokenizer_files_is_refused_as_a_tokenizer(sandbox: Sandbox) -> None:
    _checkpoint_without_tokenizer(sandbox)
    sandbox.write("t.txt", WORDS)
    sandbox.refused("marginals", "t.txt", "-t", "ck", words=("ck holds no tokenizer files", "tokenizer.json"))


def test_a_folder_of_only_a_tokenizer_config_is_refused(sandbox: Sandbox) -> None:
    sandbox.write("tok/tokenizer_config.json", json.dumps({"tokenizer_class": "BertTokenizer"}))
    sandbox.write("t.txt", WORDS)
    sandbox.refused("marginals", "t.txt", "-t", "tok", words=("no tokenizer files", "vocab.txt"))


def test_a_tokenizer_much_smaller_than_its_models_vocabulary_is_refused(sandbox: Sandbox) -> None:
    folder = _word_level(sandbox.path("ck2"), {**{f"w{i}": i for i in range(99)}, "[UNK]": 99}, "[UNK]")
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 30522}), encoding="utf-8")
    sandbox.write("t.txt", WORDS)
    sandbox.refused("marginals", "t.txt", "-t", "ck2", words=("100 tokens", "30522", "config.json"))


def test_a_padded_vocabulary_is_accepted(sandbox: Sandbox) -> None:
    # GPT-NeoX style: 104 embedding rows for 100 tokens (a multiple of 8): the same tokenizer, not another's
    vocab = {**{f"w{i}": i for i in range(95)}, "alpha": 95, "beta": 96, "gamma": 97, "delta": 98, "[UNK]": 99}
    folder = _word_level(sandbox.path("padded"), vocab, "[UNK]")
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt_neox", "vocab_size": 104}), encoding="utf-8")
    sandbox.write("t.txt", WORDS)
    counts = json.loads(sandbox.accepted("marginals", "t.txt", "-t", "padded", "-f", "json", "--no-cache").stdout)
    assert counts["n_sequences"] == 120 and counts["vocab_size"] == 100


def test_an_unknown_word_without_an_unk_token_names_the_word(sandbox: Sandbox) -> None:
    # was: exit 3, "internal error (Exception: WordLevel error: Missing [UNK] token from the vocabulary)"
    _word_level(sandbox.path("nounk"), {"alpha": 0, "beta": 1, "gamma": 2}, None)
    sandbox.write("t.txt", WORDS)
    sandbox.refused("marginals", "t.txt", "-t", "nounk", "--no-cache", words=("'delta'", "[UNK]", "unk_token"))


def test_a_known_vocabulary_without_an_unk_token_counts(sandbox: Sandbox) -> None:
    _word_level(sandbox.path("nounk"), {"alpha": 0, "beta": 1, "gamma": 2, "delta": 3}, None)
    sandbox.write("t.txt", WORDS)
    counts = json.loads(sandbox.accepted("marginals", "t.txt", "-t", "nounk", "-f", "json", "--no-cache").stdout)
    assert counts["n_sequences"] == 120 and sum(counts["totals"]) == 480


@pytest.mark.parametrize("value", ["abc", -5, 0, True, [512]], ids=["text", "negative", "zero", "bool", "list"])
def test_a_model_max_length_that_is_no_integer_is_refused(sandbox: Sandbox, value: object) -> None:
    # was: exit 3, "TypeError: '>' not supported between instances of 'str' and 'int'"
    vocab = {"alpha": 0, "beta": 1, "gamma": 2, "delta": 3, "[UNK]": 4}
    _word_level(sandbox.path("tok"), vocab, "[UNK]", {"model_max_length": value})
    sandbox.write("t.txt", WORDS)
    sandbox.refused("marginals", "t.txt", "-t", "tok", "--no-cache", words=("model_max_length", "--max-length"))


def test_a_bad_model_max_length_gives_way_to_max_length(sandbox: Sandbox) -> None:
    vocab = {"alpha": 0, "beta": 1, "gamma": 2, "delta": 3, "[UNK]": 4}
    _word_level(sandbox.path("tok"), vocab, "[UNK]", {"model_max_length": "abc"})
    sandbox.write("t.txt", WORDS)
    counts = json.loads(
        sandbox.accepted("marginals", "t.txt", "-t", "tok", "--max-length", "3", "-f", "json", "--no-cache").stdout
    )
    assert counts["n_positions"] == 3 and counts["totals"] == [120, 120, 120]  # 120 texts cut to 3 tokens


@pytest.mark.slow  # ~16 s: two spawned workers import the program
def test_an_unknown_word_met_in_a_worker_process_is_one_error_line(sandbox: Sandbox) -> None:
    # the console script in real processes: a worker's error is the one line, and the workers the
    # pool then stops say nothing (was: two more "error: interrupted" lines, one per stopped worker)
    _word_level(sandbox.path("nounk"), {"alpha": 0, "beta": 1, "gamma": 2, "delta": 3}, None)
    for index in range(3):
        sandbox.write(f"shards/s{index}.txt", WORDS + ("alpha omega\n" if index == 2 else ""))
    run = geoanalyze_process(
        "marginals", "shards/*.txt", "-t", "nounk", "--workers", "2", "--no-cache", cwd=sandbox.root
    )
    assert run.code == 2, str(run)
    assert run.stderr.strip().splitlines() == [
        "error: tokenizer nounk: the word 'omega' is not in its vocabulary, and the tokenizer has no unknown "
        "token ([UNK]) to stand for it; add an unk_token to its tokenizer.json, or use a tokenizer that covers "
        "the corpus"
    ], str(run)
