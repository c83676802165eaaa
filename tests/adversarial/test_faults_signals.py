"""Every terminating signal cleans up, and closed or narrow streams are survived (issue 22), with real
processes: SIGHUP (a closed terminal or ssh session) and SIGQUIT end a run as SIGTERM does (exit
130, ``error: interrupted``, no staged ``.<name>.<pid>-0.staged`` file left); a stdout closed
before the start (``>&-``) is one error line, not a traceback at import; a stream that cannot
encode a file name (``PYTHONIOENCODING=ascii``) gets it escaped, not a UnicodeEncodeError."""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

import pytest
from helpers import GEOANALYZE, run_process

from .harness import (
    SAMPLES,
    Sandbox,
    assert_interrupted_mid_count,
    python_process,
    python_run,
    signal_env,
    signalled_while_importing,
    tree,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and streams")

QUICK = ["--null-draws", "2", "--compare", "", "-t", "whitespace", "--no-cache"]


@pytest.mark.parametrize(
    "signum", [signal.SIGHUP, pytest.param(signal.SIGQUIT, marks=pytest.mark.slow)], ids=["sighup", "sigquit"]
)
def test_a_hangup_or_quit_mid_run_says_interrupted_and_leaves_nothing(tmp_path: Path, signum: int) -> None:
    assert_interrupted_mid_count(tmp_path, signum)


def test_a_hangup_while_importing_says_interrupted(tmp_path: Path) -> None:
    result = signalled_while_importing(tmp_path, "SIGHUP", default_handler=True)
    assert result.returncode == 130, result
    assert result.stderr.strip() == "error: interrupted"


# A signal that comes while an output is staged: sent by the process to itself as the figure has been
# drawn into its staged file (the one moment a real signal cannot be timed to), then the run goes on.
_SIGNALLED_WHILE_STAGED = """
import os, signal, sys, time
for signum in (signal.SIGHUP, signal.SIGQUIT):
    signal.signal(signum, signal.SIG_DFL)
import geoanalyze.report.figures as figures
SIGNAL, FOLDER = getattr(signal, sys.argv[1]), sys.argv[2]
drawn = figures.distance_heatmap
def signalled(*args, **kwargs):
    drawn(*args, **kwargs)
    staged = [name for name in os.listdir(".") + os.listdir(FOLDER) if ".staged" in name]
    print("staged:", len(staged), file=sys.stderr, flush=True)
    os.kill(os.getpid(), SIGNAL)
    time.sleep(5)
figures.distance_heatmap = signalled
sys.argv = ["geoanalyze", *sys.argv[3:]]
from geoanalyze.cli.app import main
main()
"""

STAGED = {
    "report": (".", ["report", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", "r.md"]),
    "distances-heatmap": (
        ".",
        ["distances", "drift.txt", "-t", "whitespace", "--no-cache", "--heatmap", "h.png", "-o", "d.safetensors"],
    ),
    "stress-plot-dir": ("figs", ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "--plot-dir", "figs"]),
}


SLOW = pytest.mark.slow  # ~10 s each on 2 cores: one case stays in the default suite
STAGED_CASES = [
    pytest.param(case, name, marks=() if (case, name) == ("distances-heatmap", "SIGHUP") else SLOW, id=f"{case}-{name}")
    for case in STAGED
    for name in ("SIGHUP", "SIGQUIT", "SIGTERM")
]


@pytest.mark.parametrize(("case", "signal_name"), STAGED_CASES)
def test_a_signal_while_outputs_are_staged_removes_them(sandbox: Sandbox, case: str, signal_name: str) -> None:
    # was (SIGHUP, SIGQUIT): the process died at once, leaving .<name>.<pid>-0.staged files
    sandbox.copy_sample("drift.txt")
    folder, args = STAGED[case]
    sandbox.path(folder).mkdir(exist_ok=True)
    before = tree(sandbox.root)
    done = python_process(sandbox, _SIGNALLED_WHILE_STAGED, signal_name, folder, *args)
    lines = done.stderr.strip().splitlines()
    assert lines[0] != "staged: 0" and lines[1:] == ["error: interrupted"], done.stderr  # signalled while staged
    assert done.returncode == 130, done.stderr
    assert tree(sandbox.root) == before, "a signalled run left files"


def test_a_hangup_under_nohup_is_still_ignored(tmp_path: Path) -> None:
    # nohup sets SIGHUP to ignored: the run must not turn it back into an interrupt
    shutil.copy(SAMPLES / "drift.txt", tmp_path / "drift.txt")
    code = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "sys.argv = ['geoanalyze', 'marginals', 'drift.txt', '-t', 'whitespace', '--no-cache', '-f', 'json']\n"
        "import geoanalyze.cli.app as app\n"
        "import geoanalyze.corpus.marginals as marginals\n"
        "os.kill(os.getpid(), signal.SIGHUP)\n"
        "app.main()\n"
    )
    result = python_run(code, tmp_path, timeout=120)
    assert result.returncode == 0, result
    assert '"n_sequences": 2000' in result.stdout


def test_a_closed_stdout_is_one_error_line(tmp_path: Path) -> None:
    # was: exit 1 and a traceback at import (sys.stdout is None in the width probe)
    shutil.copy(SAMPLES / "drift.txt", tmp_path / "drift.txt")
    for args in (["marginals", "drift.txt", "-t", "whitespace", "-o", "c.safetensors"], ["--version"]):
        result = run_process(["bash", "-c", '"$@" >&-', "bash", *GEOANALYZE, *args], cwd=tmp_path, env=signal_env(tmp_path))
        assert result.returncode == 2, result
        assert result.stderr.strip().splitlines() == [
            "error: stdout is closed (`>&-`), so the results would go nowhere; send them somewhere, "
            "e.g. `> /dev/null` to discard them"
        ], result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drift.txt"]  # nothing written, no cache either


def test_a_closed_stderr_still_runs(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "drift.txt", tmp_path / "drift.txt")
    args = ["marginals", "drift.txt", "-t", "whitespace", "--no-cache", "-f", "json"]
    result = run_process(["bash", "-c", '"$@" 2>&-', "bash", *GEOANALYZE, *args], cwd=tmp_path, env=signal_env(tmp_path))
    assert result.returncode == 0, result
    assert '"n_sequences": 2000' in result.stdout


@pytest.mark.parametrize("format", ["table", *(pytest.param(f, marks=pytest.mark.slow) for f in ("json", "markdown"))])
def test_a_stream_that_cannot_encode_a_name_gets_it_escaped(tmp_path: Path, format: str) -> None:
    # was: exit 3, internal error (UnicodeEncodeError)
    name = "ünï😀.txt"
    shutil.copy(SAMPLES / "drift.txt", tmp_path / name)
    result = run_process(
        [*GEOANALYZE, "marginals", name, "-t", "whitespace", "--no-cache", "-f", format],
        cwd=tmp_path,
        env=signal_env(tmp_path, PYTHONIOENCODING="ascii"),
    )
    assert result.returncode == 0, result
    assert "\\xfcn\\xef\\U0001f600.txt" in result.stdout or "\\u00fcn\\u00ef\\ud83d\\ude00" in result.stdout, result
    assert "2000" in result.stdout and not result.stderr.strip()  # drift.txt: 2000 texts


def test_an_error_naming_an_unencodable_name_is_escaped(tmp_path: Path) -> None:
    result = run_process(
        [*GEOANALYZE, "marginals", "ünï😀.txt", "-t", "whitespace"],
        cwd=tmp_path,
        env=signal_env(tmp_path, PYTHONIOENCODING="ascii"),
    )
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "\\xfcn\\xef\\U0001f600" in lines[0], result
