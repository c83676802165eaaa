"""Counting at scale: streamed shard by shard, on every core or a Dask cluster, resumable.

A corpus source is cut into **shards**; each is read as a stream, tokenized and counted batch
by batch into a sparse accumulator, and the shards' counts are merged by addition in shard
order. The split-half coin of the sequence with global index g is the g-th uniform of the PCG64
stream seeded by ``split_seed`` (reached with ``PCG64.advance``), so the counts are bit for bit
those of one process over the whole list of texts, whatever the sharding or the number of
workers. Each shard's counts are written to a work folder as soon as they are done, so a re-run
of the same job counts only the rest (docs/large-corpora.md tells the whole story).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..cache import KEY_FIELD, cache_dir, cache_entry, cache_holds, cache_key, caching, key_matches, write_cache
from ..errors import FormatError, GeoanalyzeError, IncompatibleError, InputError, first_line
from ..io import write_text
from ..notes import note
from ..progress import CountProgress, ShardCallbackProgress
from .marginals import (
    PositionalCounts,
    SparseCounter,
    check_mergeable,
    csr_keys,
    keys_to_csr,
    merge_sorted,
    short_name,
    tokenizer_fingerprint,
    tokenizer_identity,
)
from .sources import CorpusSource, Shard, check_read_mode
from .tokenize import (
    DOCUMENT_MAX_LENGTH,
    Tokenizer,
    TokenizerSpec,
    fresh_tokenizer,
    get_tokenizer,
    model_max_length,
)

BATCH = 4096
# A batch also ends at this many characters: the tokenizer's per-token structures (~160 bytes a
# token) of 4096 long reviews would hold ~200 MB; 1 M characters hold ~30 MB, at the same speed.
BATCH_CHARS = 1_000_000
# Encoded batches are handed to the counter in blocks of this many tokens (8 bytes an id): each
# hand-over merges into the sorted keys, and long sequences bring mostly new (position, token) keys.
BLOCK_TOKENS = 1 << 22
FILES_PER_SHARD = 2000  # one-text-a-file folders: files per shard
_SAMPLE_STREAM = 0x53414D50  # second seed word of the --sample stream ("SAMP")
WORK_VERSION = 1


# --- shards -------------------------------------------------------------------------------


def shards_of(source: CorpusSource, read: str = "rows") -> list[Shard]:
    """Cut a resolved source into shards, in corpus order (a folder: FILES_PER_SHARD files a shard),
    read as ``read`` (:data:`~geoanalyze.corpus.sources.READ_MODES`). Packed, the corpus is one
    shard: a packed sequence may hold the end of one text and the start of the next."""
    if read == "packed":
        return [Shard(source.name, source, read)]
    shards = source.shards(FILES_PER_SHARD)
    return shards if read == "rows" else [replace(shard, read=read) for shard in shards]


# --- one shard ----------------------------------------------------------------------------


def uniforms(seed: Any, start: int, count: int) -> np.ndarray:
    """Uniforms start .. start+count-1 of the PCG64 stream of ``seed`` (= default_rng(seed).random)."""
    generator = np.random.PCG64(seed)
    generator.advance(start)
    return np.random.Generator(generator).random(count)


def sample_seed_sequence(sample_seed: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(sample_seed), _SAMPLE_STREAM])


@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs to count one shard (picklable, small but for the tokenizer)."""

    index: int
    shard: Shard
    tokenizer: TokenizerSpec
    exclude_special: bool = False
    split_seed: int = 0
    first: int = 0  # global index, among counted texts, of the shard's first counted text
    raw_first: int = 0  # global index, among all texts, of the shard's first text
    take: int | None = None  # count at most this many texts of the shard
    sample: float | None = None
    sample_seed: int = 0
    batch_size: int = BATCH
    batch_chars: int = BATCH_CHARS


def _selected_batches(job: ShardJob, state: dict[str, int]) -> Iterator[list[str]]:
    """The shard's texts that are counted, in batches; ``state`` tracks read / kept / whole."""
    texts = job.shard.texts()
    while job.take is None or state["kept"] < job.take:
        block = _next_block(texts, job.batch_size, job.batch_chars)
        if not block:
            state["complete"] = 1
            return
        raw_start = job.raw_first + state["read"]
        state["read"] += len(block)
        if job.sample is not None:
            keep = uniforms(sample_seed_sequence(job.sample_seed), raw_start, len(block)) < job.sample
            block = [text for text, kept in zip(block, keep, strict=True) if kept]
        if job.take is not None:
            block = block[: job.take - state["kept"]]
        state["kept"] += len(block)
        if block:
            yield block
    # Stopped by --limit: the shard may hold more texts, so it was not read whole.


def _next_block(texts: Iterator[str], size: int, chars: int) -> list[str]:
    """Up to ``size`` texts, fewer once they hold ``chars`` characters."""
    block: list[str] = []
    held = 0
    for text in texts:
        block.append(text)
        held += len(text)
        if len(block) >= size or held >= chars:
            break
    return block


@dataclass(frozen=True)
class ShardReport:
    """What counting one shard did: texts read, whether to its end, tokens, where it was placed
    (raw first, counted first, take); and the counts, unless the worker wrote them to the work
    folder (then they do not travel through a pipe)."""

    n_read: int
    complete: bool
    n_tokens: int
    placed: tuple[int, int, int | None] | None = None
    counts: PositionalCounts | None = None

    @classmethod
    def of(cls, metadata: Mapping[str, Any], counts: PositionalCounts | None = None) -> ShardReport:
        """The report a shard's counts record in their metadata (a partial counts file's header)."""
        placed = metadata.get("placed")
        n_read, n_tokens = int(metadata.get("n_read", 0)), int(metadata.get("n_tokens", 0))
        return cls(n_read, bool(metadata.get("complete")), n_tokens, None if placed is None else tuple(placed), counts)


