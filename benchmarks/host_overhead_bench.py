"""Host overhead of one call on a tiny problem (1x1x16x16 torch tensors), culina against
flash-linear-attention's chunk_simple_gla in the same process.

The host's cost of one call (the time a decode step pays per layer) is timed over batches of
back-to-back calls, the GPU drained between batches (per_call_us says why that measures the host). culina is timed on its routes: no autograd
(straight to the kernels), inputs that require grad (the dispatcher and autograd), and forward +
backward. --breakdown adds where one call's host time goes (culina's pieces, each timed alone) and
the GPU time of the kernels. Usage:
python benchmarks/host_overhead_bench.py [--device cuda|cpu] [--breakdown] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "package"))
import culina  # noqa: E402

SHAPE = (1, 1, 16, 16)  # B, H, T, D
DECAY = [0.95]


def per_call_us(fn, device: str, calls: int, repeats: int) -> float:
    """Host time of one call: the median over `repeats` batches of `calls` calls, each batch timed
    from its first call's start to its last call's return, with the GPU drained between batches.
    A batch is short enough (a few hundred launches) never to fill CUDA's launch queue, so the
    figure is what the host spends, whatever the GPU's clocks: what a decode step pays per call."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(calls):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return statistics.median(times)


def breakdown(q, scale: float, calls: int, repeats: int) -> dict:
    """Host time of each piece of one culina call on CUDA tensors, and the kernels' GPU time."""
    from culina import _api, _C, _torch

    device = q.device.index
    stream = torch._C._cuda_getCurrentRawStream(device)
    problem = _torch.problem_of(q, q, q, None, None, None, None, "BHTD")
    description = _api.describe(problem)
    out = torch.empty_like(q)
    grads = [torch.empty_like(q) for _ in range(3)]
    forward_bytes = _C.forward_workspace_bytes(description, device)
    backward_bytes = _C.backward_workspace_bytes(description, device)
    workspace = torch.empty(max(forward_bytes, backward_bytes, 1), dtype=torch.uint8, device=q.device)
    address = q.data_ptr()
    # every tensor here is q-shaped and contiguous, as the description says; ungated
    inputs = {"q": address, "k": address, "v": address, "scale": scale, "decay": DECAY, "device": device,
              "stream": stream, "workspace": workspace.data_ptr()}
    forward_call = {**inputs, "out": out.data_ptr(), "workspace_bytes": forward_bytes}
    backward_call = {**inputs, "do": address, "do_strides": tuple(q.stride()[:3]), "dq": grads[0].data_ptr(),
                     "dk": grads[1].data_ptr(), "dv": grads[2].data_ptr(), "workspace_bytes": backward_bytes}
    pieces = {
        "torch.empty (one output)": lambda: torch.empty(q.shape, dtype=q.dtype, device=q.device),
        "_C.forward alone": lambda: _C.forward(description, forward_call),
        "_C.backward alone": lambda: _C.backward(description, backward_call),
        "culina._torch.forward": lambda: _torch.forward(q, q, q, DECAY, None, None, scale, None, None, False, "BHTD"),
        "torch.ops.culina.linear_attention": lambda: torch.ops.culina.linear_attention(
            q, q, q, DECAY, None, None, scale, None, None, False, "BHTD"),
        "culina._torch.backward": lambda: _torch.backward(q, q, q, q, DECAY, None, None, scale, None, None, None,
                                                          False, "BHTD"),
        "torch.ops.culina.linear_attention_backward": lambda: torch.ops.culina.linear_attention_backward(
            q, q, q, q, DECAY, None, None, scale, None, None, None, False, "BHTD"),
    }
    figures = {f"host: {name}": per_call_us(fn, "cuda", calls, repeats) for name, fn in pieces.items()}
    for name in ("_C.forward alone", "_C.backward alone"):
        # The GPU sleeps while the host queues 100 calls, then runs them back to back: the events
        # time the kernels alone, without the host's gaps between launches.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100_000_000)
        start.record()
        for _ in range(100):
            pieces[name]()
        end.record()
        end.synchronize()
        figures[f"GPU: {name.split()[0]} kernels"] = start.elapsed_time(end) * 10  # ms / 100 calls -> us
    figures["workspace bytes (forward, backward)"] = (forward_bytes, backward_bytes)
    return figures


def load_fla():
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except Exception as exc:  # any import failure means "not available here", reported below
        return None, f"{type(exc).__name__}: {exc}"
    return chunk_simple_gla, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--calls", type=int, default=200, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=50, help="timed batches; the median is reported")
    parser.add_argument("--breakdown", action="store_true", help="also time culina's pieces (CUDA only)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator(device=args.device).manual_seed(0)
    q, k, v = (torch.randn(SHAPE, device=args.device, dtype=dtype, generator=gen) for _ in range(3))
    q_grad, k_grad, v_grad = (x.clone().requires_grad_() for x in (q, k, v))
    scale = SHAPE[-1] ** -0.5

    def forward_backward():
        culina.linear_attention(q_grad, k_grad, v_grad, DECAY, scale=scale).sum().backward()

    routes = {
        "culina forward (no autograd)": lambda: culina.linear_attention(q, k, v, DECAY, scale=scale),
        "culina forward (requires_grad)": lambda: culina.linear_attention(q_grad, k_grad, v_grad, DECAY, scale=scale),
        "culina forward + backward": forward_backward,
    }
    fla, fla_error = load_fla() if args.device == "cuda" else (None, "fla runs on CUDA only")
    if fla:
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # fla's [B, T, H, D]
        g_gamma = torch.log(torch.tensor(DECAY, device=args.device, dtype=torch.float32))
        routes["fla chunk_simple_gla forward"] = lambda: fla(qt, kt, vt, g_gamma=g_gamma, scale=scale)
        torch.testing.assert_close(routes["fla chunk_simple_gla forward"]()[0].transpose(1, 2).float(),
                                   routes["culina forward (no autograd)"]().float(), rtol=2e-2, atol=2e-2)
    print(f"device: {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}; torch {torch.__version__}; "
          f"culina {culina.__version__}; fla: {'available' if fla else 'unavailable (' + fla_error + ')'}; "
          f"shape {SHAPE} {args.dtype}; host time per call, median of {args.repeats} batches of {args.calls} calls")
    figures = {}
    for name, fn in routes.items():
        figures[name] = per_call_us(fn, args.device, args.calls, args.repeats)
        print(f"  {name:34s} {figures[name]:8.1f} us/call")
    if args.breakdown and args.device == "cuda":
        for name, value in breakdown(q, scale, args.calls, args.repeats).items():
            figures[name] = value
            print(f"  {name:50s} {value if isinstance(value, tuple) else f'{value:8.1f} us'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "dtype": args.dtype, "shape": SHAPE,
                                               "us_per_call": figures, "fla_error": fla_error}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
