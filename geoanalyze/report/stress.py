"""Rendering a stress analysis: terminal tables, Markdown, and its figures."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.padding import Padding

from ..geometry.null import ALPHA, ASPECT_WORDS, ASPECTS, MIN_DRAWS
from .render import display_path, fmt, markdown_table


@dataclass(frozen=True)
class ScoreColumn:
    """One score of the encodings table: its key in the scores dict, its label, and its legend line."""

    key: str
    label: str
    legend: str


#: The encodings table, scale-free scores first. A new score is one entry here (the table, the
#: Markdown, the legend and the --fail-above names all follow this list).
SCORE_COLUMNS: list[ScoreColumn] = [
    ScoreColumn(
        "scaled_stress",
        "scaled",
        "scaled stress: stress after the best rescaling of the vectors (0 = the shape of D up to a factor; "
        "scale-free, lower is better)",
    ),
    ScoreColumn(
        "monotonicity_violation",
        "violation",
        "share of position pairs the vectors order against D (0 = same order, 0.5 = chance; lower is better)",
    ),
    ScoreColumn(
        "anchored_monotonicity_violation",
        "anchored",
        "violation among pairs that share a position (local order; lower is better)",
    ),
    ScoreColumn(
        "lag_violation",
        "lag viol.",
        "monotonicity in position lag: per anchor, share of pairs where the farther position (in |i - j|) "
        "sits closer (0 = monotone in lag, 0.5 = chance; lower is better)",
    ),
    ScoreColumn(
        "relative_separation",
        "rel. sep.",
        "closest two positions' distance / the median distance (0 = two positions collide; higher keeps them apart)",
    ),
    ScoreColumn(
        "stress",
        "stress",
        "raw stress: grows with the vectors' size, so it ranks widths and norms, not shapes; compare scaled",
    ),
]
#: above this share of sampling noise in the naive distance, the scores rank encodings against noise
NOISE_WARNING = 0.5
#: longest encoding name the terminal table shows in full (80 columns hold 8 score columns and this)
TABLE_NAME_WIDTH = 20
#: each aspect's score, as the table labels it
ASPECT_LABELS = {
    "shape": "scaled",
    "order": "violation",
    "local_order": "anchored",
    "lag": "lag viol.",
    "separation": "rel. sep.",
}
#: encodings that are references rather than competitors in the verdict
REFERENCES = ("mds", "random")


def short_name(name: str, width: int = TABLE_NAME_WIDTH) -> str:
    """A name as a narrow table shows it: a hub id without its owner, a path's last two parts, then
    elided in the middle when still longer than ``width``."""
    text = name
    if "/" in name and len(name) > width:
        prefix, sep, rest = name.partition(":") if not name.startswith(("/", "<", "~", ".")) else ("", "", name)
        body = rest if sep else name
        if body.startswith(("/", "<", "~", ".")):
            tail = "…/" + "/".join(Path(body).parts[-2:])
        else:
            tail = body.rsplit("/", 1)[-1]  # a hub id: owner/name -> name
        text = f"{prefix}:{tail}" if sep else tail
    if len(text) > width:
        keep = width - 1
        text = text[: keep // 2] + "…" + text[-(keep - keep // 2) :]
    return text


def beaten(scores: dict[str, Any]) -> tuple[int, int]:
    """(null draws with a higher violation than this row, draws): the rank-based null test."""
    draws = int(scores.get("null_draws", 0))
    return round(scores["null"]["monotonicity_violation"]["beats"] * draws), draws


#: how a category is written in the tables' "null" column
SYMBOLS = {"better": "+", "indistinguishable": "=", "worse": "-", "undecided": "?", None: " "}


def category_code(categories: dict[str, Any]) -> str:
    """The five aspects' categories as one compact cell: "++++-" (shape, order, local order, lag, separation)."""
    return "".join(SYMBOLS.get(categories.get(aspect), "?") for aspect in ASPECTS)


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """What the table, the JSON and the Markdown all say: rows, verdict, warnings, limits, legend.

    ``rows``: per encoding, every score, how many null draws it beats, its category per aspect,
    and which earlier row it equals (identical scores). ``verdict``: one line on the target.
    ``warnings``: what makes the scores untrustworthy and what to do. ``limits``: one line per
    aspect that cannot separate encodings on this corpus (docs/scores.md, "Discriminability").
    """
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], str] = {}
    for name, scores in result["scores"].items():
        wins, draws = beaten(scores)
        key = tuple(None if scores.get(c.key) is None else round(float(scores[c.key]), 12) for c in SCORE_COLUMNS)
        same = seen.setdefault(key, name)
        rows.append(
            {
                "encoding": name,
                "dim": scores["dim"],
                **{c.key: scores.get(c.key) for c in SCORE_COLUMNS},
                "null_beaten": wins,
                "null_draws": draws,
                "beats_null": draws > 0 and wins == draws,
                "categories": dict(scores.get("categories", {})),
                "same_as": same if same != name else None,
            }
        )
    warnings = []
    noise = result["noise"].get("noise_fraction")
    if noise is not None and noise == noise and noise > NOISE_WARNING:
        fix = (
            "use --distance corrected (it removes the expected noise), or more text (a larger corpus, no --limit), "
            "or a higher --min-count"
            if result["distance"] == "naive"
            else "use more text (a larger corpus, no --limit) or a higher --min-count"
        )
        warnings.append(
            f"noise fraction {noise:.2f} (above {NOISE_WARNING}): most of the {result['distance']} distance between "
            f"positions is sampling noise, so these scores rank encodings against noise; {fix}"
        )
    return {"rows": rows, "verdict": verdict(result, rows), "warnings": warnings, "limits": limits(result)}


