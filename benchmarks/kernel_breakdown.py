"""culina.chunk_simple_gla's forward (and forward+backward) time per shape with the CUDA time of
each kernel the forward launches and of each a forward+backward launches, their total, and the
time the GPU is busy with them (busy_ms: kernels that overlap count once; torch profiler: host
time, which dominates small calls' wall time, touches neither), for comparing
two builds side by side in one device call: run it once per build, each build's package first
on PYTHONPATH.

Usage: PYTHONPATH=<build>/package python benchmarks/kernel_breakdown.py [--fla] [--train-gamma]
       [--json out.json] [--only NAMES...]
       python benchmarks/kernel_breakdown.py --plot-only A1.json B1.json A2.json B2.json
              --labels before after before after --plot out.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simple_gla_bench import bench, make_inputs, refuse_unknown_shapes  # noqa: E402

# (name, B, T, H, D, gates, packed sequences): fla's registry shapes with per-token gates, a
# short and a wide one, the head size where culina's forward trails fla's (BENCHMARKS.md), and a
# row for each path a backward can take (the 96- and 64-column walks, packed sequences of random
# lengths walked in segment slots, at D128 and D256), each with both kinds of gate (--train-gamma
# adds the per-head gradient), the two issue 24 shapes that fill the H100/H200's 132
# multiprocessors where the D64 and D256 bars are measured, two D64 shapes whose walks took
# two and four waves of three blocks to a multiprocessor (the gate-dot walks' residency), D64
# shapes whose 256-264 walk blocks fit one wave two to a multiprocessor (one segment, no state
# pass: MmaKernels::walk_step_times), and two with few heads whose segments that model keeps one
# block to a multiprocessor (B1 T8192 H9: 13 segments where 16 left 12 multiprocessors two).
SHAPES = [
    ("B2 T16384 H16 D128, g", 2, 16384, 16, 128, "g", 0),
    ("B2 T16384 H16 D128, g_gamma", 2, 16384, 16, 128, "gamma", 0),
    ("B4 T4096 H24 D64, g", 4, 4096, 24, 64, "g", 0),
    ("B4 T4096 H24 D64, g_gamma", 4, 4096, 24, 64, "gamma", 0),
    ("B1 T8192 H96 D128, g", 1, 8192, 96, 128, "g", 0),
    ("B1 T8192 H96 D128, g_gamma", 1, 8192, 96, 128, "gamma", 0),
    ("B8 T1024 H8 D64, g", 8, 1024, 8, 64, "g", 0),
    ("B2 T8192 H8 D256, g", 2, 8192, 8, 256, "g", 0),
    ("B2 T8192 H8 D256, g_gamma", 2, 8192, 8, 256, "gamma", 0),
    ("B4 T4096 H16 D192, g", 4, 4096, 16, 192, "g", 0),
    ("B4 T4096 H16 D192, g_gamma", 4, 4096, 16, 192, "gamma", 0),
    ("packed 8 seqs T16384 H16 D128, g", 1, 16384, 16, 128, "g", 8),
    ("packed 8 seqs T16384 H16 D128, g_gamma", 1, 16384, 16, 128, "gamma", 8),
    ("packed 64 seqs T16384 H16 D64, g", 1, 16384, 16, 64, "g", 64),
    ("packed 8 seqs T8192 H8 D256, g", 1, 8192, 8, 256, "g", 8),
    ("B2 T8192 H132 D64, g", 2, 8192, 132, 64, "g", 0),
    ("B1 T8192 H132 D256, g_gamma", 1, 8192, 132, 256, "gamma", 0),
    ("B4 T8192 H64 D64, g", 4, 8192, 64, 64, "g", 0),
    ("B8 T2048 H64 D64, g", 8, 2048, 64, 64, "g", 0),
    ("B2 T8192 H132 D64, g_gamma", 2, 8192, 132, 64, "gamma", 0),
    ("B2 T16384 H128 D64, g_gamma", 2, 16384, 128, 64, "gamma", 0),
    ("B1 T8192 H9 D64, g", 1, 8192, 9, 64, "g", 0),
    ("B1 T16384 H5 D64, g_gamma", 1, 16384, 5, 64, "gamma", 0),
]


def profiled(torch, run, repeats):
    """The torch profiler's record of `repeats` calls of `run`, their CUDA activity."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            run()
        torch.cuda.synchronize()
    return prof


