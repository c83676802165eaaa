"""Every experiment's smoke preset: seconds on a CPU, no download, its own looser thresholds, said so.

`geoanalyze verify NAME --preset smoke` runs each experiment at toy size (synthetic corpora stand in
for SST-2, IMDB and WikiText-2); the record and the page say which preset ran and that its
thresholds are looser. `verify all --preset smoke` runs them all; an unknown preset is one line
that lists the valid ones.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import invoke

import geoanalyze.experiments
from geoanalyze.errors import InputError
from geoanalyze.experiments import (
    EXPERIMENTS,
    ExperimentOptions,
    ExperimentResult,
    markdown,
    run_experiment,
    write_result,
)
from geoanalyze.experiments.record import PRESET_NOTES

#: a smoke run takes seconds (1-7 s each on an idle 2-core machine); generous for a loaded CI machine
SMOKE_SECONDS = 60.0


class RunOnce:
    """run_experiment, each experiment computed once per module and options: a later call with the
    same options gets a copy of the first result and of the first run's work dir (figures, runs).

    CPU training is bit-identical per seed (docs/determinism.md), so a second run would compute the
    same numbers; the commands below render the one result as table, JSON and Markdown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs: dict[tuple[Any, ...], tuple[ExperimentResult, float, Path]] = {}

    def __call__(self, name: str, options: ExperimentOptions) -> ExperimentResult:
        return self.timed(name, options)[0]

    def timed(self, name: str, options: ExperimentOptions) -> tuple[ExperimentResult, float]:
        """(the result, the seconds its one real run took)."""
        key = self.key(name, options)
        if key not in self.runs:
            began = time.perf_counter()
            result = run_experiment(name, options)
            seconds = time.perf_counter() - began
            kept = self.root / f"{len(self.runs):02d}-{name}"
            shutil.copytree(options.work_dir, kept)
            self.runs[key] = (result, seconds, kept)
        else:
            shutil.copytree(self.runs[key][2], options.work_dir, dirs_exist_ok=True)
        result, seconds, _ = self.runs[key]
        return copy.deepcopy(result), seconds

    @staticmethod
    def key(name: str, options: ExperimentOptions) -> tuple[Any, ...]:
        """What the numbers depend on (not the work dir, not the progress bars); auto is the device it picks."""
        import torch

        device = ("cuda" if torch.cuda.is_available() else "cpu") if options.device == "auto" else options.device
        data_dir = options.data_dir or os.environ.get("GEOANALYZE_DATA_DIR")
        return (name, options.preset, options.seed, device, tuple(options.overrides), data_dir)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunOnce]:
    """The module's experiments, each run once; the commands (`verify`) get the same runs."""
    once = RunOnce(tmp_path_factory.mktemp("smoke-runs"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(geoanalyze.experiments, "run_experiment", once)
        yield once


def test_every_experiment_lists_the_smoke_preset_first() -> None:
    for experiment in EXPERIMENTS.values():
        assert experiment.presets[0] == "smoke", experiment.name
        assert {"smoke", "ci", "paper"} <= set(experiment.presets), experiment.name


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_the_smoke_preset_runs_in_seconds_and_passes_its_own_thresholds(
    name: str, tmp_path: Path, smoke: RunOnce
) -> None:
    options = ExperimentOptions(preset="smoke", work_dir=tmp_path, device="cpu", progress=False)
    result, seconds = smoke.timed(name, options)
    assert seconds < SMOKE_SECONDS, f"{name} took {seconds:.1f} s at the smoke preset"
    assert result.preset == "smoke" and result.checks
    # a test over seeds cannot decide on smoke's one seed: undecided (said so), never a pass, never a failure
    failed = [f"{c.name}: {c.value} ({c.claim})" for c in result.checks if c.verdict == "fail"]
    assert not failed, failed
    assert result.passed
    assert all(c.verdict == "pass" or "UNDECIDED" in c.detail for c in result.checks)
    assert all(math.isfinite(c.value) for c in result.checks)
    for figure in result.figures:
        assert (tmp_path / figure).stat().st_size > 1000, figure
    record = json.loads(write_result(result, tmp_path)["json"].read_text(encoding="utf-8"))
    assert record["preset"] == "smoke" and record["preset_note"] == PRESET_NOTES["smoke"]
    page = markdown(result)
    assert "Preset `smoke`" in page and "looser thresholds" in page


def test_a_smoke_run_reads_no_real_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smoke corpora are synthetic: a data dir that does not exist is never looked into."""
    monkeypatch.setenv("GEOANALYZE_DATA_DIR", str(tmp_path / "nowhere"))
    options = ExperimentOptions(preset="smoke", work_dir=tmp_path, device="cpu", progress=False)
    assert run_experiment("joformer-reference", options).checks


def test_ci_thresholds_are_not_the_smoke_ones() -> None:
    """The smoke preset loosens a threshold only at smoke: ci's claims keep theirs."""
    from geoanalyze.experiments.record import smoke_or

    assert smoke_or("smoke", 0.75, 0.95) == 0.75
    assert smoke_or("ci", 0.75, 0.95) == 0.95 and smoke_or("paper", 0.75, 0.95) == 0.95


# --- the command ---------------------------------------------------------------------------------


@pytest.fixture
def in_tmp(tmp_path: Path, smoke: RunOnce) -> Path:
    """An empty folder to run the command in; its experiments are the module's runs."""
    return tmp_path


@pytest.mark.parametrize("args", [["verify", "journey", "--preset", "quick"], ["verify", "all", "-p", "fast"]])
def test_an_unknown_preset_is_one_line_listing_the_valid_ones(args: list[str], in_tmp: Path) -> None:
    result = invoke(args, cwd=in_tmp)
    assert result.code == 2
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown preset")
    assert "choose one of smoke, ci, paper" in lines[0]
    assert list(in_tmp.iterdir()) == []
    with pytest.raises(InputError, match="choose one of smoke, ci, paper"):
        run_experiment("necessity", ExperimentOptions(preset="fast", work_dir=in_tmp))


def test_verify_says_which_preset_ran_and_that_smoke_is_looser(in_tmp: Path) -> None:
    table = invoke(["verify", "edelta", "--preset", "smoke", "-o", "t"], cwd=in_tmp)
    assert table.code == 0, str(table)
    assert "edelta (smoke," in table.stdout and PRESET_NOTES["smoke"] in " ".join(table.stdout.split())
    document = json.loads(invoke(["verify", "edelta", "-p", "smoke", "-o", "j", "-f", "json"], cwd=in_tmp).stdout)
    assert document["preset"] == "smoke" and document["preset_note"] == PRESET_NOTES["smoke"]
    page = invoke(["verify", "edelta", "-p", "smoke", "-o", "m", "-f", "markdown"], cwd=in_tmp).stdout
    assert "Preset `smoke`" in page and PRESET_NOTES["smoke"] in page
    assert PRESET_NOTES["smoke"] in (in_tmp / "m" / "edelta.md").read_text(encoding="utf-8")


def test_verify_all_runs_every_experiment_into_its_own_folder(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`verify all` over the registry (here two quick experiments; the test above runs every smoke preset)."""
    import geoanalyze.experiments as experiments

    quick = {name: EXPERIMENTS[name] for name in ("journey", "edelta")}
    monkeypatch.setattr(experiments, "EXPERIMENTS", quick)
    result = invoke(["verify", "all", "--preset", "smoke", "-o", "all", "-f", "json"], cwd=in_tmp)
    assert result.code == 0, str(result)
    document = json.loads(result.stdout)
    assert document["preset"] == "smoke" and document["passed"] is True
    assert [e["experiment"] for e in document["experiments"]] == ["journey", "edelta"]
    assert "progress: verify all: journey PASS (9/9 checks), 1/2 done" in result.stderr
    for name in quick:
        assert (in_tmp / "all" / name / f"{name}.json").is_file()
        assert (in_tmp / "all" / name / f"{name}.md").is_file()
    summary = (in_tmp / "all" / "summary.md").read_text(encoding="utf-8")
    assert "| journey | PASS |" in summary and PRESET_NOTES["smoke"] in summary
    assert json.loads((in_tmp / "all" / "summary.json").read_text(encoding="utf-8"))["passed"] is True
    typed = ["verify", "all", "-p", "smoke", "-o", "md", "-f", "markdown"]
    page = invoke(typed, cwd=in_tmp, program="/usr/bin/geoanalyze").stdout  # argv as the console script sees it
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(page)
    rows = [t for t in tokens if t.type == "tr_open"]
    cells = [t for t in tokens if t.type in ("th_open", "td_open")]
    assert len(rows) == 3 and len(cells) == 3 * 5  # header and two experiments, five cells each
    assert "seed 0: `geoanalyze verify all -p smoke -o md -f markdown`" in page  # version, command line, seed
    refused = invoke(["verify", "all", "-p", "smoke", "-o", "other", "--set", "steps=3"], cwd=in_tmp)
    assert refused.code == 2 and "error: --set applies to one experiment" in refused.stderr


def test_an_experiment_no_check_could_decide_is_undecided_not_pass(tmp_path: Path) -> None:
    """A smoke run whose every check is undecided (vision-2d: 0/0, 5 undecided) reads UNDECIDED in the
    summary table, the experiment's title and its page; not a failure (exit 0), not a pass."""
    from geoanalyze.experiments.record import Check, ExperimentResult, markdown

    undecided = [Check(f"c{i}", "claim", 0.5, False, decided=False) for i in range(2)]
    result = ExperimentResult("x", "t", undecided, preset="smoke")
    assert result.passed and result.outcome == "UNDECIDED"
    assert ExperimentResult("x", "t", [*undecided, Check("d", "claim", 1.0, True)], preset="smoke").outcome == "PASS"
    assert ExperimentResult("x", "t", [Check("d", "claim", 1.0, False)], preset="smoke").outcome == "FAIL"
    assert "Verdict: **UNDECIDED**" in markdown(result)
    run = invoke(["verify", "vision-2d", "--preset", "smoke", "--output-dir", "v"], cwd=tmp_path)
    assert run.code == 0 and run.stdout.splitlines()[0].startswith("vision-2d (smoke,")
    assert "): UNDECIDED; written to" in run.stdout.splitlines()[0]


def test_verify_result_to_json_is_the_verify_json(in_tmp: Path) -> None:
    """geoanalyze.VerifyResult.to_json() is what `verify NAME -f json` prints (wall time and provenance
    taken from the command's own run, as they are its own)."""
    import dataclasses

    import geoanalyze as ga

    printed = invoke(["verify", "journey", "--preset", "smoke", "-o", "cli", "-f", "json"], cwd=in_tmp)
    assert printed.code == 0, str(printed)
    cli = json.loads(printed.stdout)
    ran = run_experiment("journey", ExperimentOptions(preset="smoke", work_dir=in_tmp / "lib", progress=True))
    result = ga.VerifyResult((dataclasses.replace(ran, seconds=cli["seconds"]),), "smoke", run=cli["run"])
    assert result.passed and result.to_json() + "\n" == printed.stdout
    every = ga.VerifyResult(result.experiments, "smoke", every=True, run=cli["run"])
    record = {key: value for key, value in cli.items() if key != "run"}
    assert json.loads(every.to_json()) == {"preset": "smoke", "passed": True, "experiments": [record], "run": cli["run"]}
