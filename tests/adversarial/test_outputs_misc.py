"""The cache never fails a job; an OS error is the user's (exit 2, one line naming the path); a train run
killed before its first checkpoint leaves an unambiguous folder; a report replaces its figure folder
as a whole, with the normal mode."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .harness import Sandbox, invoke, python_process, running_as_root, tree, unreadable
from .outputs_inputs import CORPUS, QUICK, fill, full_disk, populate, read_only_folder
from .test_outputs_writes import TRAIN_TINY

LONG = "z" * 300

# --- a cache that cannot be written: the job succeeds, one note says why ------------------------------------

CACHE_COMMANDS = {
    "marginals": ["marginals", "drift.txt", *CORPUS],
    "marginals-o": ["marginals", "drift.txt", *CORPUS, "-o", "c2.safetensors"],
    "distances": ["distances", "drift.txt", *CORPUS],
    "mds": ["mds", "drift.txt", *CORPUS, "--dim", "8"],
    "stress": ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK],
    "folder-corpus": ["marginals", "corp", *CORPUS, "--workers", "2"],
}
CACHE_PLACES = ["a-file", "under-a-file", "too-long-name", "read-only", "full"]


def _cache_place(sandbox: Sandbox, place: str, stack: Any) -> Path:
    if place == "a-file":
        return sandbox.write("cachefile", "not a folder")
    if place == "under-a-file":
        return sandbox.write("cachefile", "not a folder") / "cache"
    if place == "too-long-name":
        return sandbox.path(LONG)
    if place == "read-only":
        return stack.enter_context(read_only_folder(sandbox.path("rocache")))
    folder = stack.enter_context(full_disk(sandbox.path("fullcache"), size="16k"))
    fill(folder, 1024)
    return folder


@pytest.mark.parametrize("place", CACHE_PLACES)
@pytest.mark.parametrize("command", list(CACHE_COMMANDS))
def test_an_unwritable_cache_never_fails_a_job(sandbox: Sandbox, command: str, place: str) -> None:
    import contextlib

    populate(sandbox)
    sandbox.copy_sample("drift.txt", "corp/more.txt")
    with contextlib.ExitStack() as stack:
        cache = _cache_place(sandbox, place, stack)
        run = sandbox.run(*CACHE_COMMANDS[command], env={"GEOANALYZE_CACHE_DIR": str(cache)})
    assert run.code == 0 and not run.errors, str(run)
    notes = [line for line in run.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "cache" in notes[0] and "not written" in notes[0], str(run)
    assert not [line for line in run.stderr.splitlines() if line.strip() and not line.startswith("note:")], str(run)


@pytest.mark.slow  # a forward pass of the MiniLM checkpoint per case
@pytest.mark.parametrize("place", CACHE_PLACES)
def test_an_unwritable_cache_never_fails_a_checkpoint_job(sandbox: Sandbox, place: str, minilm_path: Path) -> None:
    """The mechanism and centroid caches of a checkpoint target, too."""
    import contextlib

    sandbox.copy_sample("drift.txt")
    args = ["stress", str(minilm_path), "--dataset", "drift.txt", "--max-sequences", "8", "--max-length", "32"]
    with contextlib.ExitStack() as stack:
        cache = _cache_place(sandbox, place, stack)
        run = sandbox.run(*args, "--null-draws", "2", "--compare", "", env={"GEOANALYZE_CACHE_DIR": str(cache)})
    assert run.code == 0 and not run.errors, str(run)
    notes = [line for line in run.stderr.splitlines() if line.startswith("note:") and "cache" in line]
    assert len(notes) == 1 and "not written" in notes[0], str(run)


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
def test_a_corrupt_cache_entry_is_recounted(sandbox: Sandbox, read_only: bool) -> None:
    populate(sandbox)
    cache = sandbox.root.parent / "cache"  # outside the sandbox: the entry is rewritten, by design
    env = {"GEOANALYZE_CACHE_DIR": str(cache)}
    first = sandbox.run("marginals", "drift.txt", *CORPUS, "-f", "json", env=env)
    entries = list(cache.glob("counts/*.safetensors"))
    assert first.code == 0 and entries, str(first)
    for entry in entries:
        entry.write_bytes(b"\x00garbage, not safetensors")
    import contextlib

    with read_only_folder(cache / "counts") if read_only else contextlib.nullcontext():
        again = sandbox.run("marginals", "drift.txt", *CORPUS, "-f", "json", env=env)
    assert again.code == 0 and not again.errors, str(again)
    assert json.loads(again.stdout)["totals"] == json.loads(first.stdout)["totals"]


# --- one line for an operating-system error, wherever it is raised -------------------------------------------

OS_ERRORS = {
    "permission-read": (OSError(errno.EACCES, "Permission denied", "drift.txt"), "cannot read drift.txt"),
    "permission-write": (OSError(errno.EACCES, "Permission denied", "out.safetensors"), "cannot write out.safetensors"),
    "read-only": (OSError(errno.EROFS, "Read-only file system", "ro/x"), "cannot write ro/x"),
    "no-space-no-name": (OSError(errno.ENOSPC, "No space left on device"), "cannot write out.safetensors"),
    "quota": (OSError(errno.EDQUOT, "Disk quota exceeded", "q/x"), "cannot write q/x"),
    "too-big": (OSError(errno.EFBIG, "File too large", "big"), "cannot write big"),
    "name-too-long": (OSError(errno.ENAMETOOLONG, "File name too long", LONG), "255 bytes"),
    "is-a-directory": (IsADirectoryError(errno.EISDIR, "Is a directory", "corp"), "cannot read corp"),
    "not-a-directory": (NotADirectoryError(errno.ENOTDIR, "Not a directory", "drift.txt/x"), "drift.txt/x"),
    "fifo": (OSError(errno.ENXIO, "No such device or address", "fifo"), "FIFO"),
    "loop": (OSError(errno.ELOOP, "Too many levels of symbolic links", "loop"), "symbolic links"),
    "io-error": (OSError(errno.EIO, "Input/output error", "disk/x"), "disk/x"),
    "wrapped": (RuntimeError("save failed"), "cannot write out.safetensors"),
    "rust-spelling": (RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })"), "space"),
    "rust-short-spelling": (RuntimeError("I/O error: File too large (os error 27)"), "too large"),
}


@pytest.mark.parametrize("case", list(OS_ERRORS))
def test_an_os_error_anywhere_is_one_line_naming_the_path(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    exc, words = OS_ERRORS[case]
    if case == "wrapped":
        exc.__cause__ = OSError(errno.ENOSPC, "No space left on device")

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise exc

    populate(sandbox)
    monkeypatch.setattr("geoanalyze.cli.pipeline.load_counts", failing)
    run = sandbox.refused("marginals", "drift.txt", *CORPUS, "-o", "out.safetensors", words=(words,))
    assert "internal error" not in run.errors[0]
    assert run.errors[0].count(";") >= 1  # the fix follows the reason


@pytest.mark.parametrize(
    "exc",
    [ValueError("a bug"), KeyError("bug"), ConnectionRefusedError(errno.ECONNREFUSED, "refused")],
    ids=["value", "key", "connection"],
)
def test_our_bugs_stay_internal_errors(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, exc: Exception) -> None:
    def failing(*args: Any, **kwargs: Any) -> Any:
        raise exc

    populate(sandbox)
    monkeypatch.setattr("geoanalyze.cli.pipeline.load_counts", failing)
    run = sandbox.refused("marginals", "drift.txt", *CORPUS, code=3, words=("internal error",))
    assert run.code == 3


def test_an_unreadable_corpus_is_a_cannot_read_line(sandbox: Sandbox) -> None:
    if running_as_root():
        pytest.skip("running as root: chmod 000 does not stop root from reading")
    populate(sandbox)
    with unreadable(sandbox.path("drift.txt"), 0o644):
        sandbox.refused("marginals", "drift.txt", *CORPUS, words=("drift.txt",))


def test_an_over_long_input_name_is_a_cannot_read_line(sandbox: Sandbox) -> None:
    sandbox.refused("marginals", f"{LONG}.txt", *CORPUS, words=("255",))


# --- train killed before its first checkpoint ---------------------------------------------------------------

_KILLED = """
import os, signal, sys
import geoanalyze.train.loop as loop
SIGNAL = getattr(signal, sys.argv[1])
def killed(*args, **kwargs):
    os.kill(os.getpid(), SIGNAL)  # the run dies as its first checkpoint would be saved
    import time; time.sleep(5)
