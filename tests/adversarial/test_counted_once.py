"""Nothing counted twice, nothing but the corpus counted (issue: the third bad-input catalogue).

- a hard link is the file it links: two names of one inode are refused as the same file,
  on their own (``a.txt b.txt``) or inside a glob or folder given beside it;
- a folder corpus reads no hidden file or folder (``.git/``, ``.ipynb_checkpoints/``, ``.notes.txt``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from helpers import DRIFT_WORDS, geoanalyze, ok, refused

CORPUS = ["-t", "whitespace", "-f", "json", "--no-cache"]


def texts(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = DRIFT_WORDS.read_text(encoding="utf-8").splitlines()[:count]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def sequences(run_stdout: str) -> int:
    return int(json.loads(run_stdout)["n_sequences"])


def test_a_hard_link_beside_its_file_is_the_same_file(tmp_path: Path) -> None:
    texts(tmp_path / "a.txt", 30)
    os.link(tmp_path / "a.txt", tmp_path / "b.txt")
    line = refused(geoanalyze("marginals", "a.txt", "b.txt", *CORPUS, cwd=tmp_path), "same file", "twice")
    assert "'a.txt'" in line and "'b.txt'" in line
    assert not list(tmp_path.glob("*.safetensors"))


def test_a_glob_and_a_hard_link_of_one_match(tmp_path: Path) -> None:
    texts(tmp_path / "part" / "1.txt", 20)
    texts(tmp_path / "part" / "2.txt", 10)
    os.link(tmp_path / "part" / "1.txt", tmp_path / "copy.txt")
    refused(geoanalyze("marginals", "part/*.txt", "copy.txt", *CORPUS, cwd=tmp_path), "same file", "twice")


def test_a_symlink_beside_its_file_is_refused_too(tmp_path: Path) -> None:
    texts(tmp_path / "a.txt", 30)
    (tmp_path / "link.txt").symlink_to(tmp_path / "a.txt")
    refused(geoanalyze("marginals", "a.txt", "link.txt", *CORPUS, cwd=tmp_path), "same file")


def test_a_copy_is_another_file(tmp_path: Path) -> None:
    """Only one file under two names is refused: a copy is a second corpus that happens to agree."""
    texts(tmp_path / "a.txt", 30)
    shutil.copy(tmp_path / "a.txt", tmp_path / "b.txt")
    assert sequences(ok(geoanalyze("marginals", "a.txt", "b.txt", *CORPUS, cwd=tmp_path)).stdout) == 60


def test_a_folder_reads_no_hidden_file_or_folder(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for index in range(30):
        texts(corpus / f"{index:02d}.txt", 1)
    texts(corpus / ".ipynb_checkpoints" / "00-checkpoint.txt", 1)
    texts(corpus / ".git" / "objects" / "stale.txt", 1)
    texts(corpus / ".notes.txt", 1)
    texts(corpus / "sub" / "30.txt", 1)  # a visible subfolder still counts
    assert sequences(ok(geoanalyze("marginals", "corpus", *CORPUS, cwd=tmp_path)).stdout) == 31


def test_a_folder_of_shards_skips_hidden_shards(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    rows = [json.dumps({"text": line}) for line in DRIFT_WORDS.read_text(encoding="utf-8").splitlines()[:12]]
    (shards / "a.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (shards / ".backup").mkdir()
    (shards / ".backup" / "a.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert sequences(ok(geoanalyze("marginals", "shards", *CORPUS, cwd=tmp_path)).stdout) == 12
