"""The claims table is data (geoanalyze/experiments/claims.toml, shipped with the package): every row
is well formed, names a paper, a status and records that exist, and its template has a value per
placeholder; a row planted wrong in any of those ways is refused (issue 33)."""

from __future__ import annotations

import string
import tomllib
from importlib.resources import files
from typing import Any

import pytest
from helpers import REPO_ROOT

from geoanalyze.experiments import claims

REQUIRED = {"paper", "claim", "paper_figure", "ours", "values", "protocol", "status", "why"}
OPTIONAL = {"expect", "needs"}
RECORD_FIELDS = {"path", "protocol", "command"}
TEXT = (REPO_ROOT / "geoanalyze" / "experiments" / claims.TABLE).read_text(encoding="utf-8")


def problems(table: dict[str, Any]) -> list[str]:
    """Every way ``table`` (claims.toml, parsed) is malformed: empty when it is sound."""
    found = [f"unknown top-level key {key!r}" for key in set(table) - {"papers", "records", "claim"}]
    found += [
        f"record {name!r} is not path, protocol and command, each text"
        for name, record in table.get("records", {}).items()
        if set(record) != RECORD_FIELDS or not all(isinstance(v, str) for v in record.values())
    ]
    papers = table.get("papers", {})
    seen: set[str] = set()
    for row in table.get("claim", []):
        name = str(row.get("claim"))
        found += [f"{name}: unknown field {key!r}" for key in sorted(set(row) - REQUIRED - OPTIONAL)]
        found += [f"{name}: no {key!r}" for key in sorted(REQUIRED - set(row))]
        found += [
            f"{name}: {key} is not text"
            for key in sorted(REQUIRED & set(row))
            if key != "values" and not isinstance(row[key], str)
        ]
        found += [f"{name}: claimed twice"] if name in seen else []
        seen.add(name)
        found += [] if row.get("paper") in papers else [f"{name}: paper {row.get('paper')!r} is not in [papers]"]
        found += [] if row.get("status") in claims.STATUSES else [f"{name}: status {row.get('status')!r} is unknown"]
        values, expect = row.get("values", []), row.get("expect", [])
        found += [f"{name}: value {v!r} is not [record, path(, format)]" for v in values if not 2 <= len(v) <= 3]
        found += [
            f"{name}: expect {e!r} is not [record, check, pass|fail]"
            for e in expect
            if len(e) != 3 or e[2] not in ("pass", "fail")
        ]
        records = [v[0] for v in values] + [e[0] for e in expect] + list(row.get("needs", []))
        found += [f"{name}: record {r!r} is not in RECORDS" for r in records if r not in table.get("records", {})]
        fields = [f for _, f, _, _ in string.Formatter().parse(str(row.get("ours", ""))) if f is not None]
        if set(fields) != {str(k) for k in range(len(values))}:  # as sets: "10" sorts before "2" as text
            found.append(f"{name}: the template's placeholders {fields} are not {{0}}..{{{len(values) - 1}}}")
    return found


def test_the_claims_table_is_sound() -> None:
    table = tomllib.loads(TEXT)
    assert problems(table) == []
    assert len(table["claim"]) == len(claims.CLAIMS) > 40
    assert set(table["papers"]) == {row["paper"] for row in table["claim"]}


PLANTED = {
    "an unknown field": ("colour", "red", "unknown field 'colour'"),
    "an unknown status": ("status", "reproduced, mostly", "status 'reproduced, mostly' is unknown"),
    "an unknown paper": ("paper", "1234.56789", "paper '1234.56789' is not in [papers]"),
    "an unknown record": ("values", [["nowhere", "checks/x/value"]], "record 'nowhere' is not in RECORDS"),
    "a value short of its path": ("values", [["necessity"]], "is not [record, path(, format)]"),
    "a verdict that is not one": ("expect", [["necessity", "no PE at chance", "maybe"]], "is not [record, check"),
    "a placeholder without a value": ("ours", "{0} and {1} and {2}", "placeholders"),
}


def test_a_planted_fault_in_a_record_is_found() -> None:
    table = tomllib.loads(TEXT)
    table["records"]["necessity"]["colour"] = "red"
    del table["records"]["separation"]["command"]
    assert [p for p in problems(table) if "is not path, protocol and command" in p] == [
        f"record {name!r} is not path, protocol and command, each text" for name in ("necessity", "separation")
    ]
    assert set(claims.RECORDS) == set(tomllib.loads(TEXT)["records"])


@pytest.mark.parametrize("planted", list(PLANTED))
def test_a_planted_fault_in_the_table_is_found(planted: str) -> None:
    key, value, message = PLANTED[planted]
    table = tomllib.loads(TEXT)
    table["claim"][0][key] = value
    assert any(message in p for p in problems(table)), problems(table)


def test_the_generator_reads_the_file_and_the_installed_package_ships_it() -> None:
    assert claims.load_table(TEXT) == (claims.PAPERS, claims.CLAIMS)
    assert files("geoanalyze.experiments").joinpath(claims.TABLE).read_text(encoding="utf-8") == TEXT
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert claims.TABLE in pyproject["tool"]["setuptools"]["package-data"]["geoanalyze.experiments"]


def test_a_field_the_claims_do_not_have_is_refused_by_the_reader() -> None:
    with pytest.raises(TypeError, match="colour"):
        claims.load_table(TEXT.replace('paper_figure = "proof"', 'paper_figure = "proof"\ncolour = "red"', 1))
