"""All or none: a write that fails (read-only, full disk, the second of two outputs, an interrupt)
leaves no partial output, every previous output byte-identical, every input unchanged, and one
``error: cannot write <path>: <reason>; <fix>`` line with exit 2 (130 for an interrupt).

Read-only destinations are read-only bind mounts when the tests run as root (chmod does not stop
root) and chmod otherwise; a full disk is a tiny tmpfs (root) or RLIMIT_FSIZE in a subprocess
(anyone). Cases skip with the reason where the machine allows neither.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import typer

from .harness import Sandbox, python_process, tree
from .outputs_inputs import CORPUS, QUICK, fill, full_disk, populate, read_only_folder

STRESS = ["stress", "rope:d=16", "--dataset", "drift.txt", *QUICK]
REPORT = ["report", "rope:d=16", "--dataset", "drift.txt", *QUICK]
TRAIN_TINY = [
    "--set", "model.d_model=16", "--set", "model.n_layers=1", "--set", "model.n_heads=2", "--set", "model.d_ff=32",
    "--set", "model.n_positions=16", "--set", "order_length=12", "--set", "batch_size=8", "--set", "steps=4",
    "--set", "eval_every=2", "--set", "eval_batches=1", "--set", "warmup_steps=1", "--device", "cpu",
]  # fmt: skip

# Commands whose (only or last) output goes into the folder ``ro`` (read-only or full).
INTO = {
    "marginals-o": ["marginals", "drift.txt", *CORPUS, "-o", "{d}/c.safetensors"],
    "marginals-o-new-folder": ["marginals", "c.safetensors", "-o", "{d}/new/c.safetensors"],
    "distances-o": ["distances", "c.safetensors", "-o", "{d}/d.safetensors"],
    "distances-heatmap-second": ["distances", "c.safetensors", "-o", "prev.safetensors", "--heatmap", "{d}/h.png"],
    "distances-o-first": ["distances", "c.safetensors", "-o", "{d}/d.safetensors", "--heatmap", "h.png"],
    "mds-o": ["mds", "d.safetensors", "-o", "{d}/p.safetensors"],
    "mds-plot-second": ["mds", "d.safetensors", "-o", "prev.safetensors", "--plot", "{d}/m.png"],
    "mds-o-first": ["mds", "d.safetensors", "-o", "{d}/p.safetensors", "--plot", "m.png"],
    "stress-o": [*STRESS, "-o", "{d}/r.json"],
    "stress-o-with-plot-dir": [*STRESS, "-o", "{d}/r.json", "--plot-dir", "figs"],
    "stress-plot-dir-new": [*STRESS, "-o", "prev.json", "--plot-dir", "{d}/figs"],
    "stress-plot-dir-itself": [*STRESS, "-o", "prev.json", "--plot-dir", "{d}"],
    "report-o": [*REPORT, "-o", "{d}/r.md"],
    "synthesize-o-new": ["datasets", "synthesize", "drift", "--n", "20", "-o", "{d}/s"],
    "synthesize-o-itself": ["datasets", "synthesize", "drift", "--n", "20", "-o", "{d}"],
    "synthesize-words": [
        "datasets",
        "synthesize",
        "drift",
        "--n",
        "20",
        "--vocab",
        "50",
        "--words",
        "words.txt",
        "-o",
        "{d}",
    ],
    "train-o": ["train", "-o", "{d}/run", *TRAIN_TINY],
}


def _prepare(sandbox: Sandbox) -> None:
    populate(sandbox)
    # previous versions of the outputs that must survive a failed run byte for byte
    sandbox.write("prev.safetensors", b"previous output")
    sandbox.write("prev.json", "{}")


def _assert_cannot_write(run: Any, folder: str) -> None:
    line = run.errors[0]
    assert line.startswith("error: cannot write"), line
    assert folder in line, line
    assert "internal error" not in line and ".staged" not in line, line


# verify fails at once on a read-only folder (on a full disk only after its runs: not here)
READ_ONLY_ONLY = {"verify-o": ["verify", "necessity", "-o", "{d}/v", "--device", "cpu"]}


@pytest.mark.parametrize("case", [*INTO, *READ_ONLY_ONLY])
def test_a_read_only_destination_writes_nothing(sandbox: Sandbox, case: str) -> None:
    _prepare(sandbox)
    with read_only_folder(sandbox.path("ro")):
        run = sandbox.refused(*[a.replace("{d}", "ro") for a in {**INTO, **READ_ONLY_ONLY}[case]])
    _assert_cannot_write(run, "ro")
    assert ("Read-only" in run.errors[0]) or ("Permission denied" in run.errors[0]), run.errors[0]


@pytest.mark.parametrize("case", list(INTO))
def test_a_full_disk_writes_nothing(sandbox: Sandbox, case: str) -> None:
    _prepare(sandbox)
    with full_disk(sandbox.path("full"), size="128k") as folder:
        fill(folder, 4096)
        run = sandbox.refused(*[a.replace("{d}", "full") for a in INTO[case]])
    _assert_cannot_write(run, "full")


# --- the second output fails after the first one was written ------------------------------------------------


def _failing(kind: str) -> Any:
    def writer(*args: Any, **kwargs: Any) -> None:
        path = next((a for a in args if isinstance(a, (str, os.PathLike)) and str(a).endswith(".png")), None)
        if path is not None:
            Path(path).write_bytes(b"half a png")  # a partial figure, as a crash mid-write leaves
        if kind == "abort":
            raise typer.Abort()
        if kind == "keyboard":
            raise KeyboardInterrupt
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return writer


SECOND = {
    "distances-heatmap": (
        ["distances", "c.safetensors", "-o", "prev.safetensors", "--heatmap", "h.png"],
        "distance_heatmap",
    ),
    "mds-plot": (["mds", "d.safetensors", "-o", "prev.safetensors", "--plot", "m.png"], "mds_figure"),
    "stress-plot-dir": ([*STRESS, "-o", "prev.json", "--plot-dir", "figs"], "shepard_diagram"),
    "stress-plot-dir-existing": ([*STRESS, "-o", "prev.json", "--plot-dir", "old_figs"], "shepard_diagram"),
    "report-figures": ([*REPORT, "-o", "old.md"], "shepard_diagram"),
    "report-first-figure": ([*REPORT, "-o", "old.md"], "distance_heatmap"),
}


def _with_previous(sandbox: Sandbox) -> None:
    _prepare(sandbox)
    sandbox.write("old_figs/hellinger.png", b"a previous figure")
    sandbox.write("old_figs/mine.txt", "the user's own file")
    sandbox.write("old.md", "# a previous report\n")
    sandbox.write("old_files/0-hellinger.png", b"a previous report's figure")


@pytest.mark.parametrize("case", list(SECOND))
def test_a_failing_second_output_leaves_the_previous_first_one_intact(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    _with_previous(sandbox)
    args, figure = SECOND[case]
    monkeypatch.setattr(f"geoanalyze.report.figures.{figure}", _failing("enospc"))
    run = sandbox.refused(*args, words=("cannot write", "No space left"))
    assert "internal error" not in run.errors[0]


@pytest.mark.parametrize("kind", ["abort", "keyboard"], ids=["sigterm", "ctrl-c"])
@pytest.mark.parametrize("case", list(SECOND))
def test_an_interrupt_mid_write_leaves_nothing(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, case: str, kind: str
) -> None:
    """SIGTERM (an abort) or Ctrl-C (KeyboardInterrupt) while the second output is written."""
    _with_previous(sandbox)
    args, figure = SECOND[case]
    monkeypatch.setattr(f"geoanalyze.report.figures.{figure}", _failing(kind))
    before = tree(sandbox.root)
    run = sandbox.run(*args)
    assert run.code == 130, str(run)
    if kind == "abort":
        assert run.errors == ["error: interrupted"], str(run)
    assert len(run.errors) <= 1 and "internal error" not in run.stderr, str(run)  # (Ctrl-C's message: app.py)
    assert tree(sandbox.root) == before


def test_a_failing_marginals_write_of_synthesize_leaves_no_text(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox.write("s/drift.txt", "a previous corpus\n")

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("numpy.save", full)
    sandbox.refused("datasets", "synthesize", "drift", "--n", "20", "-o", "s", words=("cannot write", "s/drift"))


def test_a_checkpoint_copy_is_removed_when_the_pe_file_fails(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """mds --into-checkpoint --checkpoint-output with a failing -o: no copy of the checkpoint is left."""
    from geoanalyze.cli import pipeline

    populate(sandbox)
    sandbox.write("prev.safetensors", b"previous output")
    written: list[Path] = []

    def fake_copy(encoding: Any, checkpoint: Any, output: Any) -> dict[str, Any]:
        Path(output).mkdir()
        (Path(output) / "model.safetensors").write_bytes(b"x" * 1000)
        written.append(Path(output))
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(output) / "model.safetensors"))

    monkeypatch.setattr("geoanalyze.checkpoints.write.write_into_checkpoint", fake_copy)
    monkeypatch.setattr(pipeline, "_hidden_size", lambda checkpoint: 8)
    run = sandbox.refused(
        "mds", "d.safetensors", "-o", "prev.safetensors", "--into-checkpoint", "ckpt", "--checkpoint-output", "copy",
        words=("cannot write", "copy"),
    )  # fmt: skip
    assert written and not written[0].exists()
    assert "staged" not in run.errors[0]


# --- disk full for anyone: RLIMIT_FSIZE in a subprocess ---------------------------------------------------

_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
sys.argv = ["geoanalyze", *sys.argv[2:]]
from geoanalyze.cli.app import main
main()
"""

