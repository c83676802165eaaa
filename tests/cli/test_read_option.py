"""--read rows|document|packed on the commands that count a corpus (issue 34, item 3): the table and
the JSON say the mode only when it is not rows (the default stays byte-identical), and hostile
values are one error line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REPO_ROOT, geoanalyze, ok, refused

DRIFT = str(REPO_ROOT / "sample_corpora" / "drift.txt")
COUNTING = ["marginals", "distances", "mds", "stress", "report", "track run"]


def flat(table: str) -> str:
    """A table's words on one line: the corpus line wraps at 80 columns where its path is long."""
    return " ".join(table.split())


@pytest.mark.parametrize("command", COUNTING)
def test_every_counting_command_takes_read(command: str, tmp_path: Path) -> None:
    assert "--read" in ok(geoanalyze(*command.split(), "--help", cwd=tmp_path)).stdout


@pytest.mark.parametrize("value", ["bogus", "", "Document", "rows,packed"])
def test_a_bogus_mode_is_one_line_exit_2(value: str, tmp_path: Path) -> None:
    refused(
        geoanalyze("marginals", "--dataset", DRIFT, "--read", value, cwd=tmp_path), "--read", "rows, document, packed"
    )


def test_stress_refuses_a_bogus_mode_too(tmp_path: Path) -> None:
    refused(geoanalyze("stress", "rope:d=8", "--dataset", DRIFT, "--read", "pages", cwd=tmp_path), "--read")


def test_packed_with_a_tokenizer_without_eos_or_sep_is_one_line_exit_2(tmp_path: Path) -> None:
    run = geoanalyze("marginals", "--dataset", DRIFT, "-t", "whitespace", "--read", "packed", cwd=tmp_path)
    refused(run, "--read packed", "EOS", "SEP", "whitespace")


@pytest.mark.parametrize("read", ["document", "packed"])
def test_an_empty_folder_is_one_line_exit_2(read: str, minilm_path: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    tokenizer = minilm_path if read == "packed" else "whitespace"  # packed needs an EOS or SEP
    run = geoanalyze("marginals", "--dataset", "empty", "-t", tokenizer, "--read", read, cwd=tmp_path)
    refused(run, "empty", "no .txt files")


def test_marginals_say_the_mode_only_when_it_is_not_rows(shared_data: Path, tmp_path: Path) -> None:
    wikitext = str(shared_data / "wikitext2" / "validation.tokens")
    rows = json.loads(
        ok(geoanalyze("marginals", "--dataset", wikitext, "-t", "whitespace", "-f", "json", cwd=tmp_path)).stdout
    )
    assert all("read" not in source for source in rows["sources"]) and rows["n_positions"] <= 512
    args = ("marginals", "--dataset", wikitext, "-t", "whitespace", "--read", "document")
    document = json.loads(ok(geoanalyze(*args, "-f", "json", cwd=tmp_path)).stdout)
    assert [source["read"] for source in document["sources"]] == ["document"]
    assert document["n_sequences"] == 60 and document["n_positions"] > 512
    table = flat(ok(geoanalyze(*args, cwd=tmp_path)).stdout)
    assert "read as document" in table
    assert "read as" not in flat(ok(geoanalyze("marginals", "--dataset", wikitext, "-t", "whitespace", cwd=tmp_path)).stdout)


def test_stress_says_the_mode_in_its_table_and_json(tmp_path: Path) -> None:
    args = ("stress", "rope:d=8", "--dataset", DRIFT, "--max-length", "12", "--null-draws", "2", "--compare", "")
    table = flat(ok(geoanalyze(*args, "--read", "document", "-o", "document.json", cwd=tmp_path)).stdout)
    assert "read as document" in table
    assert json.loads((tmp_path / "document.json").read_text())["dataset"]["read"] == "document"


@pytest.mark.slow
def test_stress_in_document_mode_of_a_corpus_without_headings_scores_as_rows(tmp_path: Path) -> None:
    """No WikiText heading: every line is a document, so the scores are those of rows; rows' table
    and JSON say no mode."""
    args = ("stress", "rope:d=8", "--dataset", DRIFT, "--max-length", "12", "--null-draws", "2", "--compare", "")
    plain = json.loads(ok(geoanalyze(*args, "-f", "json", cwd=tmp_path)).stdout)
    assert "read" not in plain["dataset"]
    document = json.loads(ok(geoanalyze(*args, "--read", "document", "-f", "json", cwd=tmp_path)).stdout)
    assert document["scores"] == plain["scores"]
    assert "read as" not in flat(ok(geoanalyze(*args, cwd=tmp_path)).stdout)


def test_packed_minilm_counts_sequences_of_max_length(minilm_path: Path, tmp_path: Path) -> None:
    run = geoanalyze(
        "marginals", "--dataset", DRIFT, "-t", minilm_path, "--read", "packed", "--max-length", "64", "-f", "json",
        "--min-count", "1", cwd=tmp_path,
    )  # fmt: skip
    result = json.loads(ok(run).stdout)
    assert result["n_positions"] == 64 and result["sources"][0]["read"] == "packed"


def test_the_cli_and_the_corpus_layer_know_the_same_modes() -> None:
    from geoanalyze.cli.options import READ_MODES as CLI_MODES
    from geoanalyze.corpus.sources import READ_MODES

    assert CLI_MODES == READ_MODES == ("rows", "document", "packed")


def test_a_checkpoint_forward_pass_cached_for_rows_is_not_served_for_documents(minilm_path: Path, tmp_path: Path) -> None:
    """The forward pass's cache key names the read mode: rows counted and run first (cache on), then
    documents, whose rows must equal a document run without the cache (the articles are other sequences)."""
    lines = []
    for article in range(30):
        lines += [f" = Article {article} = ", *(f"line {k} of article {article} reads on, word after word, to the end." for k in range(4))]
    (tmp_path / "wiki.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ("stress", str(minilm_path), "--dataset", "wiki.txt", "--max-length", "16", "--min-count", "20",
            "--null-draws", "2", "--compare", "", "--layers", "1", "-f", "json")  # fmt: skip
    ok(geoanalyze(*args, cwd=tmp_path))  # rows, cached
    cached = json.loads(ok(geoanalyze(*args, "--read", "document", cwd=tmp_path)).stdout)
    fresh = json.loads(ok(geoanalyze(*args, "--read", "document", "--no-cache", cwd=tmp_path)).stdout)
    assert cached["layers"] and cached["layers"] == fresh["layers"]
