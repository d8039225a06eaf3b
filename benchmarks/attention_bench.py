"""Kernel time and throughput of causal linear attention with per-head decay, on one GPU:
culina, a straightforward PyTorch chunked implementation, and flash-linear-attention's
Triton kernel (fla.ops.simple_gla.chunk_simple_gla) when it imports.

Usage: python benchmarks/attention_bench.py [--seq-lens 4096 16384] [--json out.json]
       python benchmarks/attention_bench.py --spread [--json out.json]

--spread times forward and forward+backward over a spread of shapes (B*H 8..512, T 1k..32k,
D 64/128/256, bf16 and fp16), culina through its raw `_C` entry points (preallocated outputs
and workspaces: kernel time, as fla's Triton launches measure theirs) against fla's
chunk_simple_gla (g_gamma = log(decay)) with autograd, and the HBM bandwidth each reaches
counting the bytes it must move once (forward: q, k, v, o; backward: q, k, v, do, dq, dk, dv).

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


# (B, H, T, D, dtype) for --spread.
# D = 256 last: fla's Triton autotuning takes minutes there.
SPREAD = [(1, 8, 32768, 128, "bfloat16"), (4, 16, 4096, 128, "bfloat16"), (8, 16, 2048, 64, "bfloat16"),
          (1, 32, 16384, 128, "bfloat16"), (32, 16, 1024, 64, "bfloat16"), (16, 32, 1024, 128, "bfloat16"),
          (4, 16, 4096, 128, "float16"), (2, 8, 8192, 256, "bfloat16"), (2, 8, 8192, 256, "float16")]
HBM_PEAK = {"H100": 3.35e12, "H200": 4.8e12}  # bytes/s, SXM parts


class CulinaRaw:
    """culina's forward and backward through `_C`, outputs and workspaces allocated once."""

    def __init__(self, q, k, v, decay, scale):
        from culina import _api, _C, _torch

        self.c, self.q, self.k, self.v, self.decay, self.scale = _C, q, k, v, decay, scale
        self.out, self.do = torch.empty_like(v), torch.randn_like(v)
        self.dq, self.dk, self.dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        # [B, H, T, D] tensors, contiguous as culina makes its outputs; ungated
        self.description = _api.describe(_torch.problem_of(q, k, v, None, None, None, None, "BHTD"))
        device = q.device.index or 0
        self.ws = torch.empty(_C.forward_workspace_bytes(self.description, device), dtype=torch.uint8,
                              device=q.device)
        self.bws = torch.empty(_C.backward_workspace_bytes(self.description, device), dtype=torch.uint8,
                               device=q.device)
        inputs = {"q": q.data_ptr(), "k": k.data_ptr(), "v": v.data_ptr(), "scale": scale, "decay": decay,
                  "device": device}
        self.forward_call = {**inputs, "out": self.out.data_ptr(), "workspace": self.ws.data_ptr(),
                             "workspace_bytes": self.ws.numel()}
        self.backward_call = {**inputs, "do": self.do.data_ptr(), "do_strides": tuple(self.do.stride()[:3]),
                              "dq": self.dq.data_ptr(), "dk": self.dk.data_ptr(), "dv": self.dv.data_ptr(),
                              "workspace": self.bws.data_ptr(), "workspace_bytes": self.bws.numel()}

    def forward(self):
        self.c.forward(self.description, {**self.forward_call, "stream": torch.cuda.current_stream().cuda_stream})
        return self.out

    def forward_backward(self):
        self.forward()
        self.c.backward(self.description, {**self.backward_call, "stream": torch.cuda.current_stream().cuda_stream})
        return self.dq, self.dk, self.dv


