"""examples/github-actions.yml, the recipe of docs/ci.md: its shape, and its `run:` steps run here in order.

The steps run as GitHub runs them (``bash -e``, the job's env with ``${{ github.workspace }}`` set,
a fresh $GITHUB_STEP_SUMMARY file, a step after a failure skipped unless ``if: always()``), skipping
only the ``uses: actions/...`` steps. The install step runs too, in a fresh virtual environment,
against a wheel of this repository built here and offered as the only package index (every
dependency already installed, seen through this environment's site-packages without geoanalyze):
a recipe that names another distribution (``pip install geoanalyze`` installs an unrelated GIS
package from PyPI) fails at once. The summary must render with a GFM parser: tables as tables, no
text swallowed as HTML.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
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


DISTRIBUTION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]


@dataclass(frozen=True)
class Runner:
    """What setup-python leaves: a fresh environment (``python``, ``pip`` first on PATH), whose pip
    finds only ``index`` (a folder of wheels) and sees this environment's packages but geoanalyze."""

    venv: Path
    index: Path

    def env(self) -> dict[str, str]:
        return {
            "PATH": str(self.venv / "bin") + os.pathsep + os.environ["PATH"],
            "VIRTUAL_ENV": str(self.venv),
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(self.index),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }


def ours(name: str) -> bool:
    """A site-packages entry of this repository's own installation (editable or not)."""
    stem = name.lower().replace("-", "_")
    return stem.startswith(("geoanalyze", "__editable__.geoanalyze", "__editable___geoanalyze"))


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """A wheel of this repository (built from a copy of its sources) and a fresh runner environment."""
    root = tmp_path_factory.mktemp("runner")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "geoanalyze", source / "geoanalyze", ignore=shutil.ignore_patterns("__pycache__"))
    index = root / "index"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(index),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    # Every dependency, seen through a folder of links to this environment's site-packages without
    # geoanalyze itself (a .pth file of the new environment adds it as a site directory).
    view = root / "dependencies"
    view.mkdir()
    site_packages = Path(sysconfig.get_paths()["purelib"])
    for entry in site_packages.iterdir():
        if not ours(entry.name):
            (view / entry.name).symlink_to(entry)
    venv = root / "venv"
    # without its own pip and setuptools (an older setuptools would shadow the one torch asks for):
    # `python -m pip` is this environment's pip, seen through the links, installing into the new one
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    (new_site,) = (venv / "lib").glob("python*/site-packages")
    (new_site / "dependencies.pth").write_text(f"import site; site.addsitedir({str(view)!r})\n", encoding="utf-8")
    return Runner(venv, index)


def run_steps(workspace: Path, summary: Path, runner: Runner, **overrides: str) -> list[StepRun]:
    """Every `run:` step of the job, the install included, in order, in ``workspace``."""
    job = the_job()
    env = {key: expand(str(value), workspace) for key, value in job["env"].items()}
    env.update(overrides)
    env = {**os.environ, **env, "GITHUB_STEP_SUMMARY": str(summary), **runner.env()}
    env.pop("PYTHONPATH", None)
    env["GITHUB_OUTPUT"] = str(workspace / "github-output")
    runs: list[StepRun] = []
    failed = False
    for step in job["steps"]:
        if "run" not in step:
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


