"""The papers' headline claims, each beside our number, its protocol and a status: docs/claims.md.

Every "ours" figure is read from a committed record under docs/results/ when the page is
generated; the mapping from claims to records is data: claims.toml beside this module (package
data, read into :data:`CLAIMS`), over its records (read into :data:`RECORDS`). Regenerate the page
with::

    python -m geoanalyze.experiments.claims docs/claims.md

(without an argument it prints the page). A test checks that docs/claims.md equals this output,
so the page cannot go stale: after a record is regenerated, regenerate the page too.

A status is a judgement, so it is stated in claims.toml, never computed: every claim states one (there is
no automatic "reproduced"), and the rule it rests on is reviewed with it. What is computed is
whether the record still supports it: each claim lists the verdicts of the record's checks it
rests on (``expect``), and generation fails naming the claim when a regenerated record's verdict
differs, so a changed result is re-judged rather than silently relabelled. A status of
"reproduced" or "direction only" is refused, too, when a check it rests on also passes with its
arms swapped (:func:`swapped_verdict`) or when a negative control of its record (a check named
"control: ...", which passes when the control fails the claim's test) does not pass. A claim whose
record is absent is shown as "not attempted" (or "attempted, unrecorded": runs were made but no
record was kept) with the command that writes the record.

Importing this module does not import torch.
"""

from __future__ import annotations

import json
import math
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from .record import CheckRecord, Statistics

STATUSES = (
    "reproduced",
    "direction only",
    "inconclusive at this scale",
    "not reproduced, explained",
    "not reproduced, unexplained",
    "attempted, unrecorded",
    "not attempted",
    "the paper is wrong",
)
#: the statuses that say the data support the claim: refused when a check they rest on passes swapped,
#: or when a negative control of its record passes the claim's test
SUPPORTING = ("reproduced", "direction only")
#: the statuses a claim may have while its record is absent
UNRECORDED = ("not attempted", "attempted, unrecorded", "the paper is wrong")


@dataclass(frozen=True)
class Record:
    """A committed record: its path under the repository root, what it is, the command that writes it."""

    path: str
    protocol: str
    command: str


@dataclass(frozen=True)
class Value:
    """One number of a record: ``path`` is keys joined by "/" (a list of checks is indexed by check
    name, any other list by position); ``format`` a format spec ("" = 4 significant digits)."""

    record: str
    path: str
    format: str = ""


