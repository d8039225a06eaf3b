"""Where the D128 forward's walk loses its time, two ways, through culina.chunk_simple_gla (bf16,
g_gamma, forward under torch.no_grad(), the GPU's busy time per call from the torch profiler):

- `--set heads`: B1 T8192 at 33 to 264 heads. With one block of the Hopper walk per head and
  multiprocessor, the heads are the multiprocessors that walk (fla's shape, 96 heads, leaves 36 of
  the H200's 132 idle); the bytes moved per second (8 N D over the busy time) show how far the
  walk's rate per block holds as more of them draw on memory at once. Beside it: a device-to-device
  copy's rate (torch's copy_ of 256 MiB), the bandwidth a kernel can reach at all.
- `--set builds`: five shapes timed per build, to run once per build with each build's package
  first on PYTHONPATH, in interleaved rounds (one --json file each), for builds that differ in
  one step of the walk; `--set builds-d256` the same for four shapes of head size 256.

Usage: PYTHONPATH=<build>/package python benchmarks/walk_occupancy_bench.py --set heads --json out.json
       python benchmarks/walk_occupancy_bench.py --plot-heads out.json --plot heads.png
       python benchmarks/walk_occupancy_bench.py --plot-builds A1.json B1.json ... --labels A B ... --plot builds.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_breakdown import draw_bars, label_medians, legend_above, times_and_busy  # noqa: E402
from simple_gla_bench import FORWARD_BYTES, HBM_PEAK, bench, make_inputs  # noqa: E402

# (B, T, H, D): the head sweep, fla's shape's layout with one sequence per head (B96 H1), D64.
HEADS = [(1, 8192, h, 128) for h in (33, 48, 66, 96, 120, 132, 160, 198, 264)] + [
    (96, 8192, 1, 128), (1, 8192, 132, 64), (1, 8192, 264, 64)]
BUILDS = [(1, 8192, 96, 128), (1, 8192, 132, 128), (2, 16384, 16, 128), (4, 4096, 24, 64), (1, 8192, 132, 64)]
BUILDS_D256 = [(2, 8192, 8, 256), (1, 8192, 132, 256), (1, 8192, 66, 256), (4, 4096, 16, 256)]
SETS = {"heads": HEADS, "builds": BUILDS, "builds-d256": BUILDS_D256}


def name(b, t, h, d):
    return f"B{b} T{t} H{h} D{d}"


def copy_rate(torch):
    """Bytes per second (read and written) of a 256 MiB device-to-device copy."""
    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() / (bench(lambda: y.copy_(x), 100) * 1e-3)


def measure(torch, culina, shapes):
    rows = {}
    for b, t, h, d in shapes:
        q, k, v, _, g_gamma, _ = make_inputs(torch, b, t, h, d, "gamma", 0, seed=1)
        run = lambda: culina.chunk_simple_gla(q, k, v, g_gamma=g_gamma)  # noqa: E731
        with torch.no_grad():
            bench(run, 50)
            kernels, busy = times_and_busy(torch, run)
        key = name(b, t, h, d)
        rows[key] = {"heads": h, "d": d, "busy_ms": busy, "kernels_ms": kernels,
                     "bytes_per_s": FORWARD_BYTES * b * t * h * d / (busy * 1e-3)}
        print(key, json.dumps(rows[key]), flush=True)
    return rows


def plot_heads(result, out: Path):
    """The walk's bytes per second against the heads (D128, B1), with the copy's and the peak."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for key, r in result["rows"].items() if key.startswith("B1 ") and r["d"] == 128]
    peak = next((bw for key, bw in HBM_PEAK.items() if key in result["gpu"]), None)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([r["heads"] for r in rows], [r["bytes_per_s"] / 1e12 for r in rows], "o-",
            label="forward, 8 N D bytes over GPU busy time")
    for r in rows:
        if any("states" in kernel for kernel in r["kernels_ms"]):
            ax.annotate("with a state pass", (r["heads"], r["bytes_per_s"] / 1e12), fontsize=7,
                        textcoords="offset points", xytext=(4, -10))
    ax.axhline(result["copy_bytes_per_s"] / 1e12, color="grey", linestyle="--", label="device-to-device copy")
    if peak:
        ax.axhline(peak / 1e12, color="black", linewidth=0.8, label="HBM peak")
    ax.axvline(result["multiprocessors"], color="grey", linestyle=":", label="multiprocessors")
    ax.set_xlabel("heads (B1 T8192 D128, g_gamma): one walk block each")
    ax.set_ylabel("TB/s")
    ax.set_ylim(0, (peak or result["copy_bytes_per_s"]) / 1e12 * 1.05)
    ax.set_title(f"culina's Hopper forward walk as more multiprocessors walk, {result['gpu']}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_builds(results, labels, out: Path):
    """Bars of the forward's busy time per shape, one per label (the median of its files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results[0])
    fig, ax = plt.subplots(figsize=(10, 4.8))
    draw_bars(ax, names, label_medians(results, labels, names, "busy_ms"),
              "forward GPU busy time, ms (lower is better)", "")
    fig.suptitle("culina.chunk_simple_gla forward, bf16 g_gamma, H200: builds side by side")
    legend_above(fig, ax, min(len(set(labels)), 3))
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=tuple(SETS), default="heads")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot-heads", type=Path, help="a --set heads --json result, to plot")
    parser.add_argument("--plot-builds", nargs="+", type=Path, help="--set builds --json results, to plot")
    parser.add_argument("--labels", nargs="+", help="one per --plot-builds file (files sharing a label: their median)")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    if args.plot_heads or args.plot_builds:
        if not args.plot:
            parser.error("--plot-heads and --plot-builds need --plot")
        if args.plot_heads:
            plot_heads(json.loads(args.plot_heads.read_text()), args.plot)
        else:
            labels = args.labels or [path.stem for path in args.plot_builds]
            if len(labels) != len(args.plot_builds):
                parser.error("--labels: one per --plot-builds file")
            plot_builds([json.loads(path.read_text())["rows"] for path in args.plot_builds], labels, args.plot)
        return
    import torch

    import culina

    result = {"gpu": torch.cuda.get_device_name(),
              "multiprocessors": torch.cuda.get_device_properties(0).multi_processor_count}
    if args.set == "heads":
        result["copy_bytes_per_s"] = copy_rate(torch)
        print("copy", result["copy_bytes_per_s"] / 1e12, "TB/s", flush=True)
    result["rows"] = measure(torch, culina, SETS[args.set])
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
