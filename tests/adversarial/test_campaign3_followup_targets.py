"""Campaign 3's follow-up, checkpoint targets: ``stress ./~/ckpt`` (and ``report``) once loaded
$HOME/ckpt, as pathlib drops the ``./`` and the rest was expanded; now it is the folder ``~`` here, named
in full when absent. A bare ``~/ckpt`` is still $HOME's. A target that is not a folder (a device, a
file) is named as such. Run as a user types them (harness.py); see test_campaign3_followup.py for the
options typed as paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .harness import Sandbox

WS = ["-t", "whitespace"]
QUICK = ["--compare", "", "--null-draws", "2"]




def _checkpoint_case(sandbox: Sandbox, home: Path) -> dict[str, str]:
    sandbox.copy_sample("drift.txt")
    (home / "ckpt").mkdir()
    (home / "ckpt" / "config.json").write_text("{}", encoding="utf-8")
    return {"HOME": str(home), "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("command", ["stress", "report"])
def test_a_checkpoint_under_dot_slash_tilde_is_not_the_homes(sandbox: Sandbox, home: Path, command: str) -> None:
    """``stress ./~/ckpt`` once loaded $HOME/ckpt; absent here, it is not found, naming where it looked."""
    env = _checkpoint_case(sandbox, home)
    tail = ["-o", "r.md"] if command == "report" else QUICK
    run = sandbox.refused(command, "./~/ckpt", "--dataset", "drift.txt", *WS, *tail, env=env, words=("not found",))
    assert str(sandbox.path("~") / "ckpt") in run.errors[0] and str(home / "ckpt") not in run.errors[0]


def test_a_folder_under_dot_slash_tilde_is_the_one_read(sandbox: Sandbox, home: Path) -> None:
    env = _checkpoint_case(sandbox, home)
    sandbox.path("~/ckpt").mkdir(parents=True)
    run = sandbox.refused("stress", "./~/ckpt", "--dataset", "drift.txt", *WS, *QUICK, env=env)
    assert f"{sandbox.path('~') / 'ckpt'} has no config.json" in run.errors[0]


def test_a_bare_tilde_checkpoint_is_still_the_homes(sandbox: Sandbox, home: Path) -> None:
    env = _checkpoint_case(sandbox, home)
    (home / "ckpt" / "config.json").unlink()
    sandbox.refused(
        "stress", "~/ckpt", "--dataset", "drift.txt", *WS, *QUICK, env=env, words=(f"{home}/ckpt has no config.json",)
    )


def test_an_array_under_dot_slash_tilde_gets_the_file_spec_hint(sandbox: Sandbox, home: Path) -> None:
    env = _checkpoint_case(sandbox, home)
    sandbox.write("~/t.npy", b"")
    sandbox.refused("stress", "./~/t.npy", "--dataset", "drift.txt", *WS, env=env, words=("file:./~/t.npy",))


def test_a_device_as_checkpoint_is_not_a_folder(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(
        "stress", "/dev/zero", "--dataset", "drift.txt", *WS, *QUICK, words=("/dev/zero is not a folder", "hub id")
    )


@pytest.mark.slow  # loads the real MiniLM (about 10 s on 2 cores)
def test_a_real_checkpoint_under_dot_slash_tilde_is_analysed(sandbox: Sandbox, home: Path, minilm_path: Path) -> None:
    sandbox.copy_sample("drift-words.txt")
    shutil.copytree(minilm_path, sandbox.path("~/m"))
    args = [
        "stress",
        "./~/m",
        "--dataset",
        "drift-words.txt",
        "--layers",
        "none",
        *QUICK,
        "--limit",
        "50",
        "--min-count",
        "10",
        "-f",
        "json",
    ]
    run = sandbox.accepted(*args, env={"HOME": str(home), "HF_HUB_OFFLINE": "1"})
    assert json.loads(run.stdout)["kind"] == "checkpoint"
