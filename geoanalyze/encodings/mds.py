r"""The ``mds`` encoding: the optimum every score is measured against, or a stored MDS encoding.

mds            classical MDS of the target distances D, all positive dimensions:
               X = V_+ \Lambda_+^{1/2} of B = -J D^{(2)} J / 2 (geometry/mds.py)
mds:rank=R     its top R dimensions
mds:<file>     the rows of a PE file written by ``geoanalyze mds -o`` (files.py)

The first two are built from the target distances, so they are checked once D exists.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .files import table_encoding
from .registry import Encoding, EncodingContext, Parameter, encoding, parse_parameters, reject_unknown

#: the number of MDS dimensions kept (None: every positive one)
RANK = Parameter("rank", int)


@encoding(
    "mds",
    "classical MDS of the target distances (mds, mds:rank=R), or rows of a PE file: mds:<file>",
    takes_path=True,
    order=50,
    model_width=False,
)
def mds_encoding(spec: str, args: str) -> Encoding:
    """``mds`` / ``mds:rank=R`` (checked now: rank a positive integer), else ``mds:<file>``."""
    if args and not args.startswith(f"{RANK.name}="):
        return table_encoding(spec, args)
    given = parse_parameters(args, spec)
    reject_unknown(given, (RANK,), "mds")
    rank = RANK.value(given)
    if rank is not None and not isinstance(rank, str) and rank < 1:
        raise InputError(f"mds:rank must be at least 1, got {rank}")
    return Encoding(
        spec,
        lambda positions, context: optimal_mds(context, None if rank is None else int(rank)),
        needs_distances=True,
    )


def optimal_mds(context: EncodingContext, rank: int | None = None) -> np.ndarray:
    """Classical MDS of the target distances: all positive dimensions, or the top ``rank``."""
    if context.distances is None:
        raise InputError("mds without a file needs the target distances; write mds:<file.safetensors>")
    from ..geometry.mds import classical_mds

    return classical_mds(context.distances).coordinates(rank)
