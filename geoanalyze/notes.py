"""Notes for the user: facts about a run worth knowing, such as an offline fallback taken.

Library code records them with :func:`note` in the collector of the run under way: a run opens one
(:func:`collecting`), and what it collected is the run's (``StressResult.notes``) and, when runs nest,
the enclosing run's too. The command line opens one per command and prints its notes on stderr once the
command has succeeded, and drops them when it fails, so a failure is one ``error:`` line. Outside any
run, notes go to the session's collector: Python callers read it with :func:`take`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Notes:
    """The notes of one run, each distinct message once, in the order recorded."""

    messages: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        if message not in self.messages:
            self.messages.append(message)


_SESSION = Notes()  # where notes go outside any run
_current: ContextVar[Notes | None] = ContextVar("notes", default=None)


def _collector() -> Notes:
    return _current.get() or _SESSION


@contextmanager
def collecting() -> Iterator[Notes]:
    """A collector for one run; on leaving, its notes join the enclosing collector too."""
    outer, collected = _collector(), Notes()
    token = _current.set(collected)
    try:
        yield collected
    finally:
        _current.reset(token)
        for message in collected.messages:
            outer.add(message)


def note(message: str) -> None:
    """Record a note in the current run's collector (each distinct message once)."""
    _collector().add(message)


def pending() -> tuple[str, ...]:
    """The notes the current collector holds, without forgetting them."""
    return tuple(_collector().messages)


def take() -> list[str]:
    """Return the current collector's notes and forget them."""
    collected = _collector()
    notes, collected.messages = collected.messages, []
    return notes
