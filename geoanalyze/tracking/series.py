"""A series of checkpoints in step order: what ``geoanalyze track`` scores.

A source is one of

- a run folder of ``geoanalyze train`` (``checkpoints/step-<N>/`` kept by ``--keep-checkpoints``,
  and its latest ``checkpoint/``): one member per kept step;
- a folder of Hugging Face Trainer checkpoints (``checkpoint-<N>/`` folders): one member each;
- a checkpoint folder (``config.json`` in it), a glob of them, or a hub name;
- one hub name with ``revisions`` (Pythia's ``step1000``, ...): one member per revision.

The step of a member is, in this order: ``trainer_state.json``'s ``global_step`` (HF Trainer),
``trainer.json``'s ``step`` (ours), the number in its name (``checkpoint-500``, ``step-500``,
``step500``, ``global_step500``, ``500``). A series is sorted by step; one whose steps cannot all be
read is refused unless the order is ``given``.
"""

from __future__ import annotations

import glob
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

#: where ``geoanalyze train --keep-checkpoints`` keeps its checkpoints inside a run folder
KEPT_DIR = "checkpoints"
KEPT_PREFIX = "step-"
ORDERS = ("steps", "given")
_STEP_NAME = re.compile(r"^(?:checkpoint|step|global[-_]?step|iter|iteration)?[-_]?(\d+)$", re.IGNORECASE)
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Member:
    """One checkpoint of a series.

    name : as shown (a folder path, or ``name@revision``).
    location : what is loaded (a folder, or a hub name).
    step : its training step (None when it cannot be read).
    kind : ``"hf"`` (a Hugging Face checkpoint) or ``"run"`` (a model written by ``geoanalyze train``).
    revision : the hub revision, for ``--revisions``.
    series : the series it belongs to when several are compared (``track --series``), else None.
    """

    name: str
    location: str
    step: int | None
    kind: str
    revision: str | None = None
    series: str | None = None


def step_in_name(name: str) -> int | None:
    """The step a checkpoint's name says (``checkpoint-500``, ``step500``, ``500``), or None."""
    found = _STEP_NAME.match(Path(name.rstrip("/")).name)
    return int(found.group(1)) if found else None


