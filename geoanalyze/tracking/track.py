"""Geometry over training: every checkpoint of a series scored against one corpus geometry.

::

    load_members      each checkpoint read (a failure is that member's row, not the series' end);
                      every one checked against the first for architecture and tokenizer
 -> target_geometry   the corpus counted ONCE with the series' tokenizer -> D (analysis.target_geometry)
 -> ShuffleNull       every row of every step tested against shuffles of its own positions, all at
                      the end, as one family for Holm's correction (geometry/shuffle.py)
 -> score_member      per checkpoint: its position row (and with --layers its layer rows, each from
                      a forward pass cached as stress's) scored with its categories

The result is a frozen :class:`TrackResult`: ``to_json()`` is what ``track -f json`` prints (one
record per step), ``to_markdown()`` the section ``-f markdown`` prints.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import (
    Corpus,
    ProgressFactory,
    StressOptions,
    Target,
    check_options,
    checkpoint_layers,
    checkpoint_target,
    discriminability,
    null_settings,
    probe_scores,
    score_table,
    settle,
    target_geometry,
)
from ..corpus.sources import default_tokenizer
from ..encodings import EncodingContext
from ..errors import DataNotFoundError, GeoanalyzeError, IncompatibleError, InputError, first_line
from ..geometry.null import ASPECTS
from ..geometry.shuffle import ShuffleNull
from ..io import to_jsonable
from ..results import (
    CorpusInfo,
    Discriminability,
    EncodingScores,
    LayerRow,
    NullSettings,
    category_code,
    limit_lines,
    link_target,
    markdown_table,
    md_text,
)
from .series import Member

#: what an aspect this corpus cannot rank means for a series' categories
TRACK_CONSEQUENCE = "its changes from step to step do not say which checkpoint fits the corpus better"
#: the scale-free scores a series is followed by, in the order of the aspects they are read for
TRACKED = tuple(ASPECTS.values())
#: their column labels
LABELS = {
    "scaled_stress": "scaled",
    "monotonicity_violation": "violation",
    "anchored_monotonicity_violation": "anchored",
    "lag_violation": "lag viol.",
    "relative_separation": "rel. sep.",
}
DEFAULT_MAX_POSITIONS = 512


@dataclass(frozen=True)
class Loaded:
    """A member as read before the corpus: its checkpoint (HF), its identity, or why it could not be read."""

    member: Member
    checkpoint: Any = None
    identity: Mapping[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class StepRecord:
    """One checkpoint's scores: its position row (None: it has no position vectors, or failed) and its
    layer rows, or the error that kept it from being scored."""

    index: int
    step: int | None
    checkpoint: str
    position: EncodingScores | None
    layers: tuple[LayerRow, ...] = ()
    error: str | None = None
    seconds: float = 0.0
    #: the series it belongs to (``track --series``), else None
    series: str | None = None

    @property
    def x(self) -> int:
        """Where the step sits on the figure's x axis (its index when the step is unknown)."""
        return self.step if self.step is not None else self.index

    def to_dict(self) -> dict[str, Any]:
        return {
            **({"series": self.series} if self.series is not None else {}),
            "step": self.step,
            "checkpoint": self.checkpoint,
            "position": None if self.position is None else self.position.to_dict(),
            "layers": [row.to_dict() for row in self.layers],
            "error": self.error,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class TrackResult:
    """A series of checkpoints scored against one corpus geometry, one record per step."""

    dataset: CorpusInfo
    distance: str
    positions: np.ndarray
    width: int
    null: NullSettings
    discriminability: Discriminability
    records: tuple[StepRecord, ...]
    comparison: Any = None

    @property
    def failed(self) -> list[StepRecord]:
        return [record for record in self.records if record.error is not None]

    def band(self, score: str) -> tuple[float, float] | None:
        """The first position row's shuffles' range (low, high) of ``score``, where the test's statistic is the
        score itself (scaled stress); None for the rank statistics, whose scale is not the score's."""
        if score != "scaled_stress":
            return None
        for record in self.records:
            if record.position is not None and score in record.position.null:
                null = record.position.null[score]
                return float(null.low), float(null.high)
        return None

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "dataset": self.dataset.to_dict(),
            "distance": self.distance,
            "positions": [int(p) for p in self.positions],
            "width": self.width,
            "null": self.null.to_dict(),
            "discriminability": self.discriminability.to_dict(),
            "records": [record.to_dict() for record in self.records],
        }
        if self.comparison is not None:
            document["comparison"] = self.comparison.to_dict()
        return document

    def to_json(self, **extra: Any) -> str:
        """The JSON document ``track -f json`` prints (``extra``: run, figure, gate)."""
        return json.dumps(to_jsonable({**self.document(), **extra}), indent=2, allow_nan=False)

    def to_markdown(self, figure: str | None = None) -> str:
        """The section ``track -f markdown`` prints: the position table, the layer table, the comparison."""
        several = series_of(self)
        compared = f" ({len(several)} series: {', '.join(md_text(name) for name in several)})" if several else ""
        parts = [
            f"## Geometry over training: {len(self.records)} checkpoints on {md_text(self.dataset.name)}{compared}"
        ]
        parts.append(markdown_table(*position_rows(self)))
        parts.extend(
            f"**Cannot decide:** {md_text(line)}" for line in limit_lines(self.discriminability, TRACK_CONSEQUENCE)
        )
        header, rows = layer_rows(self)
        if rows:
            parts.append("### Layers\n\n" + markdown_table(header, rows))
        if self.comparison is not None:
            parts.append("### Against the baseline\n\n" + markdown_table(*self.comparison.rows()))
            parts.extend(f"- {md_text(line)}" for line in self.comparison.lines())
        parts.append(legend(self.null))
        if figure:
            parts.append(f"![scores against step]({link_target(figure)})")
        return "\n\n".join(parts) + "\n"


