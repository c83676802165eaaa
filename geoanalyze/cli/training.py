"""`geoanalyze train` and `geoanalyze verify`: small models trained to test the papers' claims."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InputError
from ..report.render import grid_table, key_value_table, print_json, stdout_console
from . import options as opt
from .common import Folder, Output, check_format, check_output_place, guard, handles_errors

Preset = Annotated[str, typer.Option("--preset", "-p", help="ci (CPU, minutes) or paper (GPU scale).")]
Sets = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        help="KEY=VALUE setting, e.g. steps=500 or model.pe=rope (repeatable; `geoanalyze train --list-keys`).",
    ),
]
Device = Annotated[str | None, typer.Option("--device", help="auto (cuda when present), cpu or cuda.")]
Seed = Annotated[int | None, typer.Option("--seed", help="Seed of the initialisation, batches and dropout.")]


@handles_errors
def train(
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", "-o", help="Folder for metrics.jsonl and checkpoint/ (required to train)."),
    ] = None,
    preset: Preset = "ci",
    config_file: Annotated[
        Path | None, typer.Option("--config", help="TOML file of settings (top-level keys and a \\[model] table).")
    ] = None,
    sets: Sets = None,
    task: Annotated[str | None, typer.Option("--task", help="order, mlm or classification (= --set task=).")] = None,
    pe: Annotated[
        str | None,
        typer.Option("--pe", help="none, sinusoidal, learned, lowrank, mds, rope or alibi (= --set model.pe=)."),
    ] = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Corpus of mlm / classification (= --set dataset=).")
    ] = None,
    data_dir: opt.DataDir = None,
    steps: Annotated[int | None, typer.Option("--steps", min=1, help="Optimiser updates (= --set steps=).")] = None,
    device: Device = None,
    seed: Seed = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --output-dir from its checkpoint.")
    ] = False,
    list_keys: Annotated[bool, typer.Option("--list-keys", help="Print every setting --set accepts and exit.")] = False,
    format: opt.Format = "table",
) -> None:
    """Train a small BERT or GPT with any positional encoding; CUDA when present, the CPU otherwise.

    Settings come from the preset, then --config, then the shortcut options, then --set. Under
    `torchrun --nproc_per_node N -m geoanalyze train ...` the run is data-parallel. Score the
    trained positions with `geoanalyze stress model:<output-dir> --dataset ...`.
    """
    from ..train.config import resolve_config, valid_keys

    check_format(format)
    if list_keys:
        _print_keys(valid_keys(), resolve_config(preset).to_dict(), format)
        return
    if output_dir is None:
        raise InputError("--output-dir is required; pass the folder the run writes to, e.g. -o runs/order-rope")
    check_output_place(output_dir, folder=True, option="--output-dir")
    guard(
        [config_file, dataset, data_dir],
        [
            Folder("--output-dir", output_dir),
            *(Output("--output-dir", output_dir / name) for name in ("metrics.jsonl", "training.png")),
            Folder("--output-dir", output_dir / "checkpoint", replaces=True),
        ],
    )
    shortcuts = [
        f"{key}={value}"
        for key, value in (
            ("task", task),
            ("model.pe", pe),
            ("dataset", dataset),
            ("data_dir", data_dir),
            ("steps", steps),
            ("device", device),
            ("seed", seed),
        )
        if value is not None
    ]
    config = resolve_config(preset, [*shortcuts, *(sets or [])], toml_path=config_file)
    from ..train import train as run_training

    metrics = run_training(config, output_dir, resume=resume, progress=True)
    if int(os.environ.get("RANK", "0")) != 0:
        return  # under torchrun, rank 0 reports for all
    curves = _draw_training_curves(output_dir, f"{config.task}, pe {config.model.pe}")
    from ..models import Transformer

    model = Transformer.load(output_dir / "checkpoint")
    parameters = sum(p.numel() for p in model.parameters())
    pe_parameters = sum(p.numel() for p in model.pe.parameters())
    result = {
        "output_dir": str(output_dir),
        "metrics": metrics,
        "parameters": parameters,
        "pe_parameters": pe_parameters,
        "config": config.to_dict(),
        "figure": str(curves),
    }
    if format == "json":
        print_json(result)
        return
    rows: list[tuple[str, Any]] = [
        ("task", config.task),
        ("model", f"{config.model.arch}, pe {config.model.pe}, d {config.model.d_model}, L {config.model.n_layers}"),
        ("parameters", f"{parameters:,} (position encoding {pe_parameters:,})"),
        *((key, value) for key, value in metrics.items()),
        ("written", f"{output_dir}/metrics.jsonl, {output_dir}/checkpoint/, {curves}"),
    ]
    stdout_console.print(key_value_table("training run", rows))


def _draw_training_curves(output_dir: Path, subtitle: str) -> Path:
    """training.png beside metrics.jsonl: loss and accuracy against step, train and eval."""
    import json

    from ..report.figures import training_curves

    metrics = output_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    path = output_dir / "training.png"
    training_curves(rows, path, subtitle=f"{subtitle} ({output_dir})")
    return path


def _print_keys(keys: list[str], defaults: dict[str, Any], format: str) -> None:
    values = {key: (defaults["model"][key[6:]] if key.startswith("model.") else defaults[key]) for key in keys}
    if format == "json":
        print_json(values)
        return
    stdout_console.print(grid_table("settings (--set KEY=VALUE)", ["key", "value of the preset"], values.items()))


@handles_errors
def verify(
    name: Annotated[str, typer.Argument(help="Experiment name, or 'list' to list them.", show_default=False)],
    preset: Preset = "ci",
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir", "-o", help="Folder for <name>.json, <name>.md, figures and runs (default verify-<name>)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --output-dir if it already holds results.")] = False,
    sets: Sets = None,
    data_dir: opt.DataDir = None,
    device: Annotated[str, typer.Option("--device", help="auto (cuda when present), cpu or cuda.")] = "auto",
    seed: Annotated[int, typer.Option("--seed", help="Base seed of every run and draw.")] = 0,
    format: Annotated[str, typer.Option("--format", "-f", help="table, json or markdown.")] = "table",
) -> None:
    """Run one of the papers' claims as an experiment; print the verdicts, exit 1 when one fails.

    Writes <name>.json (every number), <name>.md (summary) and PNG figures, with the training runs
    under runs/. The output folder appears only when the experiment completes.
    """
    from ..experiments import EXPERIMENTS, ExperimentOptions, get_experiment, markdown, run_experiment, write_result
    from ..experiments.record import check_rows

    if format not in ("table", "json", "markdown"):
        raise InputError(f"unknown --format {format!r}; choose one of table, json, markdown")
    if name == "list":
        rows = [[e.name, e.paper, f"{e.minutes_ci:g}", e.summary] for e in EXPERIMENTS.values()]
        header = ["name", "paper", "ci minutes", "claim"]
        if format == "json":
            print_json(
                [
                    {"name": r[0], "paper": r[1], "minutes_ci": EXPERIMENTS[r[0]].minutes_ci, "summary": r[3]}
                    for r in rows
                ]
            )
        elif format == "markdown":
            from ..experiments.record import markdown_table

            print(markdown_table(header, rows))
        else:
            stdout_console.print(grid_table("experiments", header, rows, text_columns=("paper", "claim")))
        return
    presets = get_experiment(name).presets
    if preset not in presets:
        raise InputError(f"unknown preset {preset!r}; choose one of {', '.join(presets)}")
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
    target = output_dir or Path(f"verify-{name}")
    check_output_place(target, folder=True, option="--output-dir")
    guard([data_dir], [Folder("--output-dir", target, replaces=True)])
    if target.exists() and any(target.iterdir()) and not force:
        raise InputError(f"{target} already holds results; pass --force to replace them or choose another folder")
    staging = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        options = ExperimentOptions(
            preset=preset,
            work_dir=staging,
            seed=seed,
            device=device,
            overrides=tuple(sets or ()),
            data_dir=str(data_dir) if data_dir is not None else None,
            progress=True,
        )
        result = run_experiment(name, options)
        written = write_result(result, staging)
        from ..io import write_text
        from ..report.render import provenance, provenance_line

        run = provenance(seed)
        page = written["markdown"].read_text(encoding="utf-8")
        write_text(written["markdown"], page + "\n" + provenance_line(run) + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if format == "json":
        print_json({**result.to_dict(), "run": run})
    elif format == "markdown":
        print(markdown(result), end="")
        print("\n" + provenance_line(run))
    else:
        header, rows = check_rows(result.checks)
        rows = [[*row[:-1], "PASS" if row[-1] else "FAIL"] for row in rows]
        verdict = "PASS" if result.passed else "FAIL"
        title = f"{name} ({preset}, {result.seconds:.0f} s): {verdict}; written to {target}/"
        stdout_console.print(grid_table(title, header, rows))
    if not result.passed:
        raise typer.Exit(1)