LIMITED = {
    "marginals": ["marginals", "c.safetensors", "-o", "out.safetensors"],
    "distances": ["distances", "c.safetensors", "-o", "out.safetensors", "--heatmap", "h.png"],
    "distances-heatmap-only": ["distances", "c.safetensors", "--heatmap", "h.png"],
    "mds": ["mds", "d.safetensors", "-o", "out.safetensors", "--plot", "m.png"],
    "synthesize": ["datasets", "synthesize", "drift", "--n", "400", "-o", "s"],
}


def _subprocess(sandbox: Sandbox, *args: str, limit: int | None = None, env: dict[str, str] | None = None) -> Any:
    return python_process(sandbox, _LIMITED, str(limit or 2**40), *args, env=env)


@pytest.mark.parametrize("case", list(LIMITED))
def test_a_file_size_limit_is_a_cannot_write_line(sandbox: Sandbox, case: str) -> None:
    populate(sandbox)
    before = tree(sandbox.root)
    done = _subprocess(sandbox, *LIMITED[case], limit=20_000)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: cannot write"), done.stderr
    assert "File too large" in lines[0] or "No space" in lines[0], lines[0]
    assert tree(sandbox.root) == before


# --- SIGTERM to a real process while it writes ------------------------------------------------------------

_TERMINATED = """
import os, signal, sys
import geoanalyze.report.figures as figures
real = figures.shepard_diagram
def shepard_then_term(*args, **kwargs):
    real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)  # as a CI timeout would, mid-way through the figures
figures.shepard_diagram = shepard_then_term
sys.argv = ["geoanalyze", *sys.argv[1:]]
from geoanalyze.cli.app import main
main()
"""


