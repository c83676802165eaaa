"""Bit-identical CPU training per seed, whatever the machine's thread count.

What a CPU run depends on besides its seed is the number of torch's intra-op threads: a reduction
to few outputs (a full sum, LayerNorm's weight and bias gradients) is split into one partial sum
per thread, so 1 and 2 threads give gradients a few ulps apart, and a few hundred steps turn those
ulps into different models (see docs/determinism.md for the measured spread). The data, the
initialisation and the dropout masks are pure functions of the seed (:mod:`.tasks`, :mod:`.loop`,
:mod:`.geometric`); the thread count is fixed here:

    with deterministic(device):
        ...  # on CPU: GEOANALYZE_CPU_THREADS intra-op threads (default 1), deterministic kernels

The thread count is the outermost scope's: a training run inside ``verify`` (which enters this
scope for the whole experiment, evaluation included) keeps the experiment's count. On CUDA nothing
is changed: GPU runs are not claimed bit-identical (cuBLAS, atomics).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from ..errors import InputError

#: the environment variable that sets the CPU thread count of training and ``verify``
THREADS_VARIABLE = "GEOANALYZE_CPU_THREADS"
#: its default: one thread (the models here are small; a second thread rarely halves a step)
DEFAULT_THREADS = 1

_fixed = 0  # how many enclosing scopes have fixed the thread count (torch's setting is process-wide)


def cpu_threads() -> int:
    """The intra-op thread count CPU training runs at: $GEOANALYZE_CPU_THREADS, default 1.

    0 leaves torch's own setting (its default is one thread per core): faster on a large idle
    machine, but the numbers then depend on the thread count. A count above the cores this process
    may run on (:func:`~geoanalyze.corpus.streaming.default_workers`) is capped there, with a note: more threads than cores only
    stall the machine (10,000 threads on 2 cores took a load average of 1,287), and the numbers
    do not depend on the count.
    """
    raw = os.environ.get(THREADS_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_THREADS
    try:
        threads = int(raw)
    except ValueError:
        threads = -1
    if threads < 0:
        raise InputError(f"{THREADS_VARIABLE} must be an integer >= 0 (0: torch's default), got {raw!r}")
    from ..corpus.streaming import default_workers

    cores = default_workers()
    if threads > cores:
        from .. import notes

        notes.note(
            f"{THREADS_VARIABLE}={raw} is more than the {cores} core{'s' if cores != 1 else ''} this machine "
            f"gives the run; it runs on {cores} thread{'s' if cores != 1 else ''} (the results are the same)"
        )
        return cores
    return threads


@contextlib.contextmanager
def fixed_threads(threads: int | None = None) -> Iterator[None]:
    """Run torch's CPU ops on ``threads`` intra-op threads, and the BLAS and OpenMP pools numpy and scipy
    call (OpenBLAS, MKL: threadpoolctl) on as many, restoring both after.

    ``None``: the count an enclosing scope fixed, else :func:`cpu_threads`. 0: leave it as it is.
    BLAS splits a matrix product's sums by thread as torch does, so an MDS (an eigendecomposition, a
    SMACOF product) differs in its last bits between 1 and 2 BLAS threads unless they are fixed too.
    The limits reach the libraries loaded when the scope is entered: numpy's and scipy's BLAS (scipy
    ships its own) and torch's OpenMP are loaded first.
    """
    import scipy.linalg  # noqa: F401  (loads scipy's own BLAS, so that the limits below reach it too)
    from threadpoolctl import threadpool_limits

    global _fixed
    if threads is None:
        threads = 0 if _fixed else cpu_threads()
    before = torch.get_num_threads()
    if threads > 0 and threads != before:
        torch.set_num_threads(threads)
    pools = threadpool_limits(limits=threads) if threads > 0 else contextlib.nullcontext()
    _fixed += 1
    try:
        with pools:
            yield
    finally:
        _fixed -= 1
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


@contextlib.contextmanager
def deterministic(device: torch.device | str = "cpu", threads: int | None = None) -> Iterator[None]:
    """On CPU: :func:`fixed_threads` and ``torch.use_deterministic_algorithms(True)`` (an op without a
    deterministic kernel raises), both restored after. On another device: nothing."""
    if torch.device(device).type != "cpu":
        yield
        return
    enabled, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(True)
    try:
        with fixed_threads(threads):
            yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
