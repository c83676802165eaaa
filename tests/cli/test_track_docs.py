"""Every command of docs/tracking.md, run as written (in-process) on the data it names."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from helpers import REPO_ROOT, SAMPLES, invoke
from test_track import linked_copy

PAGE = REPO_ROOT / "docs" / "tracking.md"


def commands() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return [
        line.strip()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.strip()
    ]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    """The folders the page names: sample_corpora, a Trainer output, a pretrained and a fine-tuned model."""
    folder = tmp_path_factory.mktemp("docs")
    (folder / "sample_corpora").symlink_to(SAMPLES)
    for step in (10, 100, 1000):
        checkpoint = linked_copy(minilm_path, folder / "trainer-output" / f"checkpoint-{step}")
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    for step in (10, 100):  # a second run, for --series
        checkpoint = linked_copy(minilm_path, folder / "trainer-output-b" / f"checkpoint-{step}")
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    linked_copy(minilm_path, folder / "pretrained")
    linked_copy(minilm_path, folder / "finetuned")
    return folder


def test_the_page_shows_the_commands_of_the_issue() -> None:
    shown = commands()
    assert any("--keep-checkpoints" in c and "--geometry-every" in c for c in shown)
    assert any("--baseline" in c and "--fail-if-worse" in c for c in shown)
    assert any("--series" in c for c in shown)
    assert all(c.startswith("geoanalyze ") for c in shown), shown


def test_every_command_runs_as_written(work: Path) -> None:
    for command in commands():
        run = invoke(shlex.split(command)[1:], cwd=work)
        assert run.code == 0, f"{command}\n{run}"
    assert json.loads((work / "track.json").read_text())["records"][-1]["step"] == 12
    assert (work / "figures" / "track.png").is_file() and (work / "trainer-figures" / "track.png").is_file()
    assert (work / "series-figures" / "track.png").is_file()


def test_the_ci_step_is_the_command_shown() -> None:
    text = PAGE.read_text(encoding="utf-8")
    (step,) = re.findall(r"  run: (geoanalyze .*)", text)
    assert step in commands()


def test_the_callback_snippet_is_the_example_s() -> None:
    text = PAGE.read_text(encoding="utf-8")
    (snippet,) = re.findall(r"```python\n(.*?)```", text, re.S)
    example = (REPO_ROOT / "examples" / "trainer_callback.py").read_text(encoding="utf-8")
    for line in snippet.strip().splitlines():
        assert line.strip() in example, line
