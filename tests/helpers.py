"""What the tests share: the repository's paths, one way to run a command in this process, and one
way to start a real process.

A command runs in-process (:func:`invoke`, :func:`geoanalyze`) through the console script's own
entry point :func:`geoanalyze.cli.app.main`, so usage errors and internal errors are mapped as a
user sees them; stdout and stderr are captured apart (``Run.stdout``, ``Run.stderr``), as a shell's
``2>`` separates them, and a warning the command raises is printed on its stderr, as Python prints it
in a fresh process. Each command starts with the package's per-process caches empty (loaded
checkpoints, tokenizers), as a new process does. This costs no interpreter start and no torch
import per command.

A real process (:func:`run_process`) is kept for what only a process shows: signals, start-up
(the environment at import time, imports before ``main``), a real exit status or a closed stdout,
rlimits, and scripts run as a user runs them. Its environment is this one's plus ``env``.

Test modules import this file as ``helpers`` (tests/ is on pytest's ``pythonpath``).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT / "sample_corpora"
DRIFT = SAMPLES / "drift.txt"
DRIFT_WORDS = SAMPLES / "drift-words.txt"
#: a synthetic corpus of whole words at 16 positions
SYNTHETIC_WORDS = "synthetic:drift,n=300,length=16,vocab=50"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: the scores that do not change when the table is scaled
SCALE_FREE = (
    "scaled_stress",
    "monotonicity_violation",
    "anchored_monotonicity_violation",
    "lag_violation",
    "relative_separation",
)

#: a `geoanalyze train` model and run small enough for seconds on a CPU (each test adds its evaluation
#: settings); :func:`train_sets` turns settings into ``--set`` words
TINY_TRAIN = (
    "model.d_model=32",
    "model.n_layers=2",
    "model.n_heads=4",
    "model.d_ff=64",
    "model.n_positions=16",
    "order_length=12",
    "batch_size=16",
    "steps=12",
    "warmup_steps=2",
)


def train_sets(*items: str) -> list[str]:
    """``--set`` for each item; a later item replaces an earlier one of the same key (a base's steps=12
    by steps=18), as each key may be given once on the command line."""
    chosen = {item.split("=", 1)[0]: item for item in items}
    return [arg for item in chosen.values() for arg in ("--set", item)]

#: the installed console script as a shell runs it (``python -m geoanalyze`` where it is not installed)
_SCRIPT = shutil.which("geoanalyze", path=str(Path(sys.executable).parent))
GEOANALYZE: list[str] = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "geoanalyze"]


@dataclass(frozen=True)
class Run:
    """A finished command: its exit code and what it printed on each stream."""

    code: int
    stdout: str
    stderr: str

    @property
    def errors(self) -> list[str]:
        """The ``error:`` lines of stderr."""
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def invoke(
    args: Sequence[Any],
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str = "",
    program: str = "geoanalyze",
) -> Run:
    """Run ``geoanalyze *args`` in-process in ``cwd``, as the console script does (``env`` on top of
    os.environ for the run; ``program``: the ``sys.argv[0]`` it sees, e.g. the script's full path).
    The package's caches start empty; the process state the run changes (cwd, argv, streams, SIGTERM
    handler, env, notes) is restored after it."""
    from geoanalyze import notes
    from geoanalyze.cli.app import main

    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
    code = 0
    _empty_caches()
    notes.take()  # a new process has none: a note an earlier test left pending is not this run's
    with _process_state(env):
        os.chdir(cwd)
        sys.argv = [program, *(str(a) for a in args)]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
        with _warnings_on(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        notes.take()
    return Run(code, out_bytes.getvalue().decode("utf-8", "replace"), err_bytes.getvalue().decode("utf-8", "replace"))


def geoanalyze(*args: Any, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> Run:
    """:func:`invoke` with the words as positional arguments (each passed through ``str``)."""
    return invoke(list(args), cwd, env, stdin)


def _empty_caches() -> None:
    """The package's per-process caches (``functools`` caches of its module-level functions: loaded
    checkpoints, tokenizers) emptied, so a command starts as in a new process: what it reads from
    disk and writes to the counts cache does not depend on the commands run before it."""
    for name, module in list(sys.modules.items()):
        if name != "geoanalyze" and not name.startswith("geoanalyze."):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()


_OTHER_TERMINATING = tuple(getattr(signal, name) for name in ("SIGHUP", "SIGQUIT") if hasattr(signal, name))


@contextmanager
def _process_state(env: dict[str, str] | None) -> Iterator[None]:
    saved_env = {key: os.environ.get(key) for key in (env or {})}
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_term = signal.getsignal(signal.SIGTERM)
    # main() also takes SIGHUP and SIGQUIT (a closed terminal, Ctrl-\); the test process gets its own back
    saved_others = {signum: signal.getsignal(signum) for signum in _OTHER_TERMINATING}
    try:
        os.environ.update(env or {})
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        signal.signal(signal.SIGTERM, saved_term)
        for signum, handler in saved_others.items():
            signal.signal(signum, handler)
        os.environ.pop("GEOANALYZE_DEBUG", None)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def _warnings_on(stream: TextIO) -> Iterator[None]:
    """Warnings raised during the run printed on ``stream`` (a user sees them on stderr); pytest's
    own recording would otherwise take them out of the command's stderr."""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, *_: Any) -> None:
        stream.write(warnings.formatwarning(message, category, filename, lineno))

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def ok(run: Run) -> Run:
    """The run succeeded: exit 0 and no traceback."""
    assert run.code == 0, str(run)
    assert "Traceback" not in run.stderr, str(run)
    return run


