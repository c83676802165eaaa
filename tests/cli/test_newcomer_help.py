"""One name per idea, an example in every --help (each one parsed and run), help readable at 80 columns.

The names: ``--dataset`` the corpus, ``--estimate`` naive or corrected, ``--width`` the model width,
``--plot-dir`` the figures' folder, ``-o``/``--output`` a file and ``--output-dir`` a folder. The old
names (options.HIDDEN_ALIASES, the corpus as an argument, --heatmap, --plot) are still accepted and
shown nowhere.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import DRIFT, REPO_ROOT, invoke, ok, run_process
from test_docs import COMMANDS

from geoanalyze.cli.app import app
from geoanalyze.cli.examples import EXAMPLES
from geoanalyze.cli.options import HIDDEN_ALIASES

CLI_DOC = REPO_ROOT / "docs" / "cli.md"
ALL_EXAMPLES = [(key, example) for key, examples in EXAMPLES.items() for example in examples]


def words_of(example: str) -> list[str]:
    return shlex.split(example.replace("\\\n", " "))


def resolve(words: list[str]) -> tuple[tuple[str, ...], Any, list[str]]:
    """(command path, click command, its arguments) of ``geoanalyze WORDS...``."""
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    rest = list(words)
    while rest and hasattr(command, "commands") and rest[0] in command.commands:
        path.append(rest.pop(0))
        command = command.commands[path[-1]]
    return tuple(path), command, rest


def parsed(words: list[str]) -> dict[str, Any]:
    """The parameters click parses from ``geoanalyze WORDS...`` (nothing runs)."""
    path, command, rest = resolve(words)
    ctx = command.make_context(" ".join(("geoanalyze", *path)), rest)
    return dict(ctx.params)


def test_every_command_has_an_example_of_itself() -> None:
    assert set(EXAMPLES) == {" ".join(path) for path in COMMANDS}
    for key, example in ALL_EXAMPLES:
        words = words_of(example)
        assert words[0] == "geoanalyze", example
        path, _, _ = resolve(words[1:])
        assert " ".join(path).startswith(key) or key in ("", "datasets", "encodings"), (key, example)
        assert all(len(line) <= 76 for line in example.splitlines()), example


@pytest.mark.parametrize("key, example", ALL_EXAMPLES, ids=[e for _, e in ALL_EXAMPLES])
def test_every_example_parses(key: str, example: str) -> None:
    parsed(words_of(example)[1:])


def test_examples_are_in_help_and_in_the_reference(tmp_path: Path) -> None:
    reference = CLI_DOC.read_text(encoding="utf-8")
    for _key, example in ALL_EXAMPLES:
        assert example in reference, example
    run = ok(invoke(["mds", "--help"], cwd=tmp_path))
    assert "Example:" in run.stdout and "--rank 2 --width 64" in run.stdout


HELP_AT_80 = """
import io, os, sys, contextlib
os.environ["COLUMNS"] = "80"
from geoanalyze.cli.app import app
for words in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            app([*words.split(), "--help"], prog_name="geoanalyze", standalone_mode=False)
        except SystemExit:
            pass
    print("=== " + words)
    print(out.getvalue())