def count_and_store(
    job: ShardJob, path: str | None, stamp: Mapping[str, str], progress: Callable[[int], None] | None = None
) -> ShardReport:
    """Count one shard (the worker's task): stream its texts, tokenize and count them batch by batch
    (``progress`` hears each batch's tokens), and write the counts, stamped, to ``path`` (a work
    folder on this machine's disk; None: none shared); they come back only when they were not written.

    The counts' metadata carries ``n_read`` (texts read) and ``complete`` (read to its end).
    """
    tokenizer = fresh_tokenizer(job.tokenizer)
    state = {"read": 0, "kept": 0, "complete": 0}
    batches = _selected_batches(job, state)
    encoded = packed(tokenizer, batches) if job.shard.read == "packed" else _encoded(tokenizer, batches)
    counter = SparseCounter(_Encoded(tokenizer, job.shard.read != "packed"), exclude_special=job.exclude_special)
    for block in _blocks(encoded, BLOCK_TOKENS):
        first = job.first + counter.n_sequences
        in_half = uniforms(job.split_seed, first, len(block)) < 0.5
        tokens = counter.add(block, in_half)  # type: ignore[arg-type]  # encoded already: see _Encoded
        if progress is not None:
            progress(tokens)
    counts = counter.result(split_seed=job.split_seed)
    if job.shard.read != "rows":
        counts.metadata["read"] = job.shard.read
    counts.metadata.update(
        shard=job.shard.name,
        n_read=state["read"],
        complete=bool(state["complete"]),
        placed=[job.raw_first, job.first, job.take],
        n_tokens=int(counts.counts.sum()),
    )
    counts.metadata.update(stamp)
    report = ShardReport.of(counts.metadata, counts)
    if path is not None:
        with contextlib.suppress(Exception):  # a full or unwritable work folder: the counts travel instead
            counts.save(path)
            return replace(report, counts=None)
    return report


@dataclass(frozen=True)
class EncodedBlock:
    """Sequences encoded already: flat ids and the sequence lengths (``len``: the sequences)."""

    ids: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return int(self.lengths.size)


class _Encoded(Tokenizer):
    """The counter's tokenizer of :class:`EncodedBlock` s: the counter is handed blocks of several
    batches encoded already (:func:`_blocks`), so its merges are few however long the sequences
    are; the vocabulary, special ids, identity and length are the encoding tokenizer's."""

    def __init__(self, inner: Tokenizer, add_special_tokens: bool):
        self.inner, self.name, self.max_length = inner, inner.name, inner.max_length
        self.add_special_tokens = add_special_tokens and bool(getattr(inner, "add_special_tokens", False))

    @property
    def vocab_size(self) -> int:
        return self.inner.vocab_size

    @property
    def special_ids(self) -> np.ndarray:
        return self.inner.special_ids

    def encode_batch(self, texts: Any) -> tuple[np.ndarray, np.ndarray]:
        return texts.ids, texts.lengths

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def vocabulary(self) -> list[str] | None:
        return self.inner.vocabulary()

    def spec(self) -> TokenizerSpec:
        return self.inner.spec()


def _encoded(tokenizer: Tokenizer, batches: Iterable[list[str]]) -> Iterator[EncodedBlock]:
    """Each batch of texts encoded (one sequence a text, cut at ``max_length``)."""
    for batch in batches:
        yield EncodedBlock(*tokenizer.encode_batch(batch))


def _blocks(encoded: Iterable[EncodedBlock], tokens: int) -> Iterator[EncodedBlock]:
    """Consecutive encoded batches joined into blocks of about ``tokens`` ids (a batch is never cut)."""
    held: list[EncodedBlock] = []
    size = 0
    for block in encoded:
        held.append(block)
        size += block.ids.size
        if size >= tokens:
            yield _joined(held)
            held, size = [], 0
    if held:
        yield _joined(held)


def _joined(blocks: list[EncodedBlock]) -> EncodedBlock:
    if len(blocks) == 1:
        return blocks[0]
    return EncodedBlock(np.concatenate([b.ids for b in blocks]), np.concatenate([b.lengths for b in blocks]))


def packing_separator(tokenizer: Tokenizer) -> tuple[int, str]:
    """The id and name of the token packed mode puts between texts: EOS, else SEP; an InputError
    for a tokenizer with neither (the corpus-built whitespace and char vocabularies)."""
    found = tokenizer.separator()
    if found is None:
        raise InputError(
            f"--read packed joins texts with the tokenizer's EOS (or SEP) token, and {tokenizer.name} has "
            "neither; pass a tokenizer that has one (gpt2, bert-base-uncased) or --read document"
        )
    return found


