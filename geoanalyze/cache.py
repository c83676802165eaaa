"""The cache: results of a job under a hash of everything that determines them.

Counts, distances and forward passes are cached as safetensors files in
``$GEOANALYZE_CACHE_DIR`` (else the platform's user cache folder), one folder per kind. A cache
is an optimisation only: one that cannot be read holds nothing, one that cannot be written
leaves a note and never fails the job.

Cache keys come from content: a local corpus is keyed by the SHA-256 of its bytes
(:func:`file_digests`), never by its path, size and modification time alone, so a file
replaced by another of the same size and mtime (``cp -p``, ``tar x``, a container image with
fixed mtimes) is never served the old counts. Hashing reads each file once per version: the
digest is remembered under the file's device, inode, size, mtime and ctime, and the ctime
changes with every write and every ``touch``/``cp -p``/``tar`` of the file (no tool can set it).

Two rules hold for every kind of entry:

* an entry is served only if the key recorded in it (:data:`KEY_FIELD` of its header) equals
  the key asked for: an entry of another input copied over this one's is recomputed, never served;
* ``--no-cache`` (``cache=False``) neither reads nor writes: inside :func:`caching` ``(False)``
  no entry is looked at (:func:`cache_holds` is False), none is written (:func:`write_cache`
  does nothing), file digests are neither remembered nor recalled, and a count's job folder
  is a temporary one.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import notes
from .errors import first_line

CACHE_ENV = "GEOANALYZE_CACHE_DIR"
DIGEST_CHARS = 32  # of the hex SHA-256: 128 bits
_READ_BLOCK = 1 << 20
#: the header field of an entry that records the key it was written under
KEY_FIELD = "cache_key"

_disabled: contextvars.ContextVar[bool] = contextvars.ContextVar("geoanalyze_cache_disabled", default=False)
#: how many caching() blocks the current code runs in (turn_off acts only inside one)
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("geoanalyze_cache_depth", default=0)


def cache_key(key_parts: Mapping[str, Any]) -> str:
    """The key of a job: the first 32 hex digits of the SHA-256 of the JSON of its key parts."""
    return hashlib.sha256(json.dumps(dict(key_parts), sort_keys=True).encode()).hexdigest()[:32]


def cache_entry(folder: str, key_parts: dict[str, Any]) -> Path:
    """The cache file of a job: a hash of everything that determines its result, in one folder per kind."""
    return cache_dir() / folder / f"{cache_key(key_parts)}.safetensors"


def key_matches(header: Mapping[str, Any], key_parts: Mapping[str, Any]) -> bool:
    """Whether an entry's header records the key asked for (an entry without one, or of another
    key, copied or renamed over this one's, is not this job's result)."""
    return header.get(KEY_FIELD) == cache_key(key_parts)


def cache_enabled() -> bool:
    """Whether caches are read and written here (False inside :func:`caching` ``(False)``)."""
    return not _disabled.get()


@contextlib.contextmanager
def caching(enabled: bool = True) -> Iterator[None]:
    """Within the block, caches are used (``enabled``) or neither read nor written (``--no-cache``);
    a block inside one that turned them off keeps them off. Per thread (a context variable)."""
    token = _disabled.set(_disabled.get() or not enabled)
    depth = _depth.set(_depth.get() + 1)
    try:
        yield
    finally:
        _depth.reset(depth)
        _disabled.reset(token)


def turn_off() -> None:
    """Turn caches off for the rest of the current :func:`caching` block (a command's --no-cache).

    Outside every block it does nothing: there is no block to end the switch, and it would outlive
    the command (a command run by typer's test runner, not through the console script's block);
    such a caller passes ``cache=False`` down instead, which every cache reader honours."""
    if _depth.get() > 0:
        _disabled.set(True)


def cache_dir() -> Path:
    """Where counts are cached: $GEOANALYZE_CACHE_DIR, else the platform's user cache dir."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("geoanalyze"))


def cache_holds(path: Path) -> bool:
    """Whether a cache entry exists; a cache that cannot even be looked at (a name too long, no
    permission) holds nothing, and its write will say why in a note. Nothing is held with caches off."""
    if not cache_enabled():
        return False
    try:
        return path.is_file()
    except OSError:
        return False


def write_cache(write: Callable[[], None]) -> bool:
    """Run ``write`` (a cache write); a cache that cannot be written (read-only, a file, a full disk)
    never fails the job: a note says the cache was not written and why. Returns whether it was.
    With caches off (``--no-cache``) nothing is written."""
    if not cache_enabled():
        return False
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


def file_digests(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The SHA-256 (first :data:`DIGEST_CHARS` hex digits) of each file's bytes, in order.

    SHA-256, not BLAKE2: with the CPU's SHA instructions it hashes ~0.9 GB/s on one core, twice
    BLAKE2b's speed here. The digests of a list of files are remembered in the cache under the
    files' (path, device, inode, size, mtime_ns, ctime_ns): an unchanged file is hashed once,
    a file written, replaced or re-stamped since (its ctime moved) is hashed again. A file that
    cannot be looked at or read raises OSError (the caller keys it otherwise, and reading it
    reports the problem). With caches off the files are hashed and nothing is remembered.
    """
    if not cache_enabled():
        return [_sha256_of(os.path.realpath(path)) for path in paths]
    stats = [(os.path.realpath(path), os.stat(path)) for path in paths]
    key = hashlib.sha256(
        "\n".join(
            f"{real}:{s.st_dev}:{s.st_ino}:{s.st_size}:{s.st_mtime_ns}:{s.st_ctime_ns}" for real, s in stats
        ).encode("utf-8", "surrogateescape")  # a name of non-UTF-8 bytes is its bytes
    ).hexdigest()[:DIGEST_CHARS]
    memo = cache_dir() / "digests" / f"{key}.json"
    remembered = _remembered(memo, len(stats))
    if remembered is not None:
        return remembered
    digests = [_sha256_of(real) for real, _ in stats]
    write_cache(lambda: _remember(memo, digests))
    return digests


def _sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()[:DIGEST_CHARS]


def _remembered(memo: Path, count: int) -> list[str] | None:
    """The digests a memo holds, or None (absent, unreadable, damaged: hashed again, never trusted)."""
    try:
        held = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        isinstance(held, list)
        and len(held) == count
        and all(isinstance(d, str) and len(d) == DIGEST_CHARS for d in held)
    ):
        return held
    return None


def _remember(memo: Path, digests: list[str]) -> None:
    from .io import write_text

    memo.parent.mkdir(parents=True, exist_ok=True)
    write_text(memo, json.dumps(digests))
