"""JoFormer attention against RoPE attention and against the materialized-P reference.

Requirements (issue: "JoFormer: journey operators, value transport, and its experiments"):

1. JoFormer attention (rotate q, k by phi, v by -phi, SDPA, rotate the output by +phi), forward +
   backward, at most 1.3x RoPE attention through the same SDPA, at n = 1024, 8 heads x 64 dims.
2. At least 20x faster than the materialized reference (every P_{j->k} v_j built: an
   (n, n, d) tensor per head), same n.
3. Peak memory grows as O(n d), not O(n^2 d): measured at n = 512, 1024, 2048 in fresh processes
   (the peak RSS, VmHWM reset through /proc/self/clear_refs, of one forward + backward minus the
   RSS before it), printed; the growth from 512 to 2048 must stay below 8x (linear: 4x; quadratic: 16x).

All three attentions are causal, float32, batch 1, on the CPU unless --device cuda.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timing, machine, print_table, time_interleaved, verdict

REPO = Path(__file__).resolve().parents[1]
HEADS, HEAD_DIM = 8, 64

MEMORY_PROBE = r"""
import json, sys
import torch
from torch.nn import functional as F
from geoanalyze.models.joformer import journey_attention, materialized_journey_attention, rope_frequencies
from geoanalyze.models.journey import rotate_by, rotor
kind, n, nh, hs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
q, k, v = (torch.randn(1, nh, n, hs, requires_grad=True) for _ in range(3))
angles = (torch.arange(n, dtype=torch.float64)[:, None] * rope_frequencies(hs, 10000.0)).float()
def status(field):
    line = next(l for l in open("/proc/self/status") if l.startswith(field))
    return int(line.split()[1]) / 1024  # MB
# Warm the kernels at a tiny size, then reset the peak (VmHWM) so imports do not count.
small = [t[:, :, :8].detach().requires_grad_() for t in (q, k, v)]
journey_attention(*small, angles[:8], causal=True).sum().backward()
with open("/proc/self/clear_refs", "w") as file:
    file.write("5")
before = status("VmRSS")
if kind == "joformer":
    out = journey_attention(q, k, v, angles, causal=True)
elif kind == "rope":
    turn = rotor(angles)
    out = F.scaled_dot_product_attention(rotate_by(q, turn), rotate_by(k, turn), v, is_causal=True)
else:
    out = materialized_journey_attention(q, k, v, angles, causal=True)
