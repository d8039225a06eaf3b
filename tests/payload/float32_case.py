"""float32 calls of culina.chunk_simple_gla and culina.linear_attention with every gradient,
under a chosen torch.get_float32_matmul_precision(): the runs the CPU (test_torch.py) and GPU
(test_gpu_float32.py) tests of the opt-in bfloat16 rounding compare."""
import contextlib

import torch

import culina

# What run_call returns, in order.
RESULTS = ("o", "S_T", "dq", "dk", "dv", "dg", "dg_gamma", "dS0")


@contextlib.contextmanager
def matmul_precision(setting: str):
    """torch.set_float32_matmul_precision(setting) inside the block, the setting before it after."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(setting)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def float32_inputs(seed=5, b=2, t=19, h=3, dk=16, dv=24, device="cpu"):
    """fla-layout float32 q, k, v, g, g_gamma, S0 and upstream gradients of o and S_T."""
    gen = torch.Generator().manual_seed(seed)
    randn = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    inputs = {"q": 0.5 * randn(b, t, h, dk), "k": 0.5 * randn(b, t, h, dk), "v": 0.5 * randn(b, t, h, dv),
              "g": torch.nn.functional.logsigmoid(randn(b, t, h) + 3), "g_gamma": -0.1 * torch.rand(h, generator=gen),
              "initial_state": randn(b, h, dk, dv), "d_out": randn(b, t, h, dv), "d_final": randn(b, h, dk, dv)}
    return {name: x.to(device) for name, x in inputs.items()}


def run_call(call, inputs, qkv_dtype=None):
    """RESULTS of call(q, k, v, g, g_gamma, initial_state) -> (o, S_T) and its backward, with q, k
    and v cast to qkv_dtype first (as leaves) where given."""
    leaves = {}
    for name in ("q", "k", "v", "g", "g_gamma", "initial_state"):
        dtype = qkv_dtype if qkv_dtype and name in ("q", "k", "v") else inputs[name].dtype
        leaves[name] = inputs[name].clone().to(dtype).requires_grad_()
    out, final = call(*leaves.values())
    ((out.float() * inputs["d_out"]).sum() + (final * inputs["d_final"]).sum()).backward()
    return [out, final] + [leaf.grad for leaf in leaves.values()]


def fla_call(q, k, v, g, g_gamma, initial_state):
    return culina.chunk_simple_gla(q, k, v, g, g_gamma, initial_state=initial_state, output_final_state=True)


def native_call(q, k, v, g, g_gamma, initial_state):
    return culina.linear_attention(q, k, v, g_gamma.exp(), g=g, initial_state=initial_state, output_final_state=True,
                                   layout="BTHD")


CALLS, CALL_IDS = (fla_call, native_call), ("chunk_simple_gla", "linear_attention")