loop._save_checkpoint = killed
sys.argv = ["geoanalyze", *sys.argv[2:]]
from geoanalyze.cli.app import main
main()
"""


def _train_killed(sandbox: Sandbox, signal_name: str) -> subprocess.CompletedProcess[str]:
    return python_process(sandbox, _KILLED, signal_name, "train", "-o", "run", *TRAIN_TINY)


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGTERM"])
def test_a_train_killed_before_its_first_checkpoint_leaves_no_run_folder(sandbox: Sandbox, signal_name: str) -> None:
    done = _train_killed(sandbox, signal_name)
    assert done.returncode in (-9, 130), done.stderr
    if signal_name == "SIGTERM":
        assert done.stderr.strip().splitlines() == ["error: interrupted"], done.stderr
        assert tree(sandbox.root) == {}  # nothing at all: the staged run folder was removed
    assert not sandbox.path("run").exists()
    # --resume: nothing to resume, said so; train -o: starts it (and clears a killed run's leftovers)
    sandbox.refused("train", "-o", "run", "--resume", *TRAIN_TINY, words=("no checkpoint", "without resume"))
    # (invoked without the harness's unchanged-inputs check: a dead run's staged folder is cleared)
    run = invoke(["train", "-o", "run", *TRAIN_TINY], sandbox.root)
    assert run.code == 0 and not run.errors, str(run)
    assert (sandbox.path("run") / "checkpoint").is_dir()
    assert [p.name for p in sandbox.root.iterdir()] == ["run"]


@pytest.mark.parametrize(
    "leftovers",
    [
        {"metrics.jsonl": ""},
        {"metrics.jsonl": '{"step": 2, "train_loss": 1.0}\n'},
        {"metrics.jsonl": '{"step": 2, "train_lo'},
        {"checkpoint.partial/model.safetensors": "half"},
        {"metrics.jsonl": "", "checkpoint.partial/optimizer.safetensors": "half"},
    ],
    ids=["empty-metrics", "a-metrics-line", "a-cut-line", "partial-checkpoint", "both"],
)
def test_a_folder_stopped_before_its_first_checkpoint_is_unambiguous(
    sandbox: Sandbox, leftovers: dict[str, str]
) -> None:
    """The folder a run killed before its first checkpoint left (as earlier versions did)."""
    for name, content in leftovers.items():
        sandbox.write(f"run/{name}", content)
    sandbox.refused("train", "-o", "run", "--resume", *TRAIN_TINY, words=("before its first checkpoint", "without"))
    run = invoke(["train", "-o", "run", *TRAIN_TINY], sandbox.root)  # it rewrites the leftovers, by design
    assert run.code == 0, str(run)
    assert any("started over" in line for line in run.stderr.splitlines() if line.startswith("note:")), run.stderr
    steps = [json.loads(line)["step"] for line in sandbox.path("run/metrics.jsonl").read_text().splitlines()]
    assert steps == [2, 4]
    assert not sandbox.path("run/checkpoint.partial").exists()


# --- the report's figure folder ------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_report_replaces_its_figure_folder_whole_with_the_normal_mode(sandbox: Sandbox) -> None:
    populate(sandbox)
    umask = os.umask(0)
    os.umask(umask)
    first = sandbox.run("report", "rope:d=16", "sinusoidal", "--dataset", "drift.txt", *QUICK, "-o", "r.md")
    assert first.code == 0, str(first)
    assert {p.name[:2] for p in sandbox.path("r_files").iterdir()} == {"0-", "1-"}
    second = invoke(["report", "rope:d=16", "--dataset", "drift.txt", *QUICK, "-o", "r.md"], sandbox.root)
    assert second.code == 0, str(second)
    assert {p.name[:2] for p in sandbox.path("r_files").iterdir()} == {"0-"}  # no figure of the first report
    assert _mode(sandbox.path("r_files")) == 0o777 & ~umask
    assert _mode(sandbox.path("r.md")) == 0o666 & ~umask
    assert all(_mode(p) == 0o666 & ~umask for p in sandbox.path("r_files").iterdir())
    assert sorted(p.name for p in sandbox.root.iterdir() if p.name.startswith(".")) == []


def test_figures_join_an_existing_plot_dir_keeping_the_users_files(sandbox: Sandbox) -> None:
    populate(sandbox)
    sandbox.write("figs/mine.txt", "the user's own file")
    run = sandbox.run("stress", "rope:d=16", "--dataset", "drift.txt", *QUICK, "--plot-dir", "figs", "-o", "r.json")
    assert run.code == 0, str(run)
    names = sorted(p.name for p in sandbox.path("figs").iterdir())
    assert names == ["hellinger.png", "mds.png", "mine.txt", "null.png", "shepard.png"]
    figures = json.loads(sandbox.path("r.json").read_text())["figures"]
    assert all(Path(path).parent == Path("figs") for path in figures.values()), figures
    assert all((sandbox.root / path).is_file() for path in figures.values()), figures


@pytest.mark.slow  # copies the 90 MB MiniLM checkpoint
def test_a_checkpoint_copy_appears_whole_with_the_normal_mode(sandbox: Sandbox, minilm_path: Path) -> None:
    """mds --into-checkpoint: the copy is staged with the PE file and appears with readable files."""
    sandbox.copy_sample("drift.txt")
    umask = os.umask(0)
    os.umask(umask)
    args = ["mds", "drift.txt", "--tokenizer", str(minilm_path), "--max-length", "32", "-f", "json"]
    run = sandbox.run(
        *args, "--into-checkpoint", str(minilm_path), "--checkpoint-output", "copy", "-o", "p.safetensors"
    )
    assert run.code == 0, str(run)
    assert json.loads(run.stdout)["checkpoint"]["checkpoint"] == "copy"
    copy = sandbox.path("copy")
    assert _mode(copy) == 0o777 & ~umask
    assert _mode(copy / "model.safetensors") == 0o666 & ~umask
    assert sorted(p.name for p in sandbox.root.iterdir()) == ["copy", "drift.txt", "p.safetensors"]