out.sum().backward()
print(json.dumps({"extra_mb": status("VmHWM") - before}))
"""


def contenders(n: int, device: str) -> dict[str, object]:
    import torch
    from torch.nn import functional as F  # noqa: N812

    from geoanalyze.models.joformer import journey_attention, materialized_journey_attention, rope_frequencies
    from geoanalyze.models.journey import rotate_by, rotor
    from geoanalyze.models.positional import apply_rope

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, n, HEAD_DIM, device=device, requires_grad=True) for _ in range(3))
    angles = torch.arange(n, dtype=torch.float64, device=device)[:, None] * rope_frequencies(HEAD_DIM, 1e4).to(device)
    angles = angles.float()

    def step(function: object) -> object:
        def run() -> None:
            for tensor in (q, k, v):
                tensor.grad = None
            function().sum().backward()  # type: ignore[operator]
            if device == "cuda":
                torch.cuda.synchronize()

        return run

    def rope() -> torch.Tensor:
        turn = rotor(angles)  # the same rotation kernel as ours, on q and k only
        return F.scaled_dot_product_attention(rotate_by(q, turn), rotate_by(k, turn), v, is_causal=True)

    def project_rope() -> torch.Tensor:
        cos, sin = angles.cos(), angles.sin()  # models.attention.SelfAttention's path
        return F.scaled_dot_product_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v, is_causal=True)

    return {
        "joformer": step(lambda: journey_attention(q, k, v, angles, causal=True)),
        "rope": step(rope),
        "project_rope": step(project_rope),
        "materialized": step(lambda: materialized_journey_attention(q, k, v, angles, causal=True)),
    }


def bench_time(n: int, repeats: int, device: str) -> list[bool]:
    runs = contenders(n, device)
    fast = time_interleaved(
        {name: runs[name] for name in ("joformer", "rope", "project_rope")},  # type: ignore[misc]
        repeats=repeats,
    )
    slow = time_interleaved({"materialized": runs["materialized"]}, repeats=max(1, repeats // 5))  # type: ignore[dict-item]
    ours, rope, reference = fast["joformer"].best, fast["rope"].best, slow["materialized"].best

    def row(label: str, timing: Timing) -> tuple[str, str, str, str]:
        return (label, f"{timing.best * 1e3:.1f} ms", f"{timing.median * 1e3:.1f} ms", f"{timing.best / ours:.2f}")

    print(f"\n[1, 2] causal attention forward + backward, n = {n}, {HEADS} heads x {HEAD_DIM} dims, {device}")
    print_table(
        [
            row("ours: JoFormer (rotate q, k, v, SDPA, rotate out)", fast["joformer"]),
            row("peer: RoPE attention, same SDPA, same rotation kernel", fast["rope"]),
            row("peer: RoPE attention as SelfAttention does it (apply_rope)", fast["project_rope"]),
            row("peer: materialized P_(j->k) reference", slow["materialized"]),
        ],
        ("contender", "best", "median", "peer / ours"),
    )
    return [
        verdict("JoFormer <= 1.3x RoPE (same rotation kernel)", ours <= 1.3 * rope, f"{ours / rope:.2f}x"),
        verdict(
            "JoFormer >= 20x faster than the materialized reference", reference >= 20 * ours, f"{reference / ours:.1f}x"
        ),
    ]


def probe(kind: str, n: int) -> float:
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, kind, str(n), str(HEADS), str(HEAD_DIM)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"memory probe {kind} n={n} failed:\n{result.stderr[-2000:]}")
    return float(json.loads(result.stdout.strip().splitlines()[-1])["extra_mb"])


def bench_memory(sizes: list[int], reference_max: int) -> list[bool]:
    rows, extra = [], {}
    for n in sizes:
        extra[n] = probe("joformer", n)
        rope = probe("rope", n)
        reference = probe("materialized", n) if n <= reference_max else float("nan")
        inputs_mb = 3 * HEADS * n * HEAD_DIM * 4 / 2**20
        rows.append((str(n), f"{extra[n]:.1f}", f"{rope:.1f}", f"{reference:.1f}", f"{inputs_mb:.1f}"))
    print("\n[3] peak memory of one causal forward + backward, MB above the inputs (fresh process each), CPU")
    print_table(rows, ("n", "JoFormer", "RoPE", "materialized", "q, k, v themselves"))
    growth = extra[sizes[-1]] / max(extra[sizes[0]], 1e-9)
    factor = sizes[-1] // sizes[0]
    return [
        verdict(
            f"JoFormer's peak memory grows as O(n d): x{factor} in n gives < x{2 * factor} in memory",
            growth < 2 * factor,
            f"x{growth:.2f} from n = {sizes[0]} to {sizes[-1]} (quadratic would be x{factor**2})",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--memory-sizes", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--reference-max", type=int, default=512, help="largest n of the materialized memory probe")
    parser.add_argument("--part", choices=("all", "time", "memory"), default="all")
    args = parser.parse_args()
    import torch

    print(f"machine: {machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    checks: list[bool] = []
    if args.part in ("all", "time"):
        checks += bench_time(args.n, args.repeats, args.device)
    if args.part in ("all", "memory"):
        checks += bench_memory(args.memory_sizes, args.reference_max)
    sys.exit(0 if all(checks) else 1)


if __name__ == "__main__":
    main()