def legend(null: NullSettings) -> str:
    """What the tables' "null" column says (one line; the table format folds it to the output)."""
    return (
        f"null: shape, order, local order and lag against {null.draws} shuffles of which position each of the "
        f"row's vectors belongs to, Holm-corrected over the series' {null.tests} tests at {null.alpha:.0%} "
        "(+ better than shuffled, = indistinguishable, - worse, ? undecided)"
    )


def _cells(scores: EncodingScores | LayerRow | None) -> list[Any]:
    if scores is None:
        return ["-"] * (len(TRACKED) + 1)
    # numbers, not their text: a table aligns them as numbers and never splits one over two lines
    return [_number(scores.observed.get(key)) for key in TRACKED] + [category_code(scores.categories)]


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def series_of(result: TrackResult) -> list[str]:
    """The series compared (``track --series``), in order; empty for one series."""
    return list(dict.fromkeys(record.series for record in result.records if record.series is not None))


def position_rows(result: TrackResult) -> tuple[list[str], list[list[Any]]]:
    """The position table: one row per step (an error row says why a checkpoint was not scored);
    with several series, a first column names each row's."""
    several = bool(series_of(result))
    header = [*(["series"] if several else []), "step", "checkpoint", *(LABELS[key] for key in TRACKED), "null"]
    rows = []
    for record in result.records:
        step = "-" if record.step is None else record.step
        first = [record.series] if several else []
        if record.error is not None:
            rows.append([*first, step, record.checkpoint, f"not scored: {record.error}", *[""] * len(TRACKED)])
        else:
            rows.append([*first, step, record.checkpoint, *_cells(record.position)])
    return header, rows


def layer_rows(result: TrackResult) -> tuple[list[str], list[list[Any]]]:
    """The layer table: per step, every layer row (with several series, each row's first)."""
    several = bool(series_of(result))
    header = [*(["series"] if several else []), "step", "layer", "row", *(LABELS[key] for key in TRACKED), "null"]
    rows = [
        [
            *([record.series] if several else []),
            "-" if record.step is None else record.step,
            row.layer,
            row.projection,
            *_cells(row),
        ]
        for record in result.records
        for row in record.layers
    ]
    return header, rows


# --- reading the members -----------------------------------------------------------------------------


def revision_folder(name: str, revision: str) -> Path:
    """The local snapshot of ``name`` at ``revision``: the HF cache first, then the hub unless offline."""
    from huggingface_hub import snapshot_download

    from ..hub import hub_offline

    try:
        return Path(snapshot_download(name, revision=revision, local_files_only=True))
    except Exception as exc:
        cached = first_line(exc)
    if hub_offline():
        raise DataNotFoundError(
            f"{name} at revision {revision} is not in the Hugging Face cache ({cached}) and the hub is out of "
            "reach; run once with network access"
        )
    patterns = ["*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*"]
    try:
        return Path(snapshot_download(name, revision=revision, allow_patterns=patterns))
    except Exception as exc:
        raise DataNotFoundError(f"cannot download {name} at revision {revision} ({first_line(exc)})") from exc


def hf_identity(checkpoint: Any) -> dict[str, Any]:
    """What two checkpoints of one series share: the architecture, its sizes and the tokenizer's vocabulary."""
    from ..corpus.tokenize import HFTokenizer

    mechanism = checkpoint.mechanism
    return {
        "architecture": mechanism.architecture,
        "model_type": mechanism.model_type,
        "position kind": mechanism.kind,
        "hidden size": checkpoint.hidden_size,
        "layers": checkpoint.n_layers,
        "positions": checkpoint.max_positions,
        "tokenizer vocabulary": HFTokenizer(checkpoint.tokenizer_spec()).identity().get("vocab_sha256"),
    }


