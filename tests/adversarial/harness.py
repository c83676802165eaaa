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
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers import REPO_ROOT, SAMPLES, Run, invoke, run_process

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


def python_process(
    sandbox: Sandbox, code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -c code *args`` in the sandbox as a real process (for a signal, an rlimit), importing
    this checkout's geoanalyze."""
    extra: dict[str, str | None] = {"PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    return run_process([sys.executable, "-c", code, *args], cwd=sandbox.root, env=extra)


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
