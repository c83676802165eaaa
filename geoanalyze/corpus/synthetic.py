"""Synthetic corpora whose per-position token distributions are known in closed form.

Each generator draws, for every sequence and every position i, one token independently from
a distribution mu_i that it also returns, so the *true* Hellinger geometry of the corpus is
known exactly and estimators (naive, bias-corrected) can be checked against it.

Kinds
-----
stationary
    mu_i = z for every i, z a Zipf law over the vocabulary. True distances are all 0:
    everything an estimator reports is sampling noise.
drift
    ``anchors`` Zipf laws nu_0..nu_{K-1} over independently permuted vocabularies, placed at
    evenly spaced positions; between two anchors mu_i is the linear mixture
    (1 - lam) nu_k + lam nu_{k+1}. A smooth path through the simplex.
shift
    mu_i(t) = b((t - step * i) mod V) with b a wrapped bump (von Mises shaped) on the
    vocabulary circle: the distance between positions i and j depends only on j - i, the
    shift-equivariant case where a rank-1 (ALiBi-like) geometry is nearly optimal.
rough
    A family that moves continuously from smooth to rough: mu_i proportional to
    z * exp(amplitude * g_i), z a Zipf law over a permuted vocabulary and g a Gaussian process
    along the positions (each token its own independent draw) with the squared-exponential
    kernel exp(-(i - j)^2 / (2 l^2)). ``roughness`` r in [0, 1] sets the length scale
    l = (n / 4)^(1 - r) (1 / 4)^r: r = 0 varies smoothly over the whole sequence, r = 1 draws
    every position independently. The process is stationary, so the expected distance between
    positions depends only on |i - j|; with one seed the same white noise is coloured by every
    l, so the corpus moves continuously with r.

Tokens are written ``w<index>`` and texts join them with single spaces, so the
``whitespace`` tokenizer recovers exactly the drawn tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

KINDS = ("stationary", "drift", "shift", "rough")
#: positions per block when marginals are built and sampled (bounds the temporaries at long lengths)
BLOCK_ROWS = 256


@dataclass(frozen=True)
class SyntheticCorpus:
    """Texts drawn from known per-position marginals.

    Attributes
    ----------
    texts : the sequences, tokens separated by single spaces.
    marginals : (n, V) float64, row i is the true mu_i (rows sum to 1).
    vocab : the V token strings; column t of ``marginals`` is ``vocab[t]``.
    kind, seed : how it was generated.
    """

    texts: list[str]
    marginals: np.ndarray
    vocab: list[str]
    kind: str
    seed: int

    def true_distances(self, metric: str = "hellinger") -> np.ndarray:
        """The exact (population) distance matrix between positions, n x n."""
        from ..geometry.distances import fisher_rao_distances, hellinger_distances

        if metric == "fisher-rao":
            return fisher_rao_distances(self.marginals)
        return hellinger_distances(self.marginals)


def zipf(vocab_size: int, exponent: float = 1.1) -> np.ndarray:
    """Zipf law p_t proportional to (t + 1)^-exponent over t = 0..V-1."""
    weights = np.arange(1, vocab_size + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def stationary_marginals(length: int, vocab_size: int, rng: np.random.Generator) -> np.ndarray:
    """mu_i = one Zipf law (over a random permutation of the vocabulary) at every position."""
    base = zipf(vocab_size)[rng.permutation(vocab_size)]
    return np.tile(base, (length, 1))


def drift_marginals(length: int, vocab_size: int, rng: np.random.Generator, anchors: int = 3) -> np.ndarray:
    """Piecewise-linear mixtures between ``anchors`` Zipf laws over permuted vocabularies."""
    if anchors < 2:
        raise InputError("drift needs at least 2 anchors; pass anchors >= 2")
    base = zipf(vocab_size)
    nus = np.stack([base[rng.permutation(vocab_size)] for _ in range(anchors)])  # (K, V)
    # Position i sits at x = i / (n - 1) * (K - 1) on the anchor axis.
    x = np.linspace(0.0, anchors - 1, length)
    left = np.minimum(np.floor(x).astype(int), anchors - 2)
    lam = (x - left)[:, None]
    # Block by block (the same operations, so the same bits): the temporaries stay a block's size
    # at 131,072 positions, not four copies of the (n, V) result.
    out = np.empty((length, vocab_size))
    for start in range(0, length, BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        out[rows] = (1.0 - lam[rows]) * nus[left[rows]] + lam[rows] * nus[left[rows] + 1]
    return out


def shift_marginals(
    length: int, vocab_size: int, rng: np.random.Generator, step: int | None = None, kappa: float = 8.0
) -> np.ndarray:
    """Cyclic shifts of one wrapped bump: mu_i(t) = b((t - step * i) mod V)."""
    if step is None:
        step = max(1, vocab_size // (4 * length))
    elif not isinstance(step, (int, np.integer)):
        raise InputError(f"shift step must be a whole number, got {step!r}")
    angle = 2.0 * np.pi * np.arange(vocab_size) / vocab_size
    bump = np.exp(kappa * (np.cos(angle) - 1.0)) + 1e-3
    bump /= bump.sum()
    offset = int(rng.integers(vocab_size))
    t = np.arange(vocab_size)
    shifts = offset + step * np.arange(length)
    return bump[(t[None, :] - shifts[:, None]) % vocab_size]


def rough_length_scale(length: int, roughness: float) -> float:
    """l = (n / 4)^(1 - r) (1 / 4)^r: from a quarter of the sequence (r = 0) to a quarter position (r = 1)."""
    return float(max(length / 4.0, 0.25) ** (1.0 - roughness) * 0.25**roughness)


def rough_marginals(
    length: int, vocab_size: int, rng: np.random.Generator, roughness: float = 0.5, amplitude: float = 2.0
) -> np.ndarray:
    """mu_i proportional to z * exp(amplitude * g_i), g a Gaussian process of length scale set by ``roughness``."""
    if not 0.0 <= roughness <= 1.0:
        raise InputError(f"rough needs roughness in [0, 1], got {roughness}")
    if not amplitude >= 0:
        raise InputError(f"rough needs amplitude >= 0, got {amplitude}")
    base = zipf(vocab_size)[rng.permutation(vocab_size)]
    noise = rng.standard_normal((length, vocab_size))
    scale = rough_length_scale(length, roughness)
    lag = np.arange(length, dtype=np.float64)
    kernel = np.exp(-np.square(lag[:, None] - lag[None, :]) / (2.0 * scale**2))
    # A square root of the kernel through its eigenpairs: Cholesky fails on a smooth kernel
    # (numerically rank deficient), and clipping the round-off negatives keeps it real.
    values, vectors = np.linalg.eigh(kernel)
    process = (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T @ noise  # (n, V)
    logits = np.log(base)[None, :] + amplitude * process
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=1, keepdims=True)


_GENERATORS: dict[str, Callable[..., np.ndarray]] = {
    "stationary": stationary_marginals,
    "drift": drift_marginals,
    "shift": shift_marginals,
    "rough": rough_marginals,
}


def sample_tokens(marginals: np.ndarray, n_sequences: int, rng: np.random.Generator) -> np.ndarray:
    """Draw an (n_sequences, n) array of token ids, column i i.i.d. from row i of ``marginals``.

    Inverse-CDF sampling: token = #{t : cdf_i(t) <= u}, the ``searchsorted(cdf_i, u, "right")`` of
    each position, vectorised over a block of positions at once (:func:`_inverse_cdf`); the same
    uniforms, so the same tokens as one search per position.
    """
    length, vocab_size = marginals.shape
    u = rng.random((n_sequences, length))
    tokens = np.empty((n_sequences, length), dtype=np.int64)
    for start in range(0, length, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, length)
        cdf = np.cumsum(marginals[start:stop], axis=1)
        cdf[:, -1] = 1.0  # no draw may fall past the last token through rounding
        tokens[:, start:stop] = _inverse_cdf(cdf, u[:, start:stop])
    return np.minimum(tokens, vocab_size - 1)


def _inverse_cdf(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``searchsorted(cdf[i], u[:, i], "right")`` for every column i at once, exactly.

    One search into the rows laid end to end, row i shifted by i. Adding i never reverses an order
    (rounding is monotone), it can only make a near pair equal; so an answer is exact unless the key
    before it equals the query (a tie the shift may have made) or it falls outside its row (the
    last entry, set to 1.0, may sit below a rounded 1 + ulp before it). Those few are searched
    again one by one.
    """
    rows, vocab_size = cdf.shape
    offsets = np.arange(rows, dtype=np.float64)
    flat = (cdf + offsets[:, None]).ravel()
    queries = u.T + offsets[:, None]  # one row of queries a position: each search starts near the last
    found = np.searchsorted(flat, queries, side="right")
    t = found - (np.arange(rows) * vocab_size)[:, None]
    doubtful = (t < 0) | (t >= vocab_size) | (flat[np.maximum(found - 1, 0)] == queries)
    for i, s in zip(*np.nonzero(doubtful), strict=True):
        t[i, s] = np.searchsorted(cdf[i], u[s, i], side="right")
    return t.T


