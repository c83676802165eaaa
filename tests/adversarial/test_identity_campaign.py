"""A campaign of our own around one identity for every input (issue: the third bad-input catalogue),
in classes the issue did not list: counts of a glob, a shard folder, a data-directory dataset or a
sample beside their corpus; a counts file reached through a link; three inputs of which the
first and last are one; tables and shards that do take --text-column; the cache of a folder,
a glob and a tokenizer whose files are replaced in place; hidden files and the cache key; file
outputs of every command written as folders.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from geoanalyze.corpus.marginals import PositionalCounts
from geoanalyze.hub import packaged_minilm_path

from .harness import SAMPLES, Sandbox

WS = ["-t", "whitespace"]
ONE = ["--workers", "1"]  # several shards: counted here, not in spawned processes (seconds each)
TWICE = ("counted twice",)
LINES = (SAMPLES / "drift-words.txt").read_text(encoding="utf-8").splitlines()


def texts(sandbox: Sandbox, name: str, first: int, count: int) -> Path:
    return sandbox.write(name, "\n".join(LINES[first : first + count]) + "\n")


def jsonl(sandbox: Sandbox, name: str, first: int, count: int) -> Path:
    rows = (json.dumps({"text": line, "label": 0}) for line in LINES[first : first + count])
    return sandbox.write(name, "\n".join(rows) + "\n")


def sequences(sandbox: Sandbox, *args: str) -> int:
    return int(json.loads(sandbox.accepted("marginals", *args, "-f", "json").stdout)["n_sequences"])


def source_of(sandbox: Sandbox, *args: str) -> str:
    return json.loads(sandbox.accepted("marginals", *args, "-f", "json").stdout)["sources"][0]["from"]


# --- counted twice, by other routes ----------------------------------------------------------


@pytest.fixture
def shards(sandbox: Sandbox) -> Sandbox:
    """parts/0.jsonl, parts/1.jsonl (30 texts each) and their counts p.safetensors (by glob)."""
    jsonl(sandbox, "parts/0.jsonl", 0, 30)
    jsonl(sandbox, "parts/1.jsonl", 30, 30)
    sandbox.accepted("marginals", "parts/*.jsonl", *WS, *ONE, "-o", "p.safetensors")
    return sandbox


def test_counts_of_a_glob_beside_the_glob(shards: Sandbox) -> None:
    shards.refused("marginals", "parts/*.jsonl", "p.safetensors", *WS, *ONE, words=TWICE)


def test_counts_of_a_shard_folder_beside_the_folder(shards: Sandbox) -> None:
    shards.accepted("marginals", "parts", *WS, *ONE, "-o", "f.safetensors")
    shards.refused("marginals", "f.safetensors", "parts", *WS, *ONE, words=("'parts'", *TWICE))


def test_counts_of_a_glob_beside_the_same_files_as_a_folder(shards: Sandbox) -> None:
    """The glob and the folder read the same files in the same order: one corpus."""
    shards.refused("marginals", "parts", "p.safetensors", *WS, *ONE, words=TWICE)


def test_counts_of_a_data_dir_dataset_beside_the_dataset(sandbox: Sandbox) -> None:
    sandbox.write("data/sst2/train.tsv", "sentence\tlabel\n" + "".join(f"{line}\t0\n" for line in LINES[:40]))
    sandbox.accepted("marginals", "sst2", "--data-dir", "data", *WS, "-o", "s.safetensors")
    sandbox.refused("marginals", "sst2", "s.safetensors", "--data-dir", "data", *WS, words=TWICE)


def test_counts_of_a_sample_beside_the_corpus(sandbox: Sandbox) -> None:
    texts(sandbox, "a.txt", 0, 200)
    sandbox.accepted("marginals", "a.txt", *WS, "--sample", "0.3", "-o", "sample.safetensors")
    sandbox.refused("marginals", "a.txt", "sample.safetensors", *WS, words=TWICE)


def test_a_link_to_a_counts_file_beside_its_corpus(sandbox: Sandbox) -> None:
    texts(sandbox, "a.txt", 0, 50)
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "a.safetensors")
    os.symlink("a.safetensors", sandbox.path("link.safetensors"))
    sandbox.refused("marginals", "a.txt", "link.safetensors", *WS, words=TWICE)
    sandbox.refused("marginals", "a.safetensors", "link.safetensors", words=("twice",))


def test_the_first_and_the_last_of_three(sandbox: Sandbox) -> None:
    texts(sandbox, "a.txt", 0, 50)
    texts(sandbox, "b.txt", 50, 50)
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "a.safetensors")
    line = sandbox.refused("marginals", "a.safetensors", "b.txt", "a.txt", *WS, words=TWICE).errors[0]
    assert "'a.txt'" in line and "'b.txt'" not in line


def test_counts_of_another_text_column_of_one_file(sandbox: Sandbox) -> None:
    """One file, two columns: the fingerprint is the file's, and reading it twice is refused too."""
    rows = "".join(json.dumps({"text": line, "other": line[::-1]}) + "\n" for line in LINES[:30])
    sandbox.write("t.jsonl", rows)
    sandbox.accepted("marginals", "t.jsonl", "--text-column", "other", *WS, "-o", "o.safetensors")
    sandbox.refused("marginals", "t.jsonl", "o.safetensors", *WS, words=TWICE)


