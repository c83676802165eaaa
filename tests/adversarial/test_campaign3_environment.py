"""Campaign 3, the environment a job runs in: colour forced or refused, a dumb terminal, the C
locale, HOME unset, TMPDIR missing or a file, cache homes that are files, the hub's offline
switch turned off, a fixed hash seed. The result on stdout is the same valid JSON every time."""

from __future__ import annotations

import json

import pytest

from .harness import Sandbox

S = ["stress", "rope:d=16", "--dataset", "drift.txt", "-t", "whitespace", "--compare", "", "--null-draws", "2"]
ROPE16_SCALED = 0.05811681582577066  # stress rope:d=16 on drift.txt (whitespace), scaled stress

ENVIRONMENTS: dict[str, dict[str, str]] = {
    "force-color": {"FORCE_COLOR": "1"},
    "clicolor-force": {"CLICOLOR_FORCE": "1"},
    "no-color": {"NO_COLOR": "1"},
    "term-dumb": {"TERM": "dumb"},
    "c-locale": {"LC_ALL": "C", "LANG": "C"},
    "home-empty": {"HOME": ""},
    "tmpdir-missing": {"TMPDIR": "/nonexistent-tmp"},
    "tmpdir-a-file": {"TMPDIR": "drift.txt"},
    "xdg-cache-a-file": {"XDG_CACHE_HOME": "drift.txt"},
    "hf-home-a-file": {"HF_HOME": "drift.txt"},
    "hub-offline-off": {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"},
    "hash-seed": {"PYTHONHASHSEED": "123"},
    "columns-empty": {"COLUMNS": ""},
}


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
def test_an_odd_environment_gives_the_same_json(sandbox: Sandbox, name: str) -> None:
    sandbox.copy_sample("drift.txt")
    run = sandbox.accepted(*S, "-f", "json", env=ENVIRONMENTS[name])
    assert "\x1b[" not in run.stdout  # colour codes never reach a result
    report = json.loads(run.stdout)
    assert report["scores"]["rope:d=16"]["scaled_stress"] == pytest.approx(ROPE16_SCALED, rel=1e-9)


@pytest.mark.parametrize("name", ["force-color", "clicolor-force", "term-dumb"])
def test_a_table_on_a_pipe_has_no_colour_codes(sandbox: Sandbox, name: str) -> None:
    sandbox.copy_sample("drift.txt")
    run = sandbox.accepted(*S, env=ENVIRONMENTS[name])
    assert "\x1b[" not in run.stdout and "rope:d=16" in run.stdout


def test_the_c_locale_reads_and_names_a_utf8_file(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt", "dérive.txt")
    run = sandbox.accepted("marginals", "dérive.txt", "-t", "whitespace", "-f", "json", env={"LC_ALL": "C"})
    assert json.loads(run.stdout)["sources"][0]["source"] == "dérive.txt"
