"""CUDA tensors with forget gates (per-token g, per-head decay or g_gamma), both layouts, every
head-size class, packed sequences and culina.chunk_simple_gla, against the float64 recurrence
(gated_case); torch.compile (inductor); and culina.chunk_simple_gla against
flash-linear-attention's chunk_simple_gla where fla is installed. Runs only where PyTorch sees a
CUDA GPU and culina was built with CUDA."""
import pytest

import culina
from seeds import stable_seed

torch = pytest.importorskip("torch", reason="the GPU gate tests drive culina through PyTorch, which is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)
if culina.build_record().get("cpu_only") is not False:
    pytest.skip("culina was built without CUDA (CPU-only build)", allow_module_level=True)
import gated_case  # noqa: E402  (imports torch)
from gated_case import TORCH_DTYPES, rel_err, to_layout  # noqa: E402
from torch_reference import reference  # noqa: E402

# ||gpu - ref|| / ||ref||, the reference on the unrounded inputs: the 16-bit types run on tensor
# cores, which round intermediates (gated q and k, the attention matrix, the states) to 16 bits.
TOLERANCE = {"float32": 2e-4, "float16": 1e-2, "bfloat16": 4e-2}
# dg comes from q.dq - k.dk on the kernels' fp32 dq and dk (the backward's gate dots), whose
# products still take 16-bit operands (fla keeps fp32 states): measured on the H100 up to 5.4e-3
# (fp16) and 7.8e-2 (bf16); from the 16-bit dq and dk it was 6e-3 and 8e-2.
GATE_TOLERANCE = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 1e-1}
GATE_GRADIENTS = ("dg",)
# The per-head gradient sums dg over every token, where the terms largely cancel and the
# 16-bit roundings of the states and of P do not: on the H200 (2026-11-27) its relative error on
# small random problems ran from 1e-3 to 8e-2 (fp16) and 1e-2 to 0.3 (bf16). Giving the dq and dk
# passes each state as a 16-bit value plus its 16-bit remainder left several cases above
# TOLERANCE (BENCHMARKS.md, "On an H200", which also says how local weights would fix it).
# Checked in float32 here; test_per_head_gradient_16bit marks the open work.
PER_HEAD_GRADIENTS = ("ddecay", "dg_gamma")
# The per-token gates' gradient, on inputs exact in the dtype: its terms, the gate dots, measured
# on the H100 up to 2.3e-7 (fp32), 2.2e-4 (fp16) and 1.9e-3 (bf16).
GATE_DOTS_TOLERANCE = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1e-2}
GATES = {"neither": (False, False), "g": (True, False), "per-head": (False, True), "both": (True, True)}


def check(pairs, dtype):
    errors = {name: rel_err(got, ref) for name, (got, ref) in pairs.items()
              if dtype == "float32" or name not in PER_HEAD_GRADIENTS}
    assert all(got.device.type == "cuda" for name, (got, _) in pairs.items()), errors
    limits = {name: (GATE_TOLERANCE if name in GATE_GRADIENTS else TOLERANCE)[dtype] for name in errors}
    assert all(error < limits[name] for name, error in errors.items()), \
        ", ".join(f"{name} {error:.2e} (limit {limits[name]:.0e})" for name, error in errors.items())


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("layout", ["BHTD", "BTHD"])
@pytest.mark.parametrize("gates", list(GATES))
def test_gates_match_float64_reference(dtype, layout, gates):
    per_token, per_head = GATES[gates]
    check(gated_case.run((2, 3, 150, 64, 64), dtype, layout=layout, per_token=per_token, per_head=per_head,
                         device="cuda", seed=stable_seed(dtype, layout, gates)), dtype)


@pytest.mark.xfail(strict=True, reason="16-bit per-head gate gradient: a sum over every token that cancels, of "
                   "terms with 16-bit roundings (H200: fp16 1.1e-2, bf16 6.9e-2; README says it is approximate)")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_per_head_gradient_16bit(dtype):
    pairs = gated_case.run((2, 3, 150, 64, 64), dtype, layout="BTHD", per_token=True, per_head=True, device="cuda",
                           seed=5)
    assert rel_err(*pairs["ddecay"]) < TOLERANCE[dtype]