@pytest.mark.parametrize("value", [-5, 7])
def test_a_header_n_empty_that_does_not_add_up(sandbox: Sandbox, value: int) -> None:
    texts(sandbox, "a.txt", 0, 50)
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "a.safetensors")
    counts = PositionalCounts.load(sandbox.path("a.safetensors"))
    counts.metadata["n_empty"] = value
    counts.save(sandbox.path("bad.safetensors"))
    sandbox.refused("distances", "bad.safetensors", words=("50 sequences", "position 0"))


def test_blank_texts_counted_by_the_library_add_up(sandbox: Sandbox) -> None:
    """count_positions counts a blank text as a sequence of no token: its file loads."""
    from geoanalyze.corpus.marginals import count_positions
    from geoanalyze.corpus.tokenize import WhitespaceTokenizer

    counts = count_positions(["a b", "", "c"], WhitespaceTokenizer())
    counts.save(sandbox.path("c.safetensors"))
    assert PositionalCounts.load(sandbox.path("c.safetensors")).metadata["n_empty"] == 1


# --- options that do apply ------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["tsv", "jsonl", "csv", "jsonl-shards", "parquet-shards"])
def test_text_column_applies_to_tables_and_shards(sandbox: Sandbox, layout: str) -> None:
    lines = LINES[:20]
    if layout == "tsv":
        sandbox.write("c.tsv", "label\tbody\n" + "".join(f"0\t{line}\n" for line in lines))
        corpus = "c.tsv"
    elif layout == "csv":
        sandbox.write("c.csv", "label,body\n" + "".join(f"0,{line}\n" for line in lines))
        corpus = "c.csv"
    elif layout == "parquet-shards":
        import pyarrow as pa
        import pyarrow.parquet as pq

        sandbox.root.joinpath("p").mkdir()
        pq.write_table(pa.table({"body": lines}), sandbox.path("p/0.parquet"))
        corpus = "p/*.parquet"
    else:
        rows = "".join(json.dumps({"body": line}) + "\n" for line in lines)
        corpus = "c.jsonl" if layout == "jsonl" else "s/*.jsonl"
        sandbox.write(corpus.replace("*", "0"), rows)
    assert sequences(sandbox, corpus, "--text-column", "body", *WS) == 20


@pytest.mark.parametrize("corpus", ["folder", "glob of .txt"])
def test_text_column_does_not_apply_to_plain_text_collections(sandbox: Sandbox, corpus: str) -> None:
    texts(sandbox, "f/a.txt", 0, 3)
    texts(sandbox, "f/b.txt", 3, 3)
    source = "f" if corpus == "folder" else "f/*.txt"
    sandbox.refused("marginals", source, "--text-column", "body", *WS, words=("--text-column", "plain text"))


def test_split_applies_to_a_named_dataset_in_a_data_dir(sandbox: Sandbox) -> None:
    sandbox.write("data/sst2/validation.tsv", "sentence\tlabel\n" + "".join(f"{line}\t0\n" for line in LINES[:7]))
    assert sequences(sandbox, "sst2", "--data-dir", "data", "--split", "validation", *WS) == 7


@pytest.mark.parametrize("source", ["synthetic:drift,n=40", "counts"])
def test_include_hidden_on_what_has_no_hidden_files(sandbox: Sandbox, source: str) -> None:
    if source == "counts":
        sandbox.accepted("marginals", "synthetic:drift,n=40", *WS, "-o", "s.safetensors")
        source = "s.safetensors"
    sandbox.refused("marginals", source, "--include-hidden", words=("--include-hidden", "does not apply"))


