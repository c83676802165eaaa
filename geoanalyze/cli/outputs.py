"""What every command that writes shares: the input/output path guard, the one staging writer and
the line an operating-system error becomes.

* :func:`guard` is called before any work: no output (a file, a folder, a figure folder, a
  checkpoint copy) may be an input, lie inside an input folder or match an input glob, and a folder
  that is replaced as a whole may not hold an input. Paths are compared resolved (symlinks,
  ``./x`` and ``x``) and with :func:`os.path.samefile` (hard links, a case-insensitive disk).
* :func:`all_or_none` stages every output beside its target (same folder, so the final rename is
  atomic) and moves them all into place only when the command's block ended without an error; a
  failure (an exception, Ctrl-C, SIGTERM) removes what was staged and leaves every previous output
  as it was, byte for byte, also when one of the final renames fails.
* :func:`os_error_line` is the one ``cannot write <path>: <reason>; <fix>`` line.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import glob
import itertools
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

NAME_MAX = 255  # bytes in one path component on every common file system

# Outputs of the running command (set by guard() and the staging writer), so that an error the
# operating system raises without saying whether it read or wrote is told apart.
_outputs: list[Path] = []
_last_written: list[Path] = []

_WRITE_ERRNOS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_PATH_ERRNOS = _WRITE_ERRNOS | {
    errno.EACCES,
    errno.EPERM,
    errno.ENAMETOOLONG,
    errno.EISDIR,
    errno.ENOTDIR,
    errno.ENOENT,
    errno.EEXIST,
    errno.ELOOP,
    errno.ENXIO,
    errno.ENOTEMPTY,
    errno.ETXTBSY,
    errno.EXDEV,
    errno.EIO,
}
_FIXES = {
    errno.EACCES: "check its permissions or choose another path",
    errno.EPERM: "check its permissions or choose another path",
    errno.EROFS: "choose a path on a writable disk",
    errno.ENOSPC: "free some space or write to another disk",
    errno.EDQUOT: "free some space (the disk quota is full) or write to another disk",
    errno.EFBIG: "the file grew past the size limit; raise the limit or write to another disk",
    errno.ENAMETOOLONG: f"use shorter names (at most {NAME_MAX} bytes a folder or file name)",
    errno.EISDIR: "it is a folder; pass a file path",
    errno.ENOTDIR: "a part of the path is a file, not a folder; choose another path",
    errno.ENOENT: "check the path",
    errno.ENXIO: "it is a FIFO or device without a reader/writer; pass a regular file",
    errno.ELOOP: "it is a loop of symbolic links; fix the link or pass the real path",
}


def reset() -> None:
    """Forget the outputs of a previous command (one process may run several, as the tests do)."""
    _outputs.clear()
    _last_written.clear()


def _register(path: Path) -> None:
    _outputs.append(Path(path))


def _is_output(path: str | os.PathLike[str]) -> bool:
    """``path`` is an output, lies inside one, holds one, or is the temporary file of one."""
    here = os.path.abspath(path)
    for output in _outputs:
        out = os.path.abspath(output)
        if (
            here == out
            or here.startswith(out + os.sep)
            or out.startswith(here.rstrip(os.sep) + os.sep)
            or (
                os.path.dirname(here) == os.path.dirname(out)
                and os.path.basename(here).startswith("." + os.path.basename(out))
            )
        ):
            return True
    return False


def _output_named(path: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """The output a hidden temporary sibling (``.<name>.<pid>.partial``, ``.<name>.xyz.tmp``) stands for."""
    here = os.path.abspath(path)
    for output in _outputs:
        out = os.path.abspath(output)
        name = os.path.basename(here)
        if os.path.dirname(here) == os.path.dirname(out) and name.startswith("." + os.path.basename(out) + "."):
            return output
    return path


def os_error_of(exc: BaseException) -> OSError | None:
    """The operating-system error behind ``exc`` (itself, a cause, or one a library spelled as text)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, OSError) and current.errno in _PATH_ERRNOS:
            return current
        text = str(current)
        # safetensors and other Rust/C libraries report e.g. "Os { code: 28, kind: StorageFull, ... }".
        found = re.search(r"Os \{ code: (\d+)|\(os error (\d+)\)|\[Errno (\d+)\]", text)
        number = int(next(group for group in found.groups() if group)) if found else None
        if number in _PATH_ERRNOS:
            return OSError(number, os.strerror(number))
        current = current.__cause__ or current.__context__
        seen += 1
    return None


