"""The adversarial suite's one way to run a command and check the promises of docs/reliability.md.

A case runs ``geoanalyze`` in-process (:func:`helpers.invoke`: the console script's own entry
point, so usage errors and internal errors are mapped as a user sees them), inside a sandbox
folder that holds every input. After the run it checks:

* the exit code;
* stderr: exactly one ``error:`` line (``note:`` lines are allowed only on success or exit 1);
* nothing half-written: a refused run leaves the sandbox exactly as it was (same files, same
  bytes, no new files or folders, no staging leftovers);
* inputs unchanged: every file that existed before has the same hash after, whatever the exit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers import GEOANALYZE, REPO_ROOT, SAMPLES, Run, invoke, run_process

__all__ = [
    "REPO_ROOT",
    "SAMPLES",
    "Run",
    "Sandbox",
    "invoke",
    "python_process",
    "read_only",
    "running_as_root",
    "tree",
]


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, or its kind for folders, links and FIFOs."""
    entries: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            relative = str(path.relative_to(root))
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                entries[relative] = f"link -> {os.readlink(path)}"
            elif stat.S_ISDIR(mode):
                entries[relative] = "folder"
            elif stat.S_ISREG(mode):
                try:
                    entries[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
                except PermissionError:
                    entries[relative] = "unreadable"
            else:
                entries[relative] = "special"
    return entries


class Sandbox:
    """A folder holding a case's inputs; runs commands in it and checks the promises."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        return self.root / name

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def copy_sample(self, name: str, as_name: str | None = None) -> Path:
        return self.write(as_name or name, (SAMPLES / name).read_bytes())

    def run(self, *args: Any, env: dict[str, str] | None = None, stdin: str = "") -> Run:
        """Run and check only that no file that existed before changed."""
        before = tree(self.root)
        result = invoke([str(a) for a in args], self.root, env, stdin)
        after = tree(self.root)
        changed = [name for name, digest in before.items() if after.get(name) != digest]
        assert not changed, f"inputs changed or removed: {changed}\n{result}"
        return result

    def refused(self, *args: Any, words: tuple[str, ...] = (), code: int = 2, **kwargs: Any) -> Run:
        """Run a case that must fail: ``code``, one ``error:`` line naming ``words``, sandbox untouched."""
        before = tree(self.root)
        result = invoke([str(a) for a in args], self.root, kwargs.get("env"), kwargs.get("stdin", ""))
        after = tree(self.root)
        assert result.code == code, str(result)
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        if code == 2:
            assert len(lines) == 1, f"expected one error line\n{result}"
        assert len(result.errors) == 1 and lines[-1].startswith("error:"), f"expected one error line\n{result}"
        for word in words:
            assert word.lower() in result.errors[0].lower(), f"{word!r} not in {result.errors[0]!r}"
        if code not in (0, 1):  # a refused or interrupted run leaves nothing behind
            new = sorted(set(after) - set(before))
            assert not new, f"a refused run left files: {new}\n{result}"
        changed = [name for name, digest in before.items() if after.get(name) != digest]
        assert not changed, f"inputs changed or removed: {changed}\n{result}"
        return result

    def accepted(self, *args: Any, **kwargs: Any) -> Run:
        result = self.run(*args, **kwargs)
        assert result.code == 0, str(result)
        assert not result.errors, str(result)
        return result


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (a folder) without write permission for the test's duration."""
    mode = path.stat().st_mode
    path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield path
    finally:
        path.chmod(mode)


@contextlib.contextmanager
def unreadable(path: Path, mode: int) -> Iterator[Path]:
    """``path`` without any permission for the test's duration, then ``mode``."""
    path.chmod(0)
    try:
        yield path
    finally:
        path.chmod(mode)


def python_process(
    sandbox: Sandbox, code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -c code *args`` in the sandbox as a real process (for a signal, an rlimit), importing
    this checkout's geoanalyze."""
    extra: dict[str, str | None] = {"PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    return run_process([sys.executable, "-c", code, *args], cwd=sandbox.root, env=extra)


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


#: ``stress rope:d=16`` on a copy of sample_corpora/drift.txt, split on whitespace
ROPE_ON_DRIFT = ["stress", "rope:d=16", "--dataset", "drift.txt", "-t", "whitespace"]

#: a count that runs long enough to be signalled mid-run
LONG_COUNT = ["marginals", "synthetic:drift,n=700000,length=64", "--no-cache", "--workers", "1"]


def signal_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a real process under a signal test: this checkout, no progress lines, its own cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["GEOANALYZE_PROGRESS_SECONDS"] = "100000"
    env["GEOANALYZE_CACHE_DIR"] = str(tmp_path / "cache")
    return {**env, **extra}


def _default_signals() -> None:
    # a test runner started in the background (nohup, CI) may ignore these; a user's terminal does not
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


def started(args: list[str], tmp_path: Path) -> subprocess.Popen[bytes]:
    """``geoanalyze ARGS`` started in ``tmp_path`` as a terminal would start it (default signal handlers)."""
    return subprocess.Popen(
        [*GEOANALYZE, *args],
        cwd=tmp_path,
        env=signal_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_signals,
    )


def assert_interrupted_mid_count(tmp_path: Path, signum: int) -> None:
    """A long count signalled once it runs says ``error: interrupted``, exits 130 and leaves no file."""
    process = started([*LONG_COUNT, "-o", "counts.safetensors"], tmp_path)
    time.sleep(2.5)  # imported and counting
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err.decode()
    assert err.decode().strip().splitlines() == ["error: interrupted"], err.decode()
    assert not [name for name in tree(tmp_path) if not name.startswith("cache")], "an interrupted run left files"


def python_run(code: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``tmp_path`` under :func:`signal_env`."""
    return run_process([sys.executable, "-c", code], cwd=tmp_path, env=signal_env(tmp_path), timeout=timeout)


def signalled_while_importing(tmp_path: Path, name: str, default_handler: bool = False) -> subprocess.CompletedProcess[str]:
    """``geoanalyze marginals x`` that sends itself the signal ``name`` right after importing the CLI,
    before main() runs (``default_handler``: the signal's handler reset to the default first)."""
    reset = f"signal.signal(signal.{name}, signal.SIG_DFL)\n" if default_handler else ""
    code = (
        f"import os, signal, sys, time\n{reset}sys.argv = ['geoanalyze', 'marginals', 'x']\n"
        f"import geoanalyze.cli.app\nos.kill(os.getpid(), signal.{name})\ntime.sleep(10)\nprint('not interrupted')\n"
    )
    return python_run(code, tmp_path)