def test_a_tokenizer_on_a_counts_file_beside_a_corpus_counts_the_corpus(sandbox: Sandbox) -> None:
    texts(sandbox, "a.txt", 0, 30)
    texts(sandbox, "b.txt", 30, 40)
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "a.safetensors")
    assert sequences(sandbox, "a.safetensors", "b.txt", *WS, "--limit", "10") == 40


# --- the cache follows the contents ---------------------------------------------------------


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEOANALYZE_CACHE_DIR", str(tmp_path / "cache"))


def replace_in_place(path: Path, text: str) -> None:
    """New bytes of the same size, the old mtime restored (as `cp -p` leaves them)."""
    stat = path.stat()
    assert len(text.encode()) == stat.st_size
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def reversed_words(path: Path) -> str:
    return "\n".join(" ".join(reversed(line.split())) for line in path.read_text(encoding="utf-8").splitlines()) + "\n"


@pytest.mark.parametrize("kind", ["folder", "glob"])
def test_a_file_of_a_collection_replaced_in_place(sandbox: Sandbox, kind: str) -> None:
    for index in range(3):
        texts(sandbox, f"c/{index}.txt", index * 5, 5 if kind == "glob" else 1)
    source = "c" if kind == "folder" else "c/*.txt"
    sandbox.accepted("marginals", source, *WS, *ONE)
    assert source_of(sandbox, source, *WS, *ONE) == "cache"
    replace_in_place(sandbox.path("c/1.txt"), reversed_words(sandbox.path("c/1.txt")))
    assert source_of(sandbox, source, *WS, *ONE) != "cache"


def test_a_hidden_file_added_leaves_the_key_alone(sandbox: Sandbox) -> None:
    for index in range(3):
        texts(sandbox, f"c/{index}.txt", index, 1)
    sandbox.accepted("marginals", "c", *WS)
    texts(sandbox, "c/.draft.txt", 10, 1)
    assert source_of(sandbox, "c", *WS) == "cache"
    assert source_of(sandbox, "c", *WS, "--include-hidden") != "cache"


def test_a_renamed_file_reorders_a_folder(sandbox: Sandbox) -> None:
    """Folder texts are read in path order, which places the split-half coins: a new key."""
    texts(sandbox, "c/a.txt", 0, 1)
    texts(sandbox, "c/b.txt", 1, 1)
    sandbox.accepted("marginals", "c", *WS)
    os.rename(sandbox.path("c/a.txt"), sandbox.path("c/z.txt"))
    assert source_of(sandbox, "c", *WS) != "cache"


def test_a_tokenizer_file_replaced_in_place(sandbox: Sandbox) -> None:
    """A tokenizer's files are keyed by their contents too: two ids swapped, the same size and mtime."""
    packaged = packaged_minilm_path()
    assert packaged is not None
    folder = sandbox.root / "tok"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(packaged / name, folder / name)
    sandbox.write("x.txt", "The Cat sat\nA Dog ran\n" * 10)
    sandbox.accepted("marginals", "x.txt", "-t", "tok")
    assert source_of(sandbox, "x.txt", "-t", "tok") == "cache"
    text = (folder / "tokenizer.json").read_text(encoding="utf-8")
    assert '"the":1996' in text and '"and":1998' in text
    swapped = text.replace('"the":1996', '"the":TMP').replace('"and":1998', '"and":1996').replace("TMP", "1998")
    replace_in_place(folder / "tokenizer.json", swapped)
    assert source_of(sandbox, "x.txt", "-t", "tok") != "cache"


def test_an_unwritable_cache_still_counts(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = sandbox.write("cache-file", "not a folder\n")
    monkeypatch.setenv("GEOANALYZE_CACHE_DIR", str(blocker))
    texts(sandbox, "a.txt", 0, 20)
    run = sandbox.accepted("marginals", "a.txt", *WS, "-f", "json")
    assert json.loads(run.stdout)["n_sequences"] == 20
    assert run.stderr.count("note: the cache in") == 1


# --- file outputs written as folders ---------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["distances", "a.txt", *WS, "--heatmap", "h.png/"],
        ["mds", "a.txt", *WS, "--plot", "m.png/"],
        ["stress", "sinusoidal:d=8", "--dataset", "a.txt", *WS, "-o", "r.json/"],
        ["report", "sinusoidal:d=8", "--dataset", "a.txt", *WS, "-o", "r.md/"],
    ],
    ids=["heatmap", "plot", "stress-output", "report-output"],
)
def test_more_file_outputs_ending_in_a_slash(sandbox: Sandbox, args: list[str]) -> None:
    texts(sandbox, "a.txt", 0, 20)
    sandbox.refused(*args, words=("ends in a slash",))
