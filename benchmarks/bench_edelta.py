"""EΔ-MHC-Geo: the closed-form Cayley transform against a dense solve, and an EΔ block against a GPT block.

Requirements (forward + backward, ratios from one run, contenders interleaved):

[1] n = 64: Q x by the rank-2 closed form (``cayley_apply``) for a batch of vectors is at least
    3x faster than what the reference code does: Q = torch.linalg.solve(I + M, I - M), then Q @ x.
[2] n = 4 streams of 32 features (the model's preset), one Q per token: the closed form is no
    slower than the solve (ratio <= 1.0).
[3] an EΔ block (two hybrid operators, pre / post maps; width 128, 4 heads, 4 streams) takes at
    most 1.5x the time of a plain GPT block of the same width.

Run: .venv/bin/python benchmarks/bench_edelta.py [--repeats N] [--threads T]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _common import machine, print_table, time_interleaved, verdict


def _dense(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """The peer: build Q with a batched solve and multiply (the reference code's way)."""
    n = u.shape[-1]
    a = u[..., :, None] * v[..., None, :] - v[..., :, None] * u[..., None, :]  # (..., n, n)
    m = (beta / 2)[..., None] * a
    eye = torch.eye(n, dtype=x.dtype)
    return torch.linalg.solve(eye + m, eye - m) @ x  # (..., n, c)


def _step(function: Callable[..., torch.Tensor], *tensors: torch.Tensor) -> Callable[[], None]:
    """Forward + backward of ``function`` on fresh leaf copies of ``tensors``."""
    leaves = [t.clone().requires_grad_(True) for t in tensors]

    def run() -> None:
        for leaf in leaves:
            leaf.grad = None
        function(*leaves).square().sum().backward()

    return run


def _cayley_case(tokens: int, n: int, c: int, repeats: int) -> tuple[float, float, float]:
    from geoanalyze.models.residual import cayley_apply

    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, n, c, generator=g)
    u, v = torch.randn(tokens, n, generator=g), torch.randn(tokens, n, generator=g)
    beta = torch.rand(tokens, 1, generator=g) * 4
    assert torch.allclose(cayley_apply(x, u, v, beta), _dense(x, u, v, beta), atol=1e-3)
    timings = time_interleaved(
        {"ours": _step(cayley_apply, x, u, v, beta), "peer": _step(_dense, x, u, v, beta)}, repeats=repeats
    )
    ours, peer = timings["ours"].best, timings["peer"].best
    return ours, peer, peer / ours


def _block_case(repeats: int, batch: int, length: int) -> tuple[float, float, float]:
    from geoanalyze.models.edelta import EDeltaBlock, EDeltaConfig

    torch.manual_seed(0)
    plain = EDeltaBlock(EDeltaConfig(residual="plain", n_embd=128, n_heads=4))
    edelta = EDeltaBlock(EDeltaConfig(residual="hybrid", n_embd=128, n_heads=4, n_streams=4))
    x = torch.randn(batch, length, 128)
    timings = time_interleaved({"ours": _step(edelta, x), "peer": _step(plain, x)}, repeats=repeats)
    ours, peer = timings["ours"].best, timings["peer"].best
    return ours, peer, ours / peer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds after the warm-up (default 5)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"machine: {machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"timing: best (median not shown) of {args.repeats} interleaved rounds after one warm-up; forward + backward")

    wide = _cayley_case(tokens=1024, n=64, c=1, repeats=args.repeats)
    streams = _cayley_case(tokens=64 * 256, n=4, c=32, repeats=args.repeats)
    block = _block_case(args.repeats, batch=16, length=128)
    print_table(
        [
            ("[1] Q x, n = 64, 1024 vectors", f"{wide[0] * 1e3:.2f}", f"{wide[1] * 1e3:.2f}", f"{wide[2]:.1f}x faster"),
            (
                "[2] Q X, n = 4 streams x 32, 16384 tokens",
                f"{streams[0] * 1e3:.2f}",
                f"{streams[1] * 1e3:.2f}",
                f"{streams[2]:.1f}x faster",
            ),
            (
                "[3] EΔ block vs GPT block, 16 x 128 x 128",
                f"{block[0] * 1e3:.2f}",
                f"{block[1] * 1e3:.2f}",
                f"{block[2]:.2f}x the time",
            ),
        ],
        ("case", "ours ms", "peer ms", "ratio"),
    )
    passed = [
        verdict("[1] closed-form Cayley >= 3x faster than solve at n = 64", wide[2] >= 3.0, f"{wide[2]:.1f}x"),
        verdict("[2] closed-form Cayley no slower than solve at 4 streams", streams[2] >= 1.0, f"{streams[2]:.2f}x"),
        verdict("[3] EΔ block <= 1.5x a plain GPT block", block[2] <= 1.5, f"{block[2]:.2f}x"),
    ]
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