def kernels_in(prof, repeats):
    """Per kernel in a profile of `repeats` calls, by name: its launches per call and milliseconds
    of CUDA time per call."""
    kernels = {}
    for event in prof.key_averages():
        total = getattr(event, "self_device_time_total", 0)
        if total:
            # Cut at the argument list only once the namespaces are gone: "(anonymous namespace)"
            # came first and every kernel in it shared one name, so the last one's time stood for all.
            name = event.key.replace("(anonymous namespace)::", "").replace("culina::gpu::", "").split("(")[0][:90]
            launches, ms = kernels.get(name, (0, 0))
            kernels[name] = (launches + event.count / repeats, round(ms + total / repeats / 1000, 4))
    return kernels


def busy_in(torch, prof, repeats):
    """Milliseconds per call that the GPU runs the profiled kernels: the length of the union of
    their intervals. A kernel launched early (programmatic dependent launch) starts while the one
    ahead of it runs and waits inside, so the sum of kernel times counts that wait twice (the walk
    behind a state pass: BENCHMARKS.md); host gaps between calls count in neither."""
    intervals = sorted((event.time_range.start, event.time_range.end) for event in prof.events()
                       if event.device_type == torch.autograd.DeviceType.CUDA)
    busy, reached = 0.0, float("-inf")
    for start, end in intervals:
        if end > reached:
            busy += end - max(start, reached)
            reached = end
    return round(busy / repeats / 1000, 4)


def kernel_profile(torch, run, repeats=20):
    """Per kernel `run` launches: kernels_in of a profile of `repeats` calls."""
    return kernels_in(profiled(torch, run, repeats), repeats)


def busy_ms(torch, run, repeats=20):
    """Milliseconds per call that the GPU is busy with `run`'s kernels (busy_in)."""
    return busy_in(torch, profiled(torch, run, repeats), repeats)


def times_and_busy(torch, run, repeats=20):
    """Milliseconds of CUDA time per call of each kernel `run` launches, and busy_ms, from one
    profile."""
    prof = profiled(torch, run, repeats)
    return {name: ms for name, (_, ms) in kernels_in(prof, repeats).items()}, busy_in(torch, prof, repeats)


def draw_bars(ax, names, series: dict, ylabel: str, title: str):
    """One group of bars per shape name, a bar per series (label -> heights in names' order)."""
    width = 0.8 / len(series)
    for i, (label, heights) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(names))], heights, width, label=label)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(names))])
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def legend_above(fig, ax, columns: int):
    """One legend for a figure's panels (draw_bars' series in `ax`), under its title, and the
    layout around it: inside a panel it covered the tallest bars."""
    fig.legend(*ax.get_legend_handles_labels(), loc="upper center", ncol=columns, fontsize=9,
               bbox_to_anchor=(0.5, 0.94), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.9))


def runs_by_label(results, labels):
    """The results (--json files of interleaved rounds) grouped by their labels: label -> results."""
    runs = {}
    for result, label in zip(results, labels):
        runs.setdefault(label, []).append(result)
    return runs


def label_medians(results, labels, names, key):
    """Per label, the median of row[key] over the results that carry that label and the shape,
    for each shape in `names`: label -> heights in names' order."""
    import statistics

    return {label: [statistics.median(run[name][key] for run in group if name in run) for name in names]
            for label, group in runs_by_label(results, labels).items()}