def load_member(member: Member, trust_remote_code: bool = False) -> Loaded:
    """Read one member's config (and a HF checkpoint's tensor index); an unreadable one is its error. A
    ``geoanalyze train`` run's identity is its model config (every size and the encoding)."""
    from ..checkpoints import load_checkpoint
    from ..checkpoints.load import check_trained_config

    folder = Path(member.location)
    if member.revision is None and folder.is_dir() and not (folder / "config.json").is_file():
        return Loaded(
            member, error=f"{member.name} holds no config.json (a save cut short?); save the checkpoint again"
        )
    try:
        if member.kind == "run":
            return Loaded(member, identity=dict(check_trained_config(folder)))
        location = member.location
        if member.revision is not None:
            location = str(revision_folder(member.location, member.revision))
        checkpoint = load_checkpoint(location, trust_remote_code)
        return Loaded(member, checkpoint, hf_identity(checkpoint))
    except DataNotFoundError:
        raise  # a typo in a name: the series is not what the user meant
    except GeoanalyzeError as exc:
        return Loaded(member, error=first_line(exc, 500))


def check_same_model(loaded: Sequence[Loaded]) -> Loaded:
    """The first readable member, after checking every other has its architecture and tokenizer."""
    readable = [entry for entry in loaded if entry.error is None]
    if not readable:
        raise InputError(f"no checkpoint of the series could be read; the first: {loaded[0].error}")
    first = readable[0]
    for entry in readable[1:]:
        difference = model_difference(entry, first)
        if difference is not None:
            raise IncompatibleError(f"{difference}; track one model's checkpoints separately")
    return first


def model_difference(entry: Loaded, first: Loaded) -> str | None:
    """How a readable member differs from the series' first (its kind, architecture, sizes or tokenizer),
    or None when it is a checkpoint of the same model."""
    if entry.member.kind != first.member.kind:
        return (
            f"{entry.member.name} is a {_kind_word(entry.member.kind)}, {first.member.name} a "
            f"{_kind_word(first.member.kind)}"
        )
    assert entry.identity is not None and first.identity is not None
    for key, value in first.identity.items():
        if entry.identity.get(key) != value:
            return (
                f"{entry.member.name} differs from {first.member.name} in its {key} "
                f"({entry.identity.get(key)!r}, not {value!r}); a series is the checkpoints of one model "
                "(another tokenizer would change the corpus geometry)"
            )
    return None


def reread_member(entry: Loaded, first: Loaded, trust_remote_code: bool = False) -> Loaded:
    """A member as it is when it is scored: read again and checked against the series' first, so a
    member replaced (by another model), removed or damaged since the series was checked is a row
    saying why, never scored as a normal step."""
    if entry.error is not None:
        return entry
    why: str | None
    try:
        now = load_member(entry.member, trust_remote_code)
    except DataNotFoundError as exc:  # gone since it was checked
        why = first_line(exc, 300)
    else:
        why = now.error if now.error is not None else model_difference(now, first)
        if why is None:
            return now
    return Loaded(entry.member, error=f"changed while the series was scored: {why}")


def _kind_word(kind: str) -> str:
    return "model of `geoanalyze train`" if kind == "run" else "Hugging Face checkpoint"


def series_target(first: Loaded, options: StressOptions) -> Target:
    """How the series reads the corpus: the first checkpoint's tokenizer, positions and layers."""
    if first.member.kind == "hf":
        resolved = checkpoint_target(first.checkpoint.tokenizer_spec(), options)
        return replace(resolved, name=first.member.name)
    if options.layers.strip().lower() != "none":
        raise InputError(
            "--layers scores the layers of Hugging Face checkpoints; a model of `geoanalyze train` has its "
            "query/key rows scored while it trains (train --geometry-every); drop --layers"
        )
    assert first.identity is not None
    model_positions = int(first.identity.get("n_positions") or DEFAULT_MAX_POSITIONS)
    if options.max_positions is not None and options.max_positions > model_positions:
        raise InputError(
            f"--max-length {options.max_positions} exceeds the {model_positions} positions of {first.member.name}; "
            "lower it"
        )
    return Target(
        first.member.name,
        tokenizer=options.tokenizer or default_tokenizer(options.dataset),
        width=int(first.identity.get("d_model") or 1),
        max_length=options.max_positions or min(model_positions, DEFAULT_MAX_POSITIONS),
    )


