"""Campaign 3, numbers at the edges of option values: nan, inf, -0, 1e309, hex, underscores, a
leading '+', surrounding whitespace, other scripts' digits (Arabic-Indic, full-width), a decimal
comma. Refused in one line naming the option, or read as the plain number gives the plain result."""

from __future__ import annotations

import json

import pytest

from .harness import Sandbox

C = ["drift.txt", "-t", "whitespace"]
S = ["stress", "rope:d=16", "--dataset", *C, "--compare", "", "--null-draws", "2"]
ROPE16_SCALED = 0.05811681582577066  # stress rope:d=16 on drift.txt (whitespace), scaled stress

REFUSED: list[tuple[list[str], str, str]] = [
    *[(["marginals", *C], "--limit", v) for v in ("nan", "inf", "-0", "1e309", "0x10", "٥٠", "５０", "1e2", "5.5")],
    *[(["marginals", *C], "--max-length", v) for v in ("nan", "-0", "0x8", "٨", "8.5")],
    *[(["distances", *C], "--min-count", v) for v in ("inf", "-0", "1e1", "١٠")],
    *[(["marginals", *C], "--sample", v) for v in ("nan", "inf", "-inf", "-0", "1e309", "0x1p-1", "٠٫٥", "0,5")],
    *[(["mds", *C], "--scale", v) for v in ("nan", "inf", "-0", "1e309", "0x10", "٢", "1e-400")],
    *[(["mds", *C], "--rank", v) for v in ("nan", "-0", "0x4")],
    *[(S, "--null-draws", v) for v in ("inf", "0x2")],
    *[(S, "--width", v) for v in ("nan", "-0", "1e1")],
]


@pytest.mark.parametrize(("args", "option", "value"), REFUSED, ids=[f"{a[0]}{o}={v!r}" for a, o, v in REFUSED])
def test_an_edge_number_is_refused_naming_the_option(
    sandbox: Sandbox, args: list[str], option: str, value: str
) -> None:
    sandbox.copy_sample("drift.txt")
    run = sandbox.refused(*args, option, value)
    assert option in run.errors[0] or option.lstrip("-") in run.errors[0], run.errors[0]


SAME: list[tuple[str, str, int]] = [
    ("--limit", "+50", 50),
    ("--limit", " 50 ", 50),
    ("--limit", "50\n", 50),
    ("--limit", "1_000", 1000),
    ("--limit", "0050", 50),
    ("--limit", "50.0", 50),
]


@pytest.mark.parametrize(("option", "value", "texts"), SAME, ids=[f"{o}={v!r}" for o, v, _ in SAME])
def test_an_edge_spelling_of_a_count_is_the_count(sandbox: Sandbox, option: str, value: str, texts: int) -> None:
    sandbox.copy_sample("drift.txt")
    report = json.loads(sandbox.accepted("marginals", *C, option, value, "-f", "json").stdout)
    assert report["n_sequences"] == texts


@pytest.mark.parametrize("value", ["+8", " 8", "8 "])
def test_an_edge_spelling_of_max_length(sandbox: Sandbox, value: str) -> None:
    sandbox.copy_sample("drift.txt")
    report = json.loads(sandbox.accepted("marginals", *C, "--max-length", value, "-f", "json").stdout)
    assert report["n_positions"] == 8


@pytest.mark.parametrize("value", ["+0.5", " 0.5 ", "5e-1", "0.50"])
def test_an_edge_spelling_of_a_fraction_samples_the_same_texts(sandbox: Sandbox, value: str) -> None:
    sandbox.copy_sample("drift.txt")
    plain = json.loads(sandbox.accepted("marginals", *C, "--sample", "0.5", "-f", "json").stdout)
    odd = json.loads(sandbox.accepted("marginals", *C, "--sample", value, "-f", "json").stdout)
    assert odd["n_sequences"] == plain["n_sequences"] and odd["totals"] == plain["totals"]


@pytest.mark.parametrize(("value", "plain"), [("+2", "2"), ("1_0", "10"), (" 2 ", "2")])
def test_an_edge_spelling_of_a_scale_is_the_scale(sandbox: Sandbox, value: str, plain: str) -> None:
    sandbox.copy_sample("drift.txt")
    expected = json.loads(sandbox.accepted("mds", *C, "--scale", plain, "-f", "json").stdout)
    got = json.loads(sandbox.accepted("mds", *C, "--scale", value, "-f", "json").stdout)
    assert got["stress"] == pytest.approx(expected["stress"], rel=1e-12)


@pytest.mark.parametrize("value", ["inf", "1e309", "-inf"])
def test_a_gate_at_an_infinite_limit_is_refused(sandbox: Sandbox, value: str) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused(*S, "--fail-above", f"scaled_stress={value}", words=("finite",))


@pytest.mark.parametrize(("value", "code"), [("-0", 1), ("+0.5", 0), (" 0.5", 0), ("5e-2", 1), ("1_0", 0)])
def test_a_gate_at_an_edge_spelling_compares_as_the_number(sandbox: Sandbox, value: str, code: int) -> None:
    sandbox.copy_sample("drift.txt")
    run = sandbox.run(*S, "--fail-above", f"scaled_stress={value}", "-f", "json")
    assert run.code == code, str(run)
    assert json.loads(run.stdout)["scores"]["rope:d=16"]["scaled_stress"] == pytest.approx(ROPE16_SCALED, rel=1e-9)