def plot(results, labels, out: Path, only=None):
    """Bars of the forward's and the forward+backward's busy GPU time per shape (those in `only`
    where given), one per label: the median over the runs (--json files) that carry it and the
    shape, for builds run in interleaved rounds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Every shape that each label's runs measured, in some of them (rounds of separate calls
    # may take different shapes).
    groups = runs_by_label(results, labels).values()
    names = [name for name in dict.fromkeys(name for result in results for name in result)
             if (not only or name in only) and all(any(name in run for run in group) for group in groups)]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, key, title in ((axes[0], "fwd_busy_ms", "forward"), (axes[1], "fwdbwd_busy_ms", "forward+backward")):
        draw_bars(ax, names, label_medians(results, labels, names, key), "GPU busy time, ms (lower is better)",
                  title)
    fig.suptitle("culina.chunk_simple_gla, bf16: the GPU's busy time per call")
    legend_above(fig, axes[0], len(set(labels)))
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fla", action="store_true", help="fla's forward beside culina's, twice each, and its kernels' times")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", nargs="+", help="these shapes alone (their names, as in SHAPES; with --plot-only, those plotted)")
    parser.add_argument("--train-gamma", action="store_true",
                        help="forward+backward with g_gamma's gradient too (a trainable per-head decay)")
    parser.add_argument("--plot-only", nargs="+", type=Path, help="--json files of earlier runs, to plot")
    parser.add_argument("--labels", nargs="+", help="one per --plot-only file (files sharing a label: their median)")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    refuse_unknown_shapes(parser, args.only, SHAPES)
    if args.plot_only:
        plot([json.loads(path.read_text()) for path in args.plot_only],
             args.labels or [path.stem for path in args.plot_only], args.plot, args.only)
        return
    import torch

    import culina

    fla = None
    if args.fla:
        from fla.ops.simple_gla import chunk_simple_gla as fla
    rows = {}
    for name, b, t, h, d, gates, packed in SHAPES:
        if args.only and name not in args.only:
            continue
        q, k, v, g, g_gamma, cu_seqlens = make_inputs(torch, b, t, h, d, gates, packed, seed=t + d + h)
        run = lambda: culina.chunk_simple_gla(q, k, v, g=g, g_gamma=g_gamma, cu_seqlens=cu_seqlens)  # noqa: E731
        row = {}
        with torch.no_grad():
            row["fwd_ms"] = bench(run, 100)
            if fla is not None:
                run_fla = lambda: fla(q, k, v, g=g, g_gamma=g_gamma, cu_seqlens=cu_seqlens)  # noqa: E731
                row["fla_fwd_ms"] = [bench(run_fla, 100), bench(run_fla, 100)]
                row["fwd_ms_again"] = bench(run, 100)
                row["fla_kernels_ms"], row["fla_fwd_busy_ms"] = times_and_busy(torch, run_fla)
            row["kernels_ms"], row["fwd_busy_ms"] = times_and_busy(torch, run)
        q_leaf, k_leaf, v_leaf = (x.detach().clone().requires_grad_() for x in (q, k, v))
        g_leaf = g.detach().clone().requires_grad_() if g is not None else None
        gamma_leaf = g_gamma.detach().clone().requires_grad_(args.train_gamma) if g_gamma is not None else None
        trained = [x for x in (q_leaf, k_leaf, v_leaf, g_leaf, gamma_leaf) if x is not None and x.requires_grad]
        do = torch.randn_like(v)

        def forward_backward():
            for x in trained:  # no gradient accumulates from one call to the next
                x.grad = None
            culina.chunk_simple_gla(q_leaf, k_leaf, v_leaf, g=g_leaf, g_gamma=gamma_leaf,
                                    cu_seqlens=cu_seqlens)[0].backward(do)

        row["fwdbwd_ms"] = bench(forward_backward, 100)
        row["fwdbwd_kernels_ms"], row["fwdbwd_busy_ms"] = times_and_busy(torch, forward_backward)
        row["fwdbwd_gpu_ms"] = round(sum(row["fwdbwd_kernels_ms"].values()), 4)
        row["train_gamma"] = args.train_gamma and g_gamma is not None
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
