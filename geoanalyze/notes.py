"""Notes for the user: facts about a run worth knowing, such as an offline fallback taken.

Library code records them with :func:`note`; the command line prints them on stderr once the
command has succeeded, and drops them when it fails, so a failure is one ``error:`` line.
Python callers read them with :func:`take`.
"""

from __future__ import annotations

_pending: list[str] = []


def note(message: str) -> None:
    """Record a note (each distinct message once)."""
    if message not in _pending:
        _pending.append(message)


def pending() -> tuple[str, ...]:
    """The notes recorded so far, without forgetting them."""
    return tuple(_pending)


def take() -> list[str]:
    """Return the recorded notes and forget them."""
    notes = list(_pending)
    _pending.clear()
    return notes
