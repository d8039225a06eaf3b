"""culina's Hopper kernels (the "hopper" family: wgmma, sm_90a) against its portable tensor-core
kernels on the same GPU, with flash-linear-attention's chunk_simple_gla beside them, all through
the public APIs, interleaved in one process: each round times every implementation once per
shape, and the figures are the medians over rounds (these GPUs' clocks drift between runs,
which a side-by-side comparison cancels and separate runs do not).

Per shape and implementation: forward (torch.no_grad()) and forward+backward (autograd, to the
gradients of q, k, v and g) wall time per call, and the forward's GPU time (the time the GPU runs
its kernels, torch profiler: the union of their intervals, so that a kernel launched early and
waiting on the one ahead counts once), which host work does not touch, and the same for the
forward+backward. The family is switched with culina._C.set_arch_specific_kernels, what
CULINA_KERNELS sets once per process. HBM fraction: the forward's 8 N D bytes (N = B H T, bf16)
over its GPU time, the forward+backward's 22 N D over its GPU time, each over the device's peak.
Tensor fraction: the least tensor work a chunked forward does (forward_flops) over its GPU time,
over the rate of a bf16 matrix product measured in the same run (tensor_flops_per_s).

Usage: python benchmarks/kernel_families_bench.py [--fla] [--rounds 3] [--json out.json] [--plot out.png]
                                                   [--plot-hbm hbm.png] [--plot-limits limits.png]
       python benchmarks/kernel_families_bench.py --plot-only out.json --plot out.png --plot-hbm hbm.png
                                                   [--plot-limits limits.png]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_breakdown import busy_ms  # noqa: E402
from simple_gla_bench import (FORWARD_BACKWARD_BYTES, FORWARD_BYTES, HBM_PEAK, bench, hbm_fraction,  # noqa: E402
                              make_inputs, refuse_unknown_shapes)

# (name, B, T, H, D, gates, packed sequences): fla's registry shapes, the head sizes each Hopper
# kernel covers (the wgmma walk: D 64..128 and 256; the wgmma state pass: every size; D192 runs the
# portable walk), packed sequences (Hopper's walk in segment slots; the portable kernels' two
# passes), and shapes whose walk fills every multiprocessor of a 132-multiprocessor H100 or H200
# in whole waves (H132: one walk block per (sequence, head) at D128, four at D256, three sharing a
# multiprocessor at D64), where fla's shape (96 heads) leaves 36 idle.
SHAPES = [
    ("B1 T8192 H96 D128, g", 1, 8192, 96, 128, "g", 0),
    ("B1 T8192 H96 D128, g_gamma", 1, 8192, 96, 128, "gamma", 0),
    ("B2 T16384 H16 D128, g", 2, 16384, 16, 128, "g", 0),
    ("B2 T16384 H16 D128, g_gamma", 2, 16384, 16, 128, "gamma", 0),
    ("B4 T4096 H16 D128, g", 4, 4096, 16, 128, "g", 0),
    ("B4 T4096 H16 D96, g", 4, 4096, 16, 96, "g", 0),
    ("B4 T4096 H24 D64, g", 4, 4096, 24, 64, "g", 0),
    ("B8 T1024 H8 D64, g", 8, 1024, 8, 64, "g", 0),
    ("B4 T4096 H16 D192, g", 4, 4096, 16, 192, "g", 0),
    ("B2 T8192 H8 D256, g", 2, 8192, 8, 256, "g", 0),
    ("B2 T8192 H8 D256, g_gamma", 2, 8192, 8, 256, "gamma", 0),
    ("packed 8 seqs T16384 H16 D128, g", 1, 16384, 16, 128, "g", 8),
    ("B1 T8192 H132 D128, g_gamma", 1, 8192, 132, 128, "gamma", 0),
    ("B2 T8192 H132 D128, g_gamma", 2, 8192, 132, 128, "gamma", 0),
    ("B2 T8192 H132 D64, g", 2, 8192, 132, 64, "g", 0),
    ("B2 T8192 H132 D64, g_gamma", 2, 8192, 132, 64, "gamma", 0),
    ("B1 T8192 H132 D256, g_gamma", 1, 8192, 132, 256, "gamma", 0),
]
IMPLS = ("hopper", "portable", "fla")
HEAD_SIZE = {name: d for name, _, _, _, d, _, _ in SHAPES}


def measure(torch, shape, impls, rounds, rep_ms):
    import culina
    from culina import _C

    name, b, t, h, d, gates, packed = shape
    q, k, v, g, g_gamma, cu_seqlens = make_inputs(torch, b, t, h, d, gates, packed, seed=t + d + h)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    g_leaf = g.detach().clone().requires_grad_() if g is not None else None
    trained = [x for x in (*leaves, g_leaf) if x is not None]
    do = torch.randn_like(v)
    fla = None
    if "fla" in impls:
        from fla.ops.simple_gla import chunk_simple_gla as fla

    def calls(impl):
        api = fla if impl == "fla" else culina.chunk_simple_gla

        def forward():
            return api(q, k, v, g=g, g_gamma=g_gamma, cu_seqlens=cu_seqlens)

        def forward_backward():
            for x in trained:
                x.grad = None
            api(*leaves, g=g_leaf, g_gamma=g_gamma, cu_seqlens=cu_seqlens)[0].backward(do)
        return forward, forward_backward

    samples = {impl: {"fwd_ms": [], "fwdbwd_ms": [], "fwd_gpu_ms": [], "fwdbwd_gpu_ms": []} for impl in impls}
    refused = {}  # impl -> why its backward did not run (fla 0.6 refuses gated backwards on some Tritons)
    for _ in range(rounds):
        for impl in impls:
            if impl != "fla":
                _C.set_arch_specific_kernels(impl == "hopper")
            forward, forward_backward = calls(impl)
            with torch.no_grad():
                samples[impl]["fwd_ms"].append(bench(forward, rep_ms))
                samples[impl]["fwd_gpu_ms"].append(busy_ms(torch, forward))
            if impl in refused:
                continue
            try:
                samples[impl]["fwdbwd_ms"].append(bench(forward_backward, rep_ms))
                samples[impl]["fwdbwd_gpu_ms"].append(busy_ms(torch, forward_backward))
            except RuntimeError as error:
                refused[impl] = str(error).splitlines()[0][:200]
    _C.set_arch_specific_kernels(True)
    row = {"shape": name, "d": d, "n_d": b * h * t * d, **{f"{impl}_fwdbwd_refused": why for impl, why in refused.items()}}
    for impl, values in samples.items():
        for key, series in values.items():
            row[f"{impl}_{key}"] = statistics.median(series) if series else math.nan
    return row


def table(result) -> str:
    """A Markdown table of `result`: times, speed-ups and the Hopper kernels' HBM fractions per
    shape; fla's columns only where fla ran."""
    ms = lambda key: lambda r: f"{r.get(key, math.nan):.3f}"  # noqa: E731
    ratio = lambda over, under: lambda r: f"{r.get(over, math.nan) / r[under]:.2f}x"  # noqa: E731
    both = lambda over, under: lambda r: (f"{ratio(over, under)(r)} "  # noqa: E731
                                          f"({ratio(over.replace('_ms', '_gpu_ms'), under.replace('_ms', '_gpu_ms'))(r)})")
    columns = [  # (header, cell, whether it is fla's)
        ("hopper fwd", ms("hopper_fwd_ms"), False), ("portable fwd", ms("portable_fwd_ms"), False),
        ("fla fwd", ms("fla_fwd_ms"), True), ("hopper fwd GPU", ms("hopper_fwd_gpu_ms"), False),
        ("portable fwd GPU", ms("portable_fwd_gpu_ms"), False), ("fla fwd GPU", ms("fla_fwd_gpu_ms"), True),
        ("hopper / portable fwd (GPU)", both("portable_fwd_ms", "hopper_fwd_ms"), False),
        ("hopper / fla fwd (GPU)", both("fla_fwd_ms", "hopper_fwd_ms"), True),
        ("hopper fwd+bwd", ms("hopper_fwdbwd_ms"), False), ("portable fwd+bwd", ms("portable_fwdbwd_ms"), False),
        ("fla fwd+bwd", ms("fla_fwdbwd_ms"), True),
        ("hopper / fla fwd+bwd (GPU)", both("fla_fwdbwd_ms", "hopper_fwdbwd_ms"), True),
        ("hopper fwd HBM (GPU)", lambda r: f"{hbm_fractions(result, r)[0]:.0%}", False),
        ("hopper fwd+bwd HBM (GPU)", lambda r: f"{hbm_fractions(result, r)[1]:.0%}", False)]
    if "tensor_flops_per_s" in result:
        columns.append(("hopper fwd tensor (GPU)", lambda r: f"{tensor_fraction(result, r):.0%}", False))
    with_fla = any(not math.isnan(r.get("fla_fwd_ms", math.nan)) for r in result["rows"])
    columns = [column for column in columns if with_fla or not column[2]]
    lines = [f"{result['gpu']}, bf16, medians of {result['rounds']} interleaved rounds (ms; speed-ups as ratios of the same column)", "",
             "| shape | " + " | ".join(header for header, _, _ in columns) + " |",
             "| --- |" + " ---: |" * len(columns)]
    lines += ["| " + " | ".join([r["shape"]] + [cell(r) for _, cell, _ in columns]) + " |" for r in result["rows"]]
    return "\n".join(lines)