def join_tokens(tokens: np.ndarray, vocab: Sequence[str]) -> list[str]:
    """Each row of token ids as text: the token strings joined by single spaces (one row at a time:
    no string object per token is made, only a reference to the vocabulary's)."""
    return [" ".join(map(vocab.__getitem__, row.tolist())) for row in tokens]


def synthetic_corpus(
    kind: str = "drift",
    n_sequences: int = 2000,
    length: int = 64,
    vocab_size: int = 500,
    seed: int = 0,
    words: Sequence[str] | None = None,
    **options: float,
) -> SyntheticCorpus:
    """Generate a corpus with known per-position marginals.

    Parameters
    ----------
    kind : "stationary", "drift", "shift" or "rough" (see the module docstring).
    n_sequences : number of texts; every position then has N_i = n_sequences.
    length : tokens per text (= number of positions n).
    vocab_size : V, the size of the vocabulary the marginals live on.
    seed : the only source of randomness (numpy's PCG64).
    words : token strings to use instead of ``w0, w1, ...`` (at least ``vocab_size`` distinct,
        no whitespace); a seeded sample of them becomes the vocabulary. With whole words of a
        model's vocabulary (:func:`tokenizer_words`) each token is one model token, so the known
        geometry survives the model's tokenizer (shifted by one position after [CLS]).
    options : kind-specific: ``anchors`` (drift), ``step``, ``kappa`` (shift), ``roughness``,
        ``amplitude`` (rough).

    Returns
    -------
    SyntheticCorpus with ``texts`` and the true ``marginals`` (length x vocab_size).
    """
    checked = check_parameters(kind, n_sequences, length, vocab_size, seed, options)
    rng = np.random.default_rng(int(seed))
    marginals = _GENERATORS[kind](int(length), int(vocab_size), rng, **checked)
    check_marginals(kind, marginals)
    tokens = sample_tokens(marginals, int(n_sequences), rng)
    vocab = [f"w{t}" for t in range(vocab_size)] if words is None else _pick_words(words, vocab_size, rng)
    texts = join_tokens(tokens, vocab)
    return SyntheticCorpus(texts=texts, marginals=marginals, vocab=vocab, kind=kind, seed=seed)


