"""The cache: results of a job under a hash of everything that determines them.

Counts, distances and forward passes are cached as safetensors files in
``$GEOANALYZE_CACHE_DIR`` (else the platform's user cache folder), one folder per kind. A cache
is an optimisation only: one that cannot be read holds nothing, one that cannot be written
leaves a note and never fails the job.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import notes
from .errors import first_line

CACHE_ENV = "GEOANALYZE_CACHE_DIR"


def cache_entry(folder: str, key_parts: dict[str, Any]) -> Path:
    """The cache file of a job: a hash of everything that determines its result, in one folder per kind."""
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir() / folder / f"{key}.safetensors"


def cache_dir() -> Path:
    """Where counts are cached: $GEOANALYZE_CACHE_DIR, else the platform's user cache dir."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("geoanalyze"))


def cache_holds(path: Path) -> bool:
    """Whether a cache entry exists; a cache that cannot even be looked at (a name too long, no
    permission) holds nothing, and its write will say why in a note."""
    try:
        return path.is_file()
    except OSError:
        return False


def write_cache(write: Callable[[], None]) -> bool:
    """Run ``write`` (a cache write); a cache that cannot be written (read-only, a file, a full disk)
    never fails the job: a note says the cache was not written and why. Returns whether it was."""
    try:
        write()
    except Exception as exc:  # any failure: the result is correct, only the cache is missing
        note_cache_failure(exc)
        return False
    return True


def note_cache_failure(exc: BaseException) -> None:
    """The one note of a cache that could not be written."""
    if any(message.startswith("the cache in ") for message in notes.pending()):
        return  # one note per run, the first failure's reason
    notes.note(
        f"the cache in {cache_dir()} was not written ({cache_failure(exc)}); the results are unaffected, "
        f"but the next run computes them again: make it writable or set {CACHE_ENV} to a writable folder"
    )


def cache_failure(exc: BaseException) -> str:
    """Why a cache write failed, in a few words (the operating system's reason when there is one)."""
    current: BaseException | None = exc
    for _ in range(8):
        if current is None:
            break
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        spelled = re.search(r"Os \{ code: (\d+)|\(os error (\d+)\)", str(current))  # safetensors' spelling
        if spelled:
            return os.strerror(int(next(group for group in spelled.groups() if group)))
        current = current.__cause__ or current.__context__
    return first_line(exc, 160)