def os_error_line(exc: OSError, path: str | os.PathLike[str] | None = None, writing: bool | None = None) -> str:
    """``cannot write <path>: <reason>; <fix>`` (or ``cannot read``), one line."""
    where = path if path is not None else exc.filename
    if where is None and _last_written:
        where, writing = _last_written[-1], True
    if where is None and _outputs and (writing or exc.errno in _WRITE_ERRNOS):
        where, writing = _outputs[-1], True  # a write without a file name (a full disk): the command's output
    if writing is None:
        writing = exc.errno in _WRITE_ERRNOS or (where is not None and _is_output(where))
    if where is not None:
        where = _output_named(where)
    reason = exc.strerror or os.strerror(exc.errno or 0) or type(exc).__name__
    fix = _FIXES.get(exc.errno or 0, "check the path")
    if writing and exc.errno in (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.EXDEV, errno.EIO):
        fix = "choose another output path"
    verb = "write" if writing else "read"
    named = f" {os.fsdecode(where)}" if where is not None else ""
    return f"cannot {verb}{named}: {reason}; {fix}"


# --- the input/output path guard -------------------------------------------------------------------


@dataclass
class Output:
    """One output of a command: the option that names it, the path, and how it is written."""

    option: str
    path: Path | None
    folder: bool = False
    replaces: bool = False  # a folder written as a whole (its previous content goes)


def Folder(option: str, path: Path | None, replaces: bool = False) -> Output:  # noqa: N802 - reads as a kind
    return Output(option, path, folder=True, replaces=replaces)


@dataclass
class _Input:
    text: str
    path: Path
    pattern: str | None = None  # a glob: an output matching it would be read next time


def input_paths(values: Iterable[str | os.PathLike[str] | None]) -> list[_Input]:
    """The files and folders behind inputs given as text: paths, globs, and the path in specs such as
    ``mds:<file>``, ``model:<folder>`` or a comma-separated --compare list."""
    found: list[_Input] = []
    for value in values:
        if value is None or value == "":
            continue
        text = os.fspath(value)
        pieces = {text}
        for piece in [text, *text.split(",")]:
            pieces.add(piece.strip())
            if ":" in piece:
                pieces.add(piece.split(":", 1)[1].strip())
        for piece in pieces:
            if not piece:
                continue
            expanded = os.path.expanduser(piece)
            if glob.has_magic(expanded):
                # The pattern catches outputs among its matches; the first matches are also compared
                # as files (a hard link elsewhere), not all of a glob of a million shards.
                matches = itertools.islice(glob.iglob(expanded, recursive=True), 1000)
                found += [_Input(text, Path(m)) for m in matches]
                found.append(_Input(text, Path(expanded), pattern=os.path.abspath(expanded)))
            elif os.path.lexists(expanded):
                found.append(_Input(text, Path(expanded)))
    return found


