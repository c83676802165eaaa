"""docs/long-context.md shows real output: its blocks of commands are regenerated as docs/usage.md's are
(``python tests/docs/regenerate_usage.py --page docs/long-context.md``; usage_blocks.py has the convention),
every block that shows a command is one of them, and the slow job checks that each is what its commands
print now (they count the standard library and 131,072-token sequences: minutes)."""

from __future__ import annotations

import pytest
from test_usage_blocks import check_current, fenced_commands
from usage_blocks import REPO_ROOT, blocks, sessions

PAGE = REPO_ROOT / "docs" / "long-context.md"
BLOCKS = blocks(PAGE.read_text(encoding="utf-8"))
SESSIONS = sessions(BLOCKS)


def test_every_block_of_commands_on_the_page_is_regenerated() -> None:
    marked = {block.start - 1 for block in BLOCKS}
    unmarked = [line for start, line in fenced_commands(PAGE.read_text(encoding="utf-8")) if start not in marked]
    assert not unmarked, f"blocks of commands with no <!-- regenerate: SESSION --> marker: {unmarked}"
    assert {"long-drift", "long-study", "long-llama", "long-docs"} <= set(SESSIONS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_a_session_of_the_page_is_current(name: str) -> None:
    check_current(name, SESSIONS, "docs/long-context.md")
