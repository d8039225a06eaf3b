"""culina.chunk_simple_gla against flash-linear-attention's chunk_simple_gla, both through their
public APIs, side by side in one process on one GPU.

Each implementation gets the same inputs in fla's native [B, T, H, D] layout, built outside the
timed region: q, k, v (bf16), per-token log forget gates g [B, T, H] (float32, logsigmoid of a
normal draw, as fla's examples make them) or a per-head log decay g_gamma [H], one at a
time: fla 0.6 takes one of the two (its docstring says so, and its state pass mixes them when
both come: chunk_h.py uses the g_gamma power against g's cumulative sums). Forward: under
torch.no_grad(). Forward+backward: autograd, from inputs that require grad to the gradients of q, k, v and g. Host time: the wall time of one
small forward+backward, the GPU synchronised before and after (what a small model's step pays).

HBM fraction: forward 8 N D bytes, forward+backward 22 N D (N = B H T, bf16, D the head size;
twice that for float32), over the device's peak bandwidth.

Usage: python benchmarks/simple_gla_bench.py [--json out.json] [--plots DIR] [--rep-ms 300]
       python benchmarks/simple_gla_bench.py --plot-only out.json --plots DIR   (plots from a run)
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

# (name, B, T, H, D, gates, packed sequence count[, dtype[, float32 matmul precision]]). gates:
# "g", "gamma" (one at a time, as above); dtype: bf16 unless named (float32: culina's exact
# default, or with torch.set_float32_matmul_precision("medium") its opt-in bfloat16 tensor-core
# path, against fla's TF32 dots, which do not read that setting).
SHAPES = [
    ("fla: B1 T8192 H96 D128", 1, 8192, 96, 128, "g", 0),
    ("fla: B1 T8192 H96 D128, g_gamma", 1, 8192, 96, 128, "gamma", 0),
    ("fla: B2 T16384 H16 D128", 2, 16384, 16, 128, "g", 0),
    ("fla: B2 T16384 H16 D128, g_gamma", 2, 16384, 16, 128, "gamma", 0),
    ("fla: B8 T1024 H8 D64", 8, 1024, 8, 64, "g", 0),
    ("fla: B8 T1024 H8 D64, g_gamma", 8, 1024, 8, 64, "gamma", 0),
    ("B4 T4096 H16 D128", 4, 4096, 16, 128, "g", 0),
    ("B4 T4096 H16 D128, g_gamma", 4, 4096, 16, 128, "gamma", 0),
    ("B4 T4096 H16 D96", 4, 4096, 16, 96, "g", 0),
    ("B4 T4096 H16 D96, g_gamma", 4, 4096, 16, 96, "gamma", 0),
    ("B4 T4096 H24 D64", 4, 4096, 24, 64, "g", 0),
    ("B2 T8192 H8 D256, g_gamma", 2, 8192, 8, 256, "gamma", 0),
    ("B4 T4096 H16 D192, g_gamma", 4, 4096, 16, 192, "gamma", 0),
    ("packed 8 seqs T16384 H16 D128", 1, 16384, 16, 128, "g", 8),
    ("packed 8 seqs T16384 H16 D128, g_gamma", 1, 16384, 16, 128, "gamma", 8),
    ("B4 T4096 H16 D128, g_gamma, float32", 4, 4096, 16, 128, "gamma", 0, "float32"),
    ("B4 T4096 H16 D64, g, float32", 4, 4096, 16, 64, "g", 0, "float32"),
    ("B4 T4096 H16 D128, g_gamma, float32 medium", 4, 4096, 16, 128, "gamma", 0, "float32", "medium"),
    ("B4 T4096 H16 D64, g, float32 medium", 4, 4096, 16, 64, "g", 0, "float32", "medium"),
]
SMALL = ("small: B1 T256 H4 D64, g_gamma", 1, 256, 4, 64, "gamma", 0)
HBM_PEAK = {"H100": 3.35e12, "H200": 4.8e12}  # bytes/s, SXM parts
# Bytes per element of N D (N = B H T) at 2 bytes an element: the forward reads q, k, v and writes
# o; forward+backward adds the backward's reads of q, k, v and dO and its writes of dq, dk, dv.
FORWARD_BYTES, FORWARD_BACKWARD_BYTES = 8, 22


def hbm_fraction(bytes_per_n_d, n_d, ms, peak):
    """The fraction of the HBM peak (bytes/s) that bytes_per_n_d x n_d bytes in `ms` make."""
    return bytes_per_n_d * n_d / (ms * 1e-3) / peak


def refuse_unknown_shapes(parser, only, shapes):
    """Stops the script where --only names a shape that `shapes` (a script's SHAPES, names first)
    does not have, so that a misspelt name is not measured or plotted as nothing."""
    names = [shape[0] for shape in shapes]
    unknown = sorted(set(only or []) - set(names))
    if unknown:
        parser.error(f"--only: no such shape {unknown}; the shapes are {names}")


def make_inputs(torch, b, t, h, d, gates, packed, seed, dtype="bfloat16"):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(b, t, h, d, device="cuda", generator=gen, dtype=getattr(torch, dtype)) for _ in range(3))
    g = torch.nn.functional.logsigmoid(torch.randn(b, t, h, device="cuda", generator=gen)) / 16 if "g" in gates.split("+") else None
    g_gamma = -torch.rand(h, device="cuda", generator=gen) * 0.1 - 0.01 if "gamma" in gates else None
    cu_seqlens = None
    if packed:
        cuts = torch.sort(torch.randperm(t - 1, generator=torch.Generator().manual_seed(seed))[: packed - 1] + 1).values
        cu_seqlens = torch.cat([torch.tensor([0]), cuts, torch.tensor([t])]).to("cuda", torch.int64)
    return q, k, v, g, g_gamma, cu_seqlens


def bench(fn, rep_ms):
    from triton.testing import do_bench

    return do_bench(fn, warmup=100, rep=rep_ms, return_mode="median")


def rel_err(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def measure(torch, impls, shape, rep_ms, peak):
    name, b, t, h, d, gates, packed, *rest = shape
    dtype, precision = (list(rest) + ["bfloat16", "highest"][len(rest):])[:2]
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        return measure_row(torch, impls, shape, rep_ms, peak, dtype)
    finally:
        torch.set_float32_matmul_precision(before)


def measure_row(torch, impls, shape, rep_ms, peak, dtype):
    name, b, t, h, d, gates, packed, *_ = shape
    q, k, v, g, g_gamma, cu_seqlens = make_inputs(torch, b, t, h, d, gates, packed, seed=t + d + h, dtype=dtype)
    do = torch.randn_like(v)
    row = {"shape": name, "B": b, "T": t, "H": h, "D": d, "gates": gates, "packed": packed, "dtype": dtype}
    grads = {}
    for label, fn in impls.items():
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        g_leaf = g.detach().clone().requires_grad_() if g is not None else None

        def run(leaves=leaves, g_leaf=g_leaf, fn=fn):
            return fn(*leaves, g=g_leaf, g_gamma=g_gamma, cu_seqlens=cu_seqlens)[0]

        def forward_backward(run=run, leaves=leaves, g_leaf=g_leaf):
            for x in leaves + ([g_leaf] if g_leaf is not None else []):
                x.grad = None
            run().backward(do)

        with torch.no_grad():
            row[f"{label}_fwd_ms"] = bench(run, rep_ms)
            out = run()
        try:
            forward_backward()
        except RuntimeError as exc:  # fla 0.6 refuses its gated backward on Hopper with Triton < 3.7.1
            row[f"{label}_fwdbwd_error"] = str(exc)[:160]
            grads[label] = [out]
            continue
        row[f"{label}_fwdbwd_ms"] = bench(forward_backward, rep_ms)
        grads[label] = [out] + [x.grad for x in leaves] + ([g_leaf.grad] if g_leaf is not None else [])
    if len(grads) == 2:
        ours, theirs = grads["culina"], grads["fla"]
        for key, a, b_ in zip(["o", "dq", "dk", "dv", "dg"], ours, theirs):
            row[f"rel_diff_{key}"] = rel_err(a, b_)
    n_d = b * t * h * d * q.element_size() // 2  # the byte counts above are for 2-byte elements
    if peak:
        row["culina_fwd_hbm"] = hbm_fraction(FORWARD_BYTES, n_d, row["culina_fwd_ms"], peak)
        if "culina_fwdbwd_ms" in row:
            row["culina_fwdbwd_hbm"] = hbm_fraction(FORWARD_BACKWARD_BYTES, n_d, row["culina_fwdbwd_ms"], peak)
    return row


def host_time(torch, impls, runs=200):
    """Median wall time of one small forward+backward per implementation, synchronised."""
    name, b, t, h, d, gates, packed = SMALL
    q, k, v, g, g_gamma, _ = make_inputs(torch, b, t, h, d, gates, packed, seed=1)
    leaves = [x.detach().requires_grad_() if x is not None else None for x in (q, k, v, g)]
    do = torch.randn_like(v)
    out = {}
    for label, fn in impls.items():
        times = []
        try:
            fn(*leaves[:3], g=leaves[3], g_gamma=g_gamma)[0].backward(do)
        except RuntimeError:  # fla's refused gated backward (above)
            continue
        for i in range(runs + 20):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn(*leaves[:3], g=leaves[3], g_gamma=g_gamma)[0].backward(do)
            torch.cuda.synchronize()
            if i >= 20:
                times.append(time.perf_counter() - start)
        out[label] = sorted(times)[len(times) // 2] * 1e6
    return {"shape": name, **{f"{label}_us": us for label, us in out.items()}}


def table(rows, small):
    lines = ["| shape | culina fwd (ms) | fla fwd (ms) | fwd vs fla | culina fwd+bwd (ms) | fla fwd+bwd (ms) | "
             "fwd+bwd vs fla | culina fwd HBM | culina fwd+bwd HBM | max rel diff |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        fla_f, fla_b = r.get("fla_fwd_ms", math.nan), r.get("fla_fwdbwd_ms", math.nan)
        r.setdefault("culina_fwdbwd_ms", math.nan)
        diffs = [v for key, v in r.items() if key.startswith("rel_diff")]
        lines.append(f"| {r['shape']} | {r['culina_fwd_ms']:.3f} | {fla_f:.3f} | {fla_f / r['culina_fwd_ms']:.2f}x | "
                     f"{r['culina_fwdbwd_ms']:.3f} | {fla_b:.3f} | {fla_b / r['culina_fwdbwd_ms']:.2f}x | "
                     f"{r.get('culina_fwd_hbm', math.nan):.0%} | {r.get('culina_fwdbwd_hbm', math.nan):.0%} | "
                     f"{max(diffs) if diffs else math.nan:.1e} |")
    if small:
        lines.append("")
        lines.append(f"Host time of one forward+backward, {small['shape']}: culina {small.get('culina_us', math.nan):.0f} us, "
                     f"fla {small.get('fla_us', math.nan):.0f} us")
    return "\n".join(lines)


def plot(result, folder: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if "fla_fwd_ms" in r]
    nan = math.nan
    folder.mkdir(parents=True, exist_ok=True)
    names = [r["shape"] for r in rows]
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.8))
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], [r["fla_fwd_ms"] / r["culina_fwd_ms"] for r in rows], height=0.4, label="forward")
    ax.barh([i + 0.2 for i in y], [r.get("fla_fwdbwd_ms", nan) / r.get("culina_fwdbwd_ms", nan) for r in rows], height=0.4,
            label="forward+backward")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(1.25, color="grey", linestyle="--", linewidth=0.8, label="target 1.25x")
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up over fla's chunk_simple_gla (higher is better)")
    ax.set_title(f"culina.chunk_simple_gla vs fla, bf16 unless named,\n{result['gpu']}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(folder / "simple_gla_speedup.png", dpi=110)
    rows = [r for r in result["rows"] if "culina_fwdbwd_hbm" in r]
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.8))
    y = range(len(rows))
    for offset, key, label in ((-0.2, "fwd", "forward"), (0.2, "fwdbwd", "forward+backward")):
        ax.barh([i + offset for i in y], [100 * r[f"culina_{key}_hbm"] for r in rows], height=0.4, label=f"culina {label}")
    ax.set_yticks(list(y), [r["shape"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("% of peak HBM bandwidth (forward 8ND, forward+backward 22ND bytes)")
    ax.set_title(f"culina.chunk_simple_gla, bf16 unless named,\n{result['gpu']}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(folder / "simple_gla_hbm.png", dpi=110)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plots", type=Path, help="folder for the PNG plots")
    parser.add_argument("--plot-only", type=Path, help="draw the plots from this JSON result and stop")
    parser.add_argument("--rep-ms", type=int, default=300)
    parser.add_argument("--only", nargs="+", help="these shapes alone (their names, as in SHAPES)")
    args = parser.parse_args()
    refuse_unknown_shapes(parser, args.only, SHAPES)
    if args.plot_only:
        plot(json.loads(args.plot_only.read_text()), args.plots or Path("."))
        return 0
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "package"))
    import culina

    impls = {"culina": culina.chunk_simple_gla}
    try:
        from fla.ops.simple_gla import chunk_simple_gla as fla_chunk_simple_gla

        impls["fla"] = fla_chunk_simple_gla
        fla_error = None
    except Exception as exc:  # any import failure means "not available here", reported below
        fla_error = f"{type(exc).__name__}: {exc}"
    gpu = torch.cuda.get_device_name()
    peak = next((bw for key, bw in HBM_PEAK.items() if key in gpu), None)
    print(f"GPU: {gpu}; torch {torch.__version__}; culina {culina.__version__}; fla: {fla_error or 'available'}",
          flush=True)
    small = host_time(torch, impls)  # first: a device call that runs out of time keeps it
    print(json.dumps(small), flush=True)
    rows = []
    result = {"gpu": gpu, "torch": torch.__version__, "fla_error": fla_error, "rows": rows, "host": small}
    for shape in SHAPES:
        if args.only and shape[0] not in args.only:
            continue
        rows.append(measure(torch, impls, shape, args.rep_ms, peak))
        print(json.dumps(rows[-1]), flush=True)
        if args.json:  # after every row: a call that runs out of time keeps what it measured
            args.json.write_text(json.dumps(result, indent=2))
    print(table(rows, small))
    if args.plots:
        plot(result, args.plots)
    diffs = [v for r in rows for key, v in r.items() if key.startswith("rel_diff")]
    if any(math.isnan(v) or v > 2e-2 for v in diffs):
        print("ERROR: culina and fla disagree by more than 2e-2 (relative)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