# The backward's gate dots (q_t.dq_t - k_t.dk_t from the kernels' fp32 dq and dk, summed over
# the blocks of columns) on every kernel that writes them: (name, B, H, T, Dk, Dv, layout,
# cu_seqlens). The fused walk (padded; with several segments at T = 1200), packed sequences
# (Hopper's walk in segment slots, the portable kernels' two-pass output), several column blocks
# (Dv 192), Dk != Dv, the generic kernel (Dk 20, and float32), and
# a sequence longer than one tile of the gates' gradient (gate_gradient.cu: 8192 tokens where
# a sequence may pass 2048).
GATE_DOTS_CASES = [("walk", 2, 3, 300, 64, 64, "BTHD", None), ("walk-segments", 1, 2, 1200, 64, 64, "BHTD", None),
                   ("packed", 1, 2, 330, 64, 64, "BTHD", [0, 100, 100, 229, 230, 330]),
                   ("head-192", 1, 2, 200, 192, 192, "BTHD", None), ("dk96-dv64", 1, 2, 200, 96, 64, "BHTD", None),
                   ("generic", 1, 2, 100, 20, 12, "BTHD", None),
                   ("packed-long", 1, 2, 8700, 64, 64, "BTHD", [0, 8400, 8700])]


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("case", GATE_DOTS_CASES, ids=lambda c: c[0])
def test_gate_gradients_match_float64(dtype, case):
    """On inputs exact in dtype, the backward's gradient of the per-token gates (summed from its
    q_t.dq_t - k_t.dk_t, the final state's term included) against the float64 recurrence's, and
    its per-head gradient against the sum of its own per-token one (the per-head sums cancel:
    PER_HEAD_GRADIENTS says why they are checked in float32 only). The sums from each token to
    its sequence's end carry the dots' 16-bit errors along: GATE_TOLERANCE, not the dots' own."""
    from culina import _torch

    _, batch, heads, seq_len, dk, dv, layout, cu_seqlens = case
    gen = torch.Generator().manual_seed(seq_len + dk)
    exact = lambda x: x.to(TORCH_DTYPES[dtype]).double()  # noqa: E731
    q, k = (exact(0.5 * torch.randn(batch, heads, seq_len, dk, generator=gen, dtype=torch.float64)) for _ in range(2))
    v, d_out = (exact(0.5 * torch.randn(batch, heads, seq_len, dv, generator=gen, dtype=torch.float64))
                for _ in range(2))
    g = torch.nn.functional.logsigmoid(torch.randn(batch, heads, seq_len, generator=gen) + 3)
    gamma = -0.1 * torch.rand(heads, generator=gen)
    sequences = len(cu_seqlens) - 1 if cu_seqlens else batch
    s0, d_final = (torch.randn(sequences, heads, dk, dv, generator=gen) for _ in range(2))
    leaves = [x.double().requires_grad_() for x in (g, gamma)]
    out, final = reference(q, k, v, None, dk ** -0.5, s0.double(), cu_seqlens, *leaves)
    ((out * d_out).sum() + (final * d_final.double()).sum()).backward()
    on_gpu = lambda x: to_layout(x, layout).to(TORCH_DTYPES[dtype]).contiguous().cuda()  # noqa: E731
    offsets = torch.tensor(cu_seqlens, device="cuda") if cu_seqlens else None
    final_on_gpu = final.detach().float().cuda()
    gate_ends = (d_final.double().cuda() * final_on_gpu.double()).sum((-2, -1))
    d_g, d_gamma = _torch.backward(on_gpu(q), on_gpu(k), on_gpu(v), on_gpu(d_out), None, gamma.cuda(),
                                   to_layout(g, layout).contiguous().cuda(), dk ** -0.5, s0.cuda(), d_final.cuda(),
                                   offsets, False, layout, True, True, gate_ends)[4:]
    assert d_g.shape == to_layout(g, layout).shape and d_g.dtype == torch.float32
    assert d_gamma.shape == gamma.shape and d_gamma.dtype == torch.float64
    error = rel_err(to_layout(d_g, layout), leaves[0].grad)
    assert error < GATE_TOLERANCE[dtype], f"dg: {error:.2e}"
    per_token = to_layout(d_g, layout).double()
    gap = (d_gamma.cpu() - per_token.sum((0, 2)).cpu()).abs().max().item()
    assert gap <= 1e-6 * per_token.abs().sum().item(), f"dgamma against the sum of dg: {gap:.2e}"


# (Dk, Dv): every head size class, Dk != Dv
HEAD_SIZES = [(16, 16), (64, 64), (80, 80), (96, 96), (128, 128), (192, 192), (256, 256), (96, 64), (16, 256)]


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("dk,dv", HEAD_SIZES, ids=lambda d: str(d))
def test_head_sizes_with_gates(dtype, dk, dv):
    check(gated_case.run((1, 2, 200, dk, dv), dtype, layout="BTHD", device="cuda", seed=dk * 1000 + dv), dtype)


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("gates", list(GATES))
def test_packed_sequences_with_gates(dtype, gates):
    per_token, per_head = GATES[gates]
    check(gated_case.run((1, 2, 330, 64, 64), dtype, layout="BTHD", per_token=per_token, per_head=per_head,
                         cu_seqlens=[0, 100, 100, 229, 230, 330], scale=0.2, device="cuda", seed=9), dtype)