def undecidable(result: dict[str, Any]) -> set[str]:
    """The aspects whose score cannot separate encodings on this corpus (not those too few draws leave open)."""
    aspects = (result.get("discriminability") or {}).get("aspects", {})
    return {aspect for aspect, entry in aspects.items() if entry.get("discriminates") is False}


def limits(result: dict[str, Any]) -> list[str]:
    """One line per aspect that cannot separate encodings on this corpus, saying why."""
    aspects = (result.get("discriminability") or {}).get("aspects", {})
    lines = []
    for aspect, entry in aspects.items():
        if entry.get("discriminates") is False:
            lines.append(
                f"{ASPECT_WORDS[aspect]} ({ASPECT_LABELS[aspect]}) cannot separate encodings on this corpus: "
                f"{entry['reason']}; the verdict does not rank on it"
            )
    return lines


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def against_random(categories: dict[str, Any], draws: int) -> str:
    """The verdict's last clause: which aspects are better than random, which are not."""
    if draws < MIN_DRAWS:
        return (
            f"with {draws} null draws no aspect can be told from random (the rank test needs at least {MIN_DRAWS}: "
            f"--null-draws {MIN_DRAWS})"
        )
    better = [ASPECT_WORDS[a] for a in ASPECTS if categories.get(a) == "better"]
    other = [
        f"{ASPECT_WORDS[a]} ({categories.get(a) or 'not computed'})" for a in ASPECTS if categories.get(a) != "better"
    ]
    parts = []
    if better:
        parts.append(f"better than random in {_join(better)}")
    if other:
        parts.append(f"no better than random in {_join(other)}")
    return f"against {draws} random tables of its shape, it is " + ", and ".join(parts)


