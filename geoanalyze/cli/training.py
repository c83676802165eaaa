"""`geoanalyze train` and `geoanalyze verify`: small models trained to test the papers' claims."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError
from ..io import staged_folder
from ..report.render import grid_table, key_value_table, print_json, print_paragraph, print_table
from . import options as opt
from .common import Folder, Output, check_format, check_output_place, guard, handles_errors

if TYPE_CHECKING:
    from .. import VerifyResult
    from ..results import Provenance

Preset = Annotated[
    str,
    opt.text_option(
        "--preset", "-p", help="smoke (seconds on a CPU: checks that it runs), ci (CPU, minutes) or paper (GPU scale)."
    ),
]
Sets = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        callback=opt.distinct_settings,
        help="KEY=VALUE setting, e.g. steps=500 or model.pe=rope (repeatable; `geoanalyze train --list-keys`).",
    ),
]
Device = Annotated[
    str | None,
    opt.text_option(
        "--device", help="auto (cuda when present), cpu or cuda; default: the preset's (cpu; paper: cuda)."
    ),
]
Seed = Annotated[int | None, opt.seed_option("--seed", help="Seed of the initialisation, batches and dropout.")]
GeometryEvery = Annotated[
    int,
    typer.Option(
        "--geometry-every",
        min=0,
        help="Score the position encoding and the q/k rows on held-out batches every N steps (0: never).",
    ),
]
KeepCheckpoints = Annotated[
    int, typer.Option("--keep-checkpoints", min=0, help="Keep the last K evaluation checkpoints for `track`.")
]


@handles_errors
def train(
    output_dir: Annotated[
        Path | None,
        opt.path_option("--output-dir", "-o", help="Folder for metrics.jsonl and checkpoint/ (required to train)."),
    ] = None,
    preset: Preset = "ci",
    config_file: Annotated[
        Path | None, opt.path_option("--config", help="TOML file of settings (top-level keys and a \\[model] table).")
    ] = None,
    sets: Sets = None,
    task: Annotated[str | None, opt.text_option("--task", help="order, mlm or classification (= --set task=).")] = None,
    pe: Annotated[
        str | None,
        opt.text_option("--pe", help="none, sinusoidal, learned, lowrank, mds, rope or alibi (= --set model.pe=)."),
    ] = None,
    dataset: Annotated[
        str | None, opt.text_option("--dataset", help="Corpus of mlm / classification (= --set dataset=).")
    ] = None,
    split: Annotated[
        str | None, opt.text_option("--split", help="Split of --dataset trained on (default train; = --set split=).")
    ] = None,
    eval_split: Annotated[
        str | None,
        opt.text_option(
            "--eval-split",
            help="Held-out split evaluated on (default validation; 'none': the last 10% of the training texts; "
            "= --set eval_split=).",
        ),
    ] = None,
    allow_eval_on_train: Annotated[
        bool,
        typer.Option("--allow-eval-on-train", help="Evaluate on the split trained on (refused otherwise)."),
    ] = False,
    data_dir: opt.DataDir = None,
    steps: Annotated[int | None, typer.Option("--steps", min=1, help="Optimiser updates (= --set steps=).")] = None,
    device: Device = None,
    seed: Seed = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --output-dir from its checkpoint.")
    ] = False,
    list_keys: Annotated[bool, typer.Option("--list-keys", help="Print every setting --set accepts and exit.")] = False,
    geometry_every: GeometryEvery = 0,
    keep_checkpoints: KeepCheckpoints = 0,
    format: opt.Format = "table",
) -> None:
    """Train a small BERT or GPT with any positional encoding; on the CPU (--device auto: CUDA when present).

    Settings come from the preset, then --config, then the shortcut options, then --set. Under
    `torchrun --nproc_per_node N -m geoanalyze train ...` the run is data-parallel. Score the
    trained positions with `geoanalyze stress model:<output-dir> --dataset ...`.
    """
    from ..api import resolve_config, valid_keys
    from ..api import train as run_training

    check_format(format)
    if list_keys:
        _print_keys(valid_keys(), resolve_config(preset), format)
        return
    if output_dir is None:
        raise InputError("--output-dir is required; pass the folder the run writes to, e.g. --output-dir runs/rope")
    _check_training_outputs(output_dir, [config_file, dataset, data_dir])
    shortcuts: dict[str, object] = dict(task=task, pe=pe, dataset=dataset, split=split, eval_split=eval_split)
    shortcuts.update(data_dir=data_dir)
    shortcuts.update(steps=steps, device=device, seed=seed)
    config = _training_config(preset, config_file, sets or [], shortcuts, allow_eval_on_train)
    result = run_training(config, output_dir, resume, True, extras=_extras(geometry_every, keep_checkpoints, config))
    if int(os.environ.get("RANK", "0")) != 0:
        return  # under torchrun, rank 0 reports for all
    _print_training(result, format)


def _extras(geometry_every: int, keep_checkpoints: int, config: Any) -> Any:
    """--geometry-every's probe (docs/tracking.md) and --keep-checkpoints, for the runner."""
    from ..api import GeometryProbe, RunExtras

    def probe(task: Any) -> Any:
        return GeometryProbe(task, seed=config.seed)

    return RunExtras(geometry_every, probe if geometry_every else None, keep_checkpoints)


