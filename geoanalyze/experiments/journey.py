"""``geoanalyze verify journey``: JoFormer's algebra, each law measured on random data with a numeric verdict.

Checks (all in float64; tolerances are round-off bounds, not fitted), one function each, whose docstring
states its law: associativity, path-independence and path-dependence, flat-regime, equivariance,
curved-not-equivariant, dft, norms and factored=materialized.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from .record import Check, ExperimentOptions, ExperimentResult, Stopwatch, markdown_table
from .registry import experiment
from .stat_tests import tolerance_check

if TYPE_CHECKING:
    import torch

    from ..models import journey as jr

TOLERANCE = 1e-9
#: a path dependence / equivariance violation above this is "clearly nonzero" (round-off is ~1e-15)
CURVED_FLOOR = 1e-3
#: the lattice endpoints (r, c) of the path checks
SIZES = [(r, c) for r in range(1, 5) for c in range(1, 5)]


@dataclass(frozen=True)
class Draws:
    """The checks' random data: one generator, drawn from in the checks' order; ``d`` the generators' size."""

    rng: np.random.Generator
    trials: int
    d: int = 16

    def toral(self) -> jr.Toral:
        from ..models import journey as jr

        return jr.Toral(self.rng.uniform(-np.pi, np.pi, self.d // 2))

    def dense(self) -> jr.Dense:
        from ..models import journey as jr

        return jr.random_dense(self.d, self.rng)

    def datum(self, axes: int, dense: bool) -> jr.Datum:
        from ..models import journey as jr

        gens = tuple(self.dense() if dense else self.toral() for _ in range(axes))
        return jr.Datum(self.rng.standard_normal(self.d), gens)

    def tensor(self, shape: tuple[int, ...], bounds: tuple[float, float] | None = None) -> torch.Tensor:
        """float64 draws of ``shape``: standard normal, or uniform on [low, high) = ``bounds``."""
        import torch

        values = self.rng.standard_normal(shape) if bounds is None else self.rng.uniform(*bounds, shape)
        return torch.as_tensor(values)


@experiment(
    "journey",
    summary="JoFormer algebra: associativity, path (in)dependence, flat regime, equivariance, DFT, norms",
    paper="arXiv 2505.15507",
    minutes_ci=0.5,
)
def journey_checks(options: ExperimentOptions) -> ExperimentResult:
    """Run every check of the algebra; ``options.seed`` seeds the random data (``preset`` changes only sizes)."""
    if options.overrides:
        raise InputError("journey takes no --set overrides; remove them (--preset and --seed are its only settings)")
    watch = Stopwatch()
    draws = Draws(np.random.default_rng(options.seed), {"smoke": 5, "ci": 20}.get(options.preset, 200))
    checks = [associativity_check(draws)]
    path_checks, curved_values = path_dependence_checks(draws)
    checks += [*path_checks, flat_regime_check(draws)]
    n, shift = 24, int(draws.rng.integers(1, 1000))
    q, k, v = (draws.tensor((1, 2, n, draws.d)) for _ in range(3))
    checks += [
        equivariance_check(q, k, v, shift),
        curved_check(draws, q, k, v),
        dft_check(draws),
        norms_check(draws, n),
        factored_check(draws, q, k, v),
    ]
    figure = "journey_path_dependence.png"
    _figure(SIZES, curved_values, options.work_dir / figure)
    table = markdown_table(
        ["grid endpoint (r, c)", "dense: Frobenius norm of P_rows-first - P_cols-first"],
        [[f"({r}, {c})", value] for (r, c), value in zip(SIZES, curved_values, strict=True)][::3],
    )
    return ExperimentResult(
        name="journey",
        title="JoFormer's algebra: associativity, path (in)dependence, flat regime, equivariance, DFT, norms",
        checks=checks,
        data={"path_dependence": {"sizes": SIZES, "dense": curved_values}},
        sections=["### Path dependence of dense generators\n\n" + table],
        figures={figure: "Path dependence of dense (curved) generators; toral (flat) ones are ~1e-15"},
        preset=options.preset,
        seconds=watch(),
    )


def associativity_check(draws: Draws) -> Check:
    """(x o_k y) o_k z = x o_k (y o_k z) along each axis, toral and dense generators, 1-D and 2-D."""
    from ..models import journey as jr

    worst = 0.0
    for _ in range(draws.trials):
        for axes, dense in ((1, False), (1, True), (2, False), (2, True)):
            x, y, z = draws.datum(axes, dense), draws.datum(axes, dense), draws.datum(axes, dense)
            for axis in range(axes):  # composition is associative along each axis
                left = jr.compose(jr.compose(x, y, axis), z, axis)
                right = jr.compose(x, jr.compose(y, z, axis), axis)
                worst = max(worst, _datum_gap(left, right))
    return _within("associativity", f"max abs((x o_k y) o_k z - x o_k (y o_k z)) <= {TOLERANCE:g}", worst)


def path_dependence_checks(draws: Draws) -> tuple[list[Check], list[float]]:
    """Path (in)dependence on a 2-D lattice: commuting generators give one P for every path, dense ones do not.

    Returns the checks and the dense generators' path dependence per endpoint of :data:`SIZES`.
    """
    from ..models import journey as jr

    flat = max(jr.path_dependence((draws.toral(), draws.toral()), r, c) for r, c in SIZES)
    curved_values = [jr.path_dependence((draws.dense(), draws.dense()), r, c) for r, c in SIZES]
    random_paths = 0.0
    generators = (draws.toral(), draws.toral())
    for _ in range(draws.trials):
        r, c = int(draws.rng.integers(1, 6)), int(draws.rng.integers(1, 6))
        moves = draws.rng.permutation([0] * r + [1] * c).tolist()
        one = jr.grid_path_operator(generators, moves).matrix()
        other = jr.grid_path_operator(generators, [0] * r + [1] * c).matrix()
        random_paths = max(random_paths, float(np.abs(one - other).max()))
    flat = max(flat, random_paths)
    curved = float(min(curved_values))
    return [
        _within(
            "path-independence",
            f"commuting axis generators: max abs(P_path1 - P_path2) over lattice paths <= {TOLERANCE:g}",
            flat,
        ),
        tolerance_check(
            "path-dependence",
            f"dense non-commuting generators: min over 16 endpoints of the Frobenius norm of P_rows-first - P_cols-first > {CURVED_FLOOR:g}",
            curved,
            curved > CURVED_FLOOR,
            detail=f"median {np.median(curved_values):.3g}, max {max(curved_values):.3g} (Frobenius, d = {draws.d})",
        ),
    ], curved_values


def flat_regime_check(draws: Draws) -> Check:
    """Equal toral steps R: P_{j->k} = R^{k-j} and = F_k F_j^{-1}."""
    from ..models import journey as jr

    R = draws.toral()
    steps = np.repeat(R.angles[None], 40, axis=0)
    frames = [R.power(t) for t in range(40)]
    gap = 0.0
    for _ in range(draws.trials):
        start, end = (int(t) for t in draws.rng.integers(0, 40, 2))
        P = jr.journey_operator_1d(steps, start, end).matrix()
        gap = max(gap, float(np.abs(P - R.power(end - start).matrix()).max()))
        gap = max(gap, float(np.abs(P - frames[end].then(frames[start].inverse()).matrix()).max()))
    return _within("flat-regime", f"max abs(P_(j->k) - R^(k-j)) and abs(P_(j->k) - F_k F_j^-1) <= {TOLERANCE:g}", gap)


def equivariance_check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shift: int) -> Check:
    """Value transport with RoPE scores: shifting every position by ``shift`` leaves the output unchanged."""
    import torch

    from ..models.joformer import axis_frequencies, journey_attention

    n, hs = q.shape[-2], q.shape[-1]
    W = axis_frequencies(hs, 100.0, 1)
    equivariance = 0.0
    for causal in (False, True):
        base = journey_attention(q, k, v, torch.arange(n, dtype=torch.float64)[:, None] @ W, causal=causal)
        moved = journey_attention(q, k, v, (torch.arange(n, dtype=torch.float64)[:, None] + shift) @ W, causal=causal)
        equivariance = max(equivariance, float((base - moved).abs().max()))
    return _within(
        "equivariance",
        f"flat regime: max abs(c(positions + s) - c(positions)) <= {TOLERANCE:g}",
        equivariance,
        detail=f"shift s = {shift}, causal and bidirectional",
    )


def curved_check(draws: Draws, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Check:
    """Dense 2-D frames exp(r S_1 + c S_2): shifting the grid changes the output (the size is reported)."""
    import torch

    from ..models.joformer import dense_journey_attention, grid_positions

    hs = q.shape[-1]
    grid = grid_positions(4, 6).to(torch.float64)  # (24, 2)
    S = draws.tensor((2, hs, hs)) / np.sqrt(hs)
    S = S - S.transpose(-1, -2)

    def dense_frames(points: torch.Tensor) -> torch.Tensor:
        return torch.linalg.matrix_exp(torch.einsum("ta,aij->tij", points, S))

    offset = torch.tensor([2.0, 3.0], dtype=torch.float64)
    moved = dense_journey_attention(q, k, v, dense_frames(grid + offset))
    broken = float((dense_journey_attention(q, k, v, dense_frames(grid)) - moved).abs().max())
    return tolerance_check(
        "curved-not-equivariant",
        f"dense 2-D frames exp(r S1 + c S2): max abs(c(grid + (2, 3)) - c(grid)) > {CURVED_FLOOR:g}",
        broken,
        broken > CURVED_FLOOR,
    )


def dft_check(draws: Draws) -> Check:
    """Value transport with uniform weights and frequencies 2 pi m / N reproduces numpy's FFT."""
    from ..models import journey as jr

    dft_gap = 0.0
    for N in (8, 31, 64):
        signal = draws.rng.standard_normal(N)
        dft_gap = max(dft_gap, float(np.abs(jr.dft_by_transport(signal) - np.fft.fft(signal)).max()))
    return _within("dft", f"max abs(transport DFT - numpy.fft.fft) <= {TOLERANCE:g} (N = 8, 31, 64)", dft_gap)


def norms_check(draws: Draws, n: int) -> Check:
    """Rotations preserve norms; composed generators stay orthogonal."""
    from ..models import journey as jr

    hs = draws.d
    points = draws.tensor((draws.trials, n, hs))
    angles = draws.tensor((draws.trials, n, hs // 2), (-50, 50))
    norm_gap = float((jr.rotate_pairs(points, angles).norm(dim=-1) - points.norm(dim=-1)).abs().max())
    composed = draws.datum(2, True)
    for _ in range(10):
        composed = jr.compose(composed, draws.datum(2, True), int(draws.rng.integers(2)))
    orthogonality = max(float(np.abs(g.matrix().T @ g.matrix() - np.eye(hs)).max()) for g in composed.generators)
    norm_value = max(norm_gap, orthogonality)
    return _within(
        "norms",
        f"max abs(norm(R x) - norm(x)) and max abs(G^T G - I) after 10 compositions <= {TOLERANCE:g}",
        norm_value,
    )


def factored_check(draws: Draws, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Check:
    """Rotate-attend-rotate equals the explicit sum over P_{j->k} v_j."""
    from ..models.joformer import journey_attention, materialized_journey_attention

    n, hs = q.shape[-2], q.shape[-1]
    factored_gap = 0.0
    for causal in (False, True):
        phi = draws.tensor((1, 2, n, hs // 2), (-10, 10))
        fast = journey_attention(q, k, v, phi, causal=causal)
        slow = materialized_journey_attention(q, k, v, phi, causal=causal)
        factored_gap = max(factored_gap, float((fast - slow).abs().max()))
    return _within(
        "factored=materialized",
        f"max abs(rotate-attend-rotate - sum_j alpha_kj P_(j->k) v_j) <= {TOLERANCE:g}",
        factored_gap,
    )


def _within(name: str, statement: str, gap: float, detail: str = "") -> Check:
    """The tolerance check that ``gap`` (a round-off error) is at most :data:`TOLERANCE`."""
    return tolerance_check(name, statement, gap, gap <= TOLERANCE, detail=detail)


def _datum_gap(left: Any, right: Any) -> float:
    gap = float(np.abs(left.content - right.content).max())
    for a, b in zip(left.generators, right.generators, strict=True):
        gap = max(gap, float(np.abs(a.matrix() - b.matrix()).max()))
    return gap


def _figure(sizes: list[tuple[int, int]], values: list[float], path: Any) -> None:
    from ..plotting import pyplot as _pyplot
    from ..plotting import save as _save

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5, 3.5), layout="constrained")
    steps = [r + c for r, c in sizes]
    axis.scatter(steps, values)
    axis.set_xlabel("path length r + c")
    axis.set_ylabel("Frobenius norm of P_rows-first - P_cols-first")
    axis.set_title("dense generators: the journey depends on the path")
    _save(figure, path)
