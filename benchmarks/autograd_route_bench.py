"""Host time of one forward+backward through autograd, two ways of wiring the same no-op kernels:
a torch.library.custom_op with register_autograd (what torch.compile and tensor subclasses need)
and a plain torch.autograd.Function (what culina runs for eager calls with grad, _torch._route).
Same arguments as culina's op; CPU tensors, so only PyTorch's machinery is timed.

Usage: python benchmarks/autograd_route_bench.py   (in a venv with torch)
"""
import time, torch
from typing import Optional, List, Tuple

@torch.library.custom_op("exp::fwd", mutates_args=())
def fwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: Optional[List[float]], gamma: Optional[torch.Tensor],
           g: Optional[torch.Tensor], scale: float, s0: Optional[torch.Tensor], cu: Optional[torch.Tensor], ofs: bool,
           layout: str) -> Tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(v), q.new_empty((0,))
@fwd_op.register_fake
def _(q, k, v, decay, gamma, g, scale, s0, cu, ofs, layout):
    return torch.empty_like(v), q.new_empty((0,))
@torch.library.custom_op("exp::bwd", mutates_args=())
def bwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
def setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:3])
def backward(ctx, do, _):
    q, k, v = ctx.saved_tensors
    dq, dk, dv = torch.ops.exp.bwd(q, k, v, do)
    return dq, dk, dv, None, None, None, None, None, None, None, None
fwd_op.register_autograd(backward, setup_context=setup)

class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, decay, gamma, g, scale, s0, cu, ofs, layout):
        ctx.save_for_backward(q, k, v)
        return torch.empty_like(v), q.new_empty((0,))
    @staticmethod
    def backward(ctx, do, _):
        q, k, v = ctx.saved_tensors
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None, None, None, None, None, None, None, None

q, k, v = (torch.randn(1, 4, 16, 16, requires_grad=True) for _ in range(3))
do = torch.randn(1, 4, 16, 16)
def via_op():
    o, _ = torch.ops.exp.fwd(q, k, v, None, None, None, 1.0, None, None, False, "BHTD"); o.backward(do)
def via_fn():
    o, _ = Fn.apply(q, k, v, None, None, None, 1.0, None, None, False, "BHTD"); o.backward(do)
for name, f in (("op", via_op), ("fn", via_fn), ("op", via_op), ("fn", via_fn)):
    for _ in range(200): f()
    ts = []
    for _ in range(20):
        t = time.perf_counter()
        for _ in range(200): f()
        ts.append((time.perf_counter() - t) / 200 * 1e6)
    print(name, "fwd+bwd us", round(sorted(ts)[10], 1))
