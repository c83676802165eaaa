"""Counting at scale from the command line: a job killed for real and resumed, a corrupt shard,
a real Dask cluster (local, 2 worker processes), a dead scheduler address, mixes refused before
counting, progress lines, and every command of docs/large-corpora.md.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import GEOANALYZE, REPO_ROOT, geoanalyze, geoanalyze_process, ok, refused

from geoanalyze.corpus.marginals import PositionalCounts, count_positions
from geoanalyze.corpus.sources import resolve_source
from geoanalyze.corpus.streaming import CountJob, compute_counts
from geoanalyze.corpus.tokenize import HFTokenizer

DOC = REPO_ROOT / "docs" / "large-corpora.md"
DASK = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")


def write_shards(folder: Path, texts: list[str], per_shard: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, start in enumerate(range(0, len(texts), per_shard)):
        path = folder / f"part-{k:05d}.jsonl.gz"
        lines = "".join(json.dumps({"text": t}) + "\n" for t in texts[start : start + per_shard])
        path.write_bytes(gzip.compress(lines.encode()))
        paths.append(path)
    return paths


def identical(a: PositionalCounts, b: PositionalCounts, halves: bool = True) -> None:
    pairs = [(a.counts, b.counts)] + ([(a.half, b.half)] if halves else [])
    for x, y in pairs:
        x, y = sp.csr_array(x), sp.csr_array(y)
        assert x.shape == y.shape
        assert np.array_equal(x.indptr, y.indptr) and np.array_equal(x.indices, y.indices)
        assert np.array_equal(x.data, y.data)


@pytest.fixture(scope="module")
def bert(minilm_path: Path) -> HFTokenizer:
    return HFTokenizer(str(minilm_path))


@pytest.fixture(scope="module")
def imdb_reviews(shared_data: Path) -> list[str]:
    """The first 1,600 IMDB train reviews, read without geoanalyze."""
    with gzip.open(shared_data / "imdb" / "train.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for _, line in zip(range(1600), handle, strict=False)]


@pytest.fixture(scope="module")
def reviews(imdb_reviews: list[str]) -> list[str]:
    return imdb_reviews[:560]


# --- killed for real, then resumed --------------------------------------------------------


def test_a_killed_job_resumes_and_equals_an_uninterrupted_run(
    bert: HFTokenizer, imdb_reviews: list[str], tmp_path: Path
) -> None:
    texts = imdb_reviews[:1600]
    write_shards(tmp_path / "corpus", texts, 100)  # 16 shards
    work = tmp_path / "work"
    args = ["marginals", "corpus", "--workers", "1", "--work-dir", "work", "-o", "counts.safetensors"]
    job = subprocess.Popen([*GEOANALYZE, *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(work.glob("shard-*.safetensors"))) < 3 and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.01)
    os.kill(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    done_before = len(list(work.glob("shard-*.safetensors")))
    assert job.returncode == -signal.SIGKILL
    assert 3 <= done_before < 16, f"the job was not killed mid-way ({done_before} of 16 shards done)"
    assert not (tmp_path / "counts.safetensors").exists()
    result = json.loads(ok(geoanalyze(*args, "-f", "json", cwd=tmp_path)).stdout)
    (report,) = result["counting"]
    assert report["reused"] == done_before
    assert report["counted"] == 16 - done_before
    resumed = PositionalCounts.load(tmp_path / "counts.safetensors")
    identical(resumed, count_positions(texts, bert))
    assert resumed.n_sequences == 1600


def test_a_corrupt_shard_stops_the_job_in_one_line_and_keeps_the_shards_done(
    reviews: list[str], tmp_path: Path
) -> None:
    paths = write_shards(tmp_path / "corpus", reviews[:200], 50)
    good = paths[2].read_bytes()
    paths[2].write_bytes(good[:-40])
    line = refused(geoanalyze("marginals", "corpus", "--workers", "1", "--work-dir", "work", cwd=tmp_path))
    assert "part-00002.jsonl.gz" in line
    assert sorted(p.name for p in (tmp_path / "work").glob("shard-*")) == [
        "shard-000000.safetensors",
        "shard-000001.safetensors",
    ]
    paths[2].write_bytes(good)
    result = json.loads(ok(geoanalyze("marginals", "corpus", "--work-dir", "work", "-f", "json", cwd=tmp_path)).stdout)
    assert (result["counting"][0]["reused"], result["counting"][0]["counted"]) == (2, 2)


def test_mixed_tokenizers_are_refused_before_counting(reviews: list[str], tmp_path: Path) -> None:
    """The corpus has a corrupt shard: reaching it would mean the counting had started."""
    paths = write_shards(tmp_path / "corpus", reviews[:100], 50)
    paths[0].write_bytes(b"not gzip")
    (tmp_path / "words.txt").write_text("a b c\nd e\n", encoding="utf-8")
    ok(geoanalyze("marginals", "words.txt", "--tokenizer", "whitespace", "-o", "words.safetensors", cwd=tmp_path))
    line = refused(geoanalyze("marginals", "words.safetensors", "corpus", cwd=tmp_path))
    assert "different tokenizers" in line
    (tmp_path / "more.txt").write_text("f g\n", encoding="utf-8")
    line = refused(
        geoanalyze("marginals", "words.safetensors", "more.txt", "-t", "whitespace", "--max-length", "7", cwd=tmp_path)
    )
    assert "max_length" in line


def test_progress_lines_when_stderr_is_not_a_terminal(
    reviews: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEOANALYZE_PROGRESS_SECONDS", "0")  # a line at every update (default: every 30 s)
    write_shards(tmp_path / "corpus", reviews[:120], 40)
    result = ok(geoanalyze("marginals", "corpus", "--workers", "1", cwd=tmp_path))
    progress = [line for line in result.stderr.splitlines() if "shards" in line]
    assert progress, result.stderr
    assert re.fullmatch(
        r"progress: counting corpus: 3/3 shards \(100%\), [\d.]+ k tokens, [\d.]+ [kM] tokens/s, elapsed \d+s",
        progress[-1],
    ), progress[-1]


# --- Dask ---------------------------------------------------------------------------------


def test_a_local_dask_cluster_of_two_workers_gives_identical_counts(
    bert: HFTokenizer, reviews: list[str], tmp_path: Path
) -> None:
    from distributed import Client, LocalCluster

    write_shards(tmp_path / "corpus", reviews, 70)
    source = resolve_source(str(tmp_path / "corpus"))
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        assert len(client.scheduler_info()["workers"]) == 2
        job = CountJob(tokenizer=str(bert.resolved), cluster=cluster.scheduler_address)
        on_cluster, _ = compute_counts(source, job, cache=False)
    one_process, _ = compute_counts(source, CountJob(tokenizer=str(bert.resolved), workers=1), cache=False)
    identical(on_cluster, one_process)
    identical(one_process, count_positions(reviews, bert))


def test_a_scheduler_that_does_not_answer_fails_in_seconds(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("some text\n", encoding="utf-8")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.monotonic()
    line = refused(geoanalyze("marginals", "a.txt", "--cluster", f"127.0.0.1:{port}", cwd=tmp_path))
    assert time.monotonic() - start < 20
    assert "no Dask scheduler answers" in line


# --- the documented commands --------------------------------------------------------------


def doc_commands() -> list[str]:
    """The shell lines of docs/large-corpora.md's bash blocks, in order."""
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_every_documented_command_runs(
    bert: HFTokenizer, reviews: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_shards(tmp_path / "corpus", reviews, 40)  # part-00000 .. part-00013
    port = free_port()
    started: list[subprocess.Popen[bytes]] = []
    commands = doc_commands()
    assert len(commands) == 11
    try:
        for command in commands:
            command = command.replace("head-node:8786", f"127.0.0.1:{port}").replace("head-node", "127.0.0.1")
            command = command.replace("--port 8786", f"--port {port}")
            words = shlex.split(command.rstrip("& "))
            if words[0] == "dask":
                assert DASK is not None
                started.append(
                    subprocess.Popen(
                        [DASK, *words[1:]], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                )
                if words[1] == "scheduler":
                    _wait_for_port(port)
                continue
            assert words[0] == "geoanalyze", command
            if (
                "/" in words[2]
                and not words[2].startswith("'")
                and not Path(tmp_path, words[2]).exists()
                and "*" not in words[2]
            ):
                _run_hub_command(words[1:], tmp_path, reviews, monkeypatch)
                continue
            ok(geoanalyze_process(*words[1:], cwd=tmp_path))  # a real process: its Dask client ends with it
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
    counts = PositionalCounts.load(tmp_path / "counts.safetensors")
    identical(counts, count_positions(reviews, bert))
    identical(PositionalCounts.load(tmp_path / "cluster.safetensors"), counts)
    identical(PositionalCounts.load(tmp_path / "local-cluster.safetensors"), counts)
    identical(PositionalCounts.load(tmp_path / "merged.safetensors"), counts, halves=False)
    sampled = PositionalCounts.load(tmp_path / "sample.safetensors")
    assert 0.15 * len(reviews) < sampled.n_sequences < 0.35 * len(reviews)
    assert (tmp_path / "distances.safetensors").is_file()
    hub = PositionalCounts.load(tmp_path / "fineweb.safetensors")
    identical(hub, count_positions(reviews, bert))


def _wait_for_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the Dask scheduler did not open port {port}")


def _run_hub_command(args: list[str], tmp_path: Path, reviews: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub id, streamed: the hub is out of reach here, so datasets streams the same records
    from local JSON files through the real streaming code (load_dataset(..., streaming=True))."""
    import datasets

    from geoanalyze import hub

    local = tmp_path / "hub-copy.jsonl"
    local.write_text("".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(reviews)), encoding="utf-8")
    real = datasets.load_dataset
    calls: list[dict[str, Any]] = []

    def from_the_hub(path: str, name: str | None = None, **kwargs: Any) -> Any:
        calls.append({"path": path, **kwargs})
        assert kwargs.get("streaming") is True
        return real("json", data_files=[str(local)], split=kwargs["split"], streaming=True)

    monkeypatch.setattr(datasets, "load_dataset", from_the_hub)
    monkeypatch.setattr(hub, "hub_offline", lambda: False)
    ok(geoanalyze(*args, cwd=tmp_path))
    assert calls and calls[0]["path"] == args[1]
