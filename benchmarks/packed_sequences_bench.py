"""Packed sequences (cu_seqlens) through culina.chunk_simple_gla, for comparing builds side by side
in one device call: run it once per build, each build's package first on PYTHONPATH, rounds
interleaved by the caller, then --plot-only over the JSON files.

Per shape: forward wall time (torch.no_grad()), the forward's GPU time (the time the GPU runs its
kernels, kernel_breakdown.busy_ms) and the forward+backward's (autograd, to q, k, v and g), which
host work does not touch. Lengths: random cuts as simple_gla_bench.make_inputs makes them (fla's benchmark does
alike), equal lengths (the same shape to the host, whose plan cannot see the lengths), and one
sequence.

Usage: PYTHONPATH=<build>/package python benchmarks/packed_sequences_bench.py --json out.json
       python benchmarks/packed_sequences_bench.py --plot-only before.json after.json --labels before after
              --plot out.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_breakdown import busy_ms, draw_bars, legend_above  # noqa: E402
from simple_gla_bench import bench  # noqa: E402

# (name, T, H, D, sequences, equal lengths)
SHAPES = [
    ("8 random, T16384 H16 D128", 16384, 16, 128, 8, False),
    ("8 equal, T16384 H16 D128", 16384, 16, 128, 8, True),
    ("64 random, T16384 H16 D64", 16384, 16, 64, 64, False),
    ("16 random, T65536 H8 D128", 65536, 8, 128, 16, False),
    ("1, T16384 H16 D128", 16384, 16, 128, 1, True),
    ("8 random, T8192 H8 D256", 8192, 8, 256, 8, False),
]


def offsets(torch, t, n, equal, seed):
    if equal:
        return torch.arange(0, t + 1, t // n)
    cuts = torch.sort(torch.randperm(t - 1, generator=torch.Generator().manual_seed(seed))[: n - 1] + 1).values
    return torch.cat([torch.tensor([0]), cuts, torch.tensor([t])])


def measure(torch, culina, t, h, d, n, equal, rep_ms):
    seed = t + d + h
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(1, t, h, d, device="cuda", generator=gen, dtype=torch.bfloat16) for _ in range(3))
    g = torch.nn.functional.logsigmoid(torch.randn(1, t, h, device="cuda", generator=gen)) / 16
    cu_seqlens = offsets(torch, t, n, equal, seed).to("cuda", torch.int64)
    run = lambda: culina.chunk_simple_gla(q, k, v, g=g, cu_seqlens=cu_seqlens)  # noqa: E731
    row = {"longest": int((cu_seqlens[1:] - cu_seqlens[:-1]).max())}
    with torch.no_grad():
        row["fwd_ms"] = bench(run, rep_ms)
        row["fwd_gpu_ms"] = busy_ms(torch, run)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v, g)]
    do = torch.randn_like(v)

    def forward_backward():
        for x in leaves:
            x.grad = None
        culina.chunk_simple_gla(*leaves[:3], g=leaves[3], cu_seqlens=cu_seqlens)[0].backward(do)

    row["fwdbwd_gpu_ms"] = busy_ms(torch, forward_backward)
    return row


def plot(results, labels, out: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results[0])
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, key, title in ((axes[0], "fwd_ms", "forward, wall time"),
                           (axes[1], "fwdbwd_gpu_ms", "forward+backward, GPU time")):
        series = {label: [result[n][key] for n in names] for result, label in zip(results, labels)}
        draw_bars(ax, names, series, "ms (lower is better)", title)
    fig.suptitle("culina, packed sequences (bf16, per-token gates)")
    legend_above(fig, axes[0], len(labels))
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rep-ms", type=int, default=60)
    parser.add_argument("--plot-only", nargs="+", type=Path, help="JSON files of earlier runs, in order")
    parser.add_argument("--labels", nargs="+", help="one per --plot-only file")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    if args.plot_only:
        results = [json.loads(path.read_text()) for path in args.plot_only]
        plot(results, args.labels or [path.stem for path in args.plot_only], args.plot)
        return
    import torch

    import culina

    rows = {}
    for name, t, h, d, n, equal in SHAPES:
        rows[name] = measure(torch, culina, t, h, d, n, equal, args.rep_ms)
        print(name, json.dumps(rows[name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