def spread(fla, rep_ms, first):
    """Forward and forward+backward over SPREAD[first:]; returns the rows and prints a table."""
    name = torch.cuda.get_device_name()
    peak = next((bw for key, bw in HBM_PEAK.items() if key in name), None)
    rows = []
    for b, h, t, d, dtype_name in SPREAD[first:]:
        dtype = getattr(torch, dtype_name)
        gen = torch.Generator(device="cuda").manual_seed(t + d)
        q, k, v = (torch.randn(b, h, t, d, device="cuda", generator=gen, dtype=dtype) for _ in range(3))
        decay = [1 - 2.0 ** (-5 - 3 * i / h) for i in range(h)]
        scale = d ** -0.5
        ours = CulinaRaw(q, k, v, decay, scale)
        row = {"B": b, "H": h, "T": t, "D": d, "dtype": dtype_name}
        row["culina_fwd_ms"] = bench(ours.forward, rep_ms=rep_ms)
        row["culina_fwdbwd_ms"] = bench(ours.forward_backward, rep_ms=rep_ms)
        row["culina_fwd_kernels_ms"] = [(kernel[:60], ms) for kernel, ms in kernel_breakdown(ours.forward)[:5]]
        row["culina_kernels_ms"] = [(kernel[:60], ms) for kernel, ms in kernel_breakdown(ours.forward_backward)[:5]]
        elem = q.element_size()
        row["fwd_bytes"] = elem * b * h * t * 4 * d
        row["bwd_bytes"] = elem * b * h * t * 7 * d
        if fla:
            qt, kt, vt = (x.transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v))
            dot = ours.do.transpose(1, 2).contiguous()
            g_gamma = torch.log(torch.tensor(decay, device="cuda", dtype=torch.float32))
            fwd = lambda: fla(qt, kt, vt, g_gamma=g_gamma, scale=scale)[0]
            row["rel_diff_fwd"] = rel_err(ours.forward(), fwd().detach().transpose(1, 2))
            ours.forward_backward()
            fwd().backward(dot)
            row["rel_diff_dq"] = rel_err(ours.dq, qt.grad.transpose(1, 2))
            row["rel_diff_dk"] = rel_err(ours.dk, kt.grad.transpose(1, 2))
            row["rel_diff_dv"] = rel_err(ours.dv, vt.grad.transpose(1, 2))
            with torch.no_grad():
                row["fla_fwd_ms"] = bench(fwd, rep_ms=rep_ms)
            row["fla_fwdbwd_ms"] = bench(lambda: fwd().backward(dot), rep_ms=rep_ms)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| B, H, T, D | dtype | culina fwd (ms) | fla fwd (ms) | fwd vs fla | culina fwd+bwd (ms) | "
          "fla fwd+bwd (ms) | fwd+bwd vs fla | culina fwd HBM | culina bwd HBM |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        fla_fwd, fla_both = r.get("fla_fwd_ms", float("nan")), r.get("fla_fwdbwd_ms", float("nan"))
        bw = lambda nbytes, ms: f"{nbytes / (ms * 1e-3) / peak:.0%}" if peak else "n/a"
        bwd_ms = r["culina_fwdbwd_ms"] - r["culina_fwd_ms"]
        print(f"| {r['B']}, {r['H']}, {r['T']}, {r['D']} | {r['dtype']} | {r['culina_fwd_ms']:.3f} | {fla_fwd:.3f} | "
              f"{fla_fwd / r['culina_fwd_ms']:.2f}x | {r['culina_fwdbwd_ms']:.3f} | {fla_both:.3f} | "
              f"{fla_both / r['culina_fwdbwd_ms']:.2f}x | {bw(r['fwd_bytes'], r['culina_fwd_ms'])} | "
              f"{bw(r['bwd_bytes'], bwd_ms)} |")
    return rows


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
    parser.add_argument("--only", help="time this implementation alone (e.g. culina; with --spread, culina only)")
    parser.add_argument("--spread", action="store_true", help="forward and forward+backward over SPREAD")
    parser.add_argument("--rep-ms", type=int, default=1500, help="timed milliseconds per measurement")
    parser.add_argument("--first", type=int, default=0, help="--spread from this shape on (resumes a cut run)")
    args = parser.parse_args()

    device = torch.device("cuda")
    fla, fla_error = load_fla()
    if args.spread:
        print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; culina {culina.__version__}; "
              f"fla: {'available' if fla else 'unavailable (' + fla_error + ')'}")
        rows = spread(fla if args.only != "culina" else None, args.rep_ms, args.first)
        if args.json:
            args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows,
                                             "fla_error": fla_error}, indent=2))
        diffs = [v for r in rows for key, v in r.items() if key.startswith("rel_diff")]
        if any(math.isnan(v) or v > 5e-2 for v in diffs):
            print("ERROR: culina and fla disagree by more than 5e-2", file=sys.stderr)
            return 1
        return 0
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
