"""The `geoanalyze` command."""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated

import typer

from .. import __version__
from . import datasets, pipeline, stress, training


def _flags_without_a_type() -> None:
    """--help lists a flag with no value type: typer's rich help shows ``<bool>`` for it, which reads
    as if the flag took a value (``--no-cache <bool>``)."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_geoanalyze", False):
        return

    def display_type_rich(self: TyperOption, ctx: object) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._geoanalyze = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign,assignment]


_flags_without_a_type()

app = typer.Typer(
    name="geoanalyze",
    help="Geometry of positional encodings: corpus -> per-position marginals -> Hellinger distances -> MDS.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command()(stress.stress)
app.command()(stress.report)
app.command()(pipeline.marginals)
app.command()(pipeline.distances)
app.command()(pipeline.mds)
app.command()(training.train)
app.command()(training.verify)
app.add_typer(datasets.app, name="datasets")
app.add_typer(stress.encodings_app, name="encodings")


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


def _terminated(signum: int, frame: object) -> None:
    raise typer.Abort


def main() -> None:
    """Console-script entry point: usage errors, too, are one ``error:`` line and exit code 2."""
    from typer._click import exceptions

    # A terminated run (a CI timeout, kill) unwinds like an interrupt, so staged outputs are removed.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        code = app(standalone_mode=False)
    except exceptions.NoArgsIsHelpError as exc:
        exc.show()  # a bare command group prints its help, as in standalone mode
        sys.exit(exc.exit_code)
    except exceptions.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "geoanalyze"
        message = " ".join(exc.format_message().split())
        print(f"error: {message} (see `{where} --help`)", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        # A bug, or a failure of a library underneath: not bad input (2) nor a failed threshold (1).
        if os.environ.get("GEOANALYZE_DEBUG"):
            raise
        message = " ".join(str(exc).split())[:300]
        print(
            f"error: internal error ({type(exc).__name__}: {message}); rerun with --debug for the traceback "
            "and report it",
            file=sys.stderr,
        )
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)
