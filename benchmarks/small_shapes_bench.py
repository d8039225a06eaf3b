"""Tiny and short problems against the launch floor: culina.chunk_simple_gla's forward and
forward+backward per call (wall, triton's do_bench median), the kernels each launches and their
summed GPU time (torch profiler), beside the floor: one and two launches of a 1-element torch op.

Usage: python benchmarks/small_shapes_bench.py [--json out.json] [--rep-ms 50]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_breakdown import kernel_times  # noqa: E402
from simple_gla_bench import bench, make_inputs  # noqa: E402

# (name, B, T, H, D, gates): one chunk, then a few chunks and heads, then a short batch.
SHAPES = [
    ("B1 T64 H1 D64, g", 1, 64, 1, 64, "g"),
    ("B1 T64 H1 D64, g_gamma", 1, 64, 1, 64, "gamma"),
    ("B1 T512 H4 D64, g", 1, 512, 4, 64, "g"),
    ("B4 T1024 H8 D64, g", 4, 1024, 8, 64, "g"),
    ("B2 T2048 H16 D128, g_gamma", 2, 2048, 16, 128, "gamma"),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rep-ms", type=float, default=50)
    args = parser.parse_args()
    import torch

    import culina

    one = torch.zeros(1, device="cuda")
    floor = {
        "one_launch_us": round(1000 * bench(lambda: one.add_(1.0), args.rep_ms), 2),
        "two_launches_us": round(1000 * bench(lambda: (one.add_(1.0), one.add_(1.0)), args.rep_ms), 2),
    }
    print("floor", json.dumps(floor), flush=True)
    rows = {"floor": floor}
    for name, b, t, h, d, gates in SHAPES:
        q, k, v, g, g_gamma, _ = make_inputs(torch, b, t, h, d, gates, 0, seed=t + d + h)
        row = {}
        with torch.no_grad():
            run = lambda: culina.chunk_simple_gla(q, k, v, g=g, g_gamma=g_gamma)  # noqa: E731
            row["fwd_us"] = round(1000 * bench(run, args.rep_ms), 2)
            kernels = kernel_times(torch, run)
            row["fwd_kernels"] = len(kernels)
            row["fwd_gpu_us"] = round(1000 * sum(kernels.values()), 2)
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        g_leaf = g.detach().clone().requires_grad_() if g is not None else None
        do = torch.randn_like(v)

        def forward_backward():
            for x in leaves + ([g_leaf] if g_leaf is not None else []):
                x.grad = None
            culina.chunk_simple_gla(*leaves, g=g_leaf, g_gamma=g_gamma)[0].backward(do)

        row["fwdbwd_us"] = round(1000 * bench(forward_backward, args.rep_ms), 2)
        kernels = kernel_times(torch, forward_backward)
        row["fwdbwd_culina_kernels"] = sorted(k for k in kernels if "culina" in k or "chunk" in k)
        row["fwdbwd_kernels"] = len(kernels)
        row["fwdbwd_gpu_us"] = round(1000 * sum(kernels.values()), 2)
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
