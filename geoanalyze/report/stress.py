"""Rendering a stress analysis: terminal tables, Markdown, and its figures."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .render import fmt

SCORE_COLUMNS = (
    ("stress", "stress"),
    ("scaled_stress", "scaled"),
    ("monotonicity_violation", "violation"),
    ("anchored_monotonicity_violation", "anchored"),
    ("lag_violation", "lag viol."),
    ("separation", "separation"),
    ("relative_separation", "rel. sep."),
)


def score_rows(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Header and rows of the encodings table: each score, the null's means, and the share of null draws beaten."""
    # "beats null": the share of random encodings with a higher violation rate (rank-based, so
    # scale-free; scaled stress is a poor judge when D is nearly constant, as on noisy corpora).
    header = ["encoding", "d", *[label for _, label in SCORE_COLUMNS], "null stress", "null viol.", "beats null"]
    rows = []
    for name, scores in result["scores"].items():
        null = scores["null"]
        rows.append(
            [
                name,
                scores["dim"],
                *[scores.get(key) for key, _ in SCORE_COLUMNS],
                null["stress"]["mean"],
                null["monotonicity_violation"]["mean"],
                f"{null['monotonicity_violation']['beats']:.0%}",
            ]
        )
    return header, rows


def layer_rows(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["layer", "projection", "stress", "scaled", "violation", "lag viol."]
    rows = [
        [
            row["layer"],
            row["projection"],
            row["stress"],
            row["scaled_stress"],
            row["monotonicity_violation"],
            row["lag_violation"],
        ]
        for row in result["layers"]
    ]
    return header, rows


def print_tables(result: dict[str, Any]) -> None:
    """The terminal report (rich tables on stdout)."""
    from .render import grid_table, key_value_table, stdout_console

    noise = result["noise"]
    dataset = result["dataset"]
    stdout_console.print(
        key_value_table(
            f"stress of {result['target']} on {dataset['name']}",
            [
                ("corpus", f"{dataset['location']} (split {dataset['split'] or '-'})"),
                ("tokenizer", dataset["tokenizer"]),
                ("positions kept", f"{len(result['positions'])} (min-count {result['left_out'].get('min_count')})"),
                ("left out", result["left_out"].get("positions")),
                ("target distance", f"{result['distance']} Hellinger"),
                ("noise fraction / snr", f"{fmt(noise['noise_fraction'])} / {fmt(noise['snr'])}"),
            ],
        )
    )
    header, rows = score_rows(result)
    stdout_console.print(grid_table("scores (null: i.i.d. Gaussian vectors of the same shape)", header, rows))
    interval = bootstrap_line(result)
    if interval:
        stdout_console.print(interval)
    if result["layers"]:
        header, rows = layer_rows(result)
        stdout_console.print(grid_table("layer by layer", header, rows))
        for projection, peak in result["peaks"].items():
            stdout_console.print(
                f"{projection}: stress peaks at layer {peak['peak_stress_layer']} ({fmt(peak['peak_stress'])}); "
                f"lowest scaled stress at layer {peak['best_scaled_stress_layer']} ({fmt(peak['best_scaled_stress'])})"
            )


def bootstrap_line(result: dict[str, Any]) -> str:
    """The target's bootstrap intervals in one line ('' when --bootstrap was not asked for)."""
    intervals = result["scores"].get(result["target"], {}).get("bootstrap")
    if not intervals:
        return ""
    parts = [
        f"{name} [{fmt(v['low'])}, {fmt(v['high'])}] (bias {fmt(v['bias'])})"
        for name, v in intervals.items()
        if name != "samples"
    ]
    count = intervals["samples"]["count"]
    return f"95% basic-bootstrap intervals over {count} resamples of the sequences: " + "; ".join(parts)


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(result: dict[str, Any], figures: dict[str, str] | None = None, level: int = 2) -> str:
    """A Markdown section for one analysis (tables, then figure links)."""
    hashes = "#" * level
    dataset = result["dataset"]
    noise = result["noise"]
    parts = [
        f"{hashes} {result['target']} on {dataset['name']}",
        "",
        f"- corpus: `{dataset['location']}` (split {dataset['split'] or '-'}), tokenizer `{dataset['tokenizer']}`",
        f"- positions kept: {len(result['positions'])} (min-count {result['left_out'].get('min_count')}; "
        f"left out: {fmt(result['left_out'].get('positions'))})",
        f"- target: {result['distance']} Hellinger; noise fraction {fmt(noise['noise_fraction'])}, "
        f"snr {fmt(noise['snr'])}, median noise floor {fmt(noise['median_noise_floor'])}",
        "",
        markdown_table(*score_rows(result)),
    ]
    interval = bootstrap_line(result)
    if interval:
        parts += ["", f"- {interval}"]
    if result["layers"]:
        parts += ["", markdown_table(*layer_rows(result)), ""]
        for projection, peak in result["peaks"].items():
            parts.append(
                f"- {projection}: stress peaks at layer {peak['peak_stress_layer']} ({fmt(peak['peak_stress'])}), "
                f"lowest scaled stress at layer {peak['best_scaled_stress_layer']}"
            )
    for title, link in (figures or {}).items():
        parts += ["", f"![{title}]({link})"]
    return "\n".join(parts) + "\n"


def write_figures(result: dict[str, Any], directory: str | os.PathLike[str], prefix: str = "") -> dict[str, str]:
    """Heatmap, MDS map, Shepard diagram and per-layer stress as PNGs; returns {title: path}."""
    from ..geometry.mds import classical_mds, stress_curve
    from .figures import distance_heatmap, layer_figure, mds_figure, shepard_diagram

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    geometry = result["_geometry"]
    distances = geometry.matrix(result["distance"])
    written: dict[str, str] = {}
    heatmap = folder / f"{prefix}hellinger.png"
    distance_heatmap(geometry, heatmap)
    written["Hellinger distances (naive, corrected) and noise floor"] = str(heatmap)
    mds = classical_mds(distances)
    mds_path = folder / f"{prefix}mds.png"
    mds_figure(mds, stress_curve(mds.embedding_, distances), geometry.positions, mds_path)
    written["MDS: eigen-spectrum, stress against rank, 2-D map"] = str(mds_path)
    # The vectors the analysis scored (the optimal MDS is left out: it lies on the diagonal).
    tables = {name: table for name, table in result["_vectors"].items() if name != "mds"}
    shepard = folder / f"{prefix}shepard.png"
    shepard_diagram(tables, distances, shepard)
    written["Shepard diagram"] = str(shepard)
    if result["layers"]:
        layers = folder / f"{prefix}layers.png"
        layer_figure(result["layers"], layers, title=f"({result['target']})")
        written["stress per layer"] = str(layers)
    return written
