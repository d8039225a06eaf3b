"""Tiny and short problems against the launch floor: culina.chunk_simple_gla's forward and
forward+backward per call (wall, triton's do_bench median), the kernels each launches per call
(culina's and in all) and their summed GPU time (torch profiler), beside the floor: one and two
launches of a 1-element torch op.

--host-profile adds, for each shape's forward+backward, the host time per call with the GPU
synchronised only every 300 calls, the calls that synchronise (torch.cuda.set_sync_debug_mode)
and the CPU operations that take the most of it (torch profiler, self CPU time).

Usage: python benchmarks/small_shapes_bench.py [--json out.json] [--rep-ms 50] [--host-profile]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_breakdown import kernel_profile  # noqa: E402
from simple_gla_bench import bench, make_inputs  # noqa: E402

# (name, B, T, H, D, gates): one chunk, then a few chunks and heads, then a short batch.
SHAPES = [
    ("B1 T64 H1 D64, g", 1, 64, 1, 64, "g"),
    ("B1 T64 H1 D64, g_gamma", 1, 64, 1, 64, "gamma"),
    ("B1 T512 H4 D64, g", 1, 512, 4, 64, "g"),
    ("B4 T1024 H8 D64, g", 4, 1024, 8, 64, "g"),
    ("B2 T2048 H16 D128, g_gamma", 2, 2048, 16, 128, "gamma"),
]


def launches(prefix: str, kernels: dict) -> dict:
    """A call's kernel launches (culina's, by name, and all) and their summed GPU time."""
    ours = {name: count for name, (count, _) in kernels.items() if "chunk" in name}
    return {f"{prefix}_launches": round(sum(count for count, _ in kernels.values()), 2),
            f"{prefix}_culina_launches": ours,
            f"{prefix}_gpu_us": round(1000 * sum(ms for _, ms in kernels.values()), 2)}


def host_profile(torch, run, calls=300) -> dict:
    """Host microseconds per call of `run` back to back, the calls of one run that synchronise with
    the GPU, and the CPU operations with the most self time per call (us)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(50):
        run()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    torch.cuda.synchronize()
    per_call = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.set_sync_debug_mode("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    torch.cuda.set_sync_debug_mode(0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(50):
            run()
        torch.cuda.synchronize()
    top = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
    return {"host_us": round(per_call, 1), "synchronising_calls": len(caught),
            "top_self_cpu_us": {e.key[:60]: [e.count // 50, round(e.self_cpu_time_total / 50, 1)] for e in top}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rep-ms", type=float, default=50)
    parser.add_argument("--host-profile", action="store_true", help="where each forward+backward's host time goes")
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
            row.update(launches("fwd", kernel_profile(torch, run)))
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        g_leaf = g.detach().clone().requires_grad_() if g is not None else None
        do = torch.randn_like(v)

        def forward_backward():
            for x in leaves + ([g_leaf] if g_leaf is not None else []):
                x.grad = None
            culina.chunk_simple_gla(*leaves, g=g_leaf, g_gamma=g_gamma)[0].backward(do)

        row["fwdbwd_us"] = round(1000 * bench(forward_backward, args.rep_ms), 2)
        row.update(launches("fwdbwd", kernel_profile(torch, forward_backward)))
        if args.host_profile:
            row["fwdbwd_host"] = host_profile(torch, forward_backward)
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
