"""geoanalyze.corpus.sources: local formats, the data directory, the hub fallback, synthetic specs."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from pathlib import Path

import pytest

from geoanalyze.corpus.sources import (
    DATA_DIR_ENV,
    DATASETS,
    load_texts,
    parse_synthetic_spec,
    resolve_source,
)
from geoanalyze.corpus.synthetic import synthetic_corpus
from geoanalyze.errors import DataNotFoundError, FormatError, InputError

# Texts that break naive readers: quotes, commas, tabs are absent (TSV), non-ASCII, and the
# characters str.splitlines() treats as line ends although a file line only ends at "\n".
TRICKY = [
    'he said "no" and left',
    '"starts with a quote',
    "a, b and c",
    "café naïve 東京",
    "wait\x85 what",  # NEL, as in 350 IMDB reviews
    "one\u2028two",  # LINE SEPARATOR
    "form\x0cfeed",
]


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def write_gz(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as handle:
        handle.write(data)
    return path


# --- plain text ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["corpus.txt", "wiki.tokens"])
def test_one_text_a_line_blank_lines_dropped(tmp_path: Path, name: str) -> None:
    path = write_text(tmp_path / name, "first line\n\n  second one  \n \t \n = Heading = \nlast")
    assert load_texts(str(path)) == ["first line", "second one", "= Heading =", "last"]


def test_txt_windows_line_ends(tmp_path: Path) -> None:
    path = write_text(tmp_path / "crlf.txt", "alpha beta\r\n\r\ngamma\r\n")
    assert load_texts(str(path)) == ["alpha beta", "gamma"]


def test_txt_a_line_ends_only_at_newline(tmp_path: Path) -> None:
    """NEL, LINE SEPARATOR, form feed inside a line are text, not line ends."""
    path = write_text(tmp_path / "tricky.txt", "\n".join(TRICKY) + "\n")
    assert load_texts(str(path)) == TRICKY


def test_txt_gz(tmp_path: Path) -> None:
    path = write_gz(tmp_path / "corpus.txt.gz", b"x y z\n\nu v\n")
    assert load_texts(str(path)) == ["x y z", "u v"]


def test_utf8_byte_order_mark_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbffirst\nsecond\n")
    assert load_texts(str(path)) == ["first", "second"]


# --- tables -------------------------------------------------------------------------------


def test_tsv_header_and_no_quoting(tmp_path: Path) -> None:
    """GLUE SST-2 style: a double quote is part of the text, the trailing space is kept."""
    rows = ['it \'s a "masterpiece" , they said ', '" quoted start', "plain text "]
    body = "sentence\tlabel\n" + "".join(f"{text}\t{i % 2}\n" for i, text in enumerate(rows))
    path = write_text(tmp_path / "train.tsv", body)
    assert load_texts(str(path)) == rows


def test_tsv_keeps_texts_with_unusual_line_breaks_whole(tmp_path: Path) -> None:
    texts = [t for t in TRICKY if "\t" not in t]
    path = write_text(tmp_path / "t.tsv", "label\tsentence\n" + "".join(f"1\t{t}\n" for t in texts))
    assert load_texts(str(path)) == texts


def test_tsv_gz(tmp_path: Path) -> None:
    path = write_gz(tmp_path / "t.tsv.gz", b'text\tlabel\nsay "hi"\t0\n')
    assert load_texts(str(path)) == ['say "hi"']


def test_csv_standard_quoting(tmp_path: Path) -> None:
    texts = [*TRICKY, "a text\nthat spans two lines", 'quote "inside", comma too']
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(["id", "text", "label"])
    writer.writerows([i, text, i % 2] for i, text in enumerate(texts))
    path = write_text(tmp_path / "reviews.csv", buffer.getvalue())
    assert load_texts(str(path)) == texts


def test_csv_with_byte_order_mark_finds_its_column(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes("text,label\nhello there,1\n".encode("utf-8-sig"))
    assert load_texts(str(path)) == ["hello there"]


@pytest.mark.parametrize(
    ("columns", "chosen", "expected"),
    [
        (["id", "title", "review"], None, "review"),  # guessed
        (["sentence", "text"], None, "text"),  # "text" is the first guess
        (["id", "title", "review"], "title", "title"),  # chosen
        (["body", "label"], "body", "body"),  # chosen, nothing guessable
    ],
)
def test_text_column_chosen_or_guessed(tmp_path: Path, columns: list[str], chosen: str | None, expected: str) -> None:
    records = [{c: f"{c} of row {i}" for c in columns} for i in range(3)]
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(records)
    table = write_text(tmp_path / "t.csv", buffer.getvalue())
    lines = write_text(tmp_path / "t.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    want = [r[expected] for r in records]
    assert load_texts(str(table), text_column=chosen) == want
    assert load_texts(str(lines), text_column=chosen) == want


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_missing_column_lists_the_columns(tmp_path: Path, suffix: str) -> None:
    if suffix == ".jsonl":
        body = json.dumps({"body": "x", "stars": 5}) + "\n"
    else:
        sep = "," if suffix == ".csv" else "\t"
        body = f"body{sep}stars\nsome text{sep}5\n"
    path = write_text(tmp_path / f"data{suffix}", body)
    for chosen in ("comment", None):  # asked for a missing one; nothing to guess
        with pytest.raises(InputError) as info:
            load_texts(str(path), text_column=chosen)
        assert not isinstance(info.value, FormatError)
        assert "body" in str(info.value)
        assert "stars" in str(info.value)
        assert "--text-column" in str(info.value)


def test_tsv_short_row_is_a_format_error_with_its_line(tmp_path: Path) -> None:
    path = write_text(tmp_path / "t.tsv", "label\tsentence\n1\tfine\n0\n")
    with pytest.raises(FormatError, match="line 3"):
        load_texts(str(path))


# --- JSON lines ---------------------------------------------------------------------------


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("compressed", [False, True])
def test_jsonl(tmp_path: Path, ensure_ascii: bool, compressed: bool) -> None:
    records = [{"id": i, "text": text, "label": i % 2} for i, text in enumerate(TRICKY)]
    body = "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in records)
    body = body.replace("\n", "\n\n", 1)  # a blank line is skipped
    if compressed:
        path = write_gz(tmp_path / "data.jsonl.gz", body.encode())
    else:
        path = write_text(tmp_path / "data.jsonl", body)
    assert load_texts(str(path)) == TRICKY


@pytest.mark.parametrize(
    ("line", "message"),
    [("{not json", "not valid JSON"), ("[1, 2]", "JSON object"), ('{"text": 3}', "not a string")],
)
def test_jsonl_bad_line_names_its_number(tmp_path: Path, line: str, message: str) -> None:
    path = write_text(tmp_path / "d.jsonl", '{"text": "ok"}\n{"text": "fine"}\n' + line + "\n")
    with pytest.raises(FormatError, match=message) as info:
        load_texts(str(path))
    assert "line 3" in str(info.value)


# --- folders ------------------------------------------------------------------------------


def test_folder_of_txt_files_one_text_each_sorted(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write_text(folder / "b.txt", "second file\nstill the second text\n")
    write_text(folder / "a.txt", "  first file  ")
    write_text(folder / "c.txt", "\n\n")  # blank: dropped
    write_text(folder / "d" / "e.txt", "nested file")
    write_text(folder / "notes.md", "not a text file")
    source = resolve_source(str(folder))
    assert source.kind == "folder"
    assert load_texts(str(folder)) == ["first file", "second file\nstill the second text", "nested file"]


def test_folder_without_txt_files(tmp_path: Path) -> None:
    write_text(tmp_path / "only.md", "markdown")
    with pytest.raises(InputError, match=r"\.txt"):
        load_texts(str(tmp_path))


# --- faults -------------------------------------------------------------------------------


@pytest.mark.parametrize("line_number", [1, 2, 5])
@pytest.mark.parametrize("name", ["c.txt", "c.tsv", "c.txt.gz", "c.jsonl"])
def test_non_utf8_names_the_line(tmp_path: Path, name: str, line_number: int) -> None:
    good = '{"text": "fine"}' if ".jsonl" in name else "fine"
    lines = [good.encode()] * 6
    lines[line_number - 1] = good.replace("fine", "caf\xe9").encode("latin-1")
    if ".tsv" in name:
        lines = [b"sentence", *lines]
        line_number += 1
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / name
    if name.endswith(".gz"):
        write_gz(path, data)
    else:
        path.write_bytes(data)
    with pytest.raises(FormatError) as info:
        load_texts(str(path))
    assert f"line {line_number}:" in str(info.value)
    assert "UTF-8" in str(info.value)


def test_truncated_gzip_is_a_format_error(tmp_path: Path) -> None:
    whole = tmp_path / "whole.txt.gz"
    write_gz(whole, b"some text\n" * 2000)
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(whole.read_bytes()[:-40])
    with pytest.raises(FormatError, match="complete"):
        load_texts(str(cut))


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("empty.txt", ""),
        ("blank.txt", "\n  \n\t\n"),
        ("empty.tsv", ""),
        ("header_only.tsv", "sentence\tlabel\n"),
        ("blank_texts.csv", "text,label\n,1\n  ,0\n"),
        ("empty.jsonl", "\n"),
    ],
)
def test_empty_corpus(tmp_path: Path, name: str, body: str) -> None:
    path = write_text(tmp_path / name, body)
    with pytest.raises(InputError) as info:
        load_texts(str(path))
    assert not isinstance(info.value, DataNotFoundError)


@pytest.mark.parametrize("missing", ["nope.txt", "./nope", "/nonexistent/dir/train.tsv", "nope.jsonl.gz"])
def test_missing_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="file not found"):
        load_texts(missing)


def test_limit(tmp_path: Path) -> None:
    path = write_text(tmp_path / "c.txt", "one\n\ntwo\nthree\nfour\n")
    assert load_texts(str(path), limit=2) == ["one", "two"]  # blanks do not use up the limit
    assert load_texts(str(path), limit=1) == ["one"]
    assert load_texts(str(path), limit=100) == ["one", "two", "three", "four"]
    for bad in (0, -3):
        with pytest.raises(InputError, match="limit"):
            load_texts(str(path), limit=bad)


# --- the data directory -------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_text(root / "sst2" / "train.tsv", 'label\tsentence\n1\tgood "film"\n0\tbad film\n')
    write_text(root / "sst2" / "validation.tsv", "sentence\tlabel\nvalidation one\t1\n")
    write_gz(root / "imdb" / "test.jsonl.gz", b'{"text": "a review", "label": 1}\n')
    write_text(root / "wikitext2" / "validation.tokens", "\n = Title = \n\n A paragraph . \n")
    return root


def test_data_dir_layout(data_dir: Path) -> None:
    source = resolve_source("sst2", data_dir=data_dir)
    assert source.kind == "file"
    assert source.split == "train"  # the default split
    assert source.text_column == "sentence"  # from the registry, not the column order
    assert Path(source.location) == (data_dir / "sst2" / "train.tsv").resolve()
    assert load_texts("sst2", data_dir=data_dir) == ['good "film"', "bad film"]
    assert load_texts("SST-2", split="validation", data_dir=data_dir) == ["validation one"]
    assert load_texts("glue/sst2", split="validation", data_dir=str(data_dir)) == ["validation one"]
    assert load_texts("imdb", split="test", data_dir=data_dir) == ["a review"]
    assert load_texts("wikitext-2", split="validation", data_dir=data_dir) == ["= Title =", "A paragraph ."]


def test_data_dir_from_environment(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    assert load_texts("sst2", split="validation") == ["validation one"]
    other = tmp_path / "other"
    write_text(other / "sst2" / "validation.tsv", "sentence\nfrom the argument\n")
    assert load_texts("sst2", split="validation", data_dir=other) == ["from the argument"]  # the argument wins


def test_unknown_split_lists_the_splits(data_dir: Path) -> None:
    for name, info in DATASETS.items():
        with pytest.raises(InputError) as raised:
            load_texts(name, split="dev", data_dir=data_dir)
        assert "'dev'" in str(raised.value)
        for split in info.splits:
            assert split in str(raised.value)


def test_named_dataset_offline_without_data_dir(empty_hf_cache: Path, data_dir: Path) -> None:
    with pytest.raises(DataNotFoundError) as info:
        load_texts("sst2")
    message = str(info.value)
    assert DATA_DIR_ENV in message  # the local data directory it could not try
    assert "Hugging Face cache" in message
    assert "--data-dir" in message
    # With a data directory that lacks the split, the message names the place looked in.
    with pytest.raises(DataNotFoundError) as info:
        load_texts("imdb", split="train", data_dir=data_dir)
    assert str(data_dir / "imdb") in str(info.value)
    assert "train." in str(info.value)


def test_unknown_hub_id_offline(empty_hf_cache: Path) -> None:
    with pytest.raises(DataNotFoundError) as info:
        load_texts("someone/no-such-dataset")
    message = str(info.value)
    assert "someone/no-such-dataset" in message
    assert "sst2" in message  # the known datasets it was not
    assert "Hugging Face cache" in message


# --- the real corpora ---------------------------------------------------------------------


def test_real_sst2(shared_data: Path) -> None:
    lines = (shared_data / "sst2" / "train.tsv").read_text(encoding="utf-8").split("\n")
    assert load_texts("sst2", data_dir=shared_data, limit=5) == [line.split("\t")[0] for line in lines[1:6]]
    validation = (shared_data / "sst2" / "validation.tsv").read_text(encoding="utf-8").split("\n")
    expected = [line.split("\t")[0] for line in validation[1:] if line]
    assert len(expected) == 872
    assert load_texts("sst2", split="validation", data_dir=shared_data) == expected


def test_real_imdb(shared_data: Path) -> None:
    with gzip.open(shared_data / "imdb" / "train.jsonl.gz", "rt", encoding="utf-8") as handle:
        expected = [json.loads(next(handle))["text"] for _ in range(4)]
    source = resolve_source("imdb", data_dir=shared_data)
    assert Path(source.location).name == "train.jsonl.gz"
    assert source.read(limit=4) == expected


def test_real_imdb_reviews_survive_a_round_trip_through_every_format(imdb_reviews: list[str], tmp_path: Path) -> None:
    """350 IMDB reviews hold NEL (\\x85); written one a line, each must come back whole."""
    chosen = [r for r in imdb_reviews if "\x85" in r][:20] + imdb_reviews[:20]
    assert len(chosen) == 40
    (tmp_path / "r.txt").write_text("\n".join(chosen) + "\n", encoding="utf-8")
    with (tmp_path / "r.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"text": r}, ensure_ascii=False) + "\n" for r in chosen)
    with (tmp_path / "r.csv").open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([["text"], *([r] for r in chosen)])
    for name in ("r.txt", "r.jsonl", "r.csv"):
        assert load_texts(str(tmp_path / name)) == [r.strip() if name == "r.txt" else r for r in chosen], name


def test_real_wikitext2(shared_data: Path) -> None:
    lines = (shared_data / "wikitext2" / "validation.tokens").read_text(encoding="utf-8").split("\n")
    expected = [line.strip() for line in lines if line.strip()][:30]
    assert expected[0] == "= Homarus gammarus ="
    assert load_texts("wikitext2", split="validation", data_dir=shared_data, limit=30) == expected


# --- fingerprints -------------------------------------------------------------------------


def test_file_fingerprint_changes_with_the_file(tmp_path: Path) -> None:
    path = write_text(tmp_path / "c.txt", "one\ntwo\n")
    first = resolve_source(str(path)).fingerprint
    assert resolve_source(str(path)).fingerprint == first  # stable while the file is
    write_text(path, "one\ntwo\nthree\n")
    second = resolve_source(str(path)).fingerprint
    assert second != first
    # Same size, new content and a later modification time.
    stat = path.stat()
    write_text(path, "one\ntwo\nfour!\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert path.stat().st_size == stat.st_size
    assert resolve_source(str(path)).fingerprint not in (first, second)


def test_folder_fingerprint_changes_with_its_files(tmp_path: Path) -> None:
    write_text(tmp_path / "a.txt", "one")
    first = resolve_source(str(tmp_path)).fingerprint
    write_text(tmp_path / "b.txt", "two")
    assert resolve_source(str(tmp_path)).fingerprint != first


def test_data_dir_fingerprint_changes_with_the_file(data_dir: Path) -> None:
    first = resolve_source("sst2", data_dir=data_dir).fingerprint
    write_text(data_dir / "sst2" / "train.tsv", "sentence\nanother text entirely\n")
    assert resolve_source("sst2", data_dir=data_dir).fingerprint != first


# --- synthetic specs ----------------------------------------------------------------------


def test_synthetic_spec() -> None:
    spec = "synthetic:shift,n=10,length=5,vocab=20,seed=3"
    assert parse_synthetic_spec(spec) == ("shift", {"n_sequences": 10, "length": 5, "vocab_size": 20, "seed": 3})
    source = resolve_source(spec)
    assert source.kind == "synthetic"
    # The normal form does not depend on the order of the options.
    assert resolve_source("synthetic:shift,seed=3,vocab=20,length=5,n=10").fingerprint == source.fingerprint
    assert resolve_source("synthetic:shift,seed=4,vocab=20,length=5,n=10").fingerprint != source.fingerprint
    texts = load_texts(spec)
    assert texts == synthetic_corpus("shift", n_sequences=10, length=5, vocab_size=20, seed=3).texts
    assert len(texts) == 10
    assert all(len(text.split()) == 5 for text in texts)
    assert load_texts(spec, limit=3) == texts[:3]


def test_synthetic_defaults_to_drift() -> None:
    assert parse_synthetic_spec("synthetic") == ("drift", {})
    assert parse_synthetic_spec("synthetic:n=4,length=3") == ("drift", {"n_sequences": 4, "length": 3})
    assert resolve_source("synthetic:n=4,length=3,vocab=7").name.startswith("synthetic:drift")
    assert len(load_texts("synthetic:n=4,length=3,vocab=7")) == 4


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("synthetic:wobble,n=10", "unknown synthetic kind"),
        ("synthetic:shift,n", "key=value"),
        ("synthetic:shift,n=ten", "not a number"),
    ],
)
def test_bad_synthetic_spec_at_resolution(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        resolve_source(spec)


@pytest.mark.parametrize(
    "spec",
    [
        "synthetic:shift,n=0,length=5,vocab=20",
        "synthetic:drift,n=10,length=-1,vocab=20",
        "synthetic:drift,n=2.5,length=5,vocab=20",
        "synthetic:drift,n=4,length=5,vocab=20,anchors=1",
        "synthetic:stationary,n=4,length=5,vocab=20,kappa=3",
        "synthetic:shift,n=4,length=5,vocab=20,step=1.5",
        "synthetic:shift,n=4,length=5,vocab=20,seed=0.5",
    ],
)
def test_bad_synthetic_values_at_reading(spec: str) -> None:
    with pytest.raises(InputError):
        load_texts(spec)
