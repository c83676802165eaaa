"""Campaign 4, `track` series with missing, reordered or replaced members (docs/reliability.md).

* A Trainer ``checkpoint-2/`` without config.json was silently left out of the series (exit 0);
  docs/tracking.md says an unreadable checkpoint gets a row saying why.
* ``--order given`` on a run folder scored its steps in string order (12, 6, 9).
* A member replaced by a different model while the series was scored was scored as a normal step:
  the model check ran once, before the corpus was read. Every member is now checked when it is read.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .harness import Sandbox, invoke
from .test_outputs_writes import TRAIN_TINY

CORPUS = ["--dataset", "drift-words.txt", "--null-draws", "2", "--limit", "60", "--min-count", "5"]
RUN = ["--dataset", "drift.txt", "--null-draws", "2", "--max-length", "12", "-f", "json"]


def linked_copy(source: Path, target: Path, skip: tuple[str, ...] = ()) -> Path:
    target.mkdir(parents=True)
    for file in source.iterdir():
        if file.is_file() and file.name not in skip:
            os.link(file, target / file.name)
    return target


def trained(sandbox: Sandbox, name: str, *sets: str) -> Path:
    """A tiny `geoanalyze train` run keeping its checkpoints at steps 3, 6, 9 and 12 (``sets``: more --set)."""
    chosen = {TRAIN_TINY[i + 1].split("=")[0]: TRAIN_TINY[i + 1] for i, a in enumerate(TRAIN_TINY) if a == "--set"}
    chosen.update((item.split("=")[0], item) for item in ("steps=12", "eval_every=3", *sets))
    args = [arg for item in chosen.values() for arg in ("--set", item)]
    run = invoke(["train", "-o", name, *args, "--device", "cpu", "--keep-checkpoints", "4"], sandbox.root)
    assert run.code == 0, str(run)
    return sandbox.path(name)


def test_a_trainer_checkpoint_without_config_is_a_row_saying_why(sandbox: Sandbox, minilm_path: Path) -> None:
    sandbox.copy_sample("drift-words.txt")
    for step in (1, 2, 3):
        skip = ("config.json",) if step == 2 else ()
        folder = linked_copy(minilm_path, sandbox.path(f"out/checkpoint-{step}"), skip)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    run = sandbox.run("track", "out", *CORPUS, "-f", "json")
    assert run.code == 1, str(run)
    records = json.loads(run.stdout)["records"]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert records[1]["error"] is not None and "config.json" in records[1]["error"]
    assert records[0]["error"] is None and records[2]["error"] is None
    assert len(run.errors) == 1 and "checkpoint-2" in run.errors[0] and "config.json" in run.errors[0]


def test_order_given_keeps_a_run_folders_steps_in_step_order(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    run = trained(sandbox, "run")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-12", "step-3", "step-6", "step-9"]
    for order in ("given", "steps"):
        document = json.loads(sandbox.accepted("track", "run", *RUN, "--order", order).stdout)
        assert [r["step"] for r in document["records"]] == [3, 6, 9, 12], order


def test_a_kept_step_without_config_is_a_row_in_a_run_folder(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    run = trained(sandbox, "run")
    (run / "checkpoints" / "step-6" / "config.json").unlink()
    done = sandbox.run("track", "run", *RUN)
    assert done.code == 1, str(done)
    records = json.loads(done.stdout)["records"]
    assert [r["step"] for r in records] == [3, 6, 9, 12]
    assert "config.json" in records[1]["error"] and [r["error"] for r in records if r["step"] != 6] == [None] * 3


@pytest.mark.parametrize("change", ["another model", "removed"])
def test_a_member_replaced_while_the_series_is_scored_is_a_row_saying_why(sandbox: Sandbox, change: str) -> None:
    from geoanalyze.analysis import StressOptions
    from geoanalyze.tracking import find_series, track

    sandbox.copy_sample("drift.txt")
    run = trained(sandbox, "run")
    other = trained(sandbox, "other", "model.d_model=24")  # another model: wider
    members = find_series([str(run)])
    assert [m.step for m in members] == [3, 6, 9, 12]

    def replace_the_last(record: object) -> None:
        if getattr(record, "index", None) == 0:  # the first is scored: the last changes under the series
            last = run / "checkpoints" / "step-12"
            shutil.rmtree(last)
            if change == "another model":
                shutil.copytree(other / "checkpoints" / "step-12", last)

    options = StressOptions(str(sandbox.path("drift.txt")), null_draws=2, max_positions=12, layers="none")
    result = track(members, options, on_record=replace_the_last)
    last = result.records[-1]
    assert last.position is None and last.error is not None
    assert "changed while the series was scored" in last.error
    if change == "another model":
        assert "d_model" in last.error
    assert [r.error for r in result.records[:-1]] == [None] * 3


@pytest.mark.parametrize("name", ["[/b]", "[bold]x[/bold]"])
def test_a_member_named_like_rich_markup_is_text_in_the_table(sandbox: Sandbox, name: str) -> None:
    """Our own adversary: `track`'s terminal table read a member's name as Rich markup (``[/b]``: exit 3)."""
    sandbox.copy_sample("drift.txt")
    run = trained(sandbox, "run")
    shutil.copytree(run / "checkpoints" / "step-12", sandbox.path(name))
    args = ["--dataset", "drift.txt", "--null-draws", "2", "--max-length", "12"]
    done = sandbox.accepted("track", "--baseline", "run/checkpoints/step-3", name, *args)
    assert f"candidate {name}" in done.stdout and name in done.stdout.split("against the baseline")[0]
