"""One problem with forget gates run through culina and through the float64 recurrence
(torch_reference) on the same inputs and upstream gradients: the pairs the CPU
(test_torch_gates.py) and GPU (test_gpu_gates.py) tests compare."""
import math

import torch
import torch.nn.functional as F
from torch_reference import reference

import culina

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def rel_err(got, ref):
    got, ref = got.detach().double().cpu(), ref.detach().double().cpu()
    assert torch.isfinite(got).all(), "non-finite values"
    return ((got - ref).norm() / ref.norm()).item()


def to_layout(x, layout: str):
    """A [B, H, T, ...] tensor in `layout` (a view; the swap is its own inverse)."""
    return x if layout == "BHTD" else x.transpose(1, 2)


def run(shape, dtype="float32", *, layout="BHTD", per_token=True, per_head=True, state=True, final=True,
        cu_seqlens=None, scale=None, device="cpu", seed=0, api="linear_attention"):
    """{name: (culina, reference)} for o, S_T and the gradients of q, k, v, g, the per-head gate and
    S0 (those that exist). per_head is a trainable tensor decay for linear_attention and g_gamma
    for chunk_simple_gla (whose layout is BTHD)."""
    if api == "chunk_simple_gla":
        layout = "BTHD"
    b, h, t, dk, dv = shape
    gen = torch.Generator().manual_seed(seed)
    randn = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    inputs = {"q": 0.5 * randn(b, h, t, dk), "k": 0.5 * randn(b, h, t, dk), "v": 0.5 * randn(b, h, t, dv)}
    if per_token:  # mostly near 0 (long memory), a few strong forgets
        inputs["g"] = F.logsigmoid(randn(b, h, t) + 3)
    if per_head:
        decay = 0.8 + 0.2 * torch.rand(h, generator=gen, dtype=torch.float64)
        inputs["decay" if api == "linear_attention" else "g_gamma"] = decay if api == "linear_attention" else decay.log()
    sequences = b if cu_seqlens is None else len(cu_seqlens) - 1
    if state:
        inputs["initial_state"] = randn(sequences, h, dk, dv)
    ref = {name: x.clone().requires_grad_() for name, x in inputs.items()}
    ref_out, ref_final = reference(ref["q"], ref["k"], ref["v"], ref.get("decay"), scale, ref.get("initial_state"),
                                   cu_seqlens, ref.get("g"), ref.get("g_gamma"))

    def ours(name, x):
        if name in ("q", "k", "v"):
            x = to_layout(x, layout).to(TORCH_DTYPES[dtype]).contiguous()
        elif name == "g":
            x = to_layout(x, layout).float().contiguous()
        else:
            x = x.float()
        return x.to(device).requires_grad_()

    got = {name: ours(name, x) for name, x in inputs.items()}
    seqlens = None if cu_seqlens is None else torch.tensor(cu_seqlens, dtype=torch.int32, device=device)
    if api == "linear_attention":
        out, final_state = culina.linear_attention(got["q"], got["k"], got["v"], got.get("decay"), g=got.get("g"),
                                                   scale=scale, initial_state=got.get("initial_state"),
                                                   output_final_state=True, cu_seqlens=seqlens, layout=layout)
    else:
        out, final_state = culina.chunk_simple_gla(got["q"], got["k"], got["v"], got.get("g"), got.get("g_gamma"),
                                                   scale=scale, initial_state=got.get("initial_state"),
                                                   output_final_state=True, cu_seqlens=seqlens)
    d_out, d_final = randn(*ref_out.shape), randn(*ref_final.shape)
    loss = (to_layout(out, layout).double() * d_out.to(device)).sum()
    ref_loss = (ref_out * d_out).sum()
    if final:
        loss = loss + (final_state.double() * d_final.to(device)).sum()
        ref_loss = ref_loss + (ref_final * d_final).sum()
    loss.backward()
    ref_loss.backward()
    assert out.dtype == got["q"].dtype and final_state.dtype == torch.float32
    pairs = {"o": (to_layout(out, layout), ref_out), "S_T": (final_state, ref_final)}
    for name, x in got.items():
        grad = to_layout(x.grad, layout) if name in ("q", "k", "v", "g") else x.grad
        assert x.grad.shape == x.shape and x.grad.dtype == x.dtype, name
        pairs[f"d{name}"] = (grad, ref[name].grad)
    return pairs