def _same(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside(child: Path, folder: Path) -> bool:
    """``child`` lies inside ``folder``: resolved, or a parent of it is ``folder`` by a hard link or case."""
    real_folder = os.path.realpath(folder)
    for parent in Path(os.path.realpath(child)).parents:
        if str(parent) == real_folder or (parent.exists() and _same(parent, folder)):
            return True
    return False


def check_name_lengths(option: str, path: Path) -> None:
    for part in Path(os.path.abspath(path)).parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise InputError(
                f"{option}: the name {part[:40]}... is {size} bytes, over the {NAME_MAX} a file or folder name "
                "may have; choose a shorter name"
            )


def guard(inputs: Iterable[str | os.PathLike[str] | None], outputs: Iterable[Output]) -> None:
    """Refuse, before any work, an output that would overwrite, land inside or remove an input.

    ``inputs`` are what the command reads as the user gave them (paths, globs, specs holding a
    path); ``outputs`` every file or folder it writes. The refusal names both paths and the fix.
    """
    reset()
    found = input_paths(inputs)
    given = [output for output in outputs if output.path is not None]
    for output in given:
        path = Path(output.path)  # type: ignore[arg-type]
        check_name_lengths(output.option, path)
        _register(path)
        for item in found:
            if item.pattern is not None:
                if fnmatch.fnmatch(os.path.abspath(path), item.pattern) or fnmatch.fnmatch(
                    os.path.realpath(path), item.pattern
                ):
                    raise InputError(
                        f"{output.option} {path} matches the input {item.text}: the next run would read it as input; "
                        "choose an output path outside the input"
                    )
                continue
            what = "folder" if item.path.is_dir() else "file"
            if _same(path, item.path):
                raise InputError(
                    f"{output.option} {path} is the input {what} {item.text}; writing it would destroy the input: "
                    "choose another output path"
                )
            if item.path.is_dir() and _inside(path, item.path):
                raise InputError(
                    f"{output.option} {path} lies inside the input folder {item.text}; writing there would change "
                    "the input: choose an output path outside it"
                )
            if output.folder and output.replaces and _inside(item.path, path):
                raise InputError(
                    f"{output.option} {path} holds the input {item.text}, and writing it replaces the whole folder: "
                    "choose another output folder"
                )
    for index, first in enumerate(given):
        for second in given[index + 1 :]:
            if _same(Path(first.path), Path(second.path)):  # type: ignore[arg-type]
                raise InputError(
                    f"{first.option} and {second.option} both name {first.path}; pass a different path for each"
                )


# --- the staging writer ----------------------------------------------------------------------------


@dataclass
class _Staged:
    target: Path
    temporary: Path
    folder: bool
    replaces: bool


@dataclass
class Staging:
    """``stage(target)`` -> the temporary path beside ``target`` to write instead (see :func:`all_or_none`)."""

    items: list[_Staged] = field(default_factory=list)
    created: list[Path] = field(default_factory=list)  # parent folders this staging made

    def __call__(
        self, target: str | os.PathLike[str], folder: bool = False, replaces: bool = True, create: bool = True
    ) -> Path:
        """A path beside ``target`` to write to.

        ``folder``: the output is a folder, created empty here (unless not ``create``: the writer
        makes it); with ``replaces`` it replaces ``target`` as a whole, without it its files are
        moved into ``target`` (a figure folder that also holds the user's other files).
        """
        target = Path(target)
        _register(target)
        name = os.fsencode(target.name)[:100].decode("utf-8", "ignore")
        suffix = target.suffix if len(target.suffix) <= 24 and not folder else ""
        temporary = target.with_name(f".{name}.{os.getpid()}-{len(self.items)}.staged{suffix}")
        if folder and not replaces and target.is_dir():
            # Files joining an existing folder are staged inside it: the same disk, even for a mount point.
            temporary = target / f".{os.getpid()}-{len(self.items)}.staged"
        try:
            self._make_parents(target.parent)
            if folder and create:
                temporary.mkdir()  # the user's umask mode (not mkdtemp's 0700)
        except OSError as exc:
            raise InputError(os_error_line(exc, target, writing=True)) from exc
        self.items.append(_Staged(target, temporary, folder, replaces))
        _last_written.append(target)
        return temporary

    def target_of(self, path: str | os.PathLike[str]) -> Path | None:
        """The output a staged path (or a file inside a staged folder) stands for."""
        here = os.path.abspath(path)
        for item in self.items:
            staged = os.path.abspath(item.temporary)
            if here == staged:
                return item.target
            if here.startswith(staged + os.sep):
                return item.target / os.path.relpath(here, staged)
            if os.path.dirname(here) == os.path.dirname(staged) and os.path.basename(here).startswith(
                "." + os.path.basename(staged)
            ):
                return item.target  # the temporary file of an atomic write of the staged path
        return None

    def final(self, path: str | os.PathLike[str]) -> str:
        """Where a path written into a staged folder will be once the outputs are in place."""
        target = self.target_of(path)
        return str(target) if target is not None else str(path)

    def _make_parents(self, folder: Path) -> None:
        missing = []
        for parent in [folder, *folder.parents]:
            if parent.exists() or parent.is_symlink():
                break
            missing.append(parent)
        for parent in reversed(missing):
            parent.mkdir()
            self.created.append(parent)

    def _commit(self) -> None:
        moves: list[tuple[Path, Path, Path | None]] = []  # (staged, target, backup of the previous one)
        for item in self.items:
            if not os.path.lexists(item.temporary):
                continue  # a stage whose writer wrote nothing
            if item.folder and not item.replaces and item.target.is_dir():
                moves += [(child, item.target / child.name, None) for child in sorted(item.temporary.iterdir())]
            else:
                moves.append((item.temporary, item.target, None))
        done: list[tuple[Path, Path | None]] = []
        try:
            for staged, target, _ in moves:
                backup = None
                if os.path.lexists(target):
                    short = os.fsencode(target.name)[:100].decode("utf-8", "ignore")
                    backup = target.with_name(f".{short}.{os.getpid()}.previous")
                    _remove(backup)
                    if target.is_file() and not target.is_symlink() and not staged.is_dir():
                        try:  # a file is replaced atomically: there is no moment without it
                            os.link(target, backup)
                        except OSError:
                            os.rename(target, backup)
                    else:
                        os.rename(target, backup)  # a folder cannot be replaced in one step
                try:
                    os.replace(staged, target)
                except BaseException:
                    if backup is not None:
                        _restore(backup, target)
                    raise
                done.append((target, backup))
        except BaseException as exc:
            for target, backup in reversed(done):
                if backup is None or target.is_dir():
                    _remove(target)
                if backup is not None:
                    _restore(backup, target)
            if isinstance(exc, OSError):
                where = self.target_of(exc.filename) if exc.filename else None
                raise InputError(os_error_line(exc, where or _target_named(exc, moves), writing=True)) from exc
            raise
        for _, backup in done:
            if backup is not None:
                _remove(backup)
        for item in self.items:
            _remove(item.temporary)  # an emptied staging folder inside a folder the files joined

    def _discard(self) -> None:
        for item in self.items:
            _remove(item.temporary)
        for folder in reversed(self.created):
            with contextlib.suppress(OSError):
                folder.rmdir()


def _target_named(exc: OSError, moves: list[tuple[Path, Path, Path | None]]) -> Path | None:
    for staged, target, _ in moves:
        if exc.filename in (str(staged), str(target)) or exc.filename2 in (str(staged), str(target)):
            return target
    return moves[0][1] if moves else None


def _restore(backup: Path, target: Path) -> None:
    """Put the previous output back (a hard-linked backup of a file still in place is just dropped:
    renaming a link onto its twin does nothing)."""
    try:
        same = os.path.lexists(target) and os.path.samefile(backup, target)
    except OSError:
        same = False
    if same:
        backup.unlink()
    else:
        os.replace(backup, target)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()


@contextlib.contextmanager
def all_or_none() -> Iterator[Staging]:
    """Write the outputs of one command all or none.

    ``stage(path)`` (``stage(path, folder=True)`` for a folder) returns a temporary path beside
    ``path`` to write to; the staged outputs are renamed into place only once the block has ended
    without an error. Any failure (an exception, Ctrl-C, SIGTERM raised as an abort) removes every
    staged output and the folders made for them, and leaves previous outputs untouched. A write
    the operating system refuses (read-only, disk full, ...) becomes one ``cannot write`` line
    naming the output, not the staged file.
    """
    staging = Staging()
    try:
        yield staging
        staging._commit()
    except BaseException as exc:
        staging._discard()
        error = os_error_of(exc) if isinstance(exc, Exception) else None
        if error is not None:
            # A write the system refused, named by the output (not the staged file) it was for.
            where = staging.target_of(error.filename) if error.filename else None
            if where is None and error.filename is None and not isinstance(exc, InputError) and staging.items:
                where = staging.items[-1].target
            if where is not None:
                raise InputError(os_error_line(error, where, writing=True)) from exc
        raise
    finally:
        _last_written.clear()
