"""The `geoanalyze` command.

Exit codes: 0 success; 1 a crossed ``--fail-above`` threshold; 2 bad input (one ``error:`` line);
3 an internal error (a bug: report it); 130 interrupted (Ctrl-C, SIGTERM, SIGHUP of a closed
terminal, SIGQUIT; staged outputs are removed); 141 (128 + SIGPIPE) stdout was closed by its reader
(``geoanalyze ... | head``): the run stops quietly, as other Unix tools do.

A stdout closed before the start (``geoanalyze ... >&-``) is refused (exit 2: the results would go
nowhere); a closed stderr discards the messages; text a stream cannot encode
(``PYTHONIOENCODING=ascii``) is written with backslash escapes.
"""

from __future__ import annotations

import os
import signal
import sys

USAGE_EXIT = 2  # what typer's usage errors carry, and every bad input's code
INTERRUPTED_EXIT = 130
STDOUT_CLOSED_EXIT = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C or SIGTERM before main() runs (the imports take a while): nothing is written yet,
    so say so and stop at once."""
    os.write(2, b"error: interrupted\n")
    os._exit(INTERRUPTED_EXIT)


#: the signals that end a run as Ctrl-C does (staged outputs removed, exit 130), besides SIGINT: a
#: kill or CI timeout, a closed terminal or ssh session, Ctrl-\ (SIGQUIT)
TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name))


def _install_startup_handlers() -> None:
    """Installed before the heavy imports below, only when this process is the ``geoanalyze``
    program (not a program importing the module), and never over a signal its parent ignores."""
    program = sys.argv[0] if sys.argv else ""
    if os.path.basename(program) != "geoanalyze" and not program.endswith(os.path.join("geoanalyze", "__main__.py")):
        return
    if "__mp_main__" in sys.modules:
        # a counting worker, spawned: it runs the program's script again as __mp_main__. The pool
        # stops it with SIGTERM when a job fails; only the program itself says "error: interrupted"
        return
    for signum in TERMINATING:
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _interrupted_while_starting)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)


#: whether the program started with its stdout closed (``>&-``: Python's sys.stdout is None)
STARTED_WITHOUT_STDOUT = sys.stdout is None


def _stand_in_for_closed_streams() -> None:
    """A closed stdout or stderr (None in Python) is given /dev/null, so the imports below (which
    probe the terminal) and the messages work; :func:`main` refuses to run without a stdout."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the life of the process)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115


_install_startup_handlers()
_stand_in_for_closed_streams()

from typing import Annotated  # noqa: E402

import typer  # noqa: E402

from .. import __version__  # noqa: E402
from . import datasets, pipeline, stress, track, training  # noqa: E402
from .options import Command, Group  # noqa: E402

app = typer.Typer(
    name="geoanalyze",
    help="Geometry of positional encodings: corpus -> per-position marginals -> Hellinger distances -> MDS.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=Group,
)
app.command(cls=Command)(stress.stress)
app.command(cls=Command)(stress.report)
app.command(cls=Command)(pipeline.marginals)
app.command(cls=Command)(pipeline.distances)
app.command(cls=Command)(pipeline.mds)
app.command(cls=Command)(training.train)
app.command(cls=Command)(training.verify)
app.command(cls=Command)(track.track)
app.add_typer(datasets.app, name="datasets", cls=Group)
app.add_typer(stress.encodings_app, name="encodings", cls=Group)