def _training_config(
    preset: str, config_file: Path | None, sets: list[str], shortcuts: Mapping[str, object], allow_eval_on_train: bool
) -> Any:
    """The run's settings: the preset, then --config, then the shortcut options (``pe`` is
    ``model.pe``), then --set; refused when it would evaluate on its training split, or when the
    preset asks for a CUDA that is not here."""
    from ..api import resolve_config

    settings = [
        f"{'model.pe' if key == 'pe' else key}={value}" for key, value in shortcuts.items() if value is not None
    ]
    config = resolve_config(preset, [*settings, *sets], toml_path=config_file)
    _check_held_out(config, allow_eval_on_train)
    given = shortcuts["dataset"] is not None or any(item.split("=")[0].strip() == "dataset" for item in sets)
    _check_corpus_applies(config, given)
    asked = shortcuts["device"] is not None or any(item.split("=")[0].strip() == "device" for item in sets)
    _check_preset_device(config, preset, asked)
    return config


def _check_corpus_applies(config: Any, given: bool) -> None:
    """--dataset (or --set dataset=) with the order task, which makes its own sequences, is refused:
    ignored, it would read as a run on that corpus."""
    if given and config.task == "order":
        raise InputError(
            f"--dataset {config.dataset} does not apply to task order (it trains on synthetic sequences); "
            "drop --dataset, or choose --task mlm, lm or classification"
        )


def _check_held_out(config: Any, allowed: bool) -> None:
    """A corpus task evaluates on another split than it trains on, unless --allow-eval-on-train: the
    same split twice would report training accuracy as held-out accuracy."""
    from ..api import resolve_source

    if config.task == "order" or config.eval_split is None or config.eval_split != config.split or allowed:
        return
    if resolve_source(config.dataset, config.split, config.data_dir).split is None:
        return  # a file or synthetic corpus: the last 10% of its texts are held out, whatever the splits say
    raise InputError(
        f"the run would train and evaluate on split {config.split!r} of {config.dataset}; pass another "
        "--eval-split (or --eval-split none to hold out the last 10% of the training texts), "
        "or --allow-eval-on-train to measure training accuracy on purpose"
    )


def _check_preset_device(config: Any, preset: str, asked: bool) -> None:
    """A preset that asks for CUDA where there is none says so, when the user asked for no device."""
    from ..api import PRESETS

    if asked or config.device != "cuda" or PRESETS.get(preset, {}).get("device") != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise InputError(
            f"the {preset} preset asks for device cuda (it is sized for a GPU) and CUDA is not available here; "
            "use --preset ci, or --device cpu to run it on the CPU anyway"
        )


def _check_training_outputs(output_dir: Path, inputs: list[Any]) -> None:
    """The run's folder, metrics.jsonl, training.png and checkpoint/ may be written (none is one of ``inputs``)."""
    check_output_place(output_dir, folder=True, option="--output-dir")
    guard(
        inputs,
        [
            Folder("--output-dir", output_dir),
            *(Output("--output-dir", output_dir / name) for name in ("metrics.jsonl", "training.png")),
            Folder("--output-dir", output_dir / "checkpoint", replaces=True),
        ],
    )


