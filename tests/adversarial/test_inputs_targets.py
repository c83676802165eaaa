"""Targets whose name is also an encoding (a local ``./mds`` checkpoint folder), and ``--compare
learned:<checkpoint>`` on counts of another tokenizer. The checkpoint is a tiny random BERT saved
by transformers (the model zoo's), built once for the module."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from .harness import REPO_ROOT, Sandbox

WORDS = "drift-words.txt"
QUICK = ("--null-draws", "2")


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("_zoo_for_targets", REPO_ROOT / "tests/unit/checkpoints/model_zoo/zoo.py")
    assert spec is not None and spec.loader is not None
    zoo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = zoo
    spec.loader.exec_module(zoo)
    tokenizer = zoo.corpus_tokenizer(REPO_ROOT / "sample_corpora" / WORDS)
    entry = next(e for e in zoo.ZOO if e.name == "BERT")
    return zoo.build_checkpoint(entry, tmp_path_factory.mktemp("bert") / "bert", tokenizer)


@pytest.fixture
def here(sandbox: Sandbox, bert: Path) -> Sandbox:
    """A sandbox holding the corpus and the checkpoint as ./mds (as `mds --checkpoint-output mds` leaves it)."""
    sandbox.copy_sample(WORDS)
    shutil.copytree(bert, sandbox.path("mds"))
    return sandbox


def _notes(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("note:")]


@pytest.mark.parametrize("command", ["stress", "report"])
def test_a_local_checkpoint_named_like_an_encoding_is_the_checkpoint(here: Sandbox, command: str) -> None:
    output = ["-f", "json"] if command == "stress" else ["-o", "page.md"]
    result = here.run(command, "mds", "--dataset", WORDS, "--max-length", "64", *QUICK, "--compare", "", *output)
    assert result.code == 0, str(result)
    assert any("local checkpoint ./mds" in line and "mds:" in line for line in _notes(result)), result.stderr
    if command == "stress":
        document = json.loads(result.stdout)
        assert "hidden" in json.dumps(document)  # layers were scored: a checkpoint, not the encoding


def test_name_colon_is_always_the_encoding(here: Sandbox) -> None:
    result = here.run("stress", "mds:", "--dataset", WORDS, "-t", "whitespace", *QUICK, "--compare", "", "-f", "json")
    assert result.code == 0, str(result)
    assert not _notes(result), result.stderr


def test_a_local_folder_that_is_no_checkpoint_leaves_the_encoding(sandbox: Sandbox) -> None:
    sandbox.copy_sample(WORDS)
    sandbox.write("rope/notes.txt", "not a model\n")
    result = sandbox.run(
        "stress", "rope", "--dataset", WORDS, "-t", "whitespace", *QUICK, "--compare", "", "-f", "json"
    )
    assert result.code == 0, str(result)
    assert any("built-in encoding" in line and "./rope" in line for line in _notes(result)), result.stderr


def test_compare_keeps_the_encoding_and_says_how_to_compare_the_checkpoint(here: Sandbox) -> None:
    result = here.run(
        "stress", "rope:d=32", "--dataset", WORDS, "-t", "whitespace", *QUICK, "--compare", "mds", "-f", "json"
    )
    assert result.code == 0, str(result)
    assert any("learned:./mds" in line for line in _notes(result)), result.stderr


@pytest.mark.parametrize(
    ("tokenizer", "words"),
    [
        (["-t", "whitespace"], ("learned:", "whitespace", "--tokenizer")),
        (["-t", "char"], ("learned:", "char", "--tokenizer")),
        ([], ("learned:", "another vocabulary")),
    ],
    ids=["whitespace", "char", "another-hf-vocabulary"],
)
def test_compare_learned_checks_the_tokens_line_up(here: Sandbox, tokenizer: list[str], words: tuple[str, ...]) -> None:
    here.refused(
        "stress",
        "rope:d=32",
        "--dataset",
        WORDS,
        *tokenizer,
        *QUICK,
        "--compare",
        "learned:mds",
        words=words,
    )


def test_compare_learned_with_the_checkpoints_own_tokens_is_accepted(here: Sandbox) -> None:
    result = here.run(
        "stress",
        "rope:d=32",
        "--dataset",
        WORDS,
        "-t",
        "./mds",
        "--max-length",
        "64",
        *QUICK,
        "--compare",
        "learned:mds",
        "-f",
        "json",
    )
    assert result.code == 0, str(result)


HF_CONFIGS = [
    ("layer-norm-eps-nan", {"layer_norm_eps": float("nan")}, "layer_norm_eps"),
    ("dropout-nan", {"hidden_dropout_prob": float("nan")}, "hidden_dropout_prob"),
    ("initializer-infinite", {"initializer_range": float("inf")}, "initializer_range"),
    ("type-vocab-1e9", {"type_vocab_size": 10**9}, "type_vocab_size"),
    ("positions-a-float", {"max_position_embeddings": 64.0}, "max_position_embeddings"),
    ("layers-zero", {"num_hidden_layers": 0}, "num_hidden_layers"),
    ("vocab-zero", {"vocab_size": 0}, "vocab_size"),
    ("width-a-float", {"hidden_size": 32.5}, "hidden_size"),
]


@pytest.mark.parametrize(("changes", "word"), [c[1:] for c in HF_CONFIGS], ids=[c[0] for c in HF_CONFIGS])
def test_a_malformed_checkpoint_config_is_refused(sandbox: Sandbox, bert: Path, changes: dict, word: str) -> None:
    sandbox.copy_sample(WORDS)
    shutil.copytree(bert, sandbox.path("ckpt"))
    config = sandbox.path("ckpt/config.json")
    config.write_text(json.dumps({**json.loads(config.read_text()), **changes}))
    sandbox.refused("stress", "./ckpt", "--dataset", WORDS, *QUICK, "--compare", "", "--layers", "none", words=(word,))
