"""EΔ-MHC-Geo: the closed-form Cayley transform against a dense solve, and an EΔ block against a GPT block.

Requirements (forward + backward, ratios from one run, contenders interleaved):

[1] n = 64: Q x by the rank-2 closed form (``cayley_apply``) for a batch of vectors is at least
    3x faster than what the reference code does: Q = torch.linalg.solve(I + M, I - M), then Q @ x.
[2] n = 4 streams of 32 features (the model's preset), one Q per token: the closed form is no
    slower than the solve (ratio <= 1.0).
[3] an EΔ block (two hybrid operators, pre / post maps; width 128, 4 heads, 4 streams) takes at
    most 1.5x the time of a plain GPT block of the same width.

``--gpu-estimate`` instead counts the kernel-launching operations of one training step of each
model at the paper's scale (profiled on the CPU; the count does not depend on the batch) and turns
them into an estimate of benchmarks/gpu/edelta.sh's wall time: these 1.8M-parameter models are
launch-bound on a datacenter GPU, so a step costs about (operations x the per-launch cost).

Run: .venv/bin/python benchmarks/bench_edelta.py [--repeats N] [--threads T] [--gpu-estimate [--launch-us U]]
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


#: aten operations that only relabel memory (no kernel launch)
_VIEWS = {
    "aten::view",
    "aten::_unsafe_view",
    "aten::as_strided",
    "aten::t",
    "aten::transpose",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::expand",
    "aten::slice",
    "aten::select",
    "aten::permute",
    "aten::split",
    "aten::unflatten",
    "aten::alias",
    "aten::detach",
    "aten::unbind",
    "aten::narrow",
    "aten::chunk",
    "aten::lift_fresh",
    "aten::reshape",
    "aten::flatten",
    "aten::split_with_sizes",
    "aten::expand_as",
    "aten::view_as",
    "aten::empty",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::_reshape_alias",
    "aten::diagonal",
    "aten::result_type",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "aten::contiguous",
}


def _launches(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> int:
    """Kernel-launching aten operations in one training step (forward, backward, clipping, fused AdamW)."""
    from torch.nn import functional as F  # noqa: N812
    from torch.profiler import ProfilerActivity, profile

    optimizer = torch.optim.AdamW(model.parameters(), foreach=True)

    def step() -> None:
        aux = model.aux_loss() if hasattr(model, "aux_loss") else 0.0
        loss = F.mse_loss(model(x), target)
        loss = loss + (model.aux_loss() if hasattr(model, "aux_loss") else aux)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return sum(1 for e in prof.events() if e.name.startswith("aten::") and not e.cpu_children and e.name not in _VIEWS)


def gpu_estimate(launch_us: float, kernel_us: float, workers: int, seeds: int) -> None:
    """Per-model launches per step and the estimated wall time of the paper preset's parts at ``seeds`` seeds.

    One process issues a launch every ``launch_us``; processes sharing a GPU overlap their launch
    overhead, but (without MPS) their kernels run one at a time, ``kernel_us`` each: the wall time
    is about max(launches x launch_us / workers, launches x kernel_us).
    """
    from geoanalyze.experiments.edelta_settings import GATE_WEIGHTS, INIT_BIASES, SETTINGS
    from geoanalyze.models.edelta import MODEL_NAMES, BareOperator, EDeltaModel, preset_config

    steps, tasks = SETTINGS["paper"].steps, 4
    rows, launches = [], {"reference": 0, "sweeps": 0, "causal": 0}
    for protocol in ("reference", "causal"):
        for name in MODEL_NAMES:
            reference = protocol == "reference"
            config = preset_config(name, reference=reference, d_in=64, **({"positions": 8} if reference else {}))
            n = _launches(EDeltaModel(config), torch.randn(2, 8, 64), torch.randn(2, 8, 64))
            launches[protocol] += n * steps * tasks * seeds
            if reference and name == "edelta":
                launches["sweeps"] += n * steps * seeds * (2 * len(INIT_BIASES) + len(GATE_WEIGHTS))
            rows.append((protocol, name, str(n), f"{n * launch_us * 1e-3:.1f}"))
    sizes = len(SETTINGS["paper"].negation_sizes)
    for name, kind in (
        ("ddl", "ddl"),
        ("jpmhc", "jpmhc"),
        ("edelta", "hybrid"),
        ("cayley", "cayley"),
        ("householder", "householder"),
    ):
        n = _launches(BareOperator(kind, reference=True), torch.randn(32, 64), torch.randn(32, 64))
        launches["reference"] += n * steps * sizes * seeds
        rows.append(("negation", name, str(n), f"{n * launch_us * 1e-3:.1f}"))
    print_table(rows, ("protocol", "model", "launches / step", f"ms / step at {launch_us:g} us a launch"))
    print(
        f"paper preset, {seeds} seed(s), {steps} steps; {workers} workers, {launch_us:g} us a launch, {kernel_us:g} us a kernel:"
    )
    for part, n in launches.items():
        serial = n * launch_us * 1e-6 / 60
        bound = max(serial / workers, n * kernel_us * 1e-6 / 60)
        print(
            f"  {part}: {n / 1e6:.0f}M launches, {serial:.0f} min in one process, ~{bound:.1f} min over {workers} workers"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds after the warm-up (default 5)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--gpu-estimate", action="store_true", help="estimate benchmarks/gpu/edelta.sh's wall time")
    parser.add_argument("--launch-us", type=float, default=6.0, help="host time per kernel launch, in us (default 6)")
    parser.add_argument("--kernel-us", type=float, default=2.0, help="GPU time per small kernel, in us (default 2)")
    parser.add_argument("--workers", type=int, default=16, help="parallel processes of the GPU script (default 16)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds the GPU script runs (default 1; the paper: 3)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.gpu_estimate:
        gpu_estimate(args.launch_us, args.kernel_us, args.workers, args.seeds)
        return 0
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
