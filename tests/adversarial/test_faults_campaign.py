"""A fresh campaign beside issue 22's cases, in the classes of its faults but not among its cases:
every single-valued option of every command given twice (walked from the app, so a new option is
covered too), the repeatable ones still repeatable; broken tokenizer folders; text that is UTF-16
or UTF-32 without a byte order mark, blank after its line ends, or a BOM alone; odd COLUMNS and
stream encodings; config values of the wrong type; --scale without an output file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from helpers import geoanalyze_process
from typer.core import TyperOption

from geoanalyze.cli.app import app

from .harness import SAMPLES, Sandbox


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from _commands(sub, [*path, name])
    else:
        yield path, command


def _value_options(multiple: bool) -> list[tuple[list[str], str]]:
    return [
        (path, param.opts[0])
        for path, command in _commands(typer.main.get_command(app), [])
        for param in command.params
        if isinstance(param, TyperOption) and not param.is_flag and not param.count and param.multiple == multiple
    ]


SINGLE = _value_options(multiple=False)
REPEATABLE = _value_options(multiple=True)


def test_the_walk_finds_every_command() -> None:
    paths = {" ".join(path) for path, _ in SINGLE}
    assert {"stress", "report", "marginals", "distances", "mds", "train", "verify", "datasets synthesize"} <= paths
    assert len(SINGLE) >= 100


@pytest.mark.parametrize(("path", "option"), SINGLE, ids=[f"{' '.join(p)} {o}" for p, o in SINGLE])
def test_every_single_valued_option_given_twice_is_refused(sandbox: Sandbox, path: list[str], option: str) -> None:
    # refused while the command line is read: before any argument is checked or file read
    run = sandbox.refused(*path, option, "1", option, "2", words=("given more than once", option))
    assert f"geoanalyze {' '.join(path)} --help" in run.errors[0]


@pytest.mark.parametrize(("path", "option"), REPEATABLE, ids=[f"{' '.join(p)} {o}" for p, o in REPEATABLE])
def test_a_repeatable_option_given_twice_is_not_refused_as_repeated(
    sandbox: Sandbox, path: list[str], option: str
) -> None:
    # --help, read after the options, ends the run as soon as they parsed: no corpus is looked for
    run = sandbox.run(*path, option, "a=1", option, "b=2", "--help")
    assert run.code == 0 and "given more than once" not in run.stderr, str(run)
    assert "Usage" in run.stdout + run.stderr


# --- broken tokenizer folders -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"tokenizer.json": "{not json"}, ("holds no tokenizer", "Expecting property name")),
        ({"tokenizer.json": ""}, ("holds no tokenizer",)),
        ({"vocab.txt": ""}, ("holds no tokenizer",)),
        ({"vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"}, ("holds no tokenizer",)),
        ({"special_tokens_map.json": '{"unk_token": "[UNK]"}'}, ("no tokenizer files",)),
        ({"config.json": '{"model_type": "bert", "vocab_size": 30522}'}, ("no tokenizer files",)),
    ],
    ids=["corrupt-json", "empty-json", "empty-vocab", "specials-only-vocab", "special-map-only", "config-only"],
)
def test_a_broken_tokenizer_folder_is_one_line(sandbox: Sandbox, files: dict[str, str], words: tuple[str, ...]) -> None:
    for name, content in files.items():
        sandbox.write(f"tok/{name}", content)
    sandbox.write("t.txt", "alpha beta\n" * 10)
    sandbox.refused("marginals", "t.txt", "-t", "tok", "--no-cache", words=words)


# --- text without a byte order mark, or blank ------------------------------------------------------------

TEXT = "ab cd\nef gh\n"


BOMLESS = [(f"utf-{bits}-{end[0]}e", f"UTF-{bits} ({end}-endian)") for bits in (16, 32) for end in ("little", "big")]


@pytest.mark.parametrize(("codec", "what"), BOMLESS)
@pytest.mark.parametrize("name", ["u.txt", "u.tsv", "u.txt.gz"])
def test_utf16_or_utf32_without_a_bom_is_named(sandbox: Sandbox, codec: str, what: str, name: str) -> None:
    import gzip

    data = (("text\n" if name == "u.tsv" else "") + TEXT).encode(codec)
    sandbox.write(name, gzip.compress(data) if name.endswith(".gz") else data)
    iconv = f"iconv -f {codec.upper().replace('-LE', 'LE').replace('-BE', 'BE')}"
    sandbox.refused("marginals", name, "-t", "whitespace", words=(what, "without a byte order mark", iconv))


def test_a_nul_in_other_bytes_is_still_a_binary_file(sandbox: Sandbox) -> None:
    sandbox.write("b.txt", b"a\x00b\x01\x02\x03")
    sandbox.refused("marginals", "b.txt", "-t", "whitespace", words=("NUL byte", "binary"))


@pytest.mark.parametrize(
    "content",
    [b"\r\r\r", b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n\r\n", b"\r\n\r\n"],
    ids=["crs", "bom", "bom-crlf", "crlfs"],
)
def test_a_corpus_blank_after_its_line_ends_holds_no_text(sandbox: Sandbox, content: bytes) -> None:
    sandbox.write("blank.txt", content)
    sandbox.refused("marginals", "blank.txt", "-t", "whitespace", "--no-cache", words=("holds no text",))


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bom-cr.txt", b"\xef\xbb\xbfab cd\ref gh\r"),
        ("cr.csv", b"text\rab cd\ref gh\r"),
        ("cr.tsv", b"text\rab cd\ref gh\r"),
        ("crlf-bom.tsv", b"\xef\xbb\xbftext\r\nab cd\r\nef gh\r\n"),
    ],
)
def test_cr_line_ends_with_a_bom_or_in_tables(sandbox: Sandbox, name: str, content: bytes) -> None:
    sandbox.write(name, content)
    document = json.loads(sandbox.accepted("marginals", name, "-t", "whitespace", "--no-cache", "-f", "json").stdout)
    assert document["n_sequences"] == 2 and document["vocab_size"] == 4 and document["totals"] == [2, 2]


# --- the terminal and the streams -------------------------------------------------------------------------


SLOW = pytest.mark.slow  # a real process each (~4 s on 2 cores): the first cases stay in the default suite


@pytest.mark.parametrize(
    "columns", ["5", "abc", *(pytest.param(c, marks=SLOW) for c in ("0", "-1", "100000", "39", "40", ""))]
)
def test_odd_columns_print_whole_cells(sandbox: Sandbox, columns: str) -> None:
    sandbox.copy_sample("drift.txt")
    run = geoanalyze_process("marginals", "drift.txt", "-t", "whitespace", cwd=sandbox.root, env={"COLUMNS": columns})
    assert run.code == 0, str(run)
    assert any(line.split() == ["sequences", "2000"] for line in run.stdout.splitlines()), run.stdout


@pytest.mark.parametrize("encoding", ["latin-1", pytest.param("cp1252", marks=SLOW)])
def test_a_name_the_stream_cannot_encode_is_escaped(sandbox: Sandbox, encoding: str) -> None:
    name = "ünï😀.txt"
    (sandbox.root / name).write_bytes((SAMPLES / "drift.txt").read_bytes())
    run = geoanalyze_process(
        "marginals", name, "-t", "whitespace", "-f", "json", cwd=sandbox.root, env={"PYTHONIOENCODING": encoding}
    )
    assert run.code == 0 and not run.stderr.strip(), str(run)
    assert json.loads(run.stdout)["n_sequences"] == 2000


@SLOW
def test_a_c_locale_reads_and_prints_a_unicode_name(sandbox: Sandbox) -> None:
    name = "ünï😀.txt"
    (sandbox.root / name).write_bytes((SAMPLES / "drift.txt").read_bytes())
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": None}  # type: ignore[dict-item]
    run = geoanalyze_process("marginals", name, "-t", "whitespace", "-f", "json", cwd=sandbox.root, env=env)
    assert run.code == 0, str(run)
    assert json.loads(run.stdout)["n_sequences"] == 2000


# --- config values of the wrong type --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("1.5", ("steps must be an integer", "1.5")),
        ('"10"', ("steps must be an integer", "'10'")),
        ("true", ("steps must be an integer", "True")),
        ("-3", ("steps must be at least 1",)),
        ("0", ("steps must be at least 1",)),
        ("nan", ("steps must be an integer",)),
        ("inf", ("steps must be an integer",)),
    ],
)
def test_a_steps_of_the_wrong_type_in_a_config_is_refused(sandbox: Sandbox, value: str, words: tuple[str, ...]) -> None:
    sandbox.write("c.toml", f"steps = {value}\n")
    sandbox.refused("train", "--config", "c.toml", "-o", "run", words=words)


@pytest.mark.parametrize("value", ["1e3", "2**70", "1180591620717411303424", "0x10"])
def test_a_steps_of_the_wrong_form_in_set_is_refused(sandbox: Sandbox, value: str) -> None:
    sandbox.refused("train", "--set", f"steps={value}", "-o", "run", words=("steps",))


# --- --scale without a PE file ---------------------------------------------------------------------------


@pytest.mark.parametrize("scale", ["nan", "inf", "-1", "0"])
def test_a_scale_that_is_no_positive_number_is_refused(sandbox: Sandbox, scale: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused("mds", "drift.txt", "-t", "whitespace", "--no-cache", "--scale", scale, words=("--scale",))


def test_a_scale_beyond_float32_without_a_file_prints_float64_numbers(sandbox: Sandbox) -> None:
    # nothing is written in float32: the stress of A (float64, carrying the scale) is printed
    sandbox.copy_sample("drift.txt")
    run = sandbox.accepted("mds", "drift.txt", "-t", "whitespace", "--no-cache", "--scale", "1e40", "-f", "json")
    assert os.listdir(sandbox.root) == ["drift.txt"]
    assert json.loads(run.stdout)


@SLOW
def test_an_empty_figure_folder_is_replaced(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.path("r_files").mkdir()
    quick = ["-t", "whitespace", "--null-draws", "2", "--compare", "", "--no-cache"]
    sandbox.accepted("report", "rope:d=16", "--dataset", "drift.txt", *quick, "-o", "r.md")
    assert sorted(p.name for p in Path(sandbox.path("r_files")).iterdir())[0] == "0-hellinger.png"