def plot(result, out: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    names = [r["shape"] for r in rows]
    y = range(len(rows))
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(rows) + 1.8))
    bars = [("portable_fwd_gpu_ms", "forward GPU time: portable / hopper"),
            ("portable_fwdbwd_gpu_ms", "forward+backward GPU time: portable / hopper"),
            ("fla_fwd_gpu_ms", "forward GPU time: fla / hopper"),
            ("fla_fwd_ms", "forward wall time: fla / hopper"),
            ("fla_fwdbwd_ms", "forward+backward wall time: fla / hopper")]
    ratios = {key: [r.get(key, math.nan) / r[key.replace("portable", "hopper").replace("fla", "hopper")] for r in rows]
              for key, _ in bars}
    bars = [(key, label) for key, label in bars if not all(math.isnan(x) for x in ratios[key])]  # a run without fla
    width = 0.8 / len(bars)
    for n, (key, label) in enumerate(bars):
        ax.barh([i - 0.4 + width * (n + 0.5) for i in y], ratios[key], height=width, label=label)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up of culina's Hopper kernels (higher is better)")
    against = "its portable ones and fla" if any(key.startswith("fla") for key, _ in bars) else "its portable ones"
    ax.set_title(f"culina's sm_90a kernels against {against}, bf16, {result['gpu']}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def hbm_fractions(result, row) -> tuple[float, float]:
    """The Hopper kernels' forward and forward+backward HBM fractions of `row` (GPU busy time)."""
    peak = result["peak_bytes_per_s"]
    return (hbm_fraction(FORWARD_BYTES, row["n_d"], row["hopper_fwd_gpu_ms"], peak),
            hbm_fraction(FORWARD_BACKWARD_BYTES, row["n_d"], row["hopper_fwdbwd_gpu_ms"], peak))


def forward_flops(n_d, d):
    """The least tensor work of a chunked forward with chunks of 64 tokens and dk = dv = d, in
    FLOPs: per token, its scores against the chunk's keys (64 d products) and their sum over the
    chunk's values (64 d), its output from the state entering the chunk (d^2), and its share of
    the state's update (d^2). n_d is N D (N = B H T). The intra-chunk terms count every key, as the
    tensor cores do, masked or not. Per byte of the forward's 8 N D: 64 (D64), 96 (D128), 160
    (D256), against an H200's 142 (a matrix product's 684 TFLOP/s measured by gemm_rate, over
    4.8 TB/s; 165 at 790): D256 is past the ridge, bound by the tensor cores."""
    return 2 * (2 * 64 * d + 2 * d * d) * n_d // d


def gemm_rate(torch, rep_ms):
    """FLOP/s of a bf16 8192 x 8192 x 8192 matrix product on this GPU: the tensor cores' rate
    that the tensor fractions are taken of (its wall time per call, where the forwards' is their
    GPU busy time: one launch of about 1.6 ms, which no host gap touches)."""
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return 2 * 8192 ** 3 / (bench(lambda: a @ b, rep_ms) * 1e-3)


def head_size(row):
    """A result row's head size: recorded with it, or from SHAPES for results from before rows
    recorded it (None for a shape no longer there)."""
    return row.get("d", HEAD_SIZE.get(row["shape"]))


def tensor_fraction(result, row):
    """The Hopper forward's least tensor work (forward_flops) over its GPU time, a fraction of
    the measured matrix-product rate."""
    d = head_size(row)
    if d is None:
        return math.nan  # a shape no longer in SHAPES, from a result that did not record d
    return forward_flops(row["n_d"], d) / (row["hopper_fwd_gpu_ms"] * 1e-3) / result["tensor_flops_per_s"]


# Issue 24's bars: the forward's fraction of the HBM peak by head size, forward+backward's at D128.
FORWARD_BARS = {64: 0.60, 128: 0.70, 256: 0.60}
FORWARD_BACKWARD_BAR = 0.50


def plot_fraction_pairs(result, out: Path, series, bar_label, xlabel, title, width=10):
    """Two bars per shape, `series`: ((label, fraction of a row, bar of a head size or None),
    (label, ...)), each beside its bar for the shape's head size (a tick where it has one)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    y = range(len(rows))
    fig, ax = plt.subplots(figsize=(width, 0.45 * len(rows) + 1.8))
    for offset, (label, fraction, bar_of) in zip((-0.2, 0.2), series):
        ax.barh([i + offset for i in y], [100 * fraction(r) for r in rows], height=0.4, label=label)
        for i, r in enumerate(rows):
            bar = bar_of(head_size(r))
            if bar is not None:
                ax.plot([100 * bar] * 2, [i + offset - 0.2, i + offset + 0.2], color="black", linewidth=2)
    ax.plot([], [], color="black", linewidth=2, label=bar_label)
    ax.set_yticks(list(y), [r["shape"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel(xlabel)
    ax.set_title(f"{title}, bf16, {result['gpu']}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def plot_hbm(result, out: Path):
    """The Hopper kernels' HBM fractions per shape, forward and forward+backward, each beside the
    bar its head size has."""
    plot_fraction_pairs(
        result, out,
        (("forward (8 N D bytes)", lambda r: hbm_fractions(result, r)[0], FORWARD_BARS.get),
         ("forward+backward (22 N D bytes)", lambda r: hbm_fractions(result, r)[1],
          lambda d: FORWARD_BACKWARD_BAR if d == 128 else None)),
        "issue 24's bar", "% of the HBM peak, culina's Hopper kernels (GPU busy time)", "How close to the memory limit")


def plot_limits(result, out: Path):
    """The Hopper forward per shape against both of its limits: its fraction of the HBM peak (8 N
    D bytes), beside the forward's bar for its head size, and of the measured matrix-product rate
    (forward_flops)."""
    plot_fraction_pairs(
        result, out,
        (("of the HBM peak (8 N D bytes)", lambda r: hbm_fractions(result, r)[0], FORWARD_BARS.get),
         (f"of a bf16 matrix product's rate ({result['tensor_flops_per_s'] / 1e12:.0f} TFLOP/s)",
          lambda r: tensor_fraction(result, r), lambda d: None)),
        "issue 24's forward bar (HBM)", "% of each limit, culina's Hopper forward (GPU busy time)",
        "The forward against memory and tensor-core limits", width=13)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fla", action="store_true", help="flash-linear-attention's chunk_simple_gla beside culina's")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rep-ms", type=int, default=100)
    parser.add_argument("--only", nargs="+", help="these shapes alone (their names, as in SHAPES)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path, help="a PNG of the speed-ups")
    parser.add_argument("--plot-hbm", type=Path, help="a PNG of the Hopper kernels' HBM fractions beside issue 24's bars")
    parser.add_argument("--plot-limits", type=Path,
                        help="a PNG of the Hopper forward's fractions of the HBM peak and of the tensor cores' rate")
    parser.add_argument("--plot-only", type=Path, help="a --json result to tabulate and plot, without running")
    args = parser.parse_args()
    refuse_unknown_shapes(parser, args.only, SHAPES)
    if args.plot_only:
        result = json.loads(args.plot_only.read_text())
        if args.plot_limits and "tensor_flops_per_s" not in result:
            parser.error(f"--plot-limits: {args.plot_only} has no tensor_flops_per_s (a run from before it was measured)")
    else:
        import torch

        from culina import _api, _C

        _api.apply_kernel_choice()
        if _C.device(0)["arch_specific_version"] != 90:
            sys.exit("this device runs no sm_90a code of this build: nothing to compare")
        gpu = torch.cuda.get_device_name()
        impls = IMPLS if args.fla else IMPLS[:2]
        rows = []
        for shape in SHAPES:
            if args.only and shape[0] not in args.only:
                continue
            rows.append(measure(torch, shape, impls, args.rounds, args.rep_ms))
            print(json.dumps(rows[-1]), flush=True)
        peak = next((v for key, v in HBM_PEAK.items() if key in gpu), math.nan)
        result = {"gpu": gpu, "rounds": args.rounds, "peak_bytes_per_s": peak,
                  "tensor_flops_per_s": gemm_rate(torch, args.rep_ms), "rows": rows}
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
    print(table(result))
    if args.plot:
        plot(result, args.plot)
    if args.plot_hbm:
        plot_hbm(result, args.plot_hbm)
    if args.plot_limits:
        plot_limits(result, args.plot_limits)


if __name__ == "__main__":
    main()
