"""examples/github-actions.yml, the recipe of docs/ci.md: its shape, and its `run:` steps run here in order.

The steps run as GitHub runs them (``bash -e``, the job's env with ``${{ github.workspace }}`` set,
a fresh $GITHUB_STEP_SUMMARY file, a step after a failure skipped unless ``if: always()``), in a
folder holding the repository's sample corpora, skipping only the install step and the
``uses: actions/...`` steps. The summary must render with a GFM parser: tables as tables, no text
swallowed as HTML.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO_ROOT
from markdown_it import MarkdownIt

WORKFLOW = REPO_ROOT / "examples" / "github-actions.yml"
CI_DOC = REPO_ROOT / "docs" / "ci.md"
GFM = MarkdownIt("commonmark").enable("table")


def workflow() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return document


def the_job() -> dict[str, Any]:
    jobs = workflow()["jobs"]
    assert len(jobs) == 1
    job: dict[str, Any] = next(iter(jobs.values()))
    return job


@dataclass
class StepRun:
    name: str
    code: int | None  # None: skipped (an earlier step failed)
    output: str


def expand(text: str, workspace: Path) -> str:
    return text.replace("${{ github.workspace }}", str(workspace))


def run_steps(workspace: Path, summary: Path, **overrides: str) -> list[StepRun]:
    """Every `run:` step of the job but the install, in order, in ``workspace``."""
    job = the_job()
    env = {key: expand(str(value), workspace) for key, value in job["env"].items()}
    env.update(overrides)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, **env, "GITHUB_STEP_SUMMARY": str(summary), "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    env["GITHUB_OUTPUT"] = str(workspace / "github-output")
    runs: list[StepRun] = []
    failed = False
    for step in job["steps"]:
        if "run" not in step or step.get("name") == "Install geoanalyze":
            continue
        if failed and "always()" not in str(step.get("if", "")):
            runs.append(StepRun(step["name"], None, ""))
            continue
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-c", step["run"]],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        runs.append(StepRun(step["name"], done.returncode, done.stdout + done.stderr))
        failed = failed or done.returncode != 0
    return runs


def checkout(tmp_path: Path) -> Path:
    """What actions/checkout leaves for these steps: the repository's sample corpora."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "sample_corpora").symlink_to(REPO_ROOT / "sample_corpora")
    return workspace


def check_summary(summary: Path) -> str:
    """The job summary renders as GFM: every table a table, nothing read as HTML."""
    text = summary.read_text(encoding="utf-8")
    tokens = GFM.parse(text)
    tables = [t for t in tokens if t.type == "table_open"]
    assert tables, text[:2000]
    html = [t.content for t in tokens if t.type == "html_block"]
    html += [c.content for t in tokens if t.children for c in t.children if c.type == "html_inline"]
    # the legend folds into a <details> block (GFM passes those tags through); no other text is HTML
    tags = [tag for chunk in html for tag in re.findall(r"</?[^>]*>", chunk)]
    assert set(tags) <= {"<details>", "</details>", "<summary>", "</summary>"}, html
    assert all(not re.sub(r"</?(details|summary)>|What the columns mean", "", chunk).strip() for chunk in html), html
    source_rows = [line for line in text.splitlines() if line.startswith("|") and not re.match(r"^\|[\s:|-]+\|$", line)]
    assert sum(t.type == "tr_open" for t in tokens) == len(source_rows)
    assert "the `geometry` artifact" in text
    return text


def test_the_workflow_caches_scores_summarises_uploads_and_gates() -> None:
    document = workflow()
    assert document["name"] and (document.get("on") or document.get(True))  # YAML 1.1 reads `on` as True
    job = the_job()
    env = job["env"]
    assert env["HF_HOME"].startswith("${{ github.workspace }}/")
    assert env["GEOANALYZE_CACHE_DIR"].startswith("${{ github.workspace }}/")
    steps = job["steps"]
    uses = {step["uses"].split("@")[0]: step for step in steps if "uses" in step}
    assert {"actions/checkout", "actions/setup-python", "actions/cache", "actions/upload-artifact"} <= set(uses)
    cached = uses["actions/cache"]["with"]["path"].split()
    assert {os.path.relpath(expand(env[k], Path("/w")), "/w") for k in ("HF_HOME", "GEOANALYZE_CACHE_DIR")} <= set(
        cached
    )
    assert uses["actions/upload-artifact"].get("if") == "always()"
    runs = " ".join(step.get("run", "") for step in steps)
    assert "pip install geoanalyze" in runs and "--index-url https://download.pytorch.org/whl/cpu" in runs
    assert "geoanalyze stress" in runs and "geoanalyze report" in runs and '"$GITHUB_STEP_SUMMARY"' in runs
    assert "--fail-above" in runs
    assert steps[-1]["run"].strip().endswith("fi") and "exit 1" in steps[-1]["run"]


def test_the_docs_show_the_workflow_as_it_is() -> None:
    page = CI_DOC.read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", page, re.S)
    assert block is not None
    assert block.group(1) == WORKFLOW.read_text(encoding="utf-8")


def test_the_steps_run_here_with_an_encoding_spec(tmp_path: Path) -> None:
    """The steps as written with a small target (a spec at width 8): a passing gate, then a crossed
    one in a second run that reads the first run's caches (as actions/cache restores them)."""
    workspace = checkout(tmp_path)
    summary = tmp_path / "summary.md"
    runs = run_steps(workspace, summary, CHECKPOINT="rope:d=8")
    assert [r.code for r in runs] == [0] * len(runs), runs
    text = check_summary(summary)
    assert "rope:d=8" in text
    assert (workspace / "geometry" / "figures").is_dir() and (workspace / "geometry" / "report.md").is_file()
    assert any((workspace / ".cache" / "geoanalyze").iterdir()), "the cached folder is where the cache went"

    crossed = tmp_path / "crossed"
    crossed.mkdir()
    cache = str(workspace / ".cache" / "geoanalyze")
    runs = run_steps(
        checkout(crossed), crossed / "summary.md", CHECKPOINT="rope:d=8", GATE="scaled=0", GEOANALYZE_CACHE_DIR=cache
    )
    codes = {r.name: r.code for r in runs}
    assert codes["Fail the job when the gate was crossed"] == 1, runs
    assert codes["Show the tables in the job summary"] == 0
    check_summary(crossed / "summary.md")


@pytest.mark.slow
def test_the_steps_run_here_as_written(tmp_path: Path) -> None:
    """The packaged MiniLM checkpoint on the sample corpus, exactly the workflow's env."""
    workspace = checkout(tmp_path)
    summary = tmp_path / "summary.md"
    runs = run_steps(workspace, summary)
    gate = runs[-1]
    assert all(r.code == 0 for r in runs[:-1]), runs
    assert gate.code in (0, 1), runs
    text = check_summary(summary)
    assert "all-MiniLM-L6-v2" in text