# run_zero_gate's routes to a gate of 0: a constant (g_gamma, a decay tensor) or per-token gates.
ZERO_GATE_ROUTES = ("g_gamma", "decay tensor", "g", "g beside a g_gamma of -inf")


def run_zero_gate(shape, dtype, route, *, cu_seqlens=None, device="cpu"):
    """{name: (culina, reference)} for o, S_T, dq, dk and dv (and dg where per-token gates run)
    from an initial state, on inputs exact in dtype, where head 0's gate is 0 (shape's H is 2):
    throughout, as a g_gamma of -inf (route "g_gamma"), a zero in a decay tensor ("decay tensor")
    or a g_gamma of -inf beside per-token gates ("g beside a g_gamma of -inf"); or at every 29th
    token from the first, as a g of -inf ("g", where every other gate is 0.9, head 1's too).
    Head 1's gate is otherwise 0.9, times the per-token gates where they run."""
    batch, heads, seq_len, dk, dv = shape
    gen = torch.Generator().manual_seed(seq_len + dk)
    exact = lambda x: x.to(TORCH_DTYPES[dtype]).double()  # noqa: E731
    q, k = (exact(0.5 * torch.randn(batch, heads, seq_len, dk, generator=gen, dtype=torch.float64)) for _ in range(2))
    v, d_out = (exact(0.5 * torch.randn(batch, heads, seq_len, dv, generator=gen, dtype=torch.float64))
                for _ in range(2))
    s0 = torch.randn(len(cu_seqlens) - 1 if cu_seqlens else batch, heads, dk, dv, generator=gen, dtype=torch.float64)
    gamma = torch.tensor([float("-inf"), math.log(0.9)], dtype=torch.float64)
    g = None
    if route == "g":
        g = torch.full((batch, heads, seq_len), math.log(0.9), dtype=torch.float64)
        g[:, 0, ::29] = float("-inf")
        gamma = None
    elif route == "g beside a g_gamma of -inf":
        g = F.logsigmoid(torch.randn(batch, heads, seq_len, generator=gen, dtype=torch.float64) + 3)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    g_leaf = g.clone().requires_grad_() if g is not None else None
    out, final = reference(*leaves, None, dk ** -0.5, s0, cu_seqlens, g_leaf, gamma)
    (out * d_out).sum().backward()

    ours = [to_layout(x, "BTHD").to(TORCH_DTYPES[dtype]).contiguous().to(device).requires_grad_() for x in (q, k, v)]
    g_ours = to_layout(g, "BTHD").float().contiguous().to(device).requires_grad_() if g is not None else None
    offsets = torch.tensor(cu_seqlens, device=device) if cu_seqlens else None
    if route == "decay tensor":
        got, got_final = culina.linear_attention(*ours, gamma.exp().float().to(device),
                                                 initial_state=s0.float().to(device), output_final_state=True,
                                                 cu_seqlens=offsets, layout="BTHD")
    else:
        got, got_final = culina.chunk_simple_gla(*ours, g=g_ours,
                                                 g_gamma=gamma.float().to(device) if gamma is not None else None,
                                                 initial_state=s0.float().to(device), output_final_state=True,
                                                 cu_seqlens=offsets)
    got.backward(to_layout(d_out, "BTHD").to(TORCH_DTYPES[dtype]).to(device))
    pairs = {"o": (to_layout(got, "BTHD"), out), "S_T": (got_final, final)}
    pairs.update({f"d{name}": (to_layout(x.grad, "BTHD"), leaf.grad) for name, x, leaf in zip("qkv", ours, leaves)})
    if g is not None:
        pairs["dg"] = (to_layout(g_ours.grad, "BTHD"), g_leaf.grad)
    return pairs