#: the options each kind takes, with their checks: (type, lowest, highest), both ends inclusive
_OPTIONS: dict[str, dict[str, tuple[type, float, float]]] = {
    "stationary": {},
    "drift": {"anchors": (int, 2, 10_000)},
    "shift": {"step": (int, 0, 2**40), "kappa": (float, 0.0, 1e4)},
    "rough": {"roughness": (float, 0.0, 1.0), "amplitude": (float, 0.0, 50.0)},
}
#: the spec's short names of the common parameters (as in ``synthetic:drift,n=300,length=16``)
_SHORT = {"n_sequences": "n", "vocab_size": "vocab"}
#: at most this many cells in one dense array (tokens n x length, marginals length x V): 400 MB of float64
MAX_CELLS = 50_000_000


def _show(value: object) -> str:
    """A value as a user wrote it, short: 1e+300 rather than 301 digits."""
    if isinstance(value, (float, np.floating)) or (isinstance(value, (int, np.integer)) and abs(int(value)) >= 10**15):
        return f"{float(value):g}"  # type: ignore[arg-type]
    return repr(value)


def _whole(name: str, value: object, low: int, high: int | None = None) -> int:
    shown = _SHORT.get(name, name)
    number = value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, (int, np.integer)):
        raise InputError(f"synthetic {shown} must be a whole number, got {_show(value)}")
    if number < low or (high is not None and number > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise InputError(f"synthetic {shown} must be {bound}, got {_show(number)}")
    return int(number)


def check_parameters(
    kind: str, n_sequences: object, length: object, vocab_size: object, seed: object, options: Mapping[str, object]
) -> dict[str, object]:
    """Every parameter of a synthetic corpus checked (type, range, known to the kind) before any work.

    Returns the kind's options as the generator takes them (whole numbers as int). The sizes are
    bounded so no array exceeds :data:`MAX_CELLS` cells: a huge spec is refused, not allocated.
    """
    if not isinstance(kind, str) or kind not in _GENERATORS:
        raise InputError(f"unknown synthetic kind {kind!r}; choose one of {', '.join(KINDS)}")
    n = _whole("n_sequences", n_sequences, 1)
    positions = _whole("length", length, 1)
    vocab = _whole("vocab_size", vocab_size, 1)
    _whole("seed", seed, 0, 2**63 - 1)
    for first, second, a, b in (("n", "length", n, positions), ("length", "vocab", positions, vocab)):
        if a * b > MAX_CELLS:
            raise InputError(
                f"synthetic {first}={a} x {second}={b} is {a * b:,} cells, above the {MAX_CELLS:,} a synthetic corpus "
                "may hold; lower one of them"
            )
    allowed = _OPTIONS[kind]
    checked: dict[str, object] = {}
    for key, value in options.items():
        if key not in allowed:
            takes = ", ".join(sorted(allowed)) if allowed else "no option"
            raise InputError(
                f"unknown option {key!r} for synthetic {kind}; it takes {takes} besides n, length, vocab and seed"
            )
        kind_of, low, high = allowed[key]
        if kind_of is int:
            checked[key] = _whole(key, value, int(low), int(high))
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InputError(f"synthetic {key} must be a number, got {_show(value)}")
        if not (math.isfinite(float(value)) and low <= float(value) <= high):
            raise InputError(f"synthetic {key} must be a finite number in [{low:g}, {high:g}], got {_show(value)}")
        checked[key] = float(value)
    if "anchors" in checked and int(checked["anchors"]) * vocab > MAX_CELLS:  # type: ignore[call-overload]
        raise InputError(f"synthetic anchors x vocab is above {MAX_CELLS:,} cells; lower anchors or vocab")
    return checked


def check_marginals(kind: str, marginals: np.ndarray) -> None:
    """The generated marginals must be finite, non-negative and sum to 1 per position."""
    if not np.all(np.isfinite(marginals)) or np.any(marginals < 0):
        raise InputError(
            f"the parameters of synthetic {kind} make non-finite or negative marginals (a numeric overflow); "
            "use values closer to the defaults"
        )
    sums = marginals.sum(axis=1)
    if not np.allclose(sums, 1.0, rtol=0, atol=1e-9):
        raise InputError(
            f"the parameters of synthetic {kind} make marginals that do not sum to 1 (worst {float(sums.min()):.3g}); "
            "use values closer to the defaults"
        )


def _pick_words(words: Sequence[str], vocab_size: int, rng: np.random.Generator) -> list[str]:
    pool = sorted(set(words))
    if any(not word or any(c.isspace() for c in word) for word in pool):
        raise InputError("synthetic words must be non-empty and contain no whitespace")
    if len(pool) < vocab_size:
        raise InputError(f"{len(pool)} distinct words given but vocab_size is {vocab_size}; pass more words")
    return [pool[i] for i in rng.choice(len(pool), size=vocab_size, replace=False)]


def tokenizer_words(vocab_file: str | Path) -> list[str]:
    """Whole lower-case alphabetic words (3+ letters) of a WordPiece vocab.txt: one token each."""
    lines = Path(vocab_file).read_text(encoding="utf-8").splitlines()
    return [word for word in lines if len(word) >= 3 and word.isascii() and word.isalpha() and word.islower()]
