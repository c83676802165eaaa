"""Progress on stderr, so stdout carries only results.

On a terminal: rich bars. Elsewhere (CI logs, ``2> file``, pipes): plain lines at an interval,
``progress: counting sst2: 3000/67349 (4%), elapsed 12s, ETA 4m31s``, so a long run is never
silent in a log. ``GEOANALYZE_PROGRESS_SECONDS`` sets the interval (default 30; 0 prints every
update; a word, a negative number or nan is the default).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

stderr_console = Console(stderr=True)
DEFAULT_INTERVAL = 30.0


def duration(seconds: float) -> str:
    """12s, 4m31s, 2h05m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def progress_interval() -> float:
    """Seconds between plain progress lines (GEOANALYZE_PROGRESS_SECONDS, default 30)."""
    try:
        value = float(os.environ.get("GEOANALYZE_PROGRESS_SECONDS", DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    # garbage (a word, a negative number, nan) is the default, not a line at every update
    return value if value >= 0 else DEFAULT_INTERVAL


class _PlainLine:
    """One task's progress as plain lines on stderr, at most one per interval, and one at the end."""

    def __init__(self, description: str, total: int, interval: float, clock: Callable[[], float]) -> None:
        self.description, self.total, self.interval, self.clock = description, total, interval, clock
        self.done = 0
        self.info = ""
        self.began = self.last = clock()
        self.finished = False
        self.printed = False

    def __call__(self, done: int, info: str | None = None) -> None:
        self.done += done
        if info is not None:
            self.info = info
        now = self.clock()
        complete = self.total > 0 and self.done >= self.total
        # A task that ends within one interval prints nothing (short runs keep stderr clean); a long
        # one prints a line per interval and one at its end.
        due = now - self.last >= self.interval if self.interval > 0 else True
        if not self.finished and (due or (complete and self.printed)):
            self.last = now
            self.finished = complete
            self.printed = True
            print(self.line(now), file=sys.stderr, flush=True)

    def line(self, now: float) -> str:
        elapsed = now - self.began
        parts = [f"progress: {self.description}: {self.done}/{self.total}"]
        if self.total > 0:
            parts[0] += f" ({100 * self.done / self.total:.0f}%)"
        if self.info:
            parts.append(self.info)
        parts.append(f"elapsed {duration(elapsed)}")
        if 0 < self.done < self.total:
            parts.append(f"ETA {duration(elapsed / self.done * (self.total - self.done))}")
        return ", ".join(parts)


class ProgressBars:
    """A context manager handing out per-task progress: ``bars.track(description, total)(advance)``.

    ``advance(n, info=...)`` moves a task by ``n`` items; ``info`` (e.g. ``"loss 0.53"``) is shown
    beside it. Bars render when stderr is a terminal; otherwise plain lines go to stderr at an
    interval (``plain=False`` silences them). ``enabled=False`` shows nothing.
    """

    def __init__(self, enabled: bool = True, plain: bool | None = None, clock: Callable[[], float] = time.monotonic):
        self.enabled = enabled
        terminal = stderr_console.is_terminal
        self.plain = enabled and not terminal if plain is None else enabled and plain
        self.clock = clock
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=stderr_console,
            transient=True,
            disable=not enabled or self.plain,
        )

    def __enter__(self) -> ProgressBars:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._progress.stop()

    def track(self, description: str, total: int) -> Callable[..., None]:
        """Add a task; return the function that advances it by a number of items (and sets its info)."""
        if self.plain:
            return _PlainLine(description, total, progress_interval(), self.clock)
        task = self._progress.add_task(description, total=total, info="")

        def advance(done: int, info: str | None = None) -> None:
            if info is None:
                self._progress.update(task, advance=done)
            else:
                self._progress.update(task, advance=done, info=info)

        return advance


class CountProgress:
    """A streamed count's shards done and tokens/s on stderr: a bar on a terminal, else a plain
    line at most every ``every`` seconds (default :func:`progress_interval`), also inside a long
    shard, and a last one when the job ends. The counting runner sends it its events:
    :meth:`add_tokens` (a batch counted in this process) and :meth:`shard_done`.
    """

    def __init__(self, description: str, n_shards: int, enabled: bool = True, every: float | None = None):
        self.description, self.n_shards = description, n_shards
        self.every = progress_interval() if every is None else every
        self.tty = enabled and sys.stderr.isatty()
        self.plain = enabled and not self.tty
        self.tokens = self.done = 0
        self.start = self._last_line = time.perf_counter()
        self._printed = False
        self._bar: Progress | None = None
        if self.tty:
            columns = (TextColumn("shards  {task.fields[rate]}"), TimeElapsedColumn())
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), *columns,
                                 console=stderr_console, transient=True)  # fmt: skip
            self._task = self._bar.add_task(description, total=n_shards, rate="")
            self._bar.start()

    def rate(self) -> float:
        return self.tokens / max(time.perf_counter() - self.start, 1e-9)

    def add_tokens(self, tokens: int) -> None:
        self.tokens += tokens
        if self._bar is not None:
            self._bar.update(self._task, rate=f"{_si(self.tokens)} tokens, {_si(self.rate())} tokens/s")
        self._line(final=False)

    def _line(self, final: bool) -> None:
        now = time.perf_counter()
        if not self.plain or (now - self._last_line < self.every and not (final and self._printed)):
            return  # a job shorter than the interval prints nothing; one that printed ends with a line
        self._last_line, self._printed = now, True
        share = f" ({100 * self.done // max(self.n_shards, 1)}%)"
        print(
            f"progress: {self.description}: {self.done}/{self.n_shards} shards{share}, {_si(self.tokens)} tokens, "
            f"{_si(self.rate())} tokens/s, elapsed {duration(now - self.start)}",
            file=sys.stderr,
            flush=True,
        )

    def shard_done(self, tokens: int, counted_here: bool) -> None:
        """A shard is done; its ``tokens`` join the total unless its batches were reported already."""
        self.done += 1
        if counted_here:
            self.add_tokens(tokens)
        if self._bar is not None:
            self._bar.update(self._task, advance=1)
        self._line(final=self.done == self.n_shards)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


class ShardCallbackProgress(CountProgress):
    """A plain ``advance(n)`` callback (another command's progress bar) advanced by one per shard."""

    def __init__(self, advance: Callable[[int], None]):
        super().__init__("", 0, enabled=False)
        self._advance = advance

    def shard_done(self, tokens: int, counted_here: bool) -> None:
        self._advance(1)


def _si(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f}"
