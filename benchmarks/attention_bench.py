"""Kernel time and throughput of causal linear attention with per-head decay, on one GPU:
culina, a straightforward PyTorch chunked implementation, and flash-linear-attention's
Triton kernel (fla.ops.simple_gla.chunk_simple_gla) when it imports.

Usage: python benchmarks/attention_bench.py [--seq-lens 4096 16384] [--json out.json]

Throughput counts the chunked algorithm's matrix work with chunk C = 64, the same count for
every implementation: per token 2*C*(Dk+Dv) (intra-chunk q.k and p.v) + 4*Dk*Dv (q.S and the
k^T v state update).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "package"))
import culina  # noqa: E402

CHUNK = 64


def torch_chunked(q, k, v, decay, scale):
    """Chunked linear attention in eager PyTorch: batched matmuls over all chunks for the
    intra-chunk part and the per-chunk k^T v sums, a Python loop over chunks for the state."""
    b, h, t, dk = q.shape
    dv = v.shape[-1]
    n = t // CHUNK
    qc, kc, vc = (x.view(b, h, n, CHUNK, x.shape[-1]) for x in (q, k, v))
    log_g = torch.log(torch.tensor(decay, device=q.device, dtype=torch.float32))
    i = torch.arange(CHUNK, device=q.device, dtype=torch.float32)
    dist = i[:, None] - i[None, :]
    mask = torch.where(dist >= 0, torch.exp(log_g[:, None, None] * dist.clamp(min=0)), 0.0)  # [H,C,C]
    q_decay = torch.exp(log_g[:, None] * (i + 1))[:, None, :, None]                       # [H,1,C,1]
    k_decay = torch.exp(log_g[:, None] * (CHUNK - 1 - i))[:, None, :, None]
    chunk_decay = torch.exp(log_g * CHUNK)[None, :, None, None]

    attn = (qc @ kc.transpose(-1, -2)).float() * mask[:, None]
    o = attn.to(q.dtype) @ vc
    kv = ((kc.float() * k_decay).to(q.dtype).transpose(-1, -2) @ vc).float()            # [B,H,n,Dk,Dv]
    states = torch.empty(b, h, n, dk, dv, device=q.device, dtype=torch.float32)
    s = torch.zeros(b, h, dk, dv, device=q.device, dtype=torch.float32)
    for c in range(n):
        states[:, :, c] = s
        s = s * chunk_decay + kv[:, :, c]
    o = o.float() + (qc.float() * q_decay) @ states
    return (scale * o).to(q.dtype).view(b, h, t, dv)


def load_fla():
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except Exception as exc:  # any import failure means "not available here", reported below
        return None, f"{type(exc).__name__}: {exc}"
    return chunk_simple_gla, None


def bench(fn, warmup_ms=200, rep_ms=1500):
    from triton.testing import do_bench

    return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def kernel_breakdown(fn, calls=10):
    """Mean device time per call of each kernel `fn` launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times = {}
    for event in prof.events():
        if event.device_type.name == "CUDA":
            times[event.name] = times.get(event.name, 0.0) + event.device_time / 1000 / calls
    return sorted(times.items(), key=lambda item: -item[1])


def rel_err(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", help="time this implementation alone (e.g. culina)")
    args = parser.parse_args()

    device = torch.device("cuda")
    fla, fla_error = load_fla()
    b, h, d = args.batch, args.heads, args.head_dim
    scale = d ** -0.5
    decay = [1 - 2.0 ** (-5 - 3 * i / h) for i in range(h)]  # RetNet-style per-head decays
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; culina {culina.__version__}; "
          f"fla: {'available' if fla else 'unavailable (' + fla_error + ')'}")
    rows = []
    for t in args.seq_lens:
        gen = torch.Generator(device=device).manual_seed(t)
        q, k, v = (torch.randn(b, h, t, d, device=device, generator=gen, dtype=torch.bfloat16) for _ in range(3))
        flops = b * h * t * (2 * CHUNK * (d + d) + 4 * d * d)
        impls = {
            "culina": lambda: culina.linear_attention(q, k, v, decay, scale=scale),
            "pytorch-chunked": lambda: torch_chunked(q, k, v, decay, scale),
        }
        if fla:
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
            g_gamma = torch.log(torch.tensor(decay, device=device, dtype=torch.float32))
            impls["fla-chunk_simple_gla"] = lambda: fla(qt, kt, vt, g_gamma=g_gamma, scale=scale)[0]
        reference = impls["culina"]()
        if args.only:
            impls = {args.only: impls[args.only]}
        for name, fn in impls.items():
            out = fn()
            if name.startswith("fla"):
                out = out.transpose(1, 2)
            err = rel_err(out, reference)
            ms = bench(fn)
            row = {"impl": name, "B": b, "H": h, "T": t, "Dk": d, "Dv": d, "dtype": "bfloat16",
                   "ms": ms, "tflops": flops / ms / 1e9, "rel_diff_vs_culina": err}
            rows.append(row)
            print(f"T={t:6d} {name:22s} {ms:8.3f} ms {row['tflops']:7.1f} TFLOP/s  rel diff vs culina {err:.2e}",
                  flush=True)
            if name != "pytorch-chunked":
                row["kernels_ms"] = kernel_breakdown(fn)
                for kernel, kms in row["kernels_ms"][:4]:
                    print(f"         {kms:8.3f} ms  {kernel[:90]}")
    print("\n| T | implementation | time (ms) | TFLOP/s | culina speed-up |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for row in rows:
        ours = next(r["ms"] for r in rows if r["T"] == row["T"] and r["impl"] == rows[0]["impl"])
        print(f"| {row['T']} | {row['impl']} | {row['ms']:.3f} | {row['tflops']:.1f} | {row['ms'] / ours:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows,
                                         "fla_error": fla_error}, indent=2))
    if any(math.isnan(r["rel_diff_vs_culina"]) or r["rel_diff_vs_culina"] > 5e-2 for r in rows):
        print("ERROR: an implementation disagrees with culina by more than 5e-2", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