def _version(value: bool) -> None:
    if value:
        print(f"geoanalyze {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Geometry of positional encodings in transformers."""
    if debug:
        os.environ["GEOANALYZE_DEBUG"] = "1"


class _StdoutClosed(BaseException):
    """stdout's reader went away (``| head``). A BaseException, so no ``except Exception`` on the way
    turns it into an error; staged outputs are removed by their ``finally`` blocks as it unwinds."""


class _GuardedStdout:
    """sys.stdout, with a closed pipe raised as :class:`_StdoutClosed` (rich would otherwise exit 1,
    the threshold code, and typer would turn a BrokenPipeError into exit 1 too)."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)  # type: ignore[attr-defined,no-any-return]
        except BrokenPipeError:
            raise _StdoutClosed from None

    def flush(self) -> None:
        try:
            self._stream.flush()  # type: ignore[attr-defined]
        except BrokenPipeError:
            raise _StdoutClosed from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _silence(stream: object) -> None:
    """Point a closed stdout at /dev/null, so Python's final flush of what is left in its buffer does
    not print "Exception ignored ... BrokenPipeError"."""
    try:
        descriptor = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return  # not a real file (captured output): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


def _os_error_message(exc: OSError) -> str:
    """An OSError about a file the user named (a path component too long, a full disk, permissions):
    one line naming the path, exit 2 (the user's environment, not our bug)."""
    where = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
    reason = exc.strerror or type(exc).__name__
    return f"{where}: {reason}; check the path, its permissions and the free space"


def _terminated(signum: int, frame: object) -> None:
    # Every staged folder goes first (io.staged_folder), whatever the code it interrupts does with the
    # interrupt; then as Ctrl-C: a KeyboardInterrupt is no Exception, so no ``except Exception`` on the
    # way (a reader mapping library errors to ours) turns the termination into another error.
    from ..io import remove_staged

    remove_staged()
    raise KeyboardInterrupt


def _install_run_handlers() -> None:
    """A terminated run (a CI timeout, kill, a closed terminal) unwinds like an interrupt, so staged
    outputs are removed; a signal the parent ignores (``nohup`` and SIGHUP) stays ignored."""
    for signum in TERMINATING:
        if signum == signal.SIGTERM or signal.getsignal(signum) in (signal.SIG_DFL, _interrupted_while_starting):
            signal.signal(signum, _terminated)
    if signal.getsignal(signal.SIGINT) == _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _escape_what_cannot_be_encoded() -> None:
    """A file name or text a stream's encoding lacks (``PYTHONIOENCODING=ascii``, a C locale) is
    written as a backslash escape, not a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main() -> None:
    """Console-script entry point: usage errors, too, are one ``error:`` line and exit code 2."""
    _install_run_handlers()
    _escape_what_cannot_be_encoded()
    if STARTED_WITHOUT_STDOUT:
        print(
            "error: stdout is closed (`>&-`), so the results would go nowhere; "
            "send them somewhere, e.g. `> /dev/null` to discard them",
            file=sys.stderr,
        )
        sys.exit(USAGE_EXIT)
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)  # type: ignore[assignment]
    try:
        code = _run()
        sys.stdout.flush()
    except _StdoutClosed:
        _silence(stdout)
        code = STDOUT_CLOSED_EXIT
    finally:
        sys.stdout = stdout
    sys.exit(code)


def _run() -> int:
    """Run the command; return its exit code, printing the one ``error:`` line of a failure."""
    from ..api import caching

    try:
        with caching():  # --no-cache turns caches off inside (common.cache_option), for this command only
            code = app(standalone_mode=False)
    except typer.TyperException as exc:
        if exc.exit_code != USAGE_EXIT:
            return _internal_error(exc)  # typer's own failures that are not usage errors (none today)
        # a usage error (an unknown option, a bad value, ...): its context names the command
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "geoanalyze"
        message = " ".join(exc.format_message().split())
        print(f"error: {message} (see `{where} --help`)", file=sys.stderr)
        return USAGE_EXIT
    except (typer.Abort, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT
    except _StdoutClosed:
        raise
    except MemoryError as exc:
        return _out_of_memory(exc)
    except RuntimeError as exc:
        # torch's allocators: "DefaultCPUAllocator: can't allocate memory", CUDA's OutOfMemoryError
        text = str(exc)
        if "can't allocate memory" in text or "out of memory" in text.lower():
            return _out_of_memory(exc)
        return _internal_error(exc)
    except OSError as exc:
        if exc.filename is None:
            return _internal_error(exc)
        if os.environ.get("GEOANALYZE_DEBUG"):
            raise
        print(f"error: {_os_error_message(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        return _internal_error(exc)
    if code == INTERRUPTED_EXIT:
        # typer turns a KeyboardInterrupt (Ctrl-C) inside a command into a silent exit 130
        print("error: interrupted", file=sys.stderr)
    return code if isinstance(code, int) else 0


def _out_of_memory(exc: BaseException) -> int:
    """Sizes the user asked for (a width, a position count, a corpus) that do not fit in memory: exit 2."""
    if os.environ.get("GEOANALYZE_DEBUG"):
        raise exc
    detail = " ".join(str(exc).split())[:200]
    print(
        f"error: not enough memory ({detail or type(exc).__name__}); ask for smaller sizes (fewer positions, "
        "a smaller width or corpus) or run on a machine with more memory",
        file=sys.stderr,
    )
    return 2


def _internal_error(exc: Exception) -> int:
    # A bug, or a failure of a library underneath: not bad input (2) nor a failed threshold (1).
    if os.environ.get("GEOANALYZE_DEBUG"):
        raise exc
    message = " ".join(str(exc).split())[:300]
    print(
        f"error: internal error ({type(exc).__name__}: {message}); rerun with --debug for the traceback and report it",
        file=sys.stderr,
    )
    return 3