def checkout(tmp_path: Path, samples: bool = True) -> Path:
    """What actions/checkout leaves for these steps: geoanalyze's repository (its sample corpora), or
    with ``samples=False`` a user's repository (nothing the recipe reads)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    if samples:
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
    assert f"pip install {DISTRIBUTION}\n" in runs and "--index-url https://download.pytorch.org/whl/cpu" in runs
    assert "geoanalyze stress" in runs and "geoanalyze report" in runs and '"$GITHUB_STEP_SUMMARY"' in runs
    assert "--fail-above" in runs
    assert steps[-1]["run"].strip().endswith("fi") and "exit 1" in steps[-1]["run"]


def test_the_docs_show_the_workflow_as_it_is() -> None:
    page = CI_DOC.read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", page, re.S)
    assert block is not None
    assert block.group(1) == WORKFLOW.read_text(encoding="utf-8")


def test_the_steps_run_here_with_an_encoding_spec(tmp_path: Path, runner: Runner) -> None:
    """The steps as written with a small target (a spec at width 8), in a user's repository (no
    sample corpora: the recipe writes the one it defaults to): a passing gate, then a crossed one in
    a second run, in geoanalyze's own repository, that reads the first run's caches (as
    actions/cache restores them)."""
    workspace = checkout(tmp_path, samples=False)
    summary = tmp_path / "summary.md"
    runs = run_steps(workspace, summary, runner, CHECKPOINT="rope:d=8")
    assert [r.code for r in runs] == [0] * len(runs), runs
    assert f"Successfully installed {DISTRIBUTION}-" in runs[0].output, runs[0]
    written = workspace / "sample_corpora" / "drift-words.txt"
    assert written.read_bytes() == (REPO_ROOT / "sample_corpora" / "drift-words.txt").read_bytes()
    text = check_summary(summary)
    assert "rope:d=8" in text
    assert (workspace / "geometry" / "figures").is_dir() and (workspace / "geometry" / "report.md").is_file()
    # the page's figures are linked from where the page is (geometry/), as the artifact is opened
    page = (workspace / "geometry" / "stress.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page)
    assert len(links) >= 4 and all(link.startswith("figures/") for link in links), links
    assert all((workspace / "geometry" / link).is_file() for link in links)
    assert any((workspace / ".cache" / "geoanalyze").iterdir()), "the cached folder is where the cache went"

    crossed = tmp_path / "crossed"
    crossed.mkdir()
    cache = str(workspace / ".cache" / "geoanalyze")
    runs = run_steps(
        checkout(crossed),
        crossed / "summary.md",
        runner,
        CHECKPOINT="rope:d=8",
        GATE="scaled=0",
        GEOANALYZE_CACHE_DIR=cache,
    )
    codes = {r.name: r.code for r in runs}
    assert codes["Fail the job when the gate was crossed"] == 1, runs
    assert codes["Show the tables in the job summary"] == 0
    check_summary(crossed / "summary.md")


def test_the_steps_run_the_installed_wheel(runner: Runner) -> None:
    """After the install step the command and the module are the wheel's, in the runner's environment
    (not this repository's sources), and a recipe naming PyPI's other "geoanalyze" fails to install."""
    env = {**os.environ, **runner.env()}
    env.pop("PYTHONPATH", None)
    (install,) = [step["run"] for step in the_job()["steps"] if step.get("name") == "Install geoanalyze"]
    done = subprocess.run(["bash", "-e", "-c", install], env=env, capture_output=True, text=True, cwd=runner.index)
    assert done.returncode == 0, done.stdout + done.stderr
    assert shutil.which("geoanalyze", path=env["PATH"]) == str(runner.venv / "bin" / "geoanalyze")
    where = subprocess.run(
        ["python", "-c", "import geoanalyze; print(geoanalyze.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        cwd=runner.index,
    )
    assert Path(where.stdout.strip()).is_relative_to(runner.venv), where
    wrong = install.replace(f"pip install {DISTRIBUTION}", "pip install --force-reinstall geoanalyze")
    done = subprocess.run(["bash", "-e", "-c", wrong], env=env, capture_output=True, text=True, cwd=runner.index)
    assert done.returncode != 0 and "No matching distribution found for geoanalyze" in done.stderr


def test_readme_ci_doc_and_pyproject_name_one_distribution() -> None:
    assert DISTRIBUTION == "geoanalyze-pe"
    for page in (REPO_ROOT / "README.md", CI_DOC):
        text = page.read_text(encoding="utf-8")
        assert f"pip install {DISTRIBUTION}" in text, page
        assert not re.search(r"pip install geoanalyze(?![-\w])", text), page


@pytest.mark.slow
def test_the_steps_run_here_as_written(tmp_path: Path, runner: Runner) -> None:
    """The packaged MiniLM checkpoint on the sample corpus, exactly the workflow's env."""
    workspace = checkout(tmp_path)
    summary = tmp_path / "summary.md"
    runs = run_steps(workspace, summary, runner)
    gate = runs[-1]
    assert all(r.code == 0 for r in runs[:-1]), runs
    assert gate.code in (0, 1), runs
    text = check_summary(summary)
    assert "all-MiniLM-L6-v2" in text


def test_records_name_this_project_version_under_its_import_name() -> None:
    """Experiment records state geoanalyze's version: the distribution's name is not the module's."""
    from geoanalyze.experiments.record import environment
    from geoanalyze.version import __version__

    assert environment()["geoanalyze"] == __version__