def _print_training(result: Any, format: str) -> None:
    """The finished run: its figure drawn, then its metrics, parameter counts and files in ``format``."""
    config, output_dir = result.config, result.output_dir
    corpus = (
        f"synthetic {config.order_length}-token sequences" if config.task == "order" else Path(config.dataset).name
    )  # a corpus file by its name (a dataset name is its own), wherever it lies
    named = f"{config.task} on {corpus}, pe {config.model.pe}"  # the task's corpus (order: synthetic), the encoding
    result = replace(result, figure=_draw_training_curves(output_dir, named))
    if format == "json":
        print(result.to_json())
        return
    rows: list[tuple[str, Any]] = [
        ("task", config.task),
        ("model", f"{config.model.arch}, pe {config.model.pe}, d {config.model.d_model}, L {config.model.n_layers}"),
        ("parameters", f"{result.parameters:,} (position encoding {result.pe_parameters:,})"),
        *result.metrics.items(),
        ("written", f"{output_dir}/metrics.jsonl, {output_dir}/checkpoint/, {result.figure}"),
    ]
    print_table(key_value_table("training run", rows), format)


def _draw_training_curves(output_dir: Path, subtitle: str) -> Path:
    """training.png beside metrics.jsonl: loss and accuracy against step, train and eval."""
    import json

    from ..report.figures import training_curves

    metrics = output_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    path = output_dir / "training.png"
    if any("geometry" in row for row in rows):
        from ..api import training_figure

        training_figure(rows, path, subtitle=f"{subtitle} ({output_dir})")
    else:
        training_curves(rows, path, subtitle=f"{subtitle} ({output_dir})")
    return path


def _print_keys(keys: list[str], preset: Any, format: str) -> None:
    """--list-keys: every --set key and its value in ``preset`` (a TrainConfig)."""
    values = {key: getattr(preset.model, key[6:]) if key.startswith("model.") else getattr(preset, key) for key in keys}
    if format == "json":
        print_json(values)
        return
    print_table(grid_table("settings (--set KEY=VALUE)", ["key", "value of the preset"], values.items()), format)


@handles_errors
def verify(
    name: Annotated[
        str,
        typer.Argument(help="Experiment name, 'all' to run every one, or 'list' to list them.", show_default=False),
    ],
    preset: Annotated[
        str,
        opt.text_option(
            "--preset",
            "-p",
            help="smoke (seconds on a CPU, looser thresholds: checks that it runs), ci (CPU, minutes) or "
            "paper (GPU scale).",
        ),
    ] = "ci",
    output_dir: Annotated[
        Path | None,
        opt.path_option(
            "--output-dir",
            "-o",
            help="Folder for <name>.json, <name>.md, figures and runs (default verify-<name>; "
            "for all: one subfolder per experiment).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --output-dir if it already holds results.")] = False,
    sets: Sets = None,
    data_dir: opt.DataDir = None,
    device: Annotated[str, opt.text_option("--device", help="auto (cuda when present), cpu or cuda.")] = "auto",
    seed: Annotated[int, opt.seed_option("--seed", help="Base seed of every run and draw.")] = 0,
    format: opt.Format = "table",
) -> None:
    """Run one of the papers' claims as an experiment; print the verdicts, exit 1 when one fails.

    Writes <name>.json (every number), <name>.md (summary) and PNG figures, with the training runs
    under runs/. The output folder appears only when the experiment completes. `verify all
    --preset smoke` runs every experiment in seconds each (its thresholds are looser; it checks
    that they run, not the claims).
    """
    from ..api import EXPERIMENTS, PRESET_NAMES, get_experiment
    from ..report.render import provenance

    check_format(format)
    if name == "list":
        _print_experiments(format)
        return
    names = list(EXPERIMENTS) if name == "all" else [get_experiment(name).name]
    presets = PRESET_NAMES if name == "all" else get_experiment(name).presets
    _check_verify_settings(preset, presets, name == "all" and bool(sets), device)
    target = output_dir or Path(f"verify-{name}")
    _check_verify_target(target, force, data_dir)
    request = VerifyRun(names, name == "all", preset, seed, device, tuple(sets or ()), data_dir, provenance(seed))
    outcome = _run_staged(request, target)
    if format == "json":
        print(outcome.to_json())
    elif request.every:
        _print_summary(list(outcome.experiments), preset, target, request.run, format)
    else:
        _print_result(outcome.experiments[0], target, request.run, format)
    if not outcome.passed:
        raise typer.Exit(1)


@dataclass(frozen=True)
class VerifyRun:
    """What one `verify` runs: ``names`` at the preset, seed and device, with the --set settings.

    ``every``: `verify all` (a subfolder per experiment and a summary); ``run``: the provenance
    (version, command line, seed) every page and record ends with.
    """

    names: list[str]
    every: bool
    preset: str
    seed: int
    device: str
    sets: tuple[str, ...]
    data_dir: Path | None
    run: Provenance


