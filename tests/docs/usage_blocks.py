"""The output blocks of docs/usage.md: each is the real output of the commands it shows, and one command
regenerates them all: ``python tests/docs/regenerate_usage.py`` (``--session NAME`` for one session).

The convention: the line above a regenerated code block is an HTML comment

    <!-- regenerate: SESSION -->          (or ``<!-- regenerate: SESSION, slow -->``)

(``, file NAME``: the block, such as a Python script, is written to NAME in the scratch folder
for the session's later commands), and inside every other block each command starts with ``$ `` (continued over lines ending in a backslash or
inside an open quote); the lines up to the next command are its output, stdout then stderr, as
``bash -c`` gives them in a scratch folder. The blocks of one session run in order in one fresh
scratch folder (so a later block reads the files an earlier one wrote) and with a fresh cache;
sessions are independent. The scratch folder is always :data:`SCRATCH` (``work/`` holds a copy of
``sample_corpora``, ``shared/data`` one of ``../shared/data``, as a clone beside ``shared`` has them),
and the terminal is fixed (``COLUMNS=80``, no colour, offline), so a run prints the same bytes
wherever it is made. Only times vary between runs: :func:`comparable` masks them when a test checks
that a block is current. A trimmed output is trimmed by the command shown (``| head -n 14``).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = REPO_ROOT / "docs" / "usage.md"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
#: the scratch folder of every session (a fixed path, so the outputs that name it are the same each run)
SCRATCH = Path("/tmp/doc")
WIDTH = 80
MARKER = re.compile(r"^<!-- regenerate: (?P<session>[\w-]+)(?P<slow>, slow)?(?:, file (?P<file>[\w.-]+))? -->$")
#: a measured time (``0.4 s``, ``12 ms``, ``1.5 min``): the one thing that differs between two runs
TIME = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|min)\b")


@dataclass(frozen=True)
class Block:
    """One regenerated code block: its session, the page's lines it spans (the fences excluded) and its commands."""

    session: str
    slow: bool
    file: str | None  # a file block: its text is written to this file of the scratch folder, not run
    start: int  # index of the first line inside the fence
    end: int  # index of the closing fence
    commands: tuple[str, ...]
    outputs: tuple[str, ...]  # what the page shows under each command

    def text(self, outputs: tuple[str, ...] | None = None) -> str:
        """The block's inside: each command and its output (``outputs``, default the page's)."""
        if self.file is not None:
            return self.outputs[0]
        parts = []
        for command, output in zip(self.commands, outputs or self.outputs, strict=True):
            parts.append("$ " + command)
            if output:
                parts.append(output)
        return "\n".join(parts)


def opens_command(text: str) -> bool:
    """Whether ``text`` (a command so far) continues on the next line: a trailing backslash or an open quote."""
    return text.endswith("\\") or text.count("'") % 2 == 1