@pytest.mark.parametrize(
    "args",
    [
        [*STRESS, "-o", "prev.json", "--plot-dir", "figs"],
        [*STRESS, "--plot-dir", "old_figs"],
        [*REPORT, "-o", "old.md"],
    ],
    ids=["stress-new-plot-dir", "stress-existing-plot-dir", "report"],
)
def test_sigterm_mid_write_leaves_no_partial_output(sandbox: Sandbox, args: list[str]) -> None:
    _with_previous(sandbox)
    before = tree(sandbox.root)
    done = python_process(sandbox, _TERMINATED, *args)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["error: interrupted"], done.stderr
    assert tree(sandbox.root) == before


# --- the staging writer itself: a failing final rename rolls the earlier ones back ----------------------------

RENAME_FAILS_AT = [0, 1, 2, 3]


@pytest.mark.parametrize("interrupt", [False, True], ids=["disk-full", "ctrl-c"])
@pytest.mark.parametrize("fails_at", RENAME_FAILS_AT)
@pytest.mark.parametrize("previous", [True, False], ids=["previous-outputs", "new-outputs"])
def test_a_failing_final_rename_rolls_back_the_earlier_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails_at: int, previous: bool, interrupt: bool
) -> None:
    from geoanalyze.cli import outputs
    from geoanalyze.errors import InputError

    root = tmp_path / "out"
    root.mkdir()
    if previous:
        (root / "a.txt").write_text("old a")
        (root / "figs").mkdir()
        (root / "figs" / "x.png").write_text("old figure")
        (root / "figs" / "mine.txt").write_text("the user's")
        (root / "page_files").mkdir()
        (root / "page_files" / "old.png").write_text("old report figure")
    before = tree(root)
    real = os.replace
    calls: list[Any] = []

    def replace(source: Any, target: Any) -> None:
        if ".staged" in str(source):  # a final rename (not a rollback)
            calls.append(target)
            if len(calls) == fails_at + 1:
                if interrupt:
                    raise KeyboardInterrupt
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(source))
        real(source, target)

    monkeypatch.setattr(os, "replace", replace)
    expected = (
        pytest.raises(KeyboardInterrupt) if interrupt else pytest.raises(InputError, match=r"cannot write .*No space")
    )
    with expected, outputs.all_or_none() as stage:
        stage(root / "a.txt").write_text("new a")
        figs = stage(root / "figs", folder=True, replaces=False)
        (figs / "x.png").write_text("new figure")
        (figs / "y.png").write_text("another")
        page = stage(root / "page_files", folder=True, replaces=True)
        (page / "new.png").write_text("new report figure")
        stage(root / "deep" / "b.txt").write_text("new b")
    assert tree(root) == before


def test_the_staged_names_of_a_long_output_name_fit(tmp_path: Path) -> None:
    from geoanalyze.cli import outputs

    name = "n" * 250 + ".png"
    with outputs.all_or_none() as stage:
        staged = stage(tmp_path / name)
        assert len(staged.name.encode()) <= 255
        staged.write_text("x")
    assert (tmp_path / name).read_text() == "x"