# --- scoring ---------------------------------------------------------------------------------------------


def member_table(entry: Loaded, positions: np.ndarray) -> np.ndarray | None:
    """The member's position vectors at the kept positions (None: its positions are not vectors)."""
    if entry.member.kind == "run":
        from ..checkpoints.encodings import trained_model_vectors

        return trained_model_vectors(entry.member.location, positions)
    checkpoint = entry.checkpoint
    return checkpoint.position_vectors(positions) if checkpoint.mechanism.has_vectors else None


def score_member(
    index: int,
    entry: Loaded,
    resolved: Target,
    corpus: Corpus,
    nulls: ShuffleNull,
    options: StressOptions,
    progress: ProgressFactory | None,
) -> StepRecord:
    """One checkpoint's position row and (HF, with --layers) layer rows; an error is its row's."""
    member, began = entry.member, time.perf_counter()
    if entry.error is not None:
        return StepRecord(index, member.step, member.name, None, error=entry.error, series=member.series)
    try:
        table = member_table(entry, corpus.positions)
        position = None if table is None else score_table(table, corpus.distances, corpus.positions, nulls)
        layers: tuple[LayerRow, ...] = ()
        if entry.checkpoint is not None and resolved.layers:
            target = replace(resolved, name=member.name, checkpoint=entry.checkpoint)
            rows, _ = checkpoint_layers(entry.checkpoint, table, corpus, target, options, progress, nulls)
            layers = tuple(rows)
    except GeoanalyzeError as exc:
        return StepRecord(index, member.step, member.name, None, error=first_line(exc, 500), series=member.series)
    seconds = time.perf_counter() - began
    return StepRecord(index, member.step, member.name, position, layers, seconds=seconds, series=member.series)


def series_probe(corpus: Corpus, width: int, nulls: ShuffleNull) -> dict[str, EncodingScores]:
    """The sinusoidal probe that decides, once for the series, whether this corpus can rank tables per aspect."""
    context = EncodingContext(width=width, distances=corpus.distances, counts=corpus.counts.metadata)
    return probe_scores({}, {}, corpus.distances, corpus.positions, context, nulls)


def settle_records(
    records: Sequence[StepRecord], probes: Mapping[str, EncodingScores], nulls: ShuffleNull
) -> tuple[list[StepRecord], dict[str, EncodingScores]]:
    """Every record's rows (and the probe) with their shuffle tests, run together as one family."""
    items: list[Any] = []
    for record in records:
        items += ([record.position] if record.position is not None else []) + list(record.layers)
    settled = iter(settle(nulls, [*items, *probes.values()]))
    out = []
    for record in records:
        position = next(settled) if record.position is not None else None
        layers = tuple(next(settled) for _ in record.layers)
        out.append(replace(record, position=position, layers=layers))
    return out, {name: next(settled) for name in probes}


def track(
    members: Sequence[Member],
    options: StressOptions,
    progress: ProgressFactory | None = None,
    on_record: Callable[[StepRecord], None] | None = None,
) -> TrackResult:
    """Score every member of a series (in the order given) against the geometry of ``options.dataset``.

    The corpus is counted and its distances computed once; the null draws are made once per shape;
    each checkpoint's forward pass (``--layers``) is cached as stress's, so re-running after one more
    checkpoint costs one pass. ``on_record`` is called with each record as it is done.

    Raises InputError before any corpus work when the members are of different models (architecture,
    sizes, tokenizer), none can be read, or an option is bad.
    """
    check_options(options)
    loaded = [load_member(member, options.trust_remote_code) for member in members]
    first = check_same_model(loaded)
    resolved = series_target(first, options)
    corpus = target_geometry(resolved, options, progress)
    nulls = ShuffleNull(corpus.distances, corpus.positions, options.null_draws, options.seed)
    records = []
    for index, entry in enumerate(loaded):
        # every member is checked when it is read, not only once before the corpus
        entry = reread_member(entry, first, options.trust_remote_code)
        record = score_member(index, entry, resolved, corpus, nulls, options, progress)
        records.append(record)
        if on_record is not None:
            on_record(record)
    widths = [r.position.dim for r in records if r.position is not None]
    width = widths[0] if widths else resolved.width
    records, probes = settle_records(records, series_probe(corpus, width, nulls), nulls)
    geometry = corpus.geometry
    return TrackResult(
        dataset=CorpusInfo(corpus.source.describe(), resolved.tokenizer, resolved.max_length, options.limit),
        distance=options.distance,
        positions=geometry.positions,
        width=width,
        null=null_settings(nulls),
        discriminability=discriminability(probes, nulls, corpus.geometry.summary, options.distance),
        records=tuple(records),
    )


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
