"""geoanalyze.io.serialise: a typed record's JSON from its fields, as their metadata say."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from geoanalyze.io import FLAT, IF_SET, NOT_IN_JSON, Record, serialise, to_jsonable
from geoanalyze.results import CheckpointInfo, LayerPeak, NullSettings, Provenance, Verdict


@dataclass(frozen=True)
class Inner(Record):
    name: str
    values: tuple[int, ...] = ()


@dataclass(frozen=True)
class Outer(Record):
    scores: Mapping[str, float] = field(metadata=FLAT)
    inner: Inner
    items: tuple[Inner, ...]
    table: np.ndarray
    hidden: str = field(default="secret", metadata=NOT_IN_JSON)
    extra: Mapping[str, int] | None = field(default=None, metadata=IF_SET)
    count: int | None = field(default=None, metadata=IF_SET)


def test_fields_in_order_as_their_metadata_say() -> None:
    outer = Outer({"a": 1.0, "b": 2.0}, Inner("x", (1, 2)), (Inner("y"),), np.arange(3))
    record = outer.to_dict()
    assert list(record) == ["a", "b", "inner", "items", "table"]  # flat first, hidden and unset left out
    assert record["inner"] == {"name": "x", "values": [1, 2]}
    assert record["items"] == [{"name": "y", "values": []}]
    assert record["table"] is outer.table  # numpy values are left to to_jsonable
    assert json.loads(outer.to_json())["table"] == [0, 1, 2]


def test_if_set_keeps_zero_and_drops_none_and_empty() -> None:
    base = Outer({}, Inner("x"), (), np.zeros(0))
    assert "count" not in base.to_dict() and "extra" not in base.to_dict()
    assert Outer({}, Inner("x"), (), np.zeros(0), count=0).to_dict()["count"] == 0
    assert "extra" not in Outer({}, Inner("x"), (), np.zeros(0), extra={}).to_dict()
    assert Outer({}, Inner("x"), (), np.zeros(0), extra=MappingProxyType({"k": 1})).to_dict()["extra"] == {"k": 1}


@given(st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.floats(allow_nan=False), st.none())))
def test_mappings_and_tuples_become_plain_json(values: dict[str, object]) -> None:
    nested = {"tuple": tuple(values.values()), "map": MappingProxyType(values)}
    assert serialise(nested) == {"tuple": list(values.values()), "map": dict(values)}


def test_results_records_match_asdict() -> None:
    """The records the hand-written to_dict bodies gave: asdict, tuples as lists."""
    peak = LayerPeak(1, 2.0, 3, 0.5, 4, 0.1, {"shape": [1, 2]}, [1, 2, 3])
    assert peak.to_dict() == asdict(peak)
    info = CheckpointInfo("p", "local", "Bert", "bert", "learned", {"kind": "learned"}, 8, 2, 100, {}, ("a",))
    assert info.to_dict() == {**asdict(info), "notes": ["a"]}
    verdict = Verdict("better", None, None, None, None, "s", ("lag",), 10)
    assert verdict.to_dict() == {**asdict(verdict), "not_ranked": ["lag"]}
    null = NullSettings(draws=10, seed=3, tests=2)
    assert list(null.to_dict()) == ["kind", "draws", "correction", "tests", "alpha", "seed"]


def test_to_jsonable_reads_typed_records() -> None:
    run = Provenance("1.0", "geoanalyze stress x", None)
    assert to_jsonable({"run": run}) == {"run": {"version": "1.0", "command": "geoanalyze stress x", "seed": None}}
    assert run.markdown == "geoanalyze 1.0: `geoanalyze stress x`"
