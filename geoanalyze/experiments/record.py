"""What every experiment returns, and how it is written: checks with a verdict, data, Markdown, figures.

An experiment is a function ``run(options: ExperimentOptions) -> ExperimentResult``. It does its
work (training runs, numeric checks) in ``options.work_dir``, draws its figures there, and returns
a result whose :class:`Check` list carries the verdict. :func:`write_result` then writes
``<name>.json`` and ``<name>.md`` beside the figures; the ``verify`` command stages all of it and
moves it into ``--output-dir`` only when the run finished, so a failure leaves nothing behind.

Importing this module does not import torch.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..io import dumps, to_jsonable, write_text
from ..io import markdown_table as gfm_table

if TYPE_CHECKING:
    from ..results import Provenance  # a type only: importing results pulls in scipy

PRESET_NAMES = ("smoke", "ci", "paper")

#: what each preset is for, said on every page and in every record of a run at that preset
PRESET_NOTES = {
    "smoke": (
        "smoke preset: every code path at toy size in seconds on a CPU, with looser thresholds than ci's; "
        "its verdicts check that the experiment runs, not the paper's claim (run --preset ci for that)"
    ),
    "ci": "ci preset: CPU scale, minutes; the claims at reduced size",
    "paper": "paper preset: the papers' scale, sized for a GPU",
}


def training_preset(preset: str) -> str:
    """The training preset (:data:`geoanalyze.train.config.PRESETS`) an experiment preset starts from.

    smoke starts from ci's model and shrinks it with the experiment's own smoke settings.
    """
    return "ci" if preset == "smoke" else preset


def smoke_or(preset: str, smoke: Any, other: Any) -> Any:
    """``smoke`` at the smoke preset, ``other`` at ci and paper: a threshold that the smoke preset loosens."""
    return smoke if preset == "smoke" else other


class Statistics(TypedDict, total=False):
    """A statistical test as a check's record holds it (:meth:`~.stat_tests.TestResult.to_dict`); a check of
    several tests (:func:`~.stat_tests.all_of`) holds them under ``tests``, each with its ``statement``."""

    kind: str
    margin: float
    mean: float
    sd: float
    lower: float
    upper: float
    level: float
    n: int
    replicates: str
    seeds: list[int]
    unit: str
    method: str
    passed: bool
    decided: bool
    values: dict[str, Any]
    statement: str
    tests: list[Statistics]


class CheckRecord(TypedDict, total=False):
    """A :class:`Check` as its record holds it (records written before verdicts existed carry only ``passed``)."""

    name: str
    claim: str
    test: str
    value: float
    passed: bool
    verdict: str
    paper: str | None
    detail: str
    statistics: Statistics


@dataclass(frozen=True)
class Check:
    """One claim, measured.

    Attributes
    ----------
    name : short identifier, e.g. "equivariance".
    claim : the claim in words, with the threshold: "max |f(pi x) - pi f(x)| <= 1e-5".
    value : the measured figure the verdict is read from (NaN fails).
    passed : the verdict.
    paper : the paper's figure for the same quantity, quoted beside ours, or None.
    detail : anything a reader needs to interpret the value (units, per-variant values, mean, spread, seeds).
    test : the kind of test (:mod:`.stat_tests`): "superiority", "non-inferiority", "equivalence",
        "tolerance" (a deterministic quantity against a bound), or "" for an unlabelled check.
    decided : False when the test had too few replicates to decide (1 seed): then ``passed`` is False,
        and the verdict is "undecided", not a failure, at the smoke preset only.
    statistics : the test's numbers (mean, sd, bounds, margin, seeds), JSON-safe.
    """

    name: str
    claim: str
    value: float
    passed: bool
    paper: str | None = None
    detail: str = ""
    test: str = ""
    decided: bool = True
    statistics: Statistics = field(default_factory=lambda: Statistics())

    @property
    def verdict(self) -> str:
        """ "pass", "fail" or "undecided" (too few seeds for the test to decide)."""
        return "undecided" if not self.decided else ("pass" if self.passed else "fail")

    def to_dict(self) -> CheckRecord:
        return {
            "name": self.name,
            "claim": self.claim,
            "test": self.test,
            "value": self.value,
            "passed": bool(self.passed),
            "verdict": self.verdict,
            "paper": self.paper,
            "detail": self.detail,
            **({"statistics": self.statistics} if self.statistics else {}),
        }


def check(name: str, claim: str, value: float, passed: bool, paper: str | None = None, detail: str = "") -> Check:
    """A :class:`Check`; a NaN value never passes (fail closed)."""
    value = float(value)
    return Check(name, claim, value, bool(passed) and not math.isnan(value), paper, detail)


@dataclass
class ExperimentOptions:
    """How an experiment is run.

    Attributes
    ----------
    preset : "smoke" (seconds, looser thresholds), "ci" (CPU, minutes) or "paper" (GPU scale).
    work_dir : an existing, empty folder for training runs and figures (staged by the caller).
    seed : base seed; every run and draw derives from it.
    device : "auto", "cpu" or "cuda" (training runs).
    overrides : ``key=value`` settings applied to every training run of the experiment
        (:func:`geoanalyze.train.resolve_config` keys), after the experiment's own.
    data_dir : local folder standing in for the hub (``<name>/<split>.<ext>``), or None.
    progress : show progress bars on stderr.
    """

    preset: str = "ci"
    work_dir: Path = field(default_factory=Path)
    seed: int = 0
    device: str = "auto"
    overrides: Sequence[str] = ()
    data_dir: str | None = None
    progress: bool = True


@dataclass
class ExperimentResult:
    """The outcome of one experiment.

    Attributes
    ----------
    name : the experiment's registry name.
    title : one line saying what was tested.
    checks : the verdicts; the experiment passes when every check passes.
    data : the numbers behind the checks (JSON-safe after :func:`to_jsonable`): per-run metrics,
        per-variant scores, the configurations used.
    sections : Markdown sections (each starting with a ``###`` heading) for the summary page.
    figures : file names of PNG figures written into the work dir, with a caption each.
    preset : the preset it ran at.
    seconds : wall time.
    """

    name: str
    title: str
    checks: list[Check]
    data: dict[str, Any] = field(default_factory=dict)
    sections: list[str] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)
    preset: str = "ci"
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """Every check passes; at the smoke preset a check that could not decide (1 seed) is not a failure."""
        return all(c.passed or (not c.decided and self.preset == "smoke") for c in self.checks)

    @property
    def outcome(self) -> str:
        """ "PASS", "FAIL", or "UNDECIDED" when no check could decide (a smoke run of 1 seed): not a
        failure, and not a pass either."""
        if not self.passed:
            return "FAIL"
        return "UNDECIDED" if self.checks and not any(c.decided for c in self.checks) else "PASS"

    @property
    def undecided(self) -> list[str]:
        """The checks whose test had too few replicates to decide."""
        return [c.name for c in self.checks if not c.decided]

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(
            {
                "experiment": self.name,
                "title": self.title,
                "preset": self.preset,
                "preset_note": PRESET_NOTES.get(self.preset, ""),
                "passed": self.passed,
                "checks": [c.to_dict() for c in self.checks],
                "data": self.data,
                "figures": self.figures,
                "seconds": round(self.seconds, 2),
                "environment": environment(),
            }
        )


@dataclass(frozen=True)
class VerifyResult:
    """What ``geoanalyze verify`` found: one experiment's result, or (``every``: ``verify all``) each one's,
    at ``preset``, with the run's provenance ``run`` (version, command line, seed).

    :meth:`to_json` is what ``verify NAME -f json`` prints (and, for ``verify all``, its summary.json).
    """

    experiments: tuple[ExperimentResult, ...]
    preset: str
    every: bool = False
    run: Provenance | Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Every experiment passes."""
        return all(result.passed for result in self.experiments)

    def to_json(self) -> str:
        """One experiment's record with the run, or (``verify all``) the preset, the verdict and every record."""
        if self.every:
            document = {"preset": self.preset, "passed": self.passed, "experiments": list(self.experiments)}
        else:
            document = self.experiments[0].to_dict()
        return dumps({**document, "run": self.run})


def environment() -> dict[str, str | None]:
    """Versions and hardware, recorded with every result so numbers can be traced."""
    import importlib.metadata as metadata

    from ..version import __version__

    # The distribution is geoanalyze-pe ("geoanalyze" on PyPI is another project): the version is our own.
    versions: dict[str, str | None] = {"geoanalyze": __version__}
    for package in ("torch", "numpy", "transformers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {"python": platform.python_version(), "machine": platform.machine(), **versions}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table; numbers through :func:`fmt`, every ``|`` in a cell escaped."""
    return gfm_table(header, rows, formatter=fmt)


def fmt(value: Any) -> str:
    """Numbers to 4 significant digits (scientific below 1e-3), booleans as PASS/FAIL, None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "PASS" if value else "FAIL"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.3e}"
        return f"{value:.4g}"
    return str(value)


def check_rows(checks: Sequence[Check]) -> tuple[list[str], list[list[Any]]]:
    """The verdict table: check, claim, ours, paper, verdict (a bool: an undecided check is not a pass)."""
    header = ["check", "claim", "ours", "paper", "verdict"]
    return header, [[c.name, c.claim, c.value, c.paper, c.passed] for c in checks]


def verdict_rows(checks: Sequence[Check]) -> tuple[list[str], list[list[Any]]]:
    """The verdict table of a page: check, test, claim, ours, paper, verdict (PASS, FAIL or UNDECIDED), detail."""
    header = ["check", "claim", "ours", "paper", "verdict", "mean, spread, seeds"]
    return header, [[c.name, c.claim, c.value, c.paper, c.verdict.upper(), c.detail] for c in checks]


def markdown(result: ExperimentResult) -> str:
    """The summary page of one experiment."""
    verdict = result.outcome
    parts = [
        f"## `{result.name}`: {result.title}",
        f"Preset `{result.preset}`, {result.seconds:.0f} s. Verdict: **{verdict}**."
        + (f"\n\n> {PRESET_NOTES['smoke']}." if result.preset == "smoke" else ""),
        markdown_table(*verdict_rows(result.checks)),
        *(
            [
                f"Undecided (too few seeds for the test; not a pass): {', '.join(result.undecided)}. "
                "Run --preset ci (3 seeds) to decide them."
            ]
            if result.undecided
            else []
        ),
        *result.sections,
    ]
    parts += [f"![{caption}]({name})\n\n*{caption}*" for name, caption in result.figures.items()]
    return "\n\n".join(parts) + "\n"


def write_result(result: ExperimentResult, folder: Path) -> dict[str, Path]:
    """Write ``<name>.json`` and ``<name>.md`` into ``folder`` (atomically); return the paths."""
    paths = {"json": folder / f"{result.name}.json", "markdown": folder / f"{result.name}.md"}
    write_text(paths["json"], json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n")
    write_text(paths["markdown"], markdown(result))
    return paths


class Stopwatch:
    """Seconds since creation: ``result.seconds = watch()``."""

    def __init__(self) -> None:
        self.began = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.began
