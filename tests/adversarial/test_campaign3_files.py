"""Campaign 3, files nested or endless: JSON nested 10^5 deep in a corpus, TOML configs nested
thousands deep (once exit 3, RecursionError), a device as a TRAIN config (/dev/zero once read
forever until the memory ran out), a device as tokenizer, position table, checkpoint or series,
a JSON number beyond float64 where a text belongs, a key given twice in a TOML config."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .harness import Sandbox

WS = ["-t", "whitespace"]
QUICK = ["--compare", "", "--null-draws", "2"]
T = ["train", "--task", "order", "--steps", "1", "-o", "run"]
DEEP = 100_000

CORPORA = {
    "deep.jsonl": '{"text": ' + "[" * DEEP + "]" * DEEP + "}\n",
    "deep.json": "[" * DEEP + "]" * DEEP,
    "deep-object.jsonl": '{"text": "a", "x": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}\n",
}


@pytest.mark.parametrize("name", list(CORPORA))
def test_json_nested_beyond_reading_is_named(sandbox: Sandbox, name: str) -> None:
    sandbox.write(name, CORPORA[name])
    sandbox.refused("marginals", name, *WS, words=(name, "line 1"))


def test_a_json_number_beyond_float64_as_text_is_named(sandbox: Sandbox) -> None:
    sandbox.write("big.jsonl", '{"text": 1e400}\n')
    sandbox.refused("marginals", "big.jsonl", *WS, words=("line 1", "not a string"))


CONFIGS = {
    "deep-array": "x = " + "[" * DEEP + "]" * DEEP + "\n",
    "deep-inline-table": "x = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n",
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_config_nested_too_deep_is_refused(sandbox: Sandbox, name: str) -> None:
    sandbox.write("c.toml", CONFIGS[name])
    sandbox.refused(*T, "--config", "c.toml", words=("c.toml", "too deep"))


def test_a_key_given_twice_in_a_config_is_refused(sandbox: Sandbox) -> None:
    sandbox.write("c.toml", "steps = 1\nsteps = 2\n")
    sandbox.refused(*T, "--config", "c.toml", words=("c.toml", "TOML"))


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/stdin"])
def test_a_device_as_config_is_refused_before_reading(sandbox: Sandbox, device: str) -> None:
    sandbox.refused(*T, "--config", device, words=(device, "not a regular file"))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["marginals", "drift.txt", "-t", "/dev/zero"], ("/dev/zero", "tokenizer")),
        (["stress", "file:/dev/zero", "--dataset", "drift.txt", *WS, *QUICK], ("/dev/zero", "regular file")),
        (["stress", "rope:d=16", "--dataset", "drift.txt", *WS, "--compare", "file:/dev/zero"], ("/dev/zero",)),
        (["stress", "/dev/zero", "--dataset", "drift.txt", *WS, *QUICK], ("/dev/zero",)),
        (["track", "/dev/zero", "--dataset", "drift.txt", *WS], ("/dev/zero",)),
    ],
    ids=["tokenizer", "target-table", "compared-table", "target-checkpoint", "track-series"],
)
def test_a_device_where_a_file_is_read_is_refused(sandbox: Sandbox, args: list[str], words: tuple[str, ...]) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(*args, words=words)


def test_a_checkpoint_config_nested_too_deep_is_named(sandbox: Sandbox) -> None:
    """Once exit 3 (RecursionError in json.loads)."""
    sandbox.copy_sample("drift.txt")
    sandbox.write("ck/config.json", '{"x": ' + "[" * DEEP + "]" * DEEP + "}")
    sandbox.refused("stress", "./ck", "--dataset", "drift.txt", *QUICK, words=("config.json", "unreadable"))


@pytest.mark.slow  # transformers' tokenizer loader (4 s)
def test_a_tokenizer_json_nested_too_deep_is_named(sandbox: Sandbox, minilm_path: Path) -> None:
    """Once exit 3 (RecursionError inside transformers' loader)."""
    sandbox.copy_sample("drift.txt")
    sandbox.path("tk").mkdir()
    for name in ("tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm_path / name, sandbox.path("tk") / name)
    sandbox.write("tk/tokenizer.json", '{"x": ' + "[" * DEEP + "]" * DEEP + "}")
    sandbox.refused("marginals", "drift.txt", "-t", "./tk", "--limit", "5", words=("tk", "no tokenizer"))
