"""The harness itself: a refused run is seen as one, a changed input is caught."""

from __future__ import annotations

from .harness import Sandbox, tree


def test_an_unknown_option_is_one_error_line(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    sandbox.refused("marginals", "drift.txt", "--no-such-option", words=("--no-such-option",))


def test_a_good_run_passes(sandbox: Sandbox) -> None:
    sandbox.copy_sample("drift.txt")
    result = sandbox.accepted("marginals", "drift.txt", "-t", "whitespace", "-f", "json")
    assert '"positions"' in result.stdout or result.stdout.strip().startswith("{")


def test_the_harness_sees_a_changed_byte(sandbox: Sandbox) -> None:
    path = sandbox.copy_sample("drift.txt")
    before = tree(sandbox.root)
    path.write_bytes(path.read_bytes()[:-1] + b"?")
    assert tree(sandbox.root) != before
