"""Options that do not apply to an input are refused (issue: the third bad-input catalogue), by the
one table geoanalyze.cli.inputs.OPTION_APPLIES every command consults: `distances ws.safetensors
--limit 10` printed the whole file's numbers; `--text-column` on plain text and `--split` on a
local file changed nothing. Beside them: `--include-hidden`, an output written as a folder
(`-o c.safetensors/`), a server at `--cluster` that is not Dask, a comma inside a `--compare` file name.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from geoanalyze.cli.common import given_as_folder, split_compare
from geoanalyze.cli.inputs import OPTION_APPLIES

from .harness import Sandbox

WS = ["-t", "whitespace"]

#: each corpus option as a user types it, with a value
CORPUS_OPTIONS = {
    "--limit": ["--limit", "10"],
    "-t": ["-t", "whitespace"],
    "--max-length": ["--max-length", "8"],
    "--sample": ["--sample", "0.5"],
    "--sample-seed": ["--sample-seed", "3"],
    "--exclude-special": ["--exclude-special"],
    "--no-special-tokens": ["--no-special-tokens"],
    "--split-seed": ["--split-seed", "1"],
    "--split": ["--split", "validation"],
    "--text-column": ["--text-column", "text"],
    "--data-dir": ["--data-dir", "."],
    "--no-cache": ["--no-cache"],
    "--workers": ["--workers", "2"],
    "--work-dir": ["--work-dir", "work"],
    "--include-hidden": ["--include-hidden"],
}
MDS_OPTIONS = [name for name in CORPUS_OPTIONS if name not in ("--sample", "--sample-seed", "--workers", "--work-dir")]


def flag(words: list[str]) -> str:
    return {"-t": "--tokenizer"}.get(words[0], words[0])


@pytest.fixture
def made(sandbox: Sandbox) -> Sandbox:
    """a.txt, its counts ws.safetensors and its distances d.safetensors."""
    sandbox.copy_sample("drift-words.txt", "a.txt")
    sandbox.accepted("marginals", "a.txt", *WS, "-o", "ws.safetensors")
    sandbox.accepted("distances", "ws.safetensors", "-o", "d.safetensors", "--min-count", "1")
    return sandbox


def test_the_table_names_every_corpus_option() -> None:
    assert {flag(words) for words in CORPUS_OPTIONS.values()} <= {a.flag for a in OPTION_APPLIES.values()}


@pytest.mark.parametrize(
    ("command", "option"),
    [(command, option) for command in ("distances", "marginals") for option in CORPUS_OPTIONS]
    + [("mds", option) for option in MDS_OPTIONS],
)
def test_a_corpus_option_on_a_counts_file(made: Sandbox, command: str, option: str) -> None:
    words = CORPUS_OPTIONS[option]
    made.refused(command, "ws.safetensors", *words, words=(flag(words), "does not apply", "ws.safetensors"))


@pytest.mark.parametrize("option", MDS_OPTIONS)
def test_a_corpus_option_on_a_distances_file(made: Sandbox, option: str) -> None:
    words = CORPUS_OPTIONS[option]
    made.refused("mds", "d.safetensors", *words, words=(flag(words), "does not apply", "distances file"))


def test_the_same_file_without_the_option_is_the_whole_file(made: Sandbox) -> None:
    whole = json.loads(made.accepted("distances", "ws.safetensors", "-f", "json").stdout)
    assert whole["sources"] == [{"source": "ws.safetensors", "from": "counts file"}]


@pytest.mark.parametrize(
    ("command", "option", "corpus"),
    [
        ("marginals", ["--text-column", "text"], "a.txt"),
        ("marginals", ["--split", "validation"], "a.txt"),
        ("marginals", ["--data-dir", "."], "a.txt"),
        ("marginals", ["--include-hidden"], "a.txt"),
        ("marginals", ["--text-column", "text"], "synthetic:drift,n=50"),
        ("marginals", ["--split", "test"], "synthetic:drift,n=50"),
        ("distances", ["--text-column", "text"], "a.txt"),
        ("mds", ["--split", "validation"], "a.txt"),
    ],
)
def test_an_option_that_changes_nothing_on_this_corpus(
    made: Sandbox, command: str, option: list[str], corpus: str
) -> None:
    made.refused(command, corpus, *option, *WS, words=(option[0], "does not apply"))


@pytest.mark.parametrize("command", ["stress", "report"])
def test_stress_and_report_refuse_text_column_on_plain_text(made: Sandbox, command: str) -> None:
    out = ["-o", "r.md"] if command == "report" else []
    made.refused(
        command, "sinusoidal:d=8", *out, "--dataset", "a.txt", "--text-column", "text", words=("--text-column",)
    )


def test_options_that_apply_to_one_input_of_several(made: Sandbox) -> None:
    """A corpus option shapes the corpora of a mix (the counts file is used as written)."""
    made.write("t.tsv", "label\ttext\n" + "".join(f"0\tw{i} w{i + 1} w{i + 2}\n" for i in range(30)))
    run = made.accepted("marginals", "t.tsv", "a.txt", "--text-column", "text", *WS, "-f", "json")
    assert json.loads(run.stdout)["n_sequences"] == 30 + 2000
    mixed = made.accepted("marginals", "t.tsv", "ws.safetensors", "--text-column", "text", *WS, "-f", "json")
    assert json.loads(mixed.stdout)["n_sequences"] == 30 + 2000


def test_data_dir_from_the_environment_is_a_setting_not_an_option(made: Sandbox) -> None:
    made.accepted("distances", "ws.safetensors", env={"GEOANALYZE_DATA_DIR": str(made.root)})


# --- --include-hidden ------------------------------------------------------------------------


def test_include_hidden_reads_hidden_files_of_a_folder(sandbox: Sandbox) -> None:
    for index in range(30):
        sandbox.write(f"c/{index:02d}.txt", f"w{index} w{index + 1}\n")
    sandbox.write("c/.ipynb_checkpoints/00-checkpoint.txt", "w0 w1\n")
    sandbox.write("c/.notes.txt", "w5 w6\n")
    counted = [
        json.loads(sandbox.accepted("marginals", "c", *WS, *extra, "-f", "json").stdout)["n_sequences"]
        for extra in ([], ["--include-hidden"])
    ]
    assert counted == [30, 32]


def test_include_hidden_in_a_glob(sandbox: Sandbox) -> None:
    rows = "".join(json.dumps({"text": f"w{i} w{i + 1}"}) + "\n" for i in range(10))
    sandbox.write("s/a.jsonl", rows)
    sandbox.write("s/.old/a.jsonl", rows)
    counted = [
        json.loads(sandbox.accepted("marginals", "s/**/*.jsonl", *WS, "--workers", "1", *extra, "-f", "json").stdout)[
            "n_sequences"
        ]
        for extra in ([], ["--include-hidden"])
    ]
    assert counted == [10, 20]


# --- an output written as a folder -----------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("marginals", ["-o", "c.safetensors/"]),
        ("marginals", ["--output=c.safetensors/"]),
        ("distances", ["-oc.safetensors/"]),
        ("mds", ["--output", "pe.safetensors/"]),
    ],
)
def test_a_file_output_ending_in_a_slash(made: Sandbox, command: str, output: list[str]) -> None:
    """`-o c.safetensors/` wrote a file: a Path drops the slash the user typed."""
    made.refused(command, "a.txt", *WS, *output, words=("ends in a slash", "drop the slash"))


def test_the_words_typed_are_read() -> None:
    assert given_as_folder("--output", ["marginals", "a.txt", "-o", "x/"])
    assert not given_as_folder("--output", ["marginals", "a/", "-o", "x.safetensors"])
    assert not given_as_folder("--output", ["marginals", "a.txt", "--work-dir", "w/"])


# --- a server that is not a Dask scheduler --------------------------------------------------


@pytest.fixture
def not_dask() -> Iterator[str]:
    """A TCP server that answers every connection as an HTTP server would."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def answer() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 10)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(2)
    server.close()