@dataclass(frozen=True)
class Claim:
    """A headline claim of a paper and what our records say about it.

    ``ours`` is a template whose ``{0}``, ``{1}``... are the :class:`Value` s of ``values``, read from
    the records at generation time. ``expect`` maps (record, check name) to the verdict the status
    rests on ("pass" or "fail"). ``status`` is one of :data:`STATUSES`, always stated (reviewed):
    the generator never reads a status off the verdicts.
    """

    paper: str
    claim: str
    paper_figure: str
    ours: str
    values: tuple[Value, ...]
    protocol: str
    status: str
    why: str
    expect: dict[tuple[str, str], str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()  #: records the claim rests on beyond those of ``values`` and ``expect``

    @property
    def records(self) -> list[str]:
        names = [v.record for v in self.values] + [r for r, _ in self.expect] + list(self.needs)
        return list(dict.fromkeys(names))


def load_table(text: str | None = None) -> tuple[dict[str, str], tuple[Claim, ...]]:
    """The papers and the claims of ``text`` (the TOML of claims.toml; default: the file shipped with the
    package). A claim's ``values`` are [record, path] or [record, path, format], its ``expect`` rows
    [record, check, verdict]; a key that is not a :class:`Claim` field raises TypeError naming it."""
    table = tomllib.loads(text if text is not None else files(__package__).joinpath(TABLE).read_text("utf-8"))
    claims = tuple(
        Claim(
            **{
                **row,
                "values": tuple(Value(*item) for item in row.get("values", ())),
                "expect": {(name, check): verdict for name, check, verdict in row.get("expect", ())},
                "needs": tuple(row.get("needs", ())),
            }
        )
        for row in table["claim"]
    )
    return dict(table["papers"]), claims


#: the table docs/claims.md is generated from, as data (package data beside this module)
TABLE = "claims.toml"
CLAIMS_FILE = f"geoanalyze/experiments/{TABLE}"
PAPERS, CLAIMS = load_table()
#: every record a claim reads, by a short name (claims.toml's [records])
RECORDS = {
    name: Record(**row)
    for name, row in tomllib.loads(files(__package__).joinpath(TABLE).read_text("utf-8"))["records"].items()
}


class StaleClaimError(ValueError):
    """A record's verdict no longer supports the status stated for a claim."""


def _mds_training_checks(record: dict[str, Any]) -> list[CheckRecord]:
    """mds-training's checks by the current check function, from the record's stored per-seed results."""
    from .mds_training import CI, mds_training_checks

    data, config = record["data"], record["data"]["config"]
    results = data["results"]
    seeds = [int(config["seed"]) + k for k in range(len(results["learned"]["mlm_loss_per_seed"]))]
    width, saving = int(config["model"]["d_model"]), float(data["parameters"]["saving"])
    checks = mds_training_checks(results, seeds, CI, int(data["rank"]), int(config["max_length"]), width, saving)
    return [c.to_dict() for c in checks]


#: records whose experiment's checks changed after the record was written, and whose re-run is too
#: slow to repeat for that alone: their checks are re-judged from the data the record stores (the
#: runs are not repeated), and the page says so. Only for records written at the ci preset.
REJUDGE: dict[str, Callable[[dict[str, Any]], list[CheckRecord]]] = {"mds-training": _mds_training_checks}


def read_records(root: Path, names: Sequence[str]) -> dict[str, Any]:
    """The JSON of each named record that exists under ``root`` (absent ones are left out); a record of
    :data:`REJUDGE` whose check names differ from the current ones gets the re-judged checks and
    ``"rejudged": True``."""
    found: dict[str, Any] = {}
    for name in names:
        path = root / RECORDS[name].path
        if path.is_file():
            record = json.loads(path.read_text(encoding="utf-8"))
            if name in REJUDGE and record.get("preset") == "ci":
                checks = REJUDGE[name](record)
                if [c["name"] for c in checks] != [c["name"] for c in record.get("checks", [])]:
                    record = {**record, "checks": checks, "rejudged": True}
            found[name] = record
    return found


def lookup(document: Any, path: str) -> Any:
    """The value at ``path`` ("a/b/c"; a key that holds "/" is matched whole, the longest first; a list
    of named dicts is indexed by name, any other list by position)."""
    value = document
    keys = path.split("/")
    while keys:
        if isinstance(value, list):
            key = keys.pop(0)
            named = [item for item in value if isinstance(item, dict) and item.get("name") == key]
            value = named[0] if named else value[int(key)]
        elif isinstance(value, dict):
            for take in range(len(keys), 0, -1):
                key = "/".join(keys[:take])
                if key in value:
                    value, keys = value[key], keys[take:]
                    break
            else:
                raise KeyError(f"{path}: no {keys[0]!r} (keys: {', '.join(map(str, value))})")
        else:
            raise KeyError(f"{path}: {keys[0]!r} inside a {type(value).__name__}")
    return value


def verdict(check: CheckRecord) -> str:
    """A check's verdict; records written before verdicts existed carry only ``passed``."""
    return str(check.get("verdict") or ("pass" if check.get("passed") else "fail"))


def ours(claim: Claim, records: dict[str, Any]) -> str:
    """The claim's "ours" cell from the records: each value by its format ("raw": as the JSON holds it)."""
    values = []
    for item in claim.values:
        raw = lookup(records[item.record], item.path)
        values.append(raw if item.format == "raw" else format(raw, item.format or ".4g"))
    return claim.ours.format(*values)


def _swapped_test(test: Statistics) -> str | None:
    """The verdict of one test (a ``statistics`` dict of :mod:`.stat_tests`) with its arms swapped.

    The differences change sign: the bounds become (-upper, -lower). Superiority then passes iff
    upper < 0; non-inferiority iff upper < margin (A - B within the margin both ways: the test
    cannot tell the arms apart); a null comparison iff the null beats us by the same z sds; a trend
    iff it goes the other way; a tolerance iff its value sits on the bound. An equivalence is
    symmetric (swapping gives itself): None, as for a control or unknown statistics.
    """
    kind = test.get("kind")
    if kind in ("equivalence", "control") or not test.get("decided", True):
        return None
    lower, upper = float(test.get("lower", math.nan)), float(test.get("upper", math.nan))
    mean = float(test.get("mean", math.nan))
    if kind == "tolerance":
        bound = (test.get("values") or {}).get("bound")
        return None if bound is None else ("pass" if (mean == float(bound) or not test.get("passed")) else "fail")
    if kind not in ("superiority", "non-inferiority"):
        return None
    if test.get("replicates") == "corpora":  # a trend: the reverse passes only when rho goes the other way
        return "pass" if mean < 0 and not test.get("passed") else "fail"
    if test.get("replicates") == "null draws":
        swapped_lower = -mean - (mean - lower)
        return "pass" if swapped_lower > 0 else "fail"
    if kind == "superiority":
        return "pass" if upper < 0 else "fail"
    return "pass" if upper < float(test.get("margin", 0.0)) else "fail"


def _symmetric(test: Statistics) -> str | None:
    """An equivalence's verdict, which swapping its arms leaves as it is (None when undecided)."""
    if not test.get("decided", True):
        return None
    return "pass" if test.get("passed") else "fail"


def swapped_verdict(check: CheckRecord) -> str | None:
    """The verdict of a record's check with its arms swapped (see :func:`_swapped_test`); None where
    swapping does not apply (an equivalence, a control, a check without statistics)."""
    statistics = check.get("statistics") or Statistics()
    if str(check.get("name", "")).startswith("control:") or check.get("test") == "control":
        return None
    tests = statistics.get("tests")
    if tests:  # every test must pass for the check to pass, swapped too; an equivalence swaps to itself
        verdicts = [_symmetric(t) if t.get("kind") == "equivalence" else _swapped_test(t) for t in tests]
        if any(v is None for v in verdicts):
            return None
        return "pass" if all(v == "pass" for v in verdicts) else "fail"
    return _swapped_test(statistics) if statistics else None


def controls(record: Mapping[str, Any]) -> list[CheckRecord]:
    """A record's negative controls: its checks named "control: ...", each passing when the control fails."""
    return [c for c in record.get("checks", []) if str(c.get("name", "")).startswith("control:")]


def unsupported(claim: Claim, records: dict[str, Any]) -> list[str]:
    """Why a supporting status (:data:`SUPPORTING`) cannot stand: a check it rests on passes with its arms
    swapped, or a negative control of the record passes the claim's test. Empty when none."""
    reasons = []
    for (name, check_name), expected in claim.expect.items():
        check = lookup(records[name], f"checks/{check_name}")
        if expected == "pass" and swapped_verdict(check) == "pass":
            reasons.append(f"check {check_name!r} of {RECORDS[name].path} also passes with its arms swapped")
    for name in dict.fromkeys(name for name, _ in claim.expect):
        for control in controls(records[name]):
            if verdict(control) != "pass":
                reasons.append(f"{control['name']!r} of {RECORDS[name].path} is {verdict(control)!r}")
    return reasons


def row(claim: Claim, records: dict[str, Any]) -> list[str]:
    """paper, claim, paper's figure, ours, protocol, status, why; raises StaleClaimError on a changed verdict,
    an unknown status, or a supporting status that a swapped check or a negative control refutes."""
    if claim.status not in STATUSES:
        raise StaleClaimError(f"{claim.claim!r}: status {claim.status!r} is not one of {', '.join(STATUSES)}")
    missing = [name for name in claim.records if name not in records]
    if missing:
        commands = "; ".join(f"`{RECORDS[name].command}`" for name in missing)
        status = claim.status if claim.status in UNRECORDED else "not attempted"
        return [
            claim.paper,
            claim.claim,
            claim.paper_figure,
            f"no record yet: {commands}",
            claim.protocol,
            status,
            claim.why if status == claim.status and claim.why else "the record has not been written yet",
        ]
    if claim.status == "attempted, unrecorded":
        raise StaleClaimError(f"{claim.claim!r}: its record exists now: re-judge its status in {CLAIMS_FILE}")
    differs = []
    for (name, check_name), expected in claim.expect.items():
        found = verdict(lookup(records[name], f"checks/{check_name}"))
        if found != expected:
            differs.append(f"check {check_name!r} of {RECORDS[name].path} is {found!r}, not {expected!r}")
    if differs:
        raise StaleClaimError(
            f"{claim.claim!r}: {'; '.join(differs)}: re-judge its status ({claim.status!r}) in {CLAIMS_FILE}"
        )
    if claim.status in SUPPORTING and (reasons := unsupported(claim, records)):
        raise StaleClaimError(f"{claim.claim!r}: status {claim.status!r} refused: {'; '.join(reasons)}")
    return [claim.paper, claim.claim, claim.paper_figure, ours(claim, records), claim.protocol, claim.status, claim.why]


def provenance(root: Path, record: Record, data: dict[str, Any]) -> str:
    """The command line that wrote the record: a stress record's ``run``, a script's ``command``, a verify
    record's page's last line."""
    run = data.get("run")
    if isinstance(run, dict) and run.get("command"):
        return str(run["command"])
    command = data.get("command")
    if isinstance(command, str) and command.startswith("benchmarks/"):  # a script's record
        return f"python {command}"
    page = (root / record.path).with_suffix(".md")
    if page.is_file():
        for line in reversed(page.read_text(encoding="utf-8").splitlines()):
            if line.startswith("geoanalyze ") and "`" in line:
                return line.split("`")[1]
    return ""


def escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


CONVENTION = """\
## How a page names its records

Every table of [results.md](results.md), [training.md](training.md), [joformer.md](joformer.md) and
[edelta.md](edelta.md) has an HTML comment on the line above it (invisible when rendered):

- `<!-- record: PATH[, PATH...]; command: COMMAND -->`: every number in the table is a number
  of those records, as printed (rounded to the digits the cell shows, 20,460 to its four
  significant digits; a percentage is 100 x a fraction in the record or a value already in
  percent). A JSON record's numbers include those in its strings and in the Markdown page of the
  same run beside it; a text record (a benchmark's output, a test that pins figures) is read as
  text. Optional fields: `paper columns: PREFIX, PREFIX` (the columns whose header starts with a
  prefix quote a paper, left unchecked), `paper rows: TEXT` (rows whose first cell starts with
  TEXT), `labels: PREFIX, ...` (columns whose numbers are names or settings), and the fields that
  tie every measured cell to the path of its value in the record: `keys: ROW -> PATH | ...;
  cells: HEADER -> TEMPLATE | ...` (`{}` in a template is the row's path, e.g.
  `data/corpora/sst2 (naive)/widths/BERT-base/saving`) and `at: ROW @ HEADER -> PATH & ...` for a
  cell of several numbers; so a wrong number that happens to be elsewhere in the record fails.
- `<!-- not a measurement: REASON -->`: a table of definitions, settings or a paper's own figures.

`tests/docs/test_docs_records.py` reads every table of those pages (markdown-it's GFM parser) and
fails on a table of numbers with no marker, a record that does not exist, a measured number with
no path, or a cell that is not the value at its path. Prose is not checked: a figure that matters
is in a table.

Every verify record at once: `geoanalyze verify all --preset ci --data-dir ../shared/data -o
results-ci`, then copy each `results-ci/NAME/` over `docs/results/NAME/` without its `runs/`
folder (training checkpoints, tens of MB). Not `-o docs/results` itself: `--force` replaces the
whole folder, the stress records with it. Then regenerate this page and run `pytest tests/docs`.
"""


def render(root: Path) -> str:
    """docs/claims.md from the records under ``root``."""
    records = read_records(root, list(RECORDS))
    lines = [
        "# The papers' claims, and ours",
        "",
        "Generated from the committed records by `python -m geoanalyze.experiments.claims docs/claims.md`;",
        "do not edit by hand (a test compares this page with the generator's output). Each claim's",
        "number is the paper's; ours is read from the record named in the protocol column (the",
        "records are listed below, each with the command that regenerates it). The status is one of:",
        ", ".join(f"*{s}*" for s in STATUSES) + ".",
        "",
    ]
    for key, title in PAPERS.items():
        claims = [c for c in CLAIMS if c.paper == key]
        lines += [f"## {title}", "", "| claim | paper | ours | protocol | status | why |", "|---|---|---|---|---|---|"]
        for claim in claims:
            cells = row(claim, records)
            lines.append("| " + " | ".join(escape(c) for c in cells[1:]) + " |")
        lines.append("")
    counts = {s: 0 for s in STATUSES}
    for claim in CLAIMS:
        counts[row(claim, records)[5]] += 1
    lines += ["In all: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".", ""]
    lines += ["## The records", "", "| record | what | preset | command that regenerates it |", "|---|---|---|---|"]
    for name, record in RECORDS.items():
        data = records.get(name)
        preset = "—" if data is None else str(data.get("preset") or "—")
        if data is None:
            note = " (not written yet)"
        elif data.get("rejudged"):
            note = (
                " (its checks re-judged from the results it stores by the current check functions; the runs "
                "were not repeated)"
            )
        else:
            written = provenance(root, record, data)
            if not written:
                note = " (written before records stated their command line)"
            elif written != record.command:
                note = f" (this copy was written by `{written}`)"
            else:
                note = ""
        lines.append(f"| `{record.path}`{note} | {escape(record.protocol)} | {preset} | `{record.command}` |")
    lines += ["", CONVENTION]
    return "\n".join(lines)


def repository_root() -> Path:
    return Path(__file__).resolve().parents[2]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    page = render(repository_root())
    if args:
        Path(args[0]).write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
