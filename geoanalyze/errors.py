"""The errors a user sees.

Every failure a user can cause (a missing file, an unknown name, a corrupt counts file)
is raised as a :class:`GeoanalyzeError` whose message names the problem *and* the fix in
one line. The command line prints that line and exits with :attr:`GeoanalyzeError.exit_code`;
it never shows a traceback unless ``--debug`` is given.
"""

from __future__ import annotations


class GeoanalyzeError(Exception):
    """Base class of every error meant for a user. ``exit_code`` is what the CLI returns."""

    exit_code = 2


class InputError(GeoanalyzeError):
    """Bad input: a file, an option or a value the user gave."""


class DataNotFoundError(InputError):
    """A corpus, tokenizer or checkpoint that could not be found offline or online."""


class FormatError(InputError):
    """A file that is not what it claims to be (corrupt, foreign or of an unknown version)."""


class IncompatibleError(InputError):
    """Two inputs that cannot be combined (counts of different tokenizers, say)."""


class ThresholdError(GeoanalyzeError):
    """A ``--fail-above`` threshold was crossed: the run worked, the checkpoint did not pass."""

    exit_code = 1


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message (its type when empty), cut to ``limit`` characters,
    for quoting a library's error inside one of ours."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else type(exc).__name__
