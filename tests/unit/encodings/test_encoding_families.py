"""The encodings registry: families registered with @encoding carry builder, parameters and width.

The tables and error messages of every spec are pinned in tests/unit/encodings/test_encoding_registry.py;
this file checks the registry's own contract: the decorator, typed parameters, width rules,
listing order, and that learned: / model: come from the checkpoints layer by the entry point
group, so the encodings package never imports a layer above it.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import numpy as np
import pytest
from helpers import assert_python_runs

from geoanalyze.encodings import REGISTRY, EncodingContext, Parameter, encoding, get_encoding, spec_width
from geoanalyze.encodings.registry import PLUGIN_GROUP
from geoanalyze.errors import InputError


def test_listing_order_is_the_registry_order() -> None:
    assert list(REGISTRY) == ["sinusoidal", "rope", "alibi", "random", "mds", "learned", "file", "model"]


@pytest.mark.parametrize(
    ("spec", "width"),
    [
        ("rope:d=64", 64),
        ("sinusoidal:base=100,d=16", 16),
        ("random:d=12,seed=3", 12),
        ("rope", None),
        ("alibi:heads=8", None),  # ALiBi's width is no parameter of its spec
        ("mds:rank=2", None),
        ("learned:d=3", None),
        ("rope:d=abc", None),  # get_encoding reports the bad value
        ("nope:d=3", None),
    ],
)
def test_the_width_rule_is_the_family_s(spec: str, width: int | None) -> None:
    assert spec_width(spec) == width


def test_each_family_declares_its_width_parameter() -> None:
    widths = {name: family.width for name, family in REGISTRY.items()}
    assert widths == {name: "d" if name in ("sinusoidal", "rope", "random") else None for name in REGISTRY}
    for family in REGISTRY.values():
        assert family.width is None or family.width in {parameter.name for parameter in family.parameters}


def test_a_parameter_is_typed_and_takes_its_default_only_when_absent() -> None:
    d = Parameter("d", int, default_width=True)
    assert d.value({}, width=48) == 48
    assert d.value({"d": 0.0}, width=48) == 0  # an explicit 0 reaches the encoding's own check
    assert isinstance(d.value({"d": 8.0}), int)
    with pytest.raises(InputError, match=r"d must be an integer, got 6\.5"):
        d.value({"d": 6.5})
    assert Parameter("base", float, 10000.0).value({}) == 10000.0
    assert Parameter("head", int).value({}) is None


@pytest.fixture
def scratch_family():
    """Registers a throwaway family for one test, removed afterwards."""
    names = set(REGISTRY)
    yield
    for name in set(REGISTRY.families) - names:
        del REGISTRY.families[name]


@pytest.mark.usefixtures("scratch_family")
def test_the_decorator_registers_builder_parameters_and_width() -> None:
    params = (Parameter("d", int, shown="width", default_width=True), Parameter("scale", float, 1.0, "1"))

    @encoding("ramp", "i * scale in every column", params=params, width="d", order=45)
    def ramp(positions: np.ndarray, d: int, scale: float) -> np.ndarray:
        return np.repeat(positions[:, None] * scale, d, axis=1).astype(np.float64)

    assert ramp(np.arange(2), d=1, scale=2.0).tolist() == [[0.0], [2.0]]  # returned unchanged
    assert list(REGISTRY).index("ramp") == list(REGISTRY).index("random") + 1
    np.testing.assert_array_equal(get_encoding("ramp:d=3,scale=0.5").vectors([0, 4]), [[0, 0, 0], [2, 2, 2]])
    assert get_encoding("ramp").vectors([1], EncodingContext(width=5)).shape == (1, 5)
    assert spec_width("ramp:d=7") == 7
    assert REGISTRY["ramp"].record() == {
        "name": "ramp",
        "summary": "i * scale in every column",
        "parameters": {"d": "width", "scale": "1"},
        "takes_path": False,
    }
    with pytest.raises(InputError, match="unknown parameter 'base' for ramp; it takes d, scale"):
        get_encoding("ramp:base=2")
    with pytest.raises(InputError, match="d must be an integer"):
        get_encoding("ramp:d=2.5").vectors([0])


@pytest.mark.usefixtures("scratch_family")
def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="'rope' is registered twice"):
        encoding("rope", "again")(lambda positions: positions)


def test_learned_and_model_come_from_the_checkpoints_layer() -> None:
    modules = {entry.value for entry in entry_points(group=PLUGIN_GROUP)}
    assert modules == {"geoanalyze.checkpoints.encodings"}
    for name in ("learned", "model"):
        assert REGISTRY[name].resolve.__module__ == "geoanalyze.checkpoints.encodings"
        assert REGISTRY[name].takes_path


def test_the_encodings_package_imports_no_layer_above_it() -> None:
    code = (
        "import sys, geoanalyze.encodings as e\n"
        "above = ('geoanalyze.checkpoints', 'geoanalyze.models', 'geoanalyze.train', 'geoanalyze.analysis')\n"
        "assert not [m for m in sys.modules if m.startswith(above)], sorted(sys.modules)\n"
        "e.get_encoding('rope:d=8').vectors([0, 1])\n"
        "assert 'learned' in e.REGISTRY and 'geoanalyze.checkpoints.encodings' in sys.modules\n"
        "assert 'torch' not in sys.modules\n"
    )
    assert_python_runs(code)


def test_which_target_tables_set_the_compared_width() -> None:
    """A target's table sets the width its compared encodings take, unless that width is the family's
    own dimension (an MDS rank, ALiBi's heads)."""
    from geoanalyze.encodings import takes_model_width

    assert takes_model_width("sinusoidal:d=64") and takes_model_width("rope") and takes_model_width("file:p.npy")
    assert not takes_model_width("mds:rank=4") and not takes_model_width("alibi:heads=8")
    assert takes_model_width("<function>")  # a callable's table: a model width, as before
