"""Text formats (issue 22): old-Mac CR-only line endings are line ends; UTF-16 / UTF-32 files (by
their byte order mark), gzip inside gzip and gzip data named .tsv are named as what they are, with
the command that converts them (was: "iconv -f latin1"); a byte order mark inside a corpus (left by
``cat a.txt b.txt``) or at the head of a ``--words`` file is no part of a token."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from .harness import Sandbox

TEXTS = ["the cat sat", "a dog ran far", "the end"]
LF = "\n".join(TEXTS) + "\n"
CORPUS = ("-t", "whitespace", "--no-cache", "-f", "json")


def _counts(sandbox: Sandbox, *sources: str) -> dict[str, Any]:
    document = json.loads(sandbox.accepted("marginals", *sources, *CORPUS).stdout)
    return {key: document[key] for key in ("n_sequences", "n_positions", "vocab_size", "nonzero", "totals")}


def test_the_reference_counts(sandbox: Sandbox) -> None:
    """The LF file every other case is compared with, against counts made here from TEXTS."""
    tokens = [text.split() for text in TEXTS]
    longest = max(map(len, tokens))
    expected = {
        "n_sequences": len(TEXTS),
        "n_positions": longest,
        "vocab_size": len({word for words in tokens for word in words}),
        "nonzero": len({(i, word) for words in tokens for i, word in enumerate(words)}),
        "totals": [sum(len(words) > i for words in tokens) for i in range(longest)],
    }
    sandbox.write("lf.txt", LF)
    assert _counts(sandbox, "lf.txt") == expected


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("cr.txt", LF.replace("\n", "\r").encode()),
        ("cr-no-final.txt", "\r".join(TEXTS).encode()),
        ("crlf.txt", LF.replace("\n", "\r\n").encode()),
        ("mixed.txt", b"the cat sat\ra dog ran far\r\nthe end\n"),
        ("cr.txt.gz", gzip.compress(LF.replace("\n", "\r").encode(), mtime=0)),
        ("cr.tokens", LF.replace("\n", "\r").encode()),
    ],
)
def test_cr_only_line_endings_end_lines(sandbox: Sandbox, name: str, content: bytes) -> None:
    # was: one text of 9 words (n_sequences 1, n_positions 9)
    sandbox.write(name, content)
    sandbox.write("lf.txt", LF)
    assert _counts(sandbox, name) == _counts(sandbox, "lf.txt")


def test_cr_only_shards_of_a_glob_count_as_lines(sandbox: Sandbox) -> None:
    sandbox.write("shards/a.txt", "the cat sat\ra dog ran far\r")
    sandbox.write("shards/b.txt", "the end\r")
    sandbox.write("lf.txt", LF)
    assert _counts(sandbox, "shards/*.txt") == _counts(sandbox, "lf.txt")


UNICODE = [
    ("utf-16-le", "utf-16-le", b"\xff\xfe", "UTF-16 (little-endian)", "iconv -f UTF-16 -t UTF-8"),
    ("utf-16-be", "utf-16-be", b"\xfe\xff", "UTF-16 (big-endian)", "iconv -f UTF-16 -t UTF-8"),
    ("utf-32-le", "utf-32-le", b"\xff\xfe\x00\x00", "UTF-32 (little-endian)", "iconv -f UTF-32 -t UTF-8"),
    ("utf-32-be", "utf-32-be", b"\x00\x00\xfe\xff", "UTF-32 (big-endian)", "iconv -f UTF-32 -t UTF-8"),
]


@pytest.mark.parametrize(("codec", "bom", "what", "fix"), [case[1:] for case in UNICODE], ids=[c[0] for c in UNICODE])
@pytest.mark.parametrize("name", ["u.txt", "u.jsonl", "u.tsv", "u.csv"])
def test_utf16_and_utf32_are_named_with_their_conversion(
    sandbox: Sandbox, codec: str, bom: bytes, what: str, fix: str, name: str
) -> None:
    text = LF if name.endswith(".txt") else "text\n" + LF if not name.endswith(".jsonl") else '{"text": "a b"}\n'
    sandbox.write(name, bom + text.encode(codec))
    run = sandbox.refused("marginals", name, *CORPUS, words=(what, "byte order mark", fix))
    assert "latin1" not in run.errors[0]


def test_gzipped_utf16_is_named_with_zcat(sandbox: Sandbox) -> None:
    sandbox.write("u.txt.gz", gzip.compress(b"\xff\xfe" + LF.encode("utf-16-le")))
    sandbox.refused("marginals", "u.txt.gz", *CORPUS, words=("UTF-16", "zcat u.txt.gz | iconv -f UTF-16"))


@pytest.mark.parametrize("name", ["gg.txt.gz", "gg.jsonl.gz", "gg.tsv.gz"])
def test_gzip_of_gzip_is_named(sandbox: Sandbox, name: str) -> None:
    # was: "not valid UTF-8 (byte 0x8b at offset 1); ... iconv -f latin1"
    sandbox.write(name, gzip.compress(gzip.compress(("text\n" + LF).encode())))
    run = sandbox.refused("marginals", name, *CORPUS, words=("gzip-compressed twice", f"zcat {name} > once-{name}"))
    assert "latin1" not in run.errors[0]


@pytest.mark.parametrize("layout", ["folder", "data-dir"])
def test_gzip_data_named_tsv_is_named_in_every_layout(sandbox: Sandbox, layout: str) -> None:
    data = gzip.compress(("text\n" + LF).encode())
    if layout == "folder":
        sandbox.write("corpus/train.tsv", data)
        args: tuple[str, ...] = ("corpus",)
    else:
        sandbox.write("data/sst2/train.tsv", data)
        args = ("sst2", "--data-dir", "data")
    sandbox.refused("marginals", *args, *CORPUS, words=("gzip-compressed but not named .gz", "train.tsv.gz"))


REPEATED = ["the cat sat", "the dog sat", "a cat ran"]  # every word but "dog", "a", "ran" twice


@pytest.mark.parametrize("name", ["cat.txt", "cat.txt.gz", "cat.jsonl", "cat.tsv"])
def test_a_byte_order_mark_inside_a_corpus_is_no_part_of_a_token(sandbox: Sandbox, name: str) -> None:
    # a BOM before a word that also comes without one: kept, "\ufeffthe" would be a word of its own
    bom = "\ufeff"
    marked = [f"{bom}the cat sat", f"{bom}the dog {bom}sat", f"a {bom}cat ran"]  # `cat a.txt b.txt` of BOM'd files
    if name.startswith("cat.txt"):
        body = "\n".join(marked) + "\n"
    elif name == "cat.jsonl":
        body = "".join(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in marked)
    else:
        body = "text\n" + "".join(f"{text}\n" for text in marked)
    content = gzip.compress(body.encode()) if name.endswith(".gz") else body.encode()
    sandbox.write(name, content)
    sandbox.write("plain.txt", "\n".join(REPEATED) + "\n")
    counts = _counts(sandbox, name)
    assert counts == _counts(sandbox, "plain.txt")
    assert counts["vocab_size"] == 6 and counts["nonzero"] == 6  # the, cat, sat, dog, a, ran; 6 (position, word) pairs


def test_a_byte_order_mark_at_the_head_of_a_words_file_is_no_word(sandbox: Sandbox) -> None:
    words = [f"word{i}" for i in range(20)]
    sandbox.write("words.txt", "\ufeff" + "\n".join(words) + "\n")
    sandbox.accepted(
        "datasets", "synthesize", "drift", "-o", "out", "--words", "words.txt", "--vocab", "20", "--n", "50"
    )
    vocab = sandbox.path("out/drift.vocab.txt").read_text(encoding="utf-8").split()
    assert sorted(vocab) == sorted(words)
    assert "\ufeff" not in sandbox.path("out/drift.txt").read_text(encoding="utf-8")