"""


@pytest.fixture(scope="module")
def help_pages() -> dict[str, str]:
    """Every command's --help at 80 columns, rendered in one real process (rich reads the width at import)."""
    names = [" ".join(path) for path in COMMANDS if path]
    result = run_process([sys.executable, "-c", HELP_AT_80, *names], cwd=REPO_ROOT, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    pages = result.stdout.split("=== ")[1:]
    return {page.split("\n", 1)[0]: page.split("\n", 1)[1] for page in pages}


def test_help_fits_80_columns_and_cuts_no_word(help_pages: dict[str, str]) -> None:
    assert len(help_pages) == len(COMMANDS) - 1
    for name, page in help_pages.items():
        for line in page.splitlines():
            assert len(line) <= 80, (name, line)
            assert "…" not in line, (name, line)


def test_help_shows_one_name_per_idea(help_pages: dict[str, str]) -> None:
    for name, page in help_pages.items():
        shown = page.split()
        for alias, canonical in HIDDEN_ALIASES.items():
            if canonical in page and alias.startswith("--"):
                assert not any(w.strip(",") == alias for w in shown), (name, alias)
        for old in ("--heatmap", "--plot ", "--max-positions", "--dim", "--distance"):
            assert old not in page, (name, old)
    for name in ("stress", "report", "marginals", "distances", "mds", "train"):
        assert "--dataset" in help_pages[name], name
    for name in ("distances", "mds", "stress", "track"):
        assert "--plot-dir" in help_pages[name], name
    for name in ("mds", "stress", "report"):
        assert "--width" in help_pages[name], name
    for name in ("train", "verify", "datasets synthesize"):
        assert "--output-dir" in help_pages[name] and " -o " not in help_pages[name], name
    assert "smoke" in help_pages["train"]
    # the default device is the preset's (ci: cpu), not "auto": the help says which
    words = " ".join(word for word in help_pages["train"].split() if word != "│")
    assert "on the CPU (--device auto: CUDA when present)" in words and "CUDA when present, the CPU" not in words
    assert "default: the preset's (cpu; paper: cuda)" in words


@pytest.mark.parametrize(
    "old, new",
    [
        (["mds", str(DRIFT), "--dim", "8"], ["mds", "--dataset", str(DRIFT), "--width", "8"]),
        (["mds", str(DRIFT), "-d", "8", "--distance", "corrected"], ["mds", "--dataset", str(DRIFT), "--width", "8", "--estimate", "corrected"]),
        (["stress", "rope", "--max-positions", "9", "--distance", "corrected"], ["stress", "rope", "--max-length", "9", "--estimate", "corrected"]),
        (["train", "-o", "runs/x"], ["train", "--output-dir", "runs/x"]),
        (["verify", "list", "-o", "out"], ["verify", "list", "--output-dir", "out"]),
        (["datasets", "synthesize", "drift", "-o", "c"], ["datasets", "synthesize", "drift", "--output-dir", "c"]),
        (["datasets", "synthesize", "drift", "--output", "c"], ["datasets", "synthesize", "drift", "--output-dir", "c"]),
    ],
)  # fmt: skip
def test_old_names_still_parse_to_the_same_values(old: list[str], new: list[str]) -> None:
    before, after = parsed(old), parsed(new)
    # the corpus given the old way (an argument) or with --dataset lands in one list either way
    if "sources" in before:
        corpora = [*(before.pop("sources") or []), *(before.pop("dataset") or [])]
        assert corpora == [*(after.pop("sources") or []), *(after.pop("dataset") or [])]
    assert before == after


@pytest.mark.slow
def test_old_figure_options_still_draw(tmp_path: Path) -> None:
    small = "synthetic:drift,n=200,length=12,vocab=40"
    ok(invoke(["distances", small, "--min-count", "5", "--heatmap", "old.png"], cwd=tmp_path))
    ok(invoke(["distances", "--dataset", small, "--min-count", "5", "--plot-dir", "figs"], cwd=tmp_path))
    assert (tmp_path / "old.png").read_bytes() == (tmp_path / "figs" / "hellinger.png").read_bytes()


def test_a_corpus_is_needed(tmp_path: Path) -> None:
    run = invoke(["marginals", "-t", "whitespace"], cwd=tmp_path)
    assert run.code == 2 and run.stderr.startswith("error: no corpus given"), run.stderr


def small_data(folder: Path) -> None:
    lines = [line for line in DRIFT.read_text(encoding="utf-8").splitlines() if line.strip()][:200]
    (folder / "sst2").mkdir(parents=True)
    for split in ("train", "validation"):
        (folder / "sst2" / f"{split}.tsv").write_text(
            "sentence\tlabel\n" + "".join(f"{line}\t{i % 2}\n" for i, line in enumerate(lines)), encoding="utf-8"
        )


@pytest.mark.slow
@pytest.mark.parametrize("key, example", ALL_EXAMPLES, ids=[e for _, e in ALL_EXAMPLES])
def test_every_example_runs_as_written(tmp_path: Path, key: str, example: str) -> None:
    work = tmp_path / "clone"
    work.mkdir()
    (work / "sample_corpora").symlink_to(REPO_ROOT / "sample_corpora")
    small_data(tmp_path / "shared" / "data")
    if key == "track":  # the run it tracks: the train example's
        ok(invoke(words_of(EXAMPLES["train"][0])[1:], cwd=work))
    run = invoke(words_of(example)[1:], cwd=work)
    assert run.code in ((0, 1) if "--fail-above" in example or "verify" in example else (0,)), run
    assert "Traceback" not in run.stderr


def test_no_message_names_a_hidden_alias() -> None:
    """Errors name an option as --help shows it (--width, not its old name --dim): every string of
    every ``raise`` in the package's source."""
    import ast

    old = [alias for alias in HIDDEN_ALIASES if alias.startswith("--") and alias not in ("--output",)]
    found = []
    for path in sorted((REPO_ROOT / "geoanalyze").rglob("*.py")):
        raises = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Raise)]
        for node in (child for raised in raises for child in ast.walk(raised)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for alias in old:
                    if re.search(rf"{alias}(?![-\w])", node.value):
                        found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {alias}")
    assert not found, found