def refused(run: Run, *words: str, code: int = 2) -> str:
    """The run failed with ``code``, stderr is exactly one ``error:`` line and it holds every word; that line."""
    assert run.code == code, str(run)
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), str(run)
    assert "Traceback" not in run.stderr, str(run)
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def run_process(
    argv: Sequence[Any],
    cwd: Path | None = None,
    env: dict[str, str | None] | None = None,
    timeout: float | None = 300,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """A real process (``argv``, e.g. ``[*GEOANALYZE, "stress", ...]`` or ``[sys.executable, "-c", code]``),
    its output captured as text; its environment is os.environ with ``env`` on top (None: unset)."""
    environment = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def geoanalyze_process(*args: Any, cwd: Path, env: dict[str, str | None] | None = None, timeout: float = 300) -> Run:
    """``geoanalyze *args`` as a real process (the console script), for what is read at import time,
    e.g. ``COLUMNS``, the width of the result tables."""
    done = run_process([*GEOANALYZE, *args], cwd=cwd, env=env, timeout=timeout)
    return Run(done.returncode, done.stdout, done.stderr)


def files_under(*folders: Path) -> set[Path]:
    """Every path below ``folders`` (to check that a failed run left nothing behind)."""
    return {path for folder in folders for path in folder.rglob("*")}


def read_lines(path: Path) -> list[str]:
    """The non-blank lines of a text file."""
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def hellinger(p: Counter[Any], q: Counter[Any]) -> float:
    """sqrt(1 - sum_t sqrt(p_t q_t)) of two count tables, by brute force (an independent reference)."""
    n_p, n_q = sum(p.values()), sum(q.values())
    bc = sum(math.sqrt(p[t] / n_p * q[t] / n_q) for t in p.keys() & q.keys())
    return math.sqrt(max(0.0, 1.0 - bc))


def rope_reference(positions: list[int], d: int, base: float = 10000.0) -> np.ndarray:
    """r_i = (cos(i theta_k), sin(i theta_k))_{k < d/2}, theta_k = base^(-2k/d), a (cos, sin) pair per k:
    RoPE's unit-circle vectors by a loop over positions and frequencies (GEOMETRY.md)."""
    table = np.zeros((len(positions), d))
    for row, i in enumerate(positions):
        for k in range(d // 2):
            theta = base ** (-2 * k / d)
            table[row, 2 * k] = math.cos(i * theta)
            table[row, 2 * k + 1] = math.sin(i * theta)
    return table


def gfm_tables(text: str, code_backticks: bool = False) -> list[list[list[str]]]:
    """Every table of a Markdown text as rows of cell texts (header row first), as GFM reads them
    (markdown-it-py's CommonMark parser with its GFM table rule). ``code_backticks``: inline code
    keeps its backticks, so a cell compares with the table's text."""
    from markdown_it import MarkdownIt

    tables: list[list[list[str]]] = []
    row: list[str] = []
    cell: list[str] | None = None
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            tables[-1].append(row)
        elif token.type in ("th_open", "td_open"):
            cell = []
        elif token.type in ("th_close", "td_close"):
            assert cell is not None
            row.append("".join(cell))
            cell = None
        elif token.type == "inline" and cell is not None:
            code = "`{}`" if code_backticks else "{}"
            cell.append("".join(code.format(c.content) if c.type == "code_inline" else c.content for c in token.children or []))
    return tables


def stress_json(*args: Any, cwd: Path) -> dict[str, Any]:
    """``geoanalyze stress ARGS --null-draws 2 -f json`` succeeded (:func:`ok`); its JSON document."""
    document: dict[str, Any] = json.loads(ok(geoanalyze("stress", *args, "--null-draws", "2", "-f", "json", cwd=cwd)).stdout)
    return document


def linked_copy(source: Path, target: Path) -> Path:
    """A checkpoint folder whose files are hard links of ``source``'s (no 90 MB copy per step)."""
    target.mkdir(parents=True)
    for file in source.iterdir():
        if file.is_file():
            os.link(file, target / file.name)
    return target


def assert_rope_verdict(line: str, holm_tests: int) -> None:
    """The first line that the README's tour and the example script print: rope:d=64's verdict."""
    assert line.startswith("rope:d=64: no standard encoding has a better shape")
    assert line.endswith(
        f"against 999 shuffles of its positions (Holm over {holm_tests} tests), it carries position in shape, order, "
        "local order and lag (better than its shuffles)"
    )


def assert_python_runs(code: str) -> None:
    """``python -c code`` in a fresh interpreter (what it imports is its own) exits 0."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def position_counters(texts: list[str], tokenizer_path: Path, max_length: int) -> list[Counter[int]]:
    """counters[i][id] = number of texts with token ``id`` at position i ([CLS] is position 0), counted
    with transformers' AutoTokenizer alone (the independent reference of the real-corpus tests)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path))
    counters: list[Counter[int]] = []
    for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]:
        for i, token in enumerate(ids):
            if i == len(counters):
                counters.append(Counter())
            counters[i][token] += 1
    return counters


def rule_tables(text: str) -> list[list[list[str]]]:
    """Every table of the one (rich) style in ``text``: the header above its rule of ``─``, then the rows
    below it that have as many cells as the header; cells are two or more spaces apart (a label has
    single spaces)."""

    def cells(line: str) -> list[str]:
        return re.split(r" {2,}", line.strip())

    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        if index and line and set(line) == {"─"}:
            header = cells(lines[index - 1])
            rows = []
            for row in lines[index + 1 :]:
                if not row.strip() or len(cells(row)) != len(header):
                    break
                rows.append(cells(row))
            found.append([header, *rows])
    return found
