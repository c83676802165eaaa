"""Careless option values across the commands: empty strings (an unset shell variable), sizes that
cannot fit, odd names. Each is one error line, exit 2, nothing written, inputs unchanged."""

from __future__ import annotations

import pytest

from .harness import Sandbox

DRIFT = "drift.txt"
WS = ("-t", "whitespace")
STRESS = ("rope:d=16", "--dataset", DRIFT, *WS, "--null-draws", "2", "--compare", "")

#: (command and arguments, the option given empty)
EMPTY_OPTIONS = [
    (("marginals", DRIFT), "-t"),
    (("marginals", DRIFT, *WS), "--split"),
    (("marginals", DRIFT, *WS), "--text-column"),
    (("marginals", DRIFT, *WS), "--cluster"),
    (("marginals", DRIFT, *WS), "-f"),
    (("marginals", DRIFT, *WS), "-o"),
    (("marginals", DRIFT, *WS), "--work-dir"),
    (("marginals", DRIFT, *WS), "--data-dir"),
    (("distances", DRIFT, *WS), "--metric"),
    (("distances", DRIFT, *WS), "--heatmap"),
    (("mds", DRIFT, *WS), "--basis"),
    (("mds", DRIFT, *WS), "--method"),
    (("mds", DRIFT, *WS), "--plot"),
    (("stress", *STRESS), "-t"),
    (("stress", *STRESS), "--layers"),
    (("stress", *STRESS), "--device"),
    (("stress", *STRESS), "--dtype"),
    (("stress", *STRESS), "--split"),
    (("stress", *STRESS), "--plot-dir"),
    (("report", *STRESS), "-o"),
    (("report", *STRESS), "-t"),
    (("train", "--steps", "1"), "-o"),
    (("train", "-o", "run", "--steps", "1"), "--pe"),
    (("train", "-o", "run", "--steps", "1"), "--task"),
    (("train", "-o", "run", "--steps", "1"), "--preset"),
    (("train", "-o", "run", "--steps", "1"), "--device"),
    (("train", "-o", "run", "--steps", "1"), "--config"),
    (("verify", "journey"), "--preset"),
    (("verify", "journey"), "-o"),
    (("datasets", "synthesize", "drift"), "-o"),
    (("datasets", "synthesize", "drift", "-o", "syn"), "--name"),
    (("datasets", "synthesize", "drift", "-o", "syn"), "--words"),
    (("encodings", "list"), "-f"),
]


@pytest.mark.parametrize(("args", "option"), EMPTY_OPTIONS, ids=[f"{' '.join(a[:1])}{o}" for a, o in EMPTY_OPTIONS])
@pytest.mark.parametrize("value", ["", " "], ids=["empty", "blank"])
def test_an_empty_option_value_is_refused_not_read_as_the_default(
    sandbox: Sandbox, args: tuple[str, ...], option: str, value: str
) -> None:
    sandbox.copy_sample(DRIFT)
    result = sandbox.refused(*_without(args, option), option, value)
    assert "empty" in result.errors[0] or "unknown" in result.errors[0], result.errors[0]


def _without(args: tuple[str, ...], option: str) -> tuple[str, ...]:
    """``args`` without ``option`` and its value: an option is given once (twice is refused)."""
    if option not in args:
        return args
    at = args.index(option)
    return args[:at] + args[at + 2 :]


def test_compare_empty_still_means_compare_nothing(sandbox: Sandbox) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.accepted("stress", *STRESS, "-f", "json")


ODD_VALUES = [
    (("marginals", "synthetic:drift,n=1e30"), ("cells",)),
    (("marginals", "synthetic:drift,n=100000000,length=10000"), ("cells",)),
    (("marginals", "synthetic:drift,length=100000,vocab=100000"), ("cells",)),
    (("marginals", "~no-such-user-here/corpus.txt", *WS), ("~no-such-user-here",)),
    (("stress", "", "--dataset", DRIFT, *WS), ("empty",)),
    (("stress", " ", "--dataset", DRIFT, *WS), ("empty",)),
    (("report", "", "--dataset", DRIFT, *WS, "-o", "page.md"), ("empty",)),
    (("stress", "rope:d=16,d=32", "--dataset", DRIFT, *WS), ("twice",)),
    (("stress", *STRESS[:-2], "--compare", "random:d=16,d=16"), ("twice",)),  # (STRESS's own --compare dropped)
    (("train", "-o", "run", "--steps", "1", "--set", "model.n_positions=1000000000"), ("memory",)),
]


@pytest.mark.parametrize(("args", "words"), ODD_VALUES, ids=[" ".join(a)[:50] for a, _ in ODD_VALUES])
def test_odd_values_are_one_line(sandbox: Sandbox, args: tuple[str, ...], words: tuple[str, ...]) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.refused(*args, words=words)


def test_a_missing_data_dir_is_named(sandbox: Sandbox) -> None:
    sandbox.copy_sample(DRIFT)
    sandbox.refused("marginals", "sst2", *WS, "--data-dir", "nowhere", words=("nowhere", "does not exist"))
    sandbox.refused("marginals", "sst2", *WS, "--data-dir", DRIFT, words=("is a file",))


def test_min_count_one_does_not_suggest_lowering_it(sandbox: Sandbox) -> None:
    sandbox.write("short.txt", "a b\nc d\n")
    result = sandbox.refused(
        "stress", "rope:d=16", "--dataset", "short.txt", *WS, "--min-count", "1", "--null-draws", "2", "--compare", ""
    )
    assert "lower --min-count" not in result.errors[0]
    sandbox.write("one.txt", "a\nc\n")
    result = sandbox.refused("distances", "one.txt", *WS, "--min-count", "1")
    assert "lower --min-count" not in result.errors[0]
