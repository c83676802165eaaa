"""Campaign 4, signals (docs/reliability.md): SIGTERM or SIGQUIT during the copy of a kept checkpoint
(`train --keep-checkpoints`) left ``checkpoints/.step-N.partial/`` behind for good. Every staged
folder (a kept checkpoint's copy, the checkpoint being saved, a new run's folder, `verify`'s
results) is now an :func:`geoanalyze.io.staged_folder`, which the one signal handler removes."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from .harness import Sandbox, invoke, python_process
from .test_outputs_writes import TRAIN_TINY

KEEP = [*TRAIN_TINY, "--keep-checkpoints", "2"]

# The signal comes as the kept checkpoint of step 2 is half copied (the one moment a real signal
# cannot be timed to): the process sends it to itself after the first file, then the run goes on.
_SIGNALLED_WHILE_KEEPING = """
import os, shutil, signal, sys, time
SIGNAL = getattr(signal, sys.argv[1])
copy = shutil.copy2
def copied(source, target, *args, **kwargs):
    done = copy(source, target, *args, **kwargs)
    if ".step-" in str(target):
        print("copying:", target, file=sys.stderr, flush=True)
        os.kill(os.getpid(), SIGNAL)
        time.sleep(5)
    return done
shutil.copy2 = copied
sys.argv = ["geoanalyze", *sys.argv[2:]]
from geoanalyze.cli.app import main
main()
"""


def leftovers(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob("*") if "partial" in p.name or "staged" in p.name)


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGQUIT"])
def test_a_signal_while_a_kept_checkpoint_is_copied_leaves_no_staged_folder(sandbox: Sandbox, signal_name: str) -> None:
    done = python_process(sandbox, _SIGNALLED_WHILE_KEEPING, signal_name, "train", "-o", "run", *KEEP)
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("copying:") and ".step-2.partial" in lines[0], done.stderr
    assert lines[-1] == "error: interrupted" and done.returncode == 130, done.stderr
    run = sandbox.path("run")
    assert leftovers(run) == [], "a signalled run left a staged folder"
    assert not (run / "checkpoints").exists() or not any((run / "checkpoints").iterdir())
    # resumed, it ends as a run never interrupted, bit for bit, and keeps its checkpoints
    resumed = invoke(["train", "-o", "run", "--resume", *KEEP], sandbox.root)
    assert resumed.code == 0 and not resumed.errors, str(resumed)
    whole = invoke(["train", "-o", "whole", *KEEP], sandbox.root)
    assert whole.code == 0, str(whole)
    for name in ("checkpoint/model.safetensors", "checkpoints/step-4/model.safetensors"):
        assert (run / name).read_bytes() == (sandbox.path("whole") / name).read_bytes(), name
    assert leftovers(run) == []


def test_the_handler_removes_every_staged_folder(tmp_path: Path) -> None:
    from geoanalyze.cli.app import _terminated
    from geoanalyze.io import staged_folder

    a, b = tmp_path / ".a.partial", tmp_path / ".b.partial"
    with pytest.raises(KeyboardInterrupt), staged_folder(a), staged_folder(b):
        (a / "x").write_text("half")
        (b / "y").write_text("half")
        _terminated(signal.SIGTERM, None)  # the handler, inside both blocks
    assert list(tmp_path.iterdir()) == []
