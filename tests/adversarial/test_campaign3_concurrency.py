"""Campaign 3, two processes at once on one cache: counting the same corpus, and counting two
corpora, into an empty shared cache (a CI matrix on one runner, two terminals). Both succeed with
the numbers of a lone run, no half-written entry is served afterwards, and nothing is left staged."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from helpers import GEOANALYZE

from .harness import Sandbox, tree

WS = ["-t", "whitespace"]


def _together(sandbox: Sandbox, commands: list[list[str]], cache: str) -> list[subprocess.CompletedProcess[str]]:
    env = {**os.environ, "GEOANALYZE_CACHE_DIR": cache, "GEOANALYZE_PROGRESS_SECONDS": "100000"}
    started = [
        subprocess.Popen(
            [*GEOANALYZE, *command],
            cwd=sandbox.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    done = []
    for process, command in zip(started, commands, strict=True):
        out, err = process.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(command, process.returncode, out, err))
    return done


def _counts(stdout: str) -> tuple[int, list[int]]:
    report = json.loads(stdout)
    return report["n_sequences"], report["totals"]


@pytest.mark.parametrize(
    "corpora",
    [["drift.txt", "drift.txt"], pytest.param(["drift.txt", "shift.txt"], marks=pytest.mark.slow)],
    ids=["same", "two"],
)
def test_two_processes_filling_one_cache(sandbox: Sandbox, corpora: list[str]) -> None:
    for name in set(corpora):
        sandbox.copy_sample(name)
    cache = str(sandbox.root.parent / "cache")
    before = tree(sandbox.root)
    commands = [["marginals", name, *WS, "-f", "json"] for name in corpora]
    done = _together(sandbox, commands, cache)
    for run in done:
        assert run.returncode == 0 and run.stderr.strip() == "", run.stderr
    assert tree(sandbox.root) == before
    lone = [sandbox.accepted(*command, env={"GEOANALYZE_CACHE_DIR": cache}).stdout for command in commands]
    assert [json.loads(run)["sources"][0]["from"] for run in lone] == ["cache"] * len(lone)  # entries whole
    assert [_counts(run.stdout) for run in done] == [_counts(run) for run in lone]
    staged = [p for p in (sandbox.root.parent / "cache").rglob("*") if ".staged" in p.name or p.name.endswith(".tmp")]
    assert staged == []