def packed(tokenizer: Tokenizer, batches: Iterable[list[str]]) -> Iterator[EncodedBlock]:
    """Texts packed as decoder LMs are trained: each encoded whole (no special tokens, no
    truncation), joined by the tokenizer's separator (EOS, else SEP), the stream cut into sequences
    of ``max_length`` ids; the last holds what is left. The sequences laid end to end are the texts
    joined by the separator."""
    separator, length = packing_separator(tokenizer)[0], tokenizer.max_length
    carry = np.zeros(0, dtype=np.int64)
    first = True
    for batch in batches:
        ids, lengths = tokenizer.encode_whole(batch)
        starts = np.cumsum(lengths) - lengths  # where each text begins: a separator goes before it
        stream = np.concatenate([carry, np.insert(ids, starts[1:] if first else starts, separator)])
        first = False
        whole = stream.size // length * length
        carry = stream[whole:]
        if whole:
            yield EncodedBlock(stream[:whole], np.full(whole // length, length, dtype=np.int64))
    if carry.size:
        yield EncodedBlock(carry, np.asarray([carry.size], dtype=np.int64))


def shard_size(shard: Shard) -> int:
    """How many (non-blank) texts a shard holds: the first pass, reading without tokenizing."""
    return sum(1 for _ in shard.texts())


def _kept_in(sample: float | None, sample_seed: int, raw_first: int, size: int) -> int:
    """How many of the raw texts raw_first .. raw_first+size-1 --sample keeps."""
    if sample is None:
        return size
    kept, chunk = 0, 1 << 22
    for start in range(0, size, chunk):
        count = min(chunk, size - start)
        kept += int((uniforms(sample_seed_sequence(sample_seed), raw_first + start, count) < sample).sum())
    return kept


# --- executors ----------------------------------------------------------------------------


def default_workers() -> int:
    """All the cores this process may use (its CPU affinity where the system has one, else every core)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def return_freed_memory() -> None:
    """glibc only: serve arrays of 1 MB or more from mmap, so freeing them gives the memory back.

    Otherwise glibc raises its mmap threshold up to 32 MB after the first large free and keeps
    such arrays in the heap, where a counting process's peak stays resident for the rest of
    the job.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD (fixed: no dynamic raise)
        libc.mallopt(-1, 1 << 20)  # M_TRIM_THRESHOLD


def _init_worker(threads: int) -> None:
    return_freed_memory()
    # One process per core: the tokenizer's own thread pool gets this process's share of cores.
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true" if threads > 1 else "false")


class _Executor:
    """submit / wait for the first done / result / close, over one of three engines."""

    parallel = True
    shares_disk = False  # workers can write the work folder themselves
    description = ""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def wait_first(self, handles: Iterable[Any]) -> set[Any]:
        raise NotImplementedError

    def result(self, handle: Any) -> Any:
        return handle.result()

    def close(self, abort: bool = False) -> None:
        pass


class _InProcess(_Executor):
    """One process: each job runs when submitted (the counting loop reports every batch)."""

    parallel = False
    description = "1 process"

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        future: cf.Future[Any] = cf.Future()
        try:
            future.set_result(fn(*args))
        except GeoanalyzeError as exc:
            future.set_exception(exc)
        return future

    def wait_first(self, handles: Iterable[Any]) -> set[Any]:
        return set(handles)


class _ProcessPool(_Executor):
    """N worker processes on this machine (spawned: no fork of the tokenizer's threads)."""

    shares_disk = True

    def __init__(self, workers: int):
        import multiprocessing

        threads = max(1, default_workers() // workers)
        self.description = f"{workers} processes"
        self._others = set(multiprocessing.active_children())  # the pool's workers are the children not here
        self._pool = cf.ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(threads,),
        )

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._pool.submit(fn, *args)

    def wait_first(self, handles: Iterable[Any]) -> set[Any]:
        done, _ = cf.wait(list(handles), return_when=cf.FIRST_COMPLETED)
        return set(done)

    def result(self, handle: Any) -> Any:
        try:
            return handle.result()
        except cf.process.BrokenProcessPool as exc:
            raise InputError(
                "a counting worker process died (out of memory?); the shards done are kept: "
                "re-run with fewer --workers to resume"
            ) from exc

    def close(self, abort: bool = False) -> None:
        # No new work (and so no new worker) from here on; then, on abort, the workers go now.
        self._pool.shutdown(wait=not abort, cancel_futures=True)
        if abort:
            # A failed job stops now: the shards in flight are abandoned (their partial counts
            # were never written), not waited for. A worker that outlives SIGTERM is killed.
            import multiprocessing

            for process in set(multiprocessing.active_children()) - self._others:
                with contextlib.suppress(Exception):
                    process.terminate()
                    process.join(2)
                    if process.is_alive():
                        process.kill()


CONNECT_TIMEOUT_S = 3


class _Dask(_Executor):
    """Dask ``distributed``: a running scheduler at ADDRESS, or ``local``: a LocalCluster here."""

    def __init__(self, address: str, workers: int):
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:  # pragma: no cover - a dependency
            raise InputError("--cluster needs the distributed package: pip install distributed") from exc
        self._cluster: Any = None
        self._futures: list[Any] = []
        if address == "local":
            threads = max(1, default_workers() // workers)
            self._cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                env={"RAYON_NUM_THREADS": str(threads), "OMP_NUM_THREADS": "1"},
            )
            self._client = Client(self._cluster)
            self.description = f"a local Dask cluster of {workers} processes"
            return
        self._client = connect(address)
        n = len(self._client.scheduler_info().get("workers", {}))
        self.description = f"the Dask cluster at {address} ({n} workers)"

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        future = self._client.submit(fn, *args, pure=False)
        self._futures.append(future)
        return future

    def wait_first(self, handles: Iterable[Any]) -> set[Any]:
        from distributed import wait

        done, _ = wait(list(handles), return_when="FIRST_COMPLETED")
        return set(done)

    def close(self, abort: bool = False) -> None:
        if abort:  # the shards still queued or running are dropped; those done were written
            with contextlib.suppress(Exception):
                self._client.cancel(self._futures)
        if self._cluster is not None:  # a running scheduler's connection stays open for the next source
            with contextlib.suppress(Exception):
                self._client.close()
            with contextlib.suppress(Exception):
                self._cluster.close()


@functools.lru_cache(maxsize=4)
def connect(address: str) -> Any:
    """A client of the Dask scheduler at ``address``, or one error line within CONNECT_TIMEOUT_S."""
    from distributed import Client

    full = address if "://" in address else f"tcp://{address}"
    try:
        return Client(full, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(
            f"no Dask scheduler answers at {full} ({first_line(exc)}); start one "
            "(dask scheduler, or dask-jobqueue on Slurm) or fix --cluster"
        ) from exc
    except (MemoryError, EOFError, TypeError, KeyError, IndexError) as exc:
        # Another kind of server (HTTP, SSH, a database): its first bytes read as Dask's frame
        # lengths ask for exabytes, or its answer is no Dask message at all.
        raise InputError(
            f"the server at {full} is not a Dask scheduler (its answer is not in Dask's protocol); "
            "pass the scheduler's address (tcp://host:8786) to --cluster"
        ) from exc


def make_executor(workers: int | None, cluster: str | None, n_jobs: int) -> _Executor:
    """The engine: a Dask cluster when ``cluster`` is given, else a process pool of
    min(workers, shards) processes, else this process."""
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if cluster:
        return _Dask(cluster, workers)
    if min(workers, n_jobs) <= 1:
        return _InProcess()
    return _ProcessPool(min(workers, n_jobs))


# --- the work folder ----------------------------------------------------------------------


@dataclass
class WorkFolder:
    """Per-shard partial counts and the shard sizes of one job, for resuming it."""

    path: Path
    key: str
    job: dict[str, Any]
    fingerprints: list[str]
    sizes: list[int | None] = field(default_factory=list)
    best_effort: bool = False  # a job folder in the cache: a failed write is a note, never the job's failure
    temporary: bool = False  # a temporary folder (no cache): removed whatever the job's end

    @classmethod
    def open(cls, path: Path, job: dict[str, Any], fingerprints: list[str]) -> WorkFolder:
        """Open (or start) the work folder of a job; refuse one that holds another job's counts."""
        key = hashlib.sha256(json.dumps(job, sort_keys=True, default=str).encode()).hexdigest()[:24]
        plan_file = path / "plan.json"
        sizes: list[int | None] = [None] * len(fingerprints)
        if plan_file.is_file():
            try:
                plan = json.loads(plan_file.read_text(encoding="utf-8"))
                theirs = plan["job"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise FormatError(f"{plan_file} is corrupt ({exc}); delete the work folder {path}") from exc
            if plan.get("key") != key:
                raise _refusal(path, theirs, job)
            # A size is kept only while its shard is unchanged (a repaired shard is re-read).
            known = {str(fp): int(size) for fp, size in plan.get("sizes", {}).items()}
            sizes = [known.get(fp) for fp in fingerprints]
        if path.exists() and not path.is_dir():
            raise InputError(f"--work-dir {path} is a file; pass a folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the work folder {path}: {exc.strerror}; pass another --work-dir") from exc
        folder = cls(path, key, job, fingerprints, sizes)
        folder.save_plan()
        return folder

    def save_plan(self) -> None:
        sizes = {fp: size for fp, size in zip(self.fingerprints, self.sizes, strict=True) if size is not None}
        plan = {"version": WORK_VERSION, "key": self.key, "job": self.job, "sizes": sizes}
        self._write(lambda: write_text(self.path / "plan.json", json.dumps(plan, indent=1, sort_keys=True)))

    def _write(self, write: Callable[[], None]) -> None:
        if not self.best_effort:
            write()
            return
        from ..cache import write_cache

        write_cache(write)

    def shard_file(self, index: int) -> Path:
        return self.path / f"shard-{index:06d}.safetensors"

    def load(self, index: int) -> PositionalCounts | None:
        """The partial counts of a shard done before, or None (a damaged file is counted again)."""
        if self.peek(index) is None:
            return None
        try:
            return PositionalCounts.load(self.shard_file(index))
        except GeoanalyzeError:
            return None

    def peek(self, index: int) -> ShardReport | None:
        """What a shard's partial counts done before record (read from their header only), or None."""
        from ..io import read_metadata

        file = self.shard_file(index)
        if not file.is_file():
            return None
        try:
            metadata = read_metadata(file)
        except GeoanalyzeError:
            return None
        if metadata is None or metadata.get("kind") != "counts":
            return None
        same = (metadata.get("job_key"), metadata.get("shard_fingerprint")) == (self.key, self.fingerprints[index])
        return ShardReport.of(metadata) if same else None

    def store(self, index: int, counts: PositionalCounts) -> None:
        counts.metadata.update(job_key=self.key, shard_fingerprint=self.fingerprints[index])
        self._write(lambda: counts.save(self.shard_file(index)))


def _refusal(path: Path, theirs: dict[str, Any], mine: dict[str, Any]) -> InputError:
    """Why a work folder's partial counts cannot be mixed with this job's, before any counting."""
    for key, label in (("tokenizer", "tokenizer"), ("max_length", "max length")):
        if theirs.get(key) != mine.get(key):
            return IncompatibleError(
                f"the work folder {path} holds partial counts of another {label} "
                f"({short_name(theirs.get(key))} vs {short_name(mine.get(key))}); they cannot be mixed: "
                "pass another --work-dir or delete that one"
            )
    changed = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
    return IncompatibleError(
        f"the work folder {path} holds partial counts of another job (it differs in {', '.join(changed)}); "
        "pass another --work-dir or delete that one"
    )


# --- merging ------------------------------------------------------------------------------


class ShardMerger:
    """The shards' counts added in shard order, holding only the running sum.

    Fixed vocabularies: each part's entries (as sorted ``row << 40 | column`` keys) are added in
    place into the running sorted keys, so merging costs the distinct (position, token) pairs
    plus one part. Built vocabularies (whitespace, char) are united by token string through
    :meth:`PositionalCounts.merge`.
    """

    def __init__(self) -> None:
        self._built: PositionalCounts | None = None
        self._metadata: dict[str, Any] | None = None
        self._shape = (0, 0)
        self._keys: dict[str, np.ndarray] = {}
        self._values: dict[str, np.ndarray] = {}

    def add(self, part: PositionalCounts) -> None:
        if part.vocab is not None or self._built is not None:
            self._built = part if self._built is None else self._built.merge(part)
            return
        if self._metadata is None:
            self._metadata = dict(part.metadata)
        else:
            check_mergeable(self._metadata, part.metadata)
            self._metadata["n_sequences"] = int(self._metadata.get("n_sequences", 0)) + part.n_sequences
            if "n_empty" in part.metadata:
                self._metadata["n_empty"] = int(self._metadata.get("n_empty", 0)) + int(part.metadata["n_empty"])
        self._shape = (max(self._shape[0], part.n_positions), max(self._shape[1], part.vocab_size))
        for name, matrix in (("counts", part.counts), ("half", part.half)):
            matrix = sp.csr_array(matrix)
            matrix.sum_duplicates()  # canonical: sorted, distinct entries
            keys, (values,) = merge_sorted(
                self._keys.get(name, np.zeros(0, dtype=np.int64)),
                [self._values.get(name, np.zeros(0, dtype=np.int64))],
                csr_keys(matrix),
                [matrix.data.astype(np.int64)],
            )
            self._keys[name], self._values[name] = keys, values

    def result(self) -> PositionalCounts | None:
        if self._built is not None or self._metadata is None:
            return self._built
        counts, half = (keys_to_csr(self._keys[n], self._values[n], self._shape) for n in ("counts", "half"))
        return PositionalCounts(counts, half, self._metadata, None)


# --- the driver ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CountJob:
    """A count's settings: what determines the counts, and how they are made (never changing them).

    tokenizer : its spec (a Hugging Face name or folder, ``whitespace``, ``char``), loaded by
        :func:`compute_counts` (:func:`count_stream` is handed the loaded tokenizer).
    max_length, add_special_tokens : the tokenizer's truncation and special tokens.
    exclude_special : special tokens ([CLS], [SEP], ...) are not counted.
    limit : count the first ``limit`` texts kept.
    split_seed : the seed of the split-half coins.
    sample, sample_seed : keep the text of raw index r when the r-th uniform of the sample stream
        of ``sample_seed`` is below ``sample``.
    workers, cluster : processes on this machine (default: every core), or a Dask scheduler's address.
    work_dir : the per-shard partial counts, kept (default: a job folder in the cache, removed
        once the counts are done).
    fresh : earlier partial counts in the work folder are discarded.
    """

    tokenizer: str = "bert-base-uncased"
    max_length: int | None = None
    exclude_special: bool = False
    add_special_tokens: bool = True
    limit: int | None = None
    split_seed: int = 0
    sample: float | None = None
    sample_seed: int = 0
    workers: int | None = None
    cluster: str | None = None
    work_dir: str | os.PathLike[str] | None = None
    fresh: bool = False
    #: rows (each text a sequence, truncated), document (each document whole) or packed (texts
    #: joined by EOS and cut into max_length sequences): :data:`~geoanalyze.corpus.sources.READ_MODES`
    read: str = "rows"


@dataclass(frozen=True)
class CountReport:
    """What a count did: shards counted now and reused, tokens, time, engine; or ``cached``: none."""

    shards: int = 0
    counted: int = 0
    reused: int = 0
    tokens: int = 0
    seconds: float = 0.0
    engine: str = ""
    work_dir: str | None = None
    cached: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "shards": self.shards,
            "counted": self.counted,
            "reused": self.reused,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "tokens_per_second": round(self.tokens / self.seconds) if self.seconds > 0 else None,
            "engine": self.engine,
            "work_dir": self.work_dir,
        }


def compute_counts(
    source: CorpusSource, job: CountJob = CountJob(), cache: bool = True, progress: Any = None
) -> tuple[PositionalCounts, CountReport]:
    """Counts of a corpus source, streamed shard by shard, from the cache when done before.

    Returns the counts and what counting them did (``cached`` when they came from the cache).
    ``cache=False`` (``--no-cache``) recounts and neither reads nor writes any cache
    (:func:`geoanalyze.cache.caching`); an entry is served only if the key recorded in its header
    is the key asked for. The cache key covers the corpus fingerprint (the SHA-256 of every local
    file's bytes with its format, a folder's relative names; or the hub id, config and split; or
    the synthetic spec), the tokenizer (its spec and the digests of the files it loads from),
    every setting of ``job`` that changes the result and the file format version; not the
    corpus's path, ``workers``, ``cluster`` or ``work_dir``, which never change it.

    The counting itself is :func:`count_stream`. ``progress`` is a factory ``(description,
    n_shards)`` returning a :class:`~geoanalyze.progress.CountProgress`, or a callback advanced
    by one per shard done.
    """
    with caching(cache):
        key = _counts_key(source, job)
        cached = cache_entry("counts", key)
        if cache_holds(cached):
            hit = _cached_counts(cached, key)
            if hit is not None:
                # Keyed by content: the entry may have been written for a copy at another path.
                hit.metadata["corpus"] = [corpus_entry(source, job.limit)]
                return hit, CountReport(cached=True)
        if job.limit is not None and job.limit < 1:
            raise InputError(f"--limit must be at least 1, got {job.limit}")
        shards = shards_of(source, job.read)
        special = job.add_special_tokens and job.read != "packed"  # packed: only the separator between texts
        tok = get_tokenizer(job.tokenizer, max_length=read_max_length(job), add_special_tokens=special)
        _note_reading(tok, job)
        bar = progress(f"counting {source.name}", len(shards)) if progress else None
        if bar is not None and not hasattr(bar, "shard_done"):
            bar = ShardCallbackProgress(bar)
        try:
            counts, report = count_stream(shards, tok, job, _job_description(source, tok, job), bar)
        finally:
            if bar is not None:
                bar.close()
        counts.metadata["corpus"] = [corpus_entry(source, job.limit)]
        if job.sample is not None:
            counts.metadata["sample"] = {"fraction": float(job.sample), "seed": int(job.sample_seed)}
        # The entry records its key (served only under it); an unwritable cache never fails the job;
        # with --no-cache nothing is written.
        metadata = {**counts.metadata, KEY_FIELD: cache_key(key)}
        entry = PositionalCounts(counts.counts, counts.half, metadata, counts.vocab)
        write_cache(lambda: entry.save(cached))
        return counts, report


def corpus_entry(source: CorpusSource, limit: int | None) -> dict[str, Any]:
    """A corpus as a counts file's header records it: where it was read, the --limit, and its
    ``fingerprint`` (the digest of its contents), which tells a counts file of a corpus given
    beside that corpus, or beside another counts file of it, for what it is (counted twice)."""
    return dict(source.describe(), limit=limit, fingerprint=source.fingerprint)


def _counts_key(source: CorpusSource, job: CountJob) -> dict[str, Any]:
    """What determines a corpus's counts: the cache key of :func:`compute_counts` (its format:
    version 3, content fingerprints)."""
    key: dict[str, Any] = {
        "source": source.fingerprint,
        "text_column": source.text_column,
        "tokenizer": job.tokenizer,
        "tokenizer_files": tokenizer_fingerprint(job.tokenizer),
        "max_length": job.max_length,
        "exclude_special": job.exclude_special,
        "add_special_tokens": job.add_special_tokens,
        "limit": job.limit,
        "split_seed": job.split_seed,
        "version": 3,
    }
    if job.sample is not None:
        key.update(sample=float(job.sample), sample_seed=int(job.sample_seed))
    if job.read != "rows":
        key.update(read=job.read)
    return key


def read_max_length(job: CountJob) -> int | None:
    """The length sequences are cut at: --max-length, else in document mode DOCUMENT_MAX_LENGTH (a
    document is not cut at the tokenizer's model_max_length), else the tokenizer's own."""
    check_read_mode(job.read)
    if job.max_length is None and job.read == "document":
        return DOCUMENT_MAX_LENGTH
    return job.max_length


def _note_reading(tok: Tokenizer, job: CountJob) -> None:
    """Say how the corpus is cut, where it is not the tokenizer's usual reading: documents read
    whole, a --max-length beyond the tokenizer's model_max_length (allowed for counting: positions
    no model of that tokenizer saw), the token packed texts are joined by."""
    if job.read == "packed":
        separator = packing_separator(tok)
        what = "EOS" if getattr(getattr(tok, "hf", None), "eos_token_id", None) == separator[0] else "SEP, no EOS"
        note(f"--read packed: texts joined by {separator[1]} ({what}) and cut into sequences of {tok.max_length}")
    if job.read == "document" and job.max_length is None:
        note(
            f"--read document: documents are read whole up to {DOCUMENT_MAX_LENGTH:,} tokens, past the "
            "tokenizer's model_max_length; pass --max-length to cut them shorter"
        )
    hf = getattr(tok, "hf", None)
    if hf is None or job.max_length is None:
        return
    with contextlib.suppress(InputError):  # a model_max_length that is no number gives way to --max-length
        ceiling = model_max_length(hf, tok.name)
        if tok.max_length > ceiling:
            note(
                f"sequences of up to {tok.max_length:,} tokens, beyond {tok.name}'s model_max_length "
                f"{ceiling}: allowed for counting (a model of it never saw those positions)"
            )


def _job_description(source: CorpusSource, tok: Tokenizer, job: CountJob) -> dict[str, Any]:
    """What determines a streamed count's result: the key of its work folder."""
    return {
        "corpus": source.name,
        "location": source.location,
        "text_column": source.text_column,
        "tokenizer": tokenizer_identity(tok),
        "max_length": tok.max_length,
        "exclude_special": bool(job.exclude_special),
        "add_special_tokens": bool(job.add_special_tokens),
        "split_seed": int(job.split_seed),
        "limit": job.limit,
        "sample": None if job.sample is None else [float(job.sample), int(job.sample_seed)],
        **({"read": job.read} if job.read != "rows" else {}),
    }


def _cached_counts(path: Path, key: dict[str, Any]) -> PositionalCounts | None:
    """The counts of a cache entry, or None for a damaged one or one whose recorded key is not
    ``key`` (removed: it is recomputed, never trusted)."""
    try:
        counts = PositionalCounts.load(path)
        if not key_matches(counts.metadata, key):
            raise FormatError(f"{path} records another key")
        counts.metadata.pop(KEY_FIELD, None)
        return counts
    except FormatError:
        with contextlib.suppress(OSError):  # a read-only cache keeps it; it is never trusted
            path.unlink(missing_ok=True)
    return None


def count_stream(
    shards: list[Shard],
    tokenizer: Tokenizer,
    job: CountJob,
    key: Mapping[str, Any],
    progress: CountProgress | None = None,
) -> tuple[PositionalCounts, CountReport]:
    """Count shards into one :class:`PositionalCounts`, streamed, in parallel, resumably.

    ``key`` describes everything that determines the result (it keys the work folder); the
    partial counts land in ``job.work_dir`` (kept), else in a temporary job folder under the
    cache (removed after success). Memory is bounded by one batch of text and the n x V counts
    per worker; ``progress`` receives the runner's events.
    """
    if job.limit is not None and job.limit < 1:
        raise InputError(f"--limit must be at least 1, got {job.limit}")
    if job.sample is not None and not 0.0 < job.sample <= 1.0:
        raise InputError(f"--sample must be a fraction in (0, 1], got {job.sample}")
    return_freed_memory()
    key = dict(key, version=WORK_VERSION, shards=[s.name for s in shards])
    work_dir = None if job.work_dir is None else Path(job.work_dir)
    fingerprints = [shard.fingerprint() for shard in shards]
    folder, keep_work = _open_work_folder(work_dir, key, fingerprints, job.fresh, work_dir is not None)
    try:
        return _count_into(folder, keep_work, shards, tokenizer, job, str(key.get("corpus", "")), progress)
    except BaseException:
        if folder.temporary:  # a temporary folder never outlives its job (a cache's job folder is resumed)
            shutil.rmtree(folder.path, ignore_errors=True)
        raise


def _count_into(
    folder: WorkFolder,
    keep_work: bool,
    shards: list[Shard],
    tokenizer: Tokenizer,
    job: CountJob,
    corpus: str,
    progress: CountProgress | None,
) -> tuple[PositionalCounts, CountReport]:
    """:func:`count_stream` in its work folder."""
    template = ShardJob(0, shards[0], tokenizer.spec(), job.exclude_special, job.split_seed,
                        sample=job.sample, sample_seed=job.sample_seed)  # fmt: skip
    earlier = _earlier_headers(folder)
    start = time.perf_counter()
    executor = make_executor(job.workers, job.cluster, len(shards) - len(earlier))
    scheduler = _Scheduler(shards, folder, template, job.limit, executor, progress, earlier)
    aborted = True
    try:
        scheduler.run()
        aborted = False
    finally:
        executor.close(abort=aborted)
    tally = (scheduler.counted, scheduler.reused, scheduler.tokens, time.perf_counter() - start)
    report = CountReport(len(shards), *tally, executor.description, str(folder.path))
    merged = scheduler.merger.result()
    if merged is None or merged.n_sequences == 0:
        raise InputError(f"the corpus {corpus} holds no text; check the files or the split")
    if not keep_work:
        shutil.rmtree(folder.path, ignore_errors=True)
    return _finished(merged), report


def _open_work_folder(
    work_dir: Path | None, job: dict[str, Any], fingerprints: list[str], fresh: bool, keep_work: bool
) -> tuple[WorkFolder, bool]:
    """The job's work folder and whether it is kept after success: ``work_dir``, else a job
    folder in the cache, else (the cache cannot hold it) a temporary folder, removed after:
    a cache never fails a job, and a killed job then starts over. With caches off (``--no-cache``)
    the folder is a temporary one: the cache is neither read nor written."""
    from ..cache import cache_enabled

    if work_dir is None and not cache_enabled():
        folder = WorkFolder.open(Path(tempfile.mkdtemp(prefix="geoanalyze-count-")), job, fingerprints)
        folder.temporary = True
        return folder, False
    in_cache = work_dir is None
    if work_dir is None:
        key = hashlib.sha256(json.dumps(job, sort_keys=True, default=str).encode()).hexdigest()[:24]
        work_dir = cache_dir() / "jobs" / key
    try:
        if fresh and work_dir.is_dir():
            for old in work_dir.glob("shard-*.safetensors"):
                old.unlink()
            (work_dir / "plan.json").unlink(missing_ok=True)
        folder = WorkFolder.open(work_dir, job, fingerprints)
    except (OSError, InputError) as exc:
        if not in_cache or isinstance(exc, (FormatError, IncompatibleError)):
            raise
        from ..cache import note_cache_failure

        note_cache_failure(exc)
        work_dir, keep_work = Path(tempfile.mkdtemp(prefix="geoanalyze-count-")), False
        folder = WorkFolder.open(work_dir, job, fingerprints)
        folder.temporary = True
    folder.best_effort = in_cache
    return folder, keep_work


def _earlier_headers(folder: WorkFolder) -> dict[int, ShardReport]:
    """What the partial counts an earlier run left record (used if still placed alike); the
    sizes of the shards they read whole are known from them."""
    earlier: dict[int, ShardReport] = {}
    for index in range(len(folder.fingerprints)):
        header = folder.peek(index)
        if header is not None:
            earlier[index] = header
            if header.complete and folder.sizes[index] is None:
                folder.sizes[index] = header.n_read
    return earlier


class _Scheduler:
    """One job's shards through an executor: each placed (its first raw and counted global
    index) once the sizes of the shards before it are known, then reused from the work folder
    or submitted, and merged in shard order as they come back."""

    def __init__(
        self,
        shards: list[Shard],
        folder: WorkFolder,
        template: ShardJob,
        limit: int | None,
        executor: _Executor,
        progress: CountProgress | None,
        earlier: dict[int, ShardReport],
    ):
        self.shards, self.folder, self.template, self.limit = shards, folder, template, limit
        self.executor, self.progress, self.earlier = executor, progress, earlier
        self.counted = self.reused = self.tokens = 0
        self.sizes = folder.sizes
        self.prefix: list[tuple[int, int]] = [(0, 0)]  # (raw first, counted first) of shard k
        self.results: dict[int, PositionalCounts | None] = {}  # None: in the work folder
        self.pending: dict[Any, tuple[str, int]] = {}
        self.submitted: set[int] = set()
        self.skipped: set[int] = set()
        self.merger = ShardMerger()
        self.next_to_merge = 0

    def run(self) -> None:
        """Count every shard and merge it into :attr:`merger`."""
        if self.executor.parallel:
            # The first pass: the sizes that place the later shards, queued first so that every
            # worker takes a share of it before counting (no worker idles at the end for it).
            for k in range(len(self.shards) - 1):
                if self.sizes[k] is None:
                    self.pending[self.executor.submit(shard_size, self.shards[k])] = ("size", k)
        self.submit_ready()
        while True:
            self.merge_ready()
            if self.next_to_merge == len(self.shards):
                return
            if not self.pending:  # pragma: no cover - every shard is either submitted or being sized
                raise RuntimeError("no shard can be placed")
            for handle in self.executor.wait_first(list(self.pending)):
                self.collect(handle)
            self.submit_ready()

    def offsets(self, index: int) -> tuple[int, int, int | None] | None:
        """(raw first, counted first, take) of a shard, once the sizes before it are known."""
        template = self.template
        while len(self.prefix) <= index:
            k = len(self.prefix) - 1
            size = self.sizes[k]
            if size is None:
                return None
            raw, counted = self.prefix[k]
            self.prefix.append((raw + size, counted + _kept_in(template.sample, template.sample_seed, raw, size)))
        raw_first, counted_first = self.prefix[index]
        take = None if self.limit is None else max(0, self.limit - counted_first)
        return raw_first, counted_first, take

    def limit_reached_after(self, index: int) -> None:
        """A shard cut short by --limit: the shards after it count nothing."""
        for k in range(index + 1, len(self.shards)):
            if k not in self.submitted:
                self.submitted.add(k)
                self.skipped.add(k)

    def submit_ready(self) -> None:
        """Place, in order, every shard whose place is known: skipped past --limit, reused, or submitted."""
        for index in range(len(self.shards)):
            if index in self.submitted:
                continue
            placed = self.offsets(index)
            if placed is None:
                return  # the shards after this one wait for its size too
            self.submitted.add(index)
            if placed[2] == 0:
                self.skipped.add(index)  # --limit reached before this shard
                continue
            header = self.earlier.pop(index, None)
            if header is not None and header.placed == placed:
                self._reuse(index, header)
            else:
                self._submit(index, placed)

    def _reuse(self, index: int, header: ShardReport) -> None:
        self.results[index] = None  # read from the work folder when merged
        self.reused += 1
        if self.progress is not None:
            self.progress.shard_done(0, counted_here=False)
        if not header.complete:
            self.limit_reached_after(index)

    def _submit(self, index: int, placed: tuple[int, int, int | None]) -> None:
        raw_first, counted_first, take = placed
        job = replace(
            self.template, index=index, shard=self.shards[index], first=counted_first, raw_first=raw_first, take=take
        )
        path = str(self.folder.shard_file(index)) if self.executor.shares_disk else None
        stamp = {"job_key": self.folder.key, "shard_fingerprint": self.folder.fingerprints[index]}
        # One process reports every batch; workers elsewhere report their shards when done.
        tick = self.progress.add_tokens if self.progress is not None and not self.executor.parallel else None
        self.pending[self.executor.submit(count_and_store, job, path, stamp, tick)] = ("count", index)

    def merge_ready(self) -> None:
        """Merge, in shard order, whatever is ready (built vocabularies need that order)."""
        while self.next_to_merge < len(self.shards) and (
            self.next_to_merge in self.results or self.next_to_merge in self.skipped
        ):
            index = self.next_to_merge
            if index in self.results:
                part = self.results.pop(index) or self.folder.load(index)
                if part is None:
                    raise FormatError(f"the partial counts of shard {index} vanished from {self.folder.path}")
                self.merger.add(part)
            self.next_to_merge += 1

    def collect(self, handle: Any) -> None:
        """A finished job: a shard's size, or its report (with its counts unless the worker wrote them)."""
        what, index = self.pending.pop(handle)
        value = self.executor.result(handle)
        if what == "size":
            self.sizes[index] = int(value)
            self.folder.save_plan()
            return
        if value.counts is not None:
            self.folder.store(index, value.counts)
        self.results[index] = value.counts  # None: written to the work folder, read back when merged
        if value.complete and self.sizes[index] is None:
            self.sizes[index] = value.n_read
            self.folder.save_plan()
        elif not value.complete:
            self.limit_reached_after(index)
        self.counted += 1
        self.tokens += value.n_tokens
        if self.progress is not None:
            self.progress.shard_done(value.n_tokens, counted_here=self.executor.parallel)


def _finished(counts: PositionalCounts) -> PositionalCounts:
    """Canonical matrices and the metadata of a one-pass count (no per-shard keys)."""
    for matrix in (counts.counts, counts.half):
        matrix.sum_duplicates()
        matrix.sort_indices()
    counts.half.eliminate_zeros()
    for key in ("shard", "n_read", "complete", "placed", "n_tokens", "job_key", "shard_fingerprint", "corpus"):
        counts.metadata.pop(key, None)
    return counts
