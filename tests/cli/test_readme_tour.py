"""Every command of the README tour and of its Python block, run as written on small data.

The tour's `../shared/data` is replaced by a small data directory laid out the same way
(sst2/train.tsv, imdb/train.jsonl.gz made from the sample corpus), and the long commands get a
few extra options (fewer training steps); everything else is the README's text. A command with
a `--fail-above` gate or a `verify` verdict may end with exit 1 (a completed run); any other
failure, or any exit 2 or 3, fails the test.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from helpers import DRIFT_WORDS, GEOANALYZE, REPO_ROOT, assert_rope_verdict, run_process

README = REPO_ROOT / "README.md"
#: extra options that shrink the long commands (prefix of the command -> options appended)
SMALLER = {
    "geoanalyze train": ["--steps", "4"],
    "geoanalyze verify necessity": ["--set", "steps=4"],
    "geoanalyze stress sentence-transformers/all-MiniLM-L6-v2": ["--max-sequences", "64"],
    "geoanalyze report": ["--max-sequences", "64", "--layers", "none"],
}


def tour_commands() -> list[str]:
    """The shell commands of the README's tour block, continuation lines joined, comments dropped."""
    text = README.read_text(encoding="utf-8")
    tour = text[text.index("## A tour") :]
    block = re.search(r"```bash\n(.*?)```", tour, re.S)
    assert block is not None, "the README tour has no ```bash block"
    joined = block.group(1).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def tour_python() -> str:
    text = README.read_text(encoding="utf-8")
    tour = text[text.index("## A tour") :]
    return "\n\n".join(re.findall(r"```python\n(.*?)```", tour, re.S))


def small_data_dir(folder: Path) -> Path:
    """sst2 (train, validation) and imdb laid out as in ../shared/data, from the sample corpus."""
    lines = [line for line in DRIFT_WORDS.read_text(encoding="utf-8").splitlines() if line.strip()][:400]
    (folder / "sst2").mkdir(parents=True)
    for split, rows in (("train", lines), ("validation", lines[:100])):
        (folder / "sst2" / f"{split}.tsv").write_text(
            "sentence\tlabel\n" + "".join(f"{line}\t{i % 2}\n" for i, line in enumerate(rows)), encoding="utf-8"
        )
    (folder / "imdb").mkdir()
    with gzip.open(folder / "imdb" / "train.jsonl.gz", "wt", encoding="utf-8") as handle:
        for i, line in enumerate(lines):
            handle.write(json.dumps({"text": line, "label": i % 2}) + "\n")
    return folder


def test_the_tour_lists_the_commands_a_user_meets() -> None:
    commands = tour_commands()
    assert len(commands) >= 10
    assert all(command.startswith("geoanalyze ") for command in commands), commands
    assert not any("bert-base-uncased --dataset" in command for command in commands), "offline users cannot run it"


@pytest.mark.slow
def test_every_tour_command_runs_as_written(tmp_path: Path) -> None:
    data = small_data_dir(tmp_path / "data")
    work = tmp_path / "work"
    (work / "sample_corpora").mkdir(parents=True)
    (work / "sample_corpora" / DRIFT_WORDS.name).symlink_to(DRIFT_WORDS)
    env = {"OMP_NUM_THREADS": "1"}  # read as torch starts: real processes
    for command in tour_commands():
        words = shlex.split(command.replace("../shared/data", str(data)))
        words += next((extra for prefix, extra in SMALLER.items() if command.startswith(prefix)), [])
        result = run_process([*GEOANALYZE, *words[1:]], cwd=work, env=env, timeout=600)
        allowed = (0, 1) if ("--fail-above" in words or words[1] == "verify") else (0,)
        assert result.returncode in allowed, f"{command}\nexit {result.returncode}\n{result.stderr[-2000:]}"
        if result.returncode == 1:
            assert "threshold crossed" in result.stderr or words[1] == "verify", result.stderr
        assert "Traceback" not in result.stderr, command


def test_the_readme_python_runs(tmp_path: Path) -> None:
    """The README's Python block, with its data dir pointed at small data (and its corpus path at the repo's)."""
    data = small_data_dir(tmp_path / "data")
    code = tour_python().replace("../shared/data", str(data))
    code = code.replace('"sample_corpora/', f'"{REPO_ROOT}/sample_corpora/')
    result = run_process([sys.executable, "-c", code], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert_rope_verdict(lines[0], holm_tests=20)
    assert lines[1] == "better"