def test_a_server_that_is_not_dask(made: Sandbox, not_dask: str) -> None:
    """Reported as "not enough memory (3 EiB)": the HTTP answer read as Dask frame lengths."""
    line = made.refused("marginals", "a.txt", *WS, "--cluster", not_dask, words=("not a Dask scheduler",)).errors[0]
    assert "memory" not in line and "EiB" not in line


# --- a comma inside a --compare file name ---------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "specs"),
    [
        ("file:a,b.npy", ("file:a", "b.npy")),  # unquoted: two specs, as before
        ('file:"a,b.npy",rope', ("file:a,b.npy", "rope")),
        ("file:'a,b.npy'", ("file:a,b.npy",)),
        ("file:a\\,b.npy,alibi:heads=8,head=2", ("file:a,b.npy", "alibi:heads=8,head=2")),
        ("sinusoidal,rope", ("sinusoidal", "rope")),
        ("file:a\\\\b.npy", ("file:a\\b.npy",)),
    ],
)
def test_split_compare(typed: str, specs: tuple[str, ...]) -> None:
    assert split_compare(typed) == specs


def test_a_compared_file_with_a_comma_in_its_name(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift-words.txt", "a.txt")
    table = np.random.default_rng(0).normal(size=(48, 8))
    np.save(sandbox.path("a,b.npy"), table)
    common = ["sinusoidal:d=8", "--dataset", "a.txt", "-t", "whitespace", "--min-count", "1", "-f", "json"]
    run = sandbox.accepted("stress", *common, "--compare", '"file:a,b.npy"', "--null-draws", "2")
    assert "file:a,b.npy" in json.loads(run.stdout)["scores"]
    sandbox.refused("stress", *common, "--compare", "file:'a,b.npy", words=("quote",))
