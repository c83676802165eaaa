"""One identity for every input (issue: the third bad-input catalogue): a counts file records the
content fingerprint of every corpus it counted, so a corpus and counts of it, a counts file and
its copy, or two counts files of one corpus, given together, are refused in one line naming both
(they would count the same texts twice). Counts of a cased and an uncased tokenizer of one
vocabulary never merge. Each case runs as a user types it, in a sandbox whose files must not change.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from geoanalyze.corpus.marginals import PositionalCounts
from geoanalyze.hub import packaged_minilm_path

from .harness import SAMPLES, Sandbox

WS = ["-t", "whitespace"]
TWICE = ("counted twice",)


def corpus(sandbox: Sandbox, name: str, first: int, count: int) -> Path:
    lines = (SAMPLES / "drift-words.txt").read_text(encoding="utf-8").splitlines()[first : first + count]
    return sandbox.write(name, "\n".join(lines) + "\n")


def counts_of(sandbox: Sandbox, *args: str) -> None:
    sandbox.accepted("marginals", *args, *WS, "-f", "json")


def sequences(run: object) -> int:
    return int(json.loads(run.stdout)["n_sequences"])  # type: ignore[attr-defined]


@pytest.fixture
def a(sandbox: Sandbox) -> Sandbox:
    """a.txt (300 texts), b.txt (another 200) and a.safetensors, the counts of a.txt."""
    corpus(sandbox, "a.txt", 0, 300)
    corpus(sandbox, "b.txt", 300, 200)
    counts_of(sandbox, "a.txt", "-o", "a.safetensors")
    return sandbox


@pytest.mark.parametrize("command", ["marginals", "distances", "mds"])
@pytest.mark.parametrize("order", [("a.txt", "a.safetensors"), ("a.safetensors", "a.txt")])
def test_a_counts_file_beside_its_own_corpus(a: Sandbox, command: str, order: tuple[str, str]) -> None:
    """`marginals a.txt a.safetensors` counted 600 sequences for 300 texts."""
    line = a.refused(command, *order, *WS, words=TWICE).errors[0]
    assert "'a.txt'" in line and "'a.safetensors'" in line


def test_a_copy_of_a_counts_file_beside_the_original(a: Sandbox) -> None:
    shutil.copy(a.path("a.safetensors"), a.path("copy.safetensors"))
    line = a.refused("marginals", "a.safetensors", "copy.safetensors", words=TWICE).errors[0]
    assert "'a.safetensors'" in line and "'copy.safetensors'" in line


def test_a_merged_counts_file_beside_one_of_its_corpora(a: Sandbox) -> None:
    counts_of(a, "a.txt", "b.txt", "-o", "ab.safetensors")
    a.refused("marginals", "b.txt", "ab.safetensors", *WS, words=("'ab.safetensors'", "'b.txt'", *TWICE))


def test_two_counts_files_of_one_corpus(a: Sandbox) -> None:
    """Counts of the first 100 texts overlap counts of all 300."""
    counts_of(a, "a.txt", "--limit", "100", "-o", "first.safetensors")
    a.refused("marginals", "first.safetensors", "a.safetensors", words=("'first.safetensors'", *TWICE))


def test_counts_of_an_earlier_version_of_the_file(a: Sandbox) -> None:
    """Edited since: the contents differ, the path is the one the counts were read from."""
    corpus(a, "a.txt", 0, 310)
    line = a.refused("marginals", "a.txt", "a.safetensors", *WS, words=TWICE).errors[0]
    assert "read from" in line


def test_a_folder_and_its_counts(sandbox: Sandbox) -> None:
    for index in range(5):
        corpus(sandbox, f"f/{index}.txt", index, 1)
    counts_of(sandbox, "f", "-o", "f.safetensors")
    sandbox.refused("marginals", "f", "f.safetensors", *WS, words=("'f'", *TWICE))


def test_a_synthetic_spec_and_its_counts(sandbox: Sandbox) -> None:
    spec = "synthetic:drift,n=200,length=8,vocab=30,seed=1"
    counts_of(sandbox, spec, "-o", "s.safetensors")
    sandbox.refused("marginals", "s.safetensors", spec, *WS, words=TWICE)
    other = "synthetic:drift,n=200,length=8,vocab=30,seed=2"  # another seed: another corpus
    assert sequences(sandbox.accepted("marginals", "s.safetensors", other, *WS, "-f", "json")) == 400


def test_counts_of_two_corpora_still_merge(a: Sandbox) -> None:
    counts_of(a, "b.txt", "-o", "b.safetensors")
    assert sequences(a.accepted("marginals", "a.safetensors", "b.safetensors", "-f", "json")) == 500
    assert sequences(a.accepted("marginals", "a.safetensors", "b.txt", *WS, "-f", "json")) == 500


def test_a_copy_of_a_corpus_is_still_another_corpus(a: Sandbox) -> None:
    """Two corpora are compared as files: a copy (new mtime) beside the counts of the original is counted."""
    shutil.copy(a.path("a.txt"), a.path("copy.txt"))
    assert sequences(a.accepted("marginals", "copy.txt", "a.safetensors", *WS, "-f", "json")) == 600


# --- the tokenizer is part of a count's identity -------------------------------------------


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uncased/ (the packaged WordPiece tokenizer), cased/ (the same vocabulary, no lower-casing)
    and renamed/ (uncased/ under another name)."""
    packaged = packaged_minilm_path()
    assert packaged is not None
    root = tmp_path_factory.mktemp("tokenizers")
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
    for folder in ("uncased", "cased", "renamed"):
        (root / folder).mkdir()
        for name in names:
            shutil.copy(packaged / name, root / folder / name)
    backend = json.loads((root / "cased" / "tokenizer.json").read_text(encoding="utf-8"))
    backend["normalizer"]["lowercase"] = False
    (root / "cased" / "tokenizer.json").write_text(json.dumps(backend), encoding="utf-8")
    config = json.loads((root / "cased" / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["do_lower_case"] = False
    (root / "cased" / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return root


def test_cased_and_uncased_counts_of_one_vocabulary_do_not_merge(sandbox: Sandbox, tokenizers: Path) -> None:
    sandbox.write("x.txt", "The Cat sat\nA Dog ran on THE mat\n" * 20)
    sandbox.write("y.txt", "the cat sat\na dog ran on the mat\n" * 20)
    sandbox.accepted("marginals", "x.txt", "-t", tokenizers / "uncased", "-o", "u.safetensors")
    sandbox.accepted("marginals", "y.txt", "-t", tokenizers / "cased", "-o", "c.safetensors")
    sandbox.accepted("marginals", "y.txt", "-t", tokenizers / "renamed", "-o", "r.safetensors")
    sandbox.refused("marginals", "u.safetensors", "c.safetensors", words=("different tokenizers",))
    # The same rules and vocabulary under another name merge (as bert-base-uncased and MiniLM do).
    assert sequences(sandbox.accepted("marginals", "u.safetensors", "r.safetensors", "-f", "json")) == 80


# --- what a counts file's header says must agree with its counts ---------------------------


def test_n_sequences_beyond_position_0_is_refused(a: Sandbox) -> None:
    """n_sequences 1e6 in a counts file whose every sequence has a first word: 300 at position 0."""
    counts = PositionalCounts.load(a.path("a.safetensors"))
    counts.metadata["n_sequences"] = 1_000_000
    counts.save(a.path("lying.safetensors"))
    a.refused("distances", "lying.safetensors", words=("1000000 sequences", "position 0 counts 300"))


def test_sparse_counts_of_huge_token_ids_need_no_dense_memory(sandbox: Sandbox) -> None:
    """7,733 non-zero counts at token ids near 2**33 were refused as needing 64 GiB: the distances
    follow the counts, not V (each position's mass on its own ids: every pair at distance 1)."""
    rng = np.random.default_rng(0)
    n, width = 40, 2**33
    rows = np.repeat(np.arange(n), 200)[:7733]
    cols = width - 1 - rng.choice(10**6, size=rows.size, replace=False)
    full = sp.csr_array(sp.coo_array((np.full(rows.size, 4), (rows, cols)), shape=(n, width)))
    half = sp.csr_array(sp.coo_array((np.full(rows.size, 2), (rows, cols)), shape=(n, width)))
    identity = {"kind": "hf", "name": "huge", "vocab_size": width, "vocab_sha256": "0" * 16}
    metadata = {"tokenizer": identity, "n_sequences": 800, "max_length": 512}
    PositionalCounts(full, half, metadata, None).save(sandbox.path("huge.safetensors"))
    run = sandbox.accepted("distances", "huge.safetensors", "--min-count", "1", "-f", "json")
    result = json.loads(run.stdout)
    assert len(result["positions"]) == 39  # 7,733 entries: 200 at positions 0-37, 133 at 38
    assert result["noise"]["median_naive"] == pytest.approx(1.0)


def test_a_local_file_named_like_a_synthetic_spec_says_so(sandbox: Sandbox) -> None:
    corpus(sandbox, "synthetic:drift", 0, 50)
    run = sandbox.accepted("marginals", "synthetic:drift", *WS, "-f", "json")
    assert sequences(run) == 50  # the file, not the spec's 2000 sequences
    assert "the local file" in run.stderr and "not the synthetic corpus" in run.stderr
    os.remove(sandbox.path("synthetic:drift"))
    quiet = sandbox.accepted("marginals", "synthetic:drift,n=60", *WS, "-f", "json")
    assert sequences(quiet) == 60 and "note:" not in quiet.stderr