def _json_step(file: Path, key: str) -> int | None:
    try:
        value = json.loads(file.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def folder_step(folder: Path) -> int | None:
    """A checkpoint folder's step: trainer_state.json (HF Trainer), trainer.json (ours), else its name."""
    for file, key in (("trainer_state.json", "global_step"), ("trainer.json", "step")):
        if (folder / file).is_file():
            step = _json_step(folder / file, key)
            if step is not None:
                return step
    return step_in_name(folder.name)


def is_trained_model(folder: Path) -> bool:
    """A model folder written by ``geoanalyze train`` (its config.json is a ModelConfig, not a HF config)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "model_type" not in config and "pe" in config and "d_model" in config


def _member(folder: Path) -> Member:
    kind = "run" if is_trained_model(folder) else "hf"
    return Member(str(folder), str(folder), folder_step(folder), kind)


def in_step_order(folders: list[Path]) -> list[Path]:
    """Checkpoint folders of one source in step order (``step-6`` before ``step-12``, whatever ``--order``:
    a source's own members have their order), those without a step last, by name."""
    steps = {folder: folder_step(folder) for folder in folders}
    return sorted(folders, key=lambda p: (steps[p] is None, steps[p] or 0, p.name))


def run_members(run: Path) -> list[Member]:
    """The kept checkpoints of a ``geoanalyze train`` run, and its latest one when not kept too. A kept
    folder without its config.json is a member (its row says why it was not scored), never left out."""
    kept = in_step_order([p for p in (run / KEPT_DIR).glob(f"{KEPT_PREFIX}*") if p.is_dir()])
    members = [_member(folder) for folder in kept]
    latest = run / "checkpoint"
    if (latest / "config.json").is_file():
        last = _member(latest)
        if last.step is None or last.step not in {m.step for m in members}:
            members.append(last)
    return members


def trainer_members(folder: Path) -> list[Member]:
    """The ``checkpoint-<N>`` folders of a Hugging Face Trainer output folder, in step order; one without
    its config.json (a save cut short) is a member whose row says why it was not scored."""
    return [_member(p) for p in in_step_order([p for p in folder.glob("checkpoint-*") if p.is_dir()])]


def source_members(source: str) -> list[Member]:
    """The members one source stands for (see the module docstring)."""
    path = Path(source).expanduser() if source.startswith("~") else Path(source)  # ./~/x is the folder ~
    if path.is_dir():
        if (path / "checkpoint").is_dir() or (path / KEPT_DIR).is_dir():
            members = run_members(path)
        elif (path / "config.json").is_file():
            members = [_member(path)]
        else:
            members = trainer_members(path)
        if not members:
            raise InputError(
                f"{source} holds no checkpoint (no config.json, checkpoint-*/ or run of `geoanalyze train`); "
                "pass checkpoint folders, a run folder or a Trainer output folder"
            )
        return members
    if _GLOB_CHARS & set(source):
        matched = sorted(Path(p) for p in glob.glob(str(path)) if (Path(p) / "config.json").is_file())
        if not matched:
            raise InputError(f"{source} matches no checkpoint folder (none with a config.json); check the pattern")
        return [_member(p) for p in matched]
    if path.exists():
        raise InputError(f"{source} is a file; pass a checkpoint folder, a run folder or a hub name")
    return [Member(source, source, step_in_name(source), "hf")]


def revision_members(name: str, revisions: list[str]) -> list[Member]:
    """One member per hub revision of ``name`` (its step from the revision's name: step1000 -> 1000)."""
    return [Member(f"{name}@{rev}", name, step_in_name(rev), "hf", rev) for rev in revisions]


def find_series(sources: list[str], revisions: list[str] | None = None, order: str = "steps") -> tuple[Member, ...]:
    """The checkpoints of ``sources`` (with ``revisions``: of the one hub model named), in step order.

    Raises InputError when a source holds no checkpoint, a step cannot be read (unless ``order`` is
    ``given``), or two members share a step.
    """
    if order not in ORDERS:
        raise InputError(f"unknown --order {order!r}; choose one of {', '.join(ORDERS)}")
    if not sources:
        raise InputError("no checkpoint given; pass checkpoint folders, a run folder or a Trainer output folder")
    if revisions:
        if len(sources) != 1:
            raise InputError(f"--revisions takes one hub model, got {len(sources)} sources; pass one name")
        members = revision_members(sources[0], revisions)
    else:
        members = [member for source in sources for member in source_members(source)]
    if order == "given":
        return tuple(members)
    unordered = next((m for m in members if m.step is None), None)
    if unordered is not None and unordered.revision is None and not Path(unordered.location).exists():
        # not a folder here: a path that is missing (or a hub name without --revisions), not a step to read
        folder = Path(unordered.location).parent
        if unordered.location.startswith((".", "/", "~")) or (str(folder) != "." and folder.is_dir()):
            raise InputError(f"{unordered.name} does not exist; check the path (a checkpoint, run or Trainer folder)")
        raise InputError(
            f"{unordered.name} is no local folder (it does not exist here) and, as a hub name, has no step; "
            "check the path; for a hub model pass --revisions (its checkpoints) or --order given (it as one step)"
        )
    if unordered is not None:
        raise InputError(
            f"cannot order {unordered.name}: no step in its name (checkpoint-N, step-N) or trainer state; "
            "pass --order given to keep the order given"
        )
    seen: dict[int | None, Member] = {}
    for member in members:
        if member.step in seen:
            two = "" if len(sources) < 2 else ", or --series to compare the sources as series side by side"
            raise InputError(
                f"{seen[member.step].name} and {member.name} are both step {member.step}; "
                f"pass each checkpoint once{two}"
            )
        seen[member.step] = member
    return tuple(sorted(members, key=lambda m: m.step or 0))


def find_several(sources: list[str], order: str = "steps") -> tuple[Member, ...]:
    """Each source its own series (``track --series``): its members in step order, labelled with the
    source as given (the labels must differ), one series after the other."""
    from dataclasses import replace

    if len(sources) < 2:
        raise InputError("--series compares two or more sources; pass each series' folder")
    if len(set(sources)) != len(sources):
        twice = next(source for source in sources if sources.count(source) > 1)
        raise InputError(f"--series: {twice} is given twice; pass each series once")
    return tuple(replace(member, series=source) for source in sources for member in find_series([source], None, order))