# Per-token gates over many heads (37, an odd count; the cases above take 2 or 3), each head's
# chunk gates in their own workspace slots, in the layout where a chunk's
# gates of adjacent heads are adjacent (BTHD, padded and packed) and where its tokens are (BHTD).
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout,cu_seqlens", [("BHTD", None), ("BTHD", None), ("BTHD", [0, 70, 200, 330])],
                         ids=["BHTD", "BTHD", "BTHD-packed"])
def test_per_token_gates_over_many_heads(dtype, layout, cu_seqlens):
    shape = (2, 37, 150, 64, 64) if cu_seqlens is None else (1, 37, 330, 64, 64)
    check(gated_case.run(shape, dtype, layout=layout, per_token=True, per_head=False, cu_seqlens=cu_seqlens,
                         device="cuda", seed=stable_seed(dtype, layout, str(cu_seqlens))), dtype)


@pytest.mark.parametrize("gates", list(GATES))
def test_chunk_simple_gla_matches_float64_reference(gates):
    per_token, per_head = GATES[gates]
    check(gated_case.run((2, 3, 150, 96, 96), "bfloat16", api="chunk_simple_gla", per_token=per_token,
                         per_head=per_head, device="cuda", seed=5), "bfloat16")


# (name, B, H, T, Dk, Dv, cu_seqlens): the fused walk, a sequence in segments (the state pass and
# its look-back), packed sequences, and the generic kernel (Dk 20).
ZERO_GATE_CASES = [("walk", 2, 2, 200, 64, 64, None), ("segments", 1, 2, 64 * 40 + 17, 128, 128, None),
                   ("packed", 1, 2, 330, 64, 64, [0, 100, 100, 229, 230, 330]), ("generic", 1, 2, 100, 20, 12, None)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("route", gated_case.ZERO_GATE_ROUTES)
@pytest.mark.parametrize("case", ZERO_GATE_CASES, ids=lambda c: c[0])
def test_a_zero_gate_forgets_the_state(dtype, route, case):
    """A gate of 0 (g_gamma = -inf, a zero in a decay tensor, g = -inf at some tokens, or a g_gamma
    of -inf beside per-token gates) forgets the state there: head 0 forgets, head 1 decays by 0.9.
    The kernels' powers of a constant gate took log2(0) times a count of 0 as NaN (g^0 is 1), and
    their per-token sums' differences past a gate of 0 were -inf - -inf (sequence_rows.cuh:
    kLeastLog2Gate). Forward, final state and dq, dk, dv (and dg where per-token gates run)."""
    _, batch, heads, seq_len, dk, dv, cu_seqlens = case
    check(gated_case.run_zero_gate((batch, heads, seq_len, dk, dv), dtype, route, cu_seqlens=cu_seqlens,
                                   device="cuda"), dtype)


def test_packed_call_replays_in_a_cuda_graph():
    """A captured packed call (on sm_90 the output kernel launched alongside the state pass,
    kernels.h: state_progress) gives on replay, with new values in its inputs, what an eager call
    gives: the counts of written states start over in every replay."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    lengths = [300, 17, 0, 129, 64]
    cu_seqlens = torch.tensor([0] + lengths, device="cuda").cumsum(0)
    make = lambda: torch.randn(1, sum(lengths), 4, 64, device="cuda", generator=gen).to(torch.bfloat16)  # noqa: E731
    q, k, v = make(), make(), make()
    g = torch.nn.functional.logsigmoid(torch.randn(1, sum(lengths), 4, device="cuda", generator=gen) + 3)
    run = lambda: culina.chunk_simple_gla(q, k, v, g=g, cu_seqlens=cu_seqlens, output_final_state=True)  # noqa: E731
    run()  # outside the capture: the kernels' attributes, the allocator's first blocks
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    for replay in range(2):
        for x in (q, k, v):
            x.copy_(make())
        graph.replay()
        eager = run()
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(captured, eager)), f"replay {replay}"


def test_module_with_tensor_gates_compiles_with_inductor():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 3 * 2 * 32 + 2, device="cuda", dtype=torch.bfloat16)
            self.g_gamma = torch.nn.Parameter(torch.tensor([-0.05, -0.1], device="cuda"))

        def forward(self, x, state):
            qkv, gate = self.proj(x).split([192, 2], dim=-1)
            q, k, v = qkv.unflatten(-1, (3, 2, 32)).unbind(2)  # [B, T, H, D] views of the projection
            g = torch.nn.functional.logsigmoid(gate.float())
            out, final = culina.chunk_simple_gla(q, k, v, g, self.g_gamma, initial_state=state,
                                                 output_final_state=True)
            return out.float().square().mean() + final.square().mean()

    torch.manual_seed(0)
    layer = Layer()
    x = torch.randn(2, 100, 64, device="cuda", dtype=torch.bfloat16)
    state = torch.randn(2, 2, 32, 32, device="cuda", requires_grad=True)
    eager_loss = layer(x, state)
    eager_grads = torch.autograd.grad(eager_loss, [state, *layer.parameters()])
    compiled = torch.compile(layer, fullgraph=True)
    loss = compiled(x, state)
    grads = torch.autograd.grad(loss, [state, *layer.parameters()])
    torch.testing.assert_close(loss, eager_loss, rtol=2e-2, atol=1e-3)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got.float(), want.float(), rtol=5e-2, atol=5e-3)


# culina against fla: both on the same bf16 inputs, each against the other. (name, B, T, H, D,
# per-token g, g_gamma, cu_seqlens)
# One of g and g_gamma at a time: fla 0.6 takes one (its docstring), and its state pass mixes
# them when both come (chunk_h.py uses g_gamma's power against g's cumulative sums).
FLA_CASES = [("g", 2, 512, 4, 64, True, False, None), ("g_gamma", 2, 512, 4, 64, False, True, None),
             ("head-128", 2, 512, 4, 128, False, True, None), ("head-96", 1, 1000, 4, 96, True, False, None),
             ("head-96-g_gamma", 1, 1000, 4, 96, False, True, None),
             ("head-256", 1, 1000, 8, 256, True, False, None), ("head-256-g_gamma", 1, 1000, 8, 256, False, True, None),
             ("packed", 1, 700, 4, 64, True, False, [0, 100, 101, 400, 700]),
             ("packed-g_gamma", 1, 700, 4, 64, False, True, [0, 100, 101, 400, 700])]
FLA_TOLERANCE = 2e-2  # two bf16 computations, each about 3e-3 from float64


@pytest.mark.parametrize("case", FLA_CASES, ids=lambda c: c[0])
def test_chunk_simple_gla_equals_fla(case):
    fla_simple_gla = pytest.importorskip("fla.ops.simple_gla", reason="flash-linear-attention is not installed")
    _, batch, seq_len, heads, dim, per_token, per_head, cu_seqlens = case
    gen = torch.Generator(device="cuda").manual_seed(seq_len + dim)
    randn = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
    q, k, v = ((0.5 * randn(batch, seq_len, heads, dim)).bfloat16() for _ in range(3))
    g = torch.nn.functional.logsigmoid(randn(batch, seq_len, heads) + 3) if per_token else None
    g_gamma = -0.05 * torch.rand(heads, device="cuda", generator=gen) if per_head else None
    sequences = batch if cu_seqlens is None else len(cu_seqlens) - 1
    s0 = randn(sequences, heads, dim, dim)
    offsets = None if cu_seqlens is None else torch.tensor(cu_seqlens, device="cuda", dtype=torch.long)
    d_out, d_final = randn(batch, seq_len, heads, dim).bfloat16(), randn(sequences, heads, dim, dim)
    results, losses, leaves = {}, {}, {}
    for name, fn in (("culina", culina.chunk_simple_gla), ("fla", fla_simple_gla.chunk_simple_gla)):
        leaves[name] = {n: x.clone().requires_grad_() for n, x in (("q", q), ("k", k), ("v", v), ("g", g), ("s0", s0))
                        if x is not None}
        out, final = fn(leaves[name]["q"], leaves[name]["k"], leaves[name]["v"], leaves[name].get("g"), g_gamma,
                        initial_state=leaves[name]["s0"], output_final_state=True, cu_seqlens=offsets)
        results[name] = {"o": out, "final_state": final}
        losses[name] = (out.float() * d_out.float()).sum() + (final * d_final).sum()
    errors = {n: rel_err(results["culina"][n], results["fla"][n]) for n in results["fla"]}
    assert all(error < FLA_TOLERANCE for error in errors.values()), errors
    try:
        losses["fla"].backward()
    except RuntimeError as exc:
        # fla 0.6 refuses its gated backward on Hopper with Triton 3.4 to 3.7.0 (fla issue #640:
        # wrong results); the forward above was compared, the gradients cannot be.
        if "incorrect results" not in str(exc):
            raise
        pytest.skip(f"forward equal to fla's; fla refuses the gradients here: {str(exc)[:120]}")
    losses["culina"].backward()
    errors = {f"d{n}": rel_err(leaves["culina"][n].grad, x.grad) for n, x in leaves["fla"].items()}
    assert all(error < FLA_TOLERANCE for error in errors.values()), errors
