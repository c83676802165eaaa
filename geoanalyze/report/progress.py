"""Progress bars on stderr (rich), so stdout carries only results."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

stderr_console = Console(stderr=True)


class ProgressBars:
    """A context manager handing out per-task bars: ``bars.track(description, total)(advance)``.

    Bars render only when stderr is a terminal; in pipes and CI they stay silent.
    """

    def __init__(self, enabled: bool = True):
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=stderr_console,
            transient=True,
            disable=not enabled,
        )

    def __enter__(self) -> ProgressBars:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._progress.stop()

    def track(self, description: str, total: int) -> Callable[[int], None]:
        """Add a bar; return the function that advances it by a number of items."""
        task = self._progress.add_task(description, total=total)

        def advance(done: int) -> None:
            self._progress.advance(task, done)

        return advance
