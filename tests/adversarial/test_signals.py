"""Signals and pipes, with real processes: Ctrl-C and SIGTERM say ``error: interrupted`` and exit
130 (also while the program is still importing), and a closed stdout (``| head``) ends the run
quietly with 141 (128 + SIGPIPE), without a traceback or Python's "Exception ignored" line."""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

import pytest
from helpers import GEOANALYZE, run_process

from .harness import (
    ROPE_ON_DRIFT,
    SAMPLES,
    assert_interrupted_mid_count,
    signal_env,
    signalled_while_importing,
    started,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pipes")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_mid_run_says_interrupted_and_exits_130(tmp_path: Path, signum: int) -> None:
    assert_interrupted_mid_count(tmp_path, signum)


def test_a_signal_while_importing_says_interrupted(tmp_path: Path) -> None:
    # The program's module installs its handler before its heavy imports: a signal that comes then
    # (here sent right after the import, before main() runs) is "interrupted", not a traceback.
    result = signalled_while_importing(tmp_path, "SIGTERM")
    assert result.returncode == 130, result
    assert result.stderr.strip() == "error: interrupted"
    assert "not interrupted" not in result.stdout


PIPED = [
    ("json", ["marginals", "drift.txt", "-t", "whitespace", "-f", "json"]),
    ("table", ["marginals", "drift.txt", "-t", "whitespace"]),
    ("help", ["stress", "--help"]),
    ("threshold", [*ROPE_ON_DRIFT, "--null-draws", "2", "--compare", "", "--fail-above", "scaled_stress=1e-12"]),
]


@pytest.mark.parametrize("args", [case[1] for case in PIPED], ids=[case[0] for case in PIPED])
def test_a_closed_stdout_ends_quietly_with_141(tmp_path: Path, args: list[str]) -> None:
    shutil.copy(SAMPLES / "drift.txt", tmp_path / "drift.txt")
    process = started(args, tmp_path)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader went away before the first line (`| head -c 0`)
    err = process.stderr.read().decode()
    process.wait(timeout=60)
    assert process.returncode == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err, err
    assert not [line for line in err.splitlines() if line.startswith("error:")], err


def test_output_a_reader_took_whole_exits_0(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "drift.txt", tmp_path / "drift.txt")
    result = run_process(
        [*GEOANALYZE, "marginals", "drift.txt", "-t", "whitespace", "-f", "json"],
        cwd=tmp_path,
        env=signal_env(tmp_path),
        timeout=60,
    )
    assert result.returncode == 0, result
    assert result.stdout.lstrip().startswith("{") and not result.stderr.strip()