def parse_block(lines: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The commands of a block's lines and the output shown under each."""
    commands: list[str] = []
    outputs: list[list[str]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            if not commands:
                raise ValueError(f"a regenerated block starts with a command ($ ...), not {line!r}")
            outputs[-1].append(line)
            index += 1
            continue
        command = [line[2:]]
        while opens_command("\n".join(command)) and index + 1 < len(lines):
            index += 1
            command.append(lines[index])
        commands.append("\n".join(command))
        outputs.append([])
        index += 1
    return tuple(commands), tuple("\n".join(output) for output in outputs)


def blocks(text: str | None = None) -> list[Block]:
    """Every regenerated block of the page, in order."""
    lines = (text if text is not None else PAGE.read_text(encoding="utf-8")).split("\n")
    found = []
    for index, line in enumerate(lines):
        match = MARKER.match(line)
        if match is None:
            continue
        if not lines[index + 1].startswith("```"):
            raise ValueError(f"line {index + 1}: a regenerate marker must sit right above a ``` fence")
        end = lines.index("```", index + 2)
        inside = lines[index + 2 : end]
        commands, outputs = ((), ("\n".join(inside),)) if match["file"] else parse_block(inside)
        found.append(Block(match["session"], bool(match["slow"]), match["file"], index + 2, end, commands, outputs))
    return found


def sessions(found: list[Block]) -> dict[str, list[Block]]:
    """The blocks grouped by session, in page order."""
    grouped: dict[str, list[Block]] = {}
    for block in found:
        grouped.setdefault(block.session, []).append(block)
    return grouped


def environment(scratch: Path) -> dict[str, str]:
    """The fixed terminal: 80 columns, no colour, offline, the venv's geoanalyze and python first on PATH."""
    keep = {name: os.environ[name] for name in ("HOME", "HF_HOME", "TMPDIR", "LANG") if name in os.environ}
    return {
        **keep,
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "COLUMNS": str(WIDTH),
        "LINES": "50",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "GEOANALYZE_CACHE_DIR": str(scratch / "cache"),
        "PYTHONHASHSEED": "0",
        "TOKENIZERS_PARALLELISM": "false",
    }


@contextmanager
def scratch_folder() -> Iterator[Path]:
    """A fresh :data:`SCRATCH` (one session at a time holds it: a lock file beside it)."""
    SCRATCH.parent.mkdir(parents=True, exist_ok=True)
    with open(SCRATCH.parent / f".{SCRATCH.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(SCRATCH, ignore_errors=True)
        shutil.copytree(REPO_ROOT / "sample_corpora", SCRATCH / "work" / "sample_corpora")
        shutil.copytree(SHARED_DATA, SCRATCH / "shared" / "data")
        try:
            yield SCRATCH / "work"
        finally:
            shutil.rmtree(SCRATCH, ignore_errors=True)


def run_command(command: str, cwd: Path, env: dict[str, str], status: int, timeout: float = 1800) -> tuple[str, int]:
    """What a command prints (its stdout, then its stderr, each line without trailing spaces) and its exit
    status; ``status`` is the previous command's, so ``echo $?`` prints it."""
    run = subprocess.run(
        ["bash", "-c", f"(exit {status}); {command}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    text = run.stdout + run.stderr
    shown = "\n".join(line.rstrip() for line in text.rstrip("\n").split("\n")) if text.strip() else ""
    return shown, run.returncode


def run_block(block: Block, work: Path, env: dict[str, str]) -> tuple[str, ...]:
    """The fresh outputs of a block's commands (a file block: its text, written into ``work``)."""
    if block.file is not None:
        (work / block.file).write_text(block.outputs[0] + "\n", encoding="utf-8")
        return block.outputs
    outputs, status = [], 0
    for command in block.commands:
        shown, status = run_command(command, work, env, status)
        outputs.append(shown)
    return tuple(outputs)


def run_session(found: list[Block]) -> list[tuple[str, ...]]:
    """The fresh outputs of one session's blocks, run in order in one scratch folder."""
    with scratch_folder() as work:
        env = environment(SCRATCH)
        return [run_block(block, work, env) for block in found]


#: a progress line short of 100%: how many a run prints depends on the machine's speed, not on the command
PARTIAL_PROGRESS = re.compile(r"^progress: [^\n]*\((?!100%)\d+%\)[^\n]*\n?", re.MULTILINE)
#: a time over a minute as the progress lines print it (1m08s)
MINUTES = re.compile(r"\b\d+m\d{2}s\b")


def comparable(text: str) -> str:
    """``text`` with its measured times masked and its progress lines short of 100% left out: two runs of a
    block compare equal when only times (and so how often progress was reported) differ."""
    return TIME.sub("<time>", MINUTES.sub("<time>", PARTIAL_PROGRESS.sub("", text)))


def fresh_outputs(text: str, only: set[str] | None = None) -> dict[str, list[tuple[str, ...]]]:
    """Per session of the page (or of ``only``), the fresh outputs of its blocks, in order."""
    fresh = {}
    for name, members in sessions(blocks(text)).items():
        if only is None or name in only:
            print(f"session {name}: {sum(len(b.commands) for b in members)} commands", file=sys.stderr)
            fresh[name] = run_session(members)
    return fresh


def with_outputs(text: str, fresh: dict[str, list[tuple[str, ...]]]) -> str:
    """``text`` with the blocks of the sessions in ``fresh`` showing those outputs (the blocks' commands
    must be the ones that ran: the page may have changed elsewhere meanwhile)."""
    lines = text.split("\n")
    found = blocks(text)
    replaced: dict[int, Block] = {}
    for name, outputs in fresh.items():
        members = sessions(found)[name]
        if len(members) != len(outputs):
            raise RuntimeError(f"session {name} changed while it ran; run it again")
        for block, output in zip(members, outputs, strict=True):
            replaced[block.start] = dataclasses.replace(block, outputs=output)
    for block in reversed(found):
        if block.start in replaced:
            lines[block.start : block.end] = replaced[block.start].text().split("\n")
    return "\n".join(lines)


def regenerate(text: str, only: set[str] | None = None) -> str:
    """The page with the blocks of every session (or of the sessions in ``only``) replaced by fresh output."""
    return with_outputs(text, fresh_outputs(text, only))