def verdict(result: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """One line on the target: its shape beside the standard encodings (only where this corpus can tell
    shapes apart), the MDS floor, then in plain words which aspects are better than random and which are not."""
    target = result["target"]
    by_name = {row["encoding"]: row for row in rows}
    mine = by_name.get(target)
    if mine is None:
        return f"{target}: no absolute position vectors to score; read the layer-by-layer rows"
    draws = mine["null_draws"]
    parts: list[str] = []
    references = [
        row
        for row in rows
        if row["encoding"] != target
        and row["encoding"].split(":")[0] not in REFERENCES
        and row["scaled_stress"] is not None
    ]
    if "shape" in undecidable(result):
        parts.append("shape not ranked (this corpus cannot separate shapes)")
    elif references:
        best = min(references, key=lambda row: row["scaled_stress"])
        mine_scaled, best_scaled = mine["scaled_stress"], best["scaled_stress"]
        if mine_scaled <= best_scaled * (1 + 1e-9):
            parts.append(
                f"no standard encoding has a better shape (scaled {fmt(mine_scaled)}; "
                f"best other {best['encoding']} {fmt(best_scaled)})"
            )
        else:
            ratio = mine_scaled / best_scaled if best_scaled > 0 else float("inf")
            parts.append(
                f"its shape is {ratio:.2g}x the scaled stress of the best standard encoding "
                f"({best['encoding']} {fmt(best_scaled)}; this target {fmt(mine_scaled)})"
            )
    mds = by_name.get("mds")
    if mds is not None and target != "mds" and "shape" not in undecidable(result):
        parts.append(f"MDS floor {fmt(mds['scaled_stress'])}")
    parts.append(against_random(mine["categories"], draws))
    return f"{display_path(target)}: " + "; ".join(parts)


def verdict_document(result: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The JSON ``verdict`` of the target: one category per aspect, the sentence, and what is not ranked."""
    scores = result["scores"].get(result["target"])
    categories = dict(scores.get("categories", {})) if scores else dict.fromkeys(ASPECTS)
    return {
        **categories,
        "sentence": summary["verdict"],
        "not_ranked": sorted(undecidable(result), key=list(ASPECTS).index),
        "null_draws": int(scores.get("null_draws", 0)) if scores else None,
        "alpha": ALPHA,
    }


def legend(result: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """The lines printed under the table (what each column and each special row means)."""
    draws = max((row["null_draws"] for row in summary["rows"]), default=int(result.get("null", {}).get("draws", 0)))
    lines = [f"{c.label}: {c.legend}" for c in SCORE_COLUMNS]
    lines.append(vs_random_legend(draws))
    names = {row["encoding"].split(":")[0] for row in summary["rows"]}
    if "mds" in names:
        lines.append("mds: classical MDS of D itself, the best fit any encoding can reach (a floor, not a rival)")
    if "random" in names:
        lines.append("random: one i.i.d. Gaussian encoding (what no position information scores)")
    for row in summary["rows"]:
        if row["same_as"]:
            kinds = {row["encoding"].split(":")[0], row["same_as"].split(":")[0]}
            if kinds == {"rope", "sinusoidal"}:
                why = ": RoPE's (cos, sin) coordinates are the sinusoidal table's, reordered, so distances are equal"
            elif len(kinds) == 1:
                why = ": the same encoding at the same width"
            else:
                why = ": their vectors have the same distances between positions"
            lines.append(f"{row['encoding']} has the same scores as {row['same_as']}{why}")
    lines.append(width_legend(result, summary))
    return lines


def vs_random_legend(draws: int) -> str:
    """What the "null" column says."""
    return (
        f"null: shape, order, local order, lag and separation (the scaled, violation, anchored, lag viol. and "
        f"rel. sep. columns, in that order) against {draws} random Gaussian tables of the row's shape, by a "
        f"two-sided rank test at {ALPHA:.0%} (p <= {ALPHA / 2:g} on one side): + better than random, - worse, "
        f"= indistinguishable, ? undecided (fewer than {MIN_DRAWS} draws)"
    )


def width_legend(result: dict[str, Any], summary: dict[str, Any]) -> str:
    """The d column: the width each compared encoding is drawn at, as the table shows it."""
    width = result.get("width", "-")
    others = []
    names = {
        row["encoding"].split(":")[0]: row["dim"] for row in summary["rows"] if row["encoding"] != result["target"]
    }
    if "alibi" in names:
        others.append(f"alibi has one coordinate per head ({names['alibi']})")
    if "mds" in names:
        others.append(f"mds one per positive eigenvalue of D ({names['mds']})")
    tail = f"; {'; '.join(others)}" if others else ""
    return f"d: vector width; sinusoidal, rope and random are drawn at the compared width ({width}){tail}"


def score_rows(result: dict[str, Any], summary: dict[str, Any] | None = None) -> tuple[list[str], list[list[Any]]]:
    """Header and rows of the encodings table: scale-free scores first, then raw stress and the categories."""
    summary = summary or summarize(result)
    header = ["encoding", "d", *[c.label for c in SCORE_COLUMNS], "null"]
    rows = []
    for row in summary["rows"]:
        rows.append(
            [row["encoding"], row["dim"], *[row[c.key] for c in SCORE_COLUMNS], category_code(row["categories"])]
        )
    return header, rows


#: the layer table's score columns (raw stress is in the JSON: it follows the vectors' size, not their shape)
LAYER_COLUMNS = [c for c in SCORE_COLUMNS if c.key != "stress"]


def layer_rows(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["layer", "projection", *[c.label for c in LAYER_COLUMNS], "null"]
    rows = [
        [
            row["layer"],
            row["projection"],
            *[row.get(c.key) for c in LAYER_COLUMNS],
            category_code(row.get("categories", {})),
        ]
        for row in result["layers"]
    ]
    return header, rows


#: what each row of the layer table is
PROJECTION_LEGEND = {
    "P·W_Q": "P·W_Q, P·W_K: the position table through layer l's query and key maps (bias left out)",
    "query": "query, key: the centroids of the queries and keys layer l's attention receives (after RoPE, if any)",
    "hidden": "hidden: the centroids of layer l's hidden states (0 = the embedding output)",
}


def _ranges(layers: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    runs: list[list[int]] = []
    for layer in layers:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def peak_lines(result: dict[str, Any]) -> list[str]:
    """The layer summaries, by scale-free scores and categories only (raw stress follows the vectors' size)."""
    lines = []
    not_ranked = undecidable(result)
    for projection, peak in result["peaks"].items():
        words = [
            f"{projection}: lowest scaled stress at layer {peak['best_scaled_stress_layer']} "
            f"({fmt(peak['best_scaled_stress'])}), lowest violation at layer {peak['best_violation_layer']} "
            f"({fmt(peak['best_violation'])})"
        ]
        better = peak.get("better_layers", {})
        every = peak.get("layers", [])
        shown = []
        for aspect in ASPECTS:
            chosen = better.get(aspect, [])
            where = "no layer" if not chosen else "every layer" if chosen == every else f"layers {_ranges(chosen)}"
            mark = " (not ranked here)" if aspect in not_ranked else ""
            shown.append(f"{ASPECT_WORDS[aspect]} {where}{mark}")
        words.append("better than random: " + ", ".join(shown))
        lines.append("; ".join(words))
    return lines


def interval_rows(result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]] | None:
    """The target's bootstrap intervals as (title, header, rows); None without --bootstrap."""
    intervals = result["scores"].get(result["target"], {}).get("bootstrap")
    if not intervals:
        return None
    observed = result["scores"][result["target"]]
    labels = {c.key: c.label for c in SCORE_COLUMNS}
    rows = [
        [labels.get(name, name), observed.get(name), v["low"], v["high"], v["bias"]]
        for name, v in intervals.items()
        if name != "samples"
    ]
    samples = intervals["samples"]
    title = f"{display_path(result['target'])}: 95% basic-bootstrap intervals over {samples['count']} resamples of the sequences"
    return title, ["score", "value", "low", "high", "bias"], rows


def document(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON document of an analysis: the result, plus the summary the table and Markdown show."""
    from ..analysis import public

    summary = summarize(result)
    return {
        **public(result),
        "verdict": verdict_document(result, summary),
        "summary": {**summary, "legend": legend(result, summary)},
    }


def header_rows(result: dict[str, Any]) -> list[tuple[str, Any]]:
    dataset = result["dataset"]
    noise = result["noise"]
    return [
        ("corpus", f"{display_path(dataset['location'])} (split {dataset['split'] or '-'})"),
        ("tokenizer", display_path(dataset["tokenizer"])),
        ("positions kept", f"{len(result['positions'])} (min-count {result['left_out'].get('min_count')})"),
        ("left out", fmt(result["left_out"].get("positions"))),
        ("target distance", f"{result['distance']} Hellinger"),
        ("noise fraction / snr", f"{fmt(noise['noise_fraction'])} / {fmt(noise['snr'])}"),
    ]


def print_tables(result: dict[str, Any], show_legend: bool = True, gate: dict[str, Any] | None = None) -> None:
    """The terminal report (rich tables on stdout): header, warnings, scores, verdict, intervals, legend, layers."""
    from .render import grid_table, key_value_table, stdout_console

    console = stdout_console
    title = f"stress of {display_path(result['target'])} on {result['dataset']['name']}"
    console.print(key_value_table(title, header_rows(result)))
    summary = summarize(result)
    for line in summary["warnings"]:
        console.print(f"[bold yellow]warning:[/] {escape(line)}", soft_wrap=False)
    header, rows = score_rows(result, summary)
    # A long target name (a hub id, a path) is in the title; its row says "target" so the table fits.
    shown = display_path(result["target"])
    alias = "target" if len(shown) > TABLE_NAME_WIDTH else shown
    rows = [[alias if row[0] == result["target"] else short_name(display_path(str(row[0]))), *row[1:]] for row in rows]
    print_wide_table(console, "scores against D (lower is better except rel. sep.)", header, rows)
    console.print(f"[bold]verdict:[/] {escape(summary['verdict'])}", soft_wrap=False)
    for line in summary["limits"]:
        console.print(f"[bold]cannot decide:[/] {escape(line)}", soft_wrap=False)
    intervals = interval_rows(result)
    if intervals:
        console.print(grid_table(*intervals))
    if show_legend:
        for line in legend(result, summary):
            console.print(Padding(escape(line), (0, 0, 0, 2)), highlight=False, soft_wrap=False)
    if result["layers"]:
        console.print(
            grid_table("layer by layer", *layer_rows(result), text_columns=("projection", "null")), soft_wrap=False
        )
        for line in peak_lines(result):
            console.print(line, highlight=False, soft_wrap=False)
        if show_legend:
            projections = {row["projection"] for row in result["layers"]}
            for key, line in PROJECTION_LEGEND.items():
                if key in projections:
                    console.print(Padding(escape(line), (0, 0, 0, 2)), highlight=False, soft_wrap=False)
    if gate and gate["crossed"]:
        console.print(f"[bold red]gate failed:[/] {escape('; '.join(gate['crossed']))}", soft_wrap=False)
    elif gate:
        console.print(f"[bold green]gate passed:[/] {escape(gate_rules(gate))}", soft_wrap=False)


def print_wide_table(console: Any, title: str, header: list[str], rows: list[list[Any]]) -> None:
    """A compact table when every cell fits on one line, else one block per row (narrow terminals)."""
    from .render import grid_table

    if _fits(console, header, rows):
        console.print(grid_table(title, header, rows, text_columns=("null",), compact=True))
    else:
        _print_vertical(console, title, header, rows)


def _fits(console: Any, header: list[str], rows: list[list[Any]]) -> bool:
    """Whether the compact table fits the console with every cell on one line (2 characters of padding a column)."""
    widths = [max(len(str(h)), *(len(fmt(row[i])) for row in rows)) for i, h in enumerate(header)]
    return sum(widths) + 2 * len(widths) <= console.width


def _print_vertical(console: Any, title: str, header: list[str], rows: list[list[Any]]) -> None:
    """The narrow layout: one block per encoding, one score per line."""
    console.print(f"[italic]{escape(title)}[/]")
    width = max(len(h) for h in header[1:])
    for row in rows:
        console.print(f"[bold]{escape(str(row[0]))}[/]", highlight=False)
        for label, value in zip(header[1:], row[1:], strict=True):
            console.print(f"  {label:<{width}}  {fmt(value)}", highlight=False, soft_wrap=True)


def markdown(
    result: dict[str, Any],
    figures: dict[str, str] | None = None,
    level: int = 2,
    show_legend: bool = True,
    gate: dict[str, Any] | None = None,
) -> str:
    """A Markdown section for one analysis (tables, verdict, legend, then figure links)."""
    hashes = "#" * level
    summary = summarize(result)
    parts = [f"{hashes} {display_path(result['target'])} on {result['dataset']['name']}", ""]
    parts += [f"- {label}: {value}" for label, value in header_rows(result)]
    parts += ["", *(f"> **Warning:** {line}\n" for line in summary["warnings"])]
    header, rows = score_rows(result, summary)
    rows = [[display_path(str(row[0])), *row[1:]] for row in rows]
    parts += [markdown_table(header, rows), "", f"**Verdict:** {summary['verdict']}"]
    parts += [f"\n**Cannot decide:** {line}" for line in summary["limits"]]
    intervals = interval_rows(result)
    if intervals:
        title, header, rows = intervals
        parts += ["", f"{title}:", "", markdown_table(header, rows)]
    if gate is not None:
        parts += ["", gate_line(gate)]
    if show_legend:
        parts += ["", "<details><summary>What the columns mean</summary>", ""]
        parts += [f"- {line}" for line in legend(result, summary)]
        parts += ["", "</details>"]
    if result["layers"]:
        parts += ["", markdown_table(*layer_rows(result)), ""]
        parts += [f"- {line}" for line in peak_lines(result)]
        shown = {row["projection"] for row in result["layers"]}
        parts += [f"- {line}" for key, line in PROJECTION_LEGEND.items() if key in shown]
    for title, link in (figures or {}).items():
        parts += ["", f"![{title}]({link})"]
    return "\n".join(parts) + "\n"


def report_header() -> list[str]:
    """The columns of a report's summary table: one row per target."""
    return ["target", "d", "positions", *[c.label for c in SCORE_COLUMNS], "null"]


def report_row(result: dict[str, Any], summary: dict[str, Any]) -> list[Any]:
    """One target's row of a report's summary table (its own scores; '-' where it has no position vectors)."""
    mine = next((row for row in summary["rows"] if row["encoding"] == result["target"]), None)
    return [
        display_path(result["target"]),
        "-" if mine is None else mine["dim"],
        len(result["positions"]),
        *[("-" if mine is None else mine[c.key]) for c in SCORE_COLUMNS],
        "-" if mine is None else category_code(mine["categories"]),
    ]


def gate_rules(gate: dict[str, Any]) -> str:
    """The gate's rules in words: "fail above scaled_stress > 0.5", "fail if shape not-better", or both."""
    rules = [f"{name} > {limit:g}" for name, limit in gate["thresholds"].items()]
    rules += [f"{aspect} {category}" for aspect, category in (gate.get("conditions") or {}).items()]
    kinds = "/".join(word for word, given in (("above", gate["thresholds"]), ("if", gate.get("conditions"))) if given)
    return f"fail {kinds} " + ", ".join(rules)


def gate_line(gate: dict[str, Any]) -> str:
    """The --fail-above / --fail-if gate as one Markdown line."""
    what = gate_rules(gate)
    if gate["crossed"]:
        return f"**Gate FAILED** ({what}): " + "; ".join(gate["crossed"])
    return f"**Gate passed** ({what})"


def write_figures(result: dict[str, Any], directory: str | os.PathLike[str], prefix: str = "") -> dict[str, str]:
    """Heatmap, MDS map, Shepard diagram and per-layer stress as PNGs; returns {title: path}."""
    from ..geometry.mds import classical_mds, stress_curve
    from ..plotting import caption
    from .figures import distance_heatmap, known_distances, layer_figure, mds_figure, null_figure, shepard_diagram

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    geometry = result["_geometry"]
    distances = geometry.matrix(result["distance"])
    named = caption(display_path(result["target"]), result["dataset"]["name"])
    written: dict[str, str] = {}
    truth = known_distances(geometry)  # a synthetic corpus's exact distances, drawn beside the estimates
    heatmap = folder / f"{prefix}hellinger.png"
    distance_heatmap(geometry, heatmap, subtitle=named, truth=truth)
    written["Hellinger distances (naive, corrected) and noise floor"] = str(heatmap)
    mds = classical_mds(distances)
    mds_path = folder / f"{prefix}mds.png"
    mds_figure(mds, stress_curve(mds.embedding_, distances), geometry.positions, mds_path, subtitle=named, truth=truth)
    written["MDS: eigen-spectrum, stress against rank, 2-D map"] = str(mds_path)
    # The vectors the analysis scored (the optimal MDS is left out: it lies on the diagonal).
    tables = {name: table for name, table in result["_vectors"].items() if name != "mds"}
    shepard = folder / f"{prefix}shepard.png"
    shepard_diagram(tables, distances, shepard, subtitle=f"{named} ({result['distance']})", truth=truth)
    written["Shepard diagram"] = str(shepard)
    null_path = folder / f"{prefix}null.png"
    reasons = {
        a: e["reason"]
        for a, e in (result.get("discriminability") or {}).get("aspects", {}).items()
        if e.get("discriminates") is False
    }
    shown = {short_name(display_path(name), 24): scores for name, scores in result["scores"].items()}
    null_figure(shown, ASPECTS, null_path, subtitle=f"({named})", not_ranked=reasons)
    written["every score against random tables (the verdict's categories)"] = str(null_path)
    if result["layers"]:
        layers = folder / f"{prefix}layers.png"
        scores = result["scores"]
        references: dict[str, dict[str, float]] = {}
        if result["target"] in scores:
            null = scores[result["target"]]["null"]
            references["null"] = {key: null[key]["mean"] for key in ("stress", "scaled_stress") if key in null}
        if "sinusoidal" in scores:
            references["sinusoidal"] = {key: scores["sinusoidal"][key] for key in ("stress", "scaled_stress")}
        layer_figure(result["layers"], layers, title=f"({named})", references=references)
        written["stress per layer"] = str(layers)
    return written