def _check_verify_settings(preset: str, presets: tuple[str, ...], sets_for_all: bool, device: str) -> None:
    """The preset among the experiment's, no --set for `verify all`, a known device, CUDA when it is needed."""
    if preset not in presets:
        raise InputError(f"unknown preset {preset!r}; choose one of {', '.join(presets)}")
    if sets_for_all:
        raise InputError("--set applies to one experiment's settings; run `geoanalyze verify NAME --set ...` instead")
    if device not in ("auto", "cpu", "cuda"):
        raise InputError(f"unknown --device {device!r}; choose auto, cpu or cuda")
    if device == "cuda" or (preset == "paper" and device == "auto"):
        import torch

        if not torch.cuda.is_available():
            if device == "cuda":
                raise InputError("--device cuda was asked for but CUDA is not available here; use --device cpu or auto")
            raise InputError(
                "the paper preset is sized for a GPU and CUDA is not available here; "
                "use --preset ci, or --device cpu to run it on the CPU anyway"
            )


def _check_verify_target(target: Path, force: bool, data_dir: Path | None) -> None:
    """--output-dir may be written: empty, or (--force) holding earlier verify results, never the user's own files."""
    from ..api import EXPERIMENTS

    check_output_place(target, folder=True, option="--output-dir")
    guard([data_dir], [Folder("--output-dir", target, replaces=True)])
    if target.exists() and any(target.iterdir()) and not force:
        raise InputError(f"{target} already holds results; pass --force to replace them or choose another folder")
    if force and target.is_dir() and any(target.iterdir()):
        # --force replaces earlier results, never a folder of the user's own files
        ours = [n for n in EXPERIMENTS if (target / f"{n}.json").is_file() or (target / n / f"{n}.json").is_file()]
        if not ours:
            raise InputError(
                f"--force would delete {target}, which holds no verify results "
                f"({', '.join(sorted(p.name for p in target.iterdir())[:3])}); choose another --output-dir"
            )


def _run_staged(request: VerifyRun, target: Path) -> VerifyResult:
    """Run the experiments into a staging folder beside ``target``, moved onto it only when every one finished."""
    from .. import VerifyResult
    from ..io import write_text

    with staged_folder(target.with_name(f".{target.name}.{os.getpid()}.partial")) as staging:
        outcome = VerifyResult(tuple(_run_each(request, staging)), request.preset, request.every, request.run)
        if request.every:  # summary.md and summary.json of `verify all` beside the experiments' folders
            write_text(staging / "summary.md", _summary_markdown(list(outcome.experiments), request.run))
            write_text(staging / "summary.json", outcome.to_json() + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return outcome


def _run_each(request: VerifyRun, staging: Path) -> list[Any]:
    """Each experiment into ``staging`` (its own subfolder for `verify all`, with a progress line on stderr)."""
    from ..progress import duration

    results = []
    began = time.perf_counter()
    for index, each in enumerate(request.names, 1):
        folder = staging / each if request.every else staging
        folder.mkdir(exist_ok=True)
        results.append(_run_experiment(each, folder, request))
        if request.every:  # one line per experiment on stderr, so a log follows a long run
            done = results[-1]
            print(
                f"progress: verify all: {each} {done.outcome} "
                f"({sum(c.passed for c in done.checks)}/{len(done.checks)} checks), {index}/{len(request.names)} done, "
                f"elapsed {duration(time.perf_counter() - began)}",
                file=sys.stderr,
                flush=True,
            )
    return results


def _run_experiment(name: str, folder: Path, request: VerifyRun) -> Any:
    """Run one experiment into ``folder``: its record, its page (with the provenance line) and figures."""
    from ..api import ExperimentOptions, run_experiment, write_result
    from ..io import write_text

    options = ExperimentOptions(
        preset=request.preset,
        work_dir=folder,
        seed=request.seed,
        device=request.device,
        overrides=request.sets,
        data_dir=str(request.data_dir) if request.data_dir is not None else None,
        progress=True,
    )
    result = run_experiment(name, options)
    written = write_result(result, folder)
    page = written["markdown"].read_text(encoding="utf-8")
    write_text(written["markdown"], page + "\n" + request.run.markdown + "\n")
    return result


def _print_experiments(format: str) -> None:
    """`verify list`: the experiments, their papers, CI minutes and claims."""
    from ..api import EXPERIMENTS, PRESET_NAMES

    header = ["name", "paper", "ci minutes", "claim"]
    rows = [[e.name, e.paper, f"{e.minutes_ci:g}", e.summary] for e in EXPERIMENTS.values()]
    if format == "json":
        print_json(
            [
                {
                    "name": e.name,
                    "paper": e.paper,
                    "minutes_ci": e.minutes_ci,
                    "presets": list(e.presets),
                    "summary": e.summary,
                }
                for e in EXPERIMENTS.values()
            ]
        )
        return
    title = f"experiments (presets: {', '.join(PRESET_NAMES)})"
    print_table(grid_table(title, header, rows, text_columns=("paper", "claim"), whole=("name",)), format)
    print()
    print_paragraph(f"note: {MINUTES_NOTE}", format)


#: what the minutes of `verify list` are, and what they are not
MINUTES_NOTE = (
    "ci minutes: the ci preset on 2 idle CPU cores (benchmarks/bench_verify.py measured necessity at 69 s); "
    "where other work keeps the cores busy it takes several times longer (necessity ran over 15 min on a "
    "loaded 2-core machine); benchmarks/bench_first_hour.py --verify NAME measures it on yours"
)


def _print_result(result: Any, target: Path, run: Provenance, format: str) -> None:
    """One experiment's verdicts in ``format``; the smoke preset's note under the table."""
    from ..api import PRESET_NOTES, check_rows
    from ..api import experiment_markdown as markdown

    if format == "markdown":
        print(markdown(result), end="")
        print("\n" + run.markdown)
        return
    from ..report.render import emit, output_width
    from ..report.stress import layout_width, legend_lines

    header, rows = check_rows(result.checks)
    rows = [[*row[:-1], check.verdict.upper()] for row, check in zip(rows, result.checks, strict=True)]
    verdict = result.outcome
    title = f"{result.name} ({result.preset}, {result.seconds:.0f} s): {verdict}; written to {target}/"
    width = output_width()
    if layout_width(header, rows) <= width:
        print_table(grid_table(title, header, rows, text_columns=("claim", "paper"), whole=("check",)), format)
    else:
        # Too narrow for the claims beside the numbers: the numbers and verdicts in a table, each
        # check's claim and the paper's reading below it, folded (no column squeezed to a letter).
        table = [[row[0], row[2], row[4]] for row in rows]
        emit(grid_table(title, ["check", "ours", "verdict"], table, text_columns=("check", "verdict")))
        emit(*legend_lines([f"{row[0]}: {row[1]} (paper: {row[3]})" for row in rows], width))
    if result.preset == "smoke":
        print_paragraph(f"note: {PRESET_NOTES['smoke']}")


def _summary_rows(results: list[Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["experiment", "verdict", "checks passed", "seconds", "failed checks"]
    rows = [
        [
            r.name,
            r.outcome,
            f"{sum(c.passed for c in r.checks)}/{sum(c.decided for c in r.checks)}"
            + (
                f" ({len(r.checks) - sum(c.decided for c in r.checks)} undecided)"
                if not all(c.decided for c in r.checks)
                else ""
            ),
            round(r.seconds, 1),
            ", ".join(c.name for c in r.checks if c.decided and not c.passed) or "-",
        ]
        for r in results
    ]
    return header, rows


def _summary_markdown(results: list[Any], run: Provenance) -> str:
    from ..api import PRESET_NOTES
    from ..report.render import markdown_table

    preset = results[0].preset if results else ""
    passed = all(r.passed for r in results)
    parts = [
        f"## `verify all` at preset `{preset}`: {'PASS' if passed else 'FAIL'}",
        f"> {PRESET_NOTES.get(preset, '')}.",
        markdown_table(*_summary_rows(results)),
        "Each experiment's page: `<experiment>/<experiment>.md` in the output folder.",
        run.markdown,
    ]
    return "\n\n".join(parts) + "\n"


def _print_summary(results: list[Any], preset: str, target: Path, run: Provenance, format: str) -> None:
    from ..api import PRESET_NOTES

    if format == "markdown":
        print(_summary_markdown(results, run), end="")
        return
    verdict = "PASS" if all(r.passed for r in results) else "FAIL"
    title = f"every experiment at preset {preset}: {verdict}; written to {target}/"
    print_table(
        grid_table(title, *_summary_rows(results), text_columns=("failed checks",), whole=("experiment",)), format
    )
    if preset == "smoke":
        print_paragraph(f"note: {PRESET_NOTES['smoke']}")
