"""PyTorch autograd, packed sequences and torch.compile (inductor) on CUDA tensors, against the
float64 recurrence. Runs only where PyTorch sees a CUDA GPU and culina was built with CUDA."""
import pytest

import culina
from seeds import stable_seed

torch = pytest.importorskip("torch", reason="the GPU autograd tests drive culina through PyTorch, which is not installed")
from torch_reference import reference  # noqa: E402  (imports torch)
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)
if culina.build_record().get("cpu_only") is not False:
    pytest.skip("culina was built without CUDA (CPU-only build)", allow_module_level=True)

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# ||gpu - ref|| / ||ref||: the 16-bit types run on tensor cores, which round intermediates
# (decayed q and k, the attention matrix, the states) to 16 bits.
TOLERANCE = {"float32": 2e-4, "float16": 1e-2, "bfloat16": 4e-2}
# (B, H, T, Dk, Dv): tensor-core shapes first, then odd T, head sizes 1 and 256, Dk != Dv
SHAPES = [(2, 3, 300, 64, 64), (1, 2, 129, 128, 128), (1, 1, 70, 256, 128), (2, 2, 1, 64, 128),
          (1, 2, 63, 32, 48), (1, 1, 33, 256, 256), (1, 2, 65, 7, 5), (1, 1, 40, 1, 1)]


def rel_err(got, ref):
    got, ref = got.detach().double().cpu(), ref.detach().double().cpu()
    assert torch.isfinite(got).all(), "non-finite values"
    return ((got - ref).norm() / ref.norm()).item()


def run_both(shape, dtype, seed, decay=None, use_state=False, use_final=False, cu_seqlens=None, scale=None):
    """culina on CUDA and the float64 recurrence on the CPU, the same loss; (culina, reference)
    pairs of o, S_T and the gradients of q, k, v and S0."""
    b, h, t, dk, dv = shape
    gen = torch.Generator().manual_seed(seed)
    inputs = [(torch.randn(b, h, t, d, generator=gen) * 0.5).to(TORCH_DTYPES[dtype]) for d in (dk, dk, dv)]
    states = b if cu_seqlens is None else len(cu_seqlens) - 1
    s0 = torch.randn(states, h, dk, dv, generator=gen) if use_state else None
    leaves = [x.cuda().requires_grad_() for x in inputs] + ([s0.cuda().requires_grad_()] if use_state else [])
    leaves64 = [x.double().requires_grad_() for x in inputs] + ([s0.double().requires_grad_()] if use_state else [])
    seqlens = None if cu_seqlens is None else torch.tensor(cu_seqlens, dtype=torch.int32, device="cuda")
    out, final = culina.linear_attention(*leaves[:3], decay, scale=scale, initial_state=leaves[3] if use_state else None,
                                         output_final_state=True, cu_seqlens=seqlens, layout="BHTD")
    ref_out, ref_final = reference(*leaves64[:3], decay, scale, leaves64[3] if use_state else None, cu_seqlens)
    d_out = torch.randn(out.shape, generator=gen).to(out.dtype)
    d_final = torch.randn(final.shape, generator=gen)
    ((out * d_out.cuda()).sum() + ((final * d_final.cuda()).sum() if use_final else 0)).backward()
    ((ref_out * d_out.double()).sum() + ((ref_final * d_final.double()).sum() if use_final else 0)).backward()
    return [(out, ref_out), (final, ref_final)] + [(x.grad, r.grad) for x, r in zip(leaves, leaves64)]


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", ["plain", "decay+final", "decay+state+final"])
def test_gradients_match_float64_reference(dtype, shape, mode):
    seed = stable_seed(dtype, shape, mode)
    decay = [0.8 + 0.2 * (i + 1) / shape[1] for i in range(shape[1])] if mode != "plain" else None
    pairs = run_both(shape, dtype, seed, decay, use_state="state" in mode, use_final="final" in mode)
    for name, (got, ref) in zip(["o", "S_T", "dq", "dk", "dv", "dS0"], pairs):
        assert got.device.type == "cuda"
        assert rel_err(got, ref) < TOLERANCE[dtype], name


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("cu_seqlens", [[0, 100, 100, 229, 300], [0, 1], [0, 64, 65, 200]], ids=["4-seqs", "1-row", "3-seqs"])
def test_packed_gradients_match_float64_reference(dtype, cu_seqlens):
    seed = stable_seed(dtype, tuple(cu_seqlens))
    pairs = run_both((1, 2, cu_seqlens[-1], 64, 64), dtype, seed, [0.9, 0.99], use_state=True, use_final=True,
                     cu_seqlens=cu_seqlens, scale=0.2)
    for name, (got, ref) in zip(["o", "S_T", "dq", "dk", "dv", "dS0"], pairs):
        assert rel_err(got, ref) < TOLERANCE[dtype], name


def test_routes_agree():
    """An eager call without grad and an eager backward skip the dispatcher; the op
    (torch.ops.culina.*), which autograd and torch.compile reach, gives the same bits."""
    from culina import _torch

    q, k, v, d_out = (torch.randn(1, 2, 200, 64, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    direct = culina.linear_attention(q, k, v, [0.9, 0.8])
    dispatched, _, _ = torch.ops.culina.linear_attention(q, k, v, [0.9, 0.8], None, None, 64 ** -0.5, None, None,
                                                         False, "BHTD")
    torch.testing.assert_close(dispatched, direct, rtol=0, atol=0)
    direct_grads = _torch.backward(q, k, v, d_out, [0.9, 0.8], None, None, 64 ** -0.5, None, None, None, False,
                                   "BHTD")[:3]
    dispatched_grads = torch.ops.culina.linear_attention_backward(q, k, v, d_out, [0.9, 0.8], None, None, 64 ** -0.5,
                                                                  None, None, None, False, "BHTD")[:3]
    for got, want in zip(direct_grads, dispatched_grads):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def segmented_problem(gates, seed=7, t=64 * 40 + 17, d=128, h=2):
    """Few (sequence, head) pairs and long sequences, in fla's [B, T, H, D] layout: the walks run
    in segments, where a forward that trains keeps its segments' gates and end states for the
    backward's dq pass (_C.kept_workspace_bytes)."""
    b = 1
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(b, t, h, d, device="cuda", generator=gen, dtype=torch.bfloat16) * 0.5 for _ in range(3))
    g = (torch.nn.functional.logsigmoid(torch.randn(b, t, h, device="cuda", generator=gen)) / 16
         if gates != "plain" else None)
    gamma = -torch.rand(h, device="cuda", generator=gen) * 0.01 if gates != "plain" else None
    s0 = torch.randn(b, h, d, d, device="cuda", generator=gen) * 0.1
    d_out = torch.randn(b, t, h, d, device="cuda", generator=gen, dtype=torch.bfloat16)
    d_final = torch.randn(b, h, d, d, device="cuda", generator=gen)
    return q, k, v, g, gamma, s0, d_out, d_final


@pytest.mark.parametrize("gates, t, d, h", [("plain", 64 * 40 + 17, 128, 2), ("g+gamma", 64 * 40 + 17, 128, 2),
                                            ("g+gamma", 64 * 40, 128, 2), ("g+gamma", 64 * 40 + 17, 64, 2),
                                            ("g+gamma", 64 * 64 - 5, 128, 96)],
                         ids=["plain", "gated", "gated-runs", "gated-D64", "gated-handed"])
def test_the_dq_pass_reads_what_the_forward_kept(gates, t, d, h):
    """The backward with what the forward kept (its dq pass reads the forward's segment end
    states, transposed, instead of running a state pass) against the backward without (which
    computes them): the same gradients up to the order of fp32 sums. 41 chunks walk in five
    segments of 9; 40 in five of 8, which pass 1 cuts into two runs each (common/mma_plan.cpp:
    state_pieces), so that the dq pass joins the forward's runs. At D64 the Hopper family's walks
    run three blocks to a multiprocessor and plan apart from the portable ones: the forward and
    the dq pass still plan alike. At H96 on an H100 or H200 (Hopper's family) the forward walks
    its 96 pairs in one segment and hands the dq pass the states entering four segments of 16
    chunks on its way, and the dq pass walks beside the twin walk (launch.cu: kept_for_dq)."""
    from culina import _api, _C, _torch

    if h > 2 and (_C.device(0)["arch_specific_version"] != 90 or _api.apply_kernel_choice() == "portable"):
        pytest.skip("only Hopper's walk hands the dq pass its states (the portable one keeps nothing here)")
    q, k, v, g, gamma, s0, d_out, d_final = segmented_problem(gates, t=t, d=d, h=h)
    scale = q.shape[-1] ** -0.5
    problem = _torch.problem_of(q, k, v, gamma, g, s0, None, "BTHD")
    described = _api.describe(problem)
    assert _C.kept_workspace_bytes(described, 0) > 0, "the shape keeps nothing: no segments?"
    if h > 2:
        # The forward in one segment (its workspace: chunk gates, under one state a pair), the
        # states entering the dq pass's segments after it (slots for two segments or more).
        forward_bytes, states_bytes = _C.forward_workspace_bytes(described, 0), h * d * d * 4
        assert forward_bytes < states_bytes, forward_bytes
        assert _C.kept_workspace_bytes(described, 0) >= forward_bytes + 2 * states_bytes
    forward = [_torch.forward(q, k, v, None, gamma, g, scale, s0, None, True, "BTHD", keep) for keep in (True, False)]
    kept = forward[0][2]
    assert kept is not None and forward[1][2] is None
    for got, want in zip(forward[0][:2], forward[1][:2]):  # o and S_T: keeping changes neither
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    trained = gates != "plain"
    with_kept, without = (_torch.backward(q, k, v, d_out, None, gamma, g, scale, s0, d_final, None, True, "BTHD",
                                          trained, trained, kept=ends) for ends in (kept, None))
    names = ["dq", "dk", "dv", "dS0"] + (["dg", "dgamma"] if trained else [])
    errors = {name: rel_err(got, want) for name, got, want in zip(names, with_kept, without)}
    # The dq pass's entering states are the forward's, summed in another order (K^T V against
    # V^T K): equal to fp32 rounding, which the 16-bit copy of the state the walk multiplies by
    # turns into 16-bit rounding of dq here and there (H200: 6.4e-4 with gates, and dq as close
    # to the float64 recurrence either way: 2.42e-3). The other passes do not change at all.
    bounds = {"dq": 2e-3, "dg": 2e-3, "dgamma": 2e-3}
    assert all(error <= bounds.get(name, 0.0) for name, error in errors.items()), \
        ", ".join(f"{name} {error:.2e}" for name, error in errors.items())


def test_eager_autograd_and_the_op_keep_the_same():
    """A call that trains keeps the forward's segment states for the backward on both eager
    routes: the autograd.Function and the op (as tensor subclasses reach it), whose fake gives the
    kept workspace the real one's size (opcheck); the two give the same bits but in the gates'
    gradients, whose per-token dots the kernels add up with atomics, in no fixed order."""
    q, k, v, g, gamma, s0, d_out, d_final = segmented_problem("g+gamma")
    scale = q.shape[-1] ** -0.5
    result = torch.library.opcheck(torch.ops.culina.linear_attention.default,
                                   (q, k, v, None, gamma, g, scale, s0, None, True, "BTHD", True),
                                   test_utils=("test_schema", "test_faketensor"))
    assert set(result.values()) == {"SUCCESS"}, result
    runs = []
    for route in ("eager", "op"):
        leaves = [x.clone().requires_grad_() for x in (q, k, v, g, gamma, s0)]
        lq, lk, lv, lg, lgamma, ls0 = leaves
        if route == "op":
            out, final, kept = torch.ops.culina.linear_attention(lq, lk, lv, None, lgamma, lg, scale, ls0, None, True,
                                                                 "BTHD", True)
            assert kept.numel() > 0
        else:
            out, final = culina.chunk_simple_gla(lq, lk, lv, g=lg, g_gamma=lgamma, initial_state=ls0,
                                                 output_final_state=True)
        ((out.float() * d_out.float()).sum() + (final * d_final).sum()).backward()
        runs.append([out, final] + [x.grad for x in leaves])
    names = ["o", "S_T", "dq", "dk", "dv", "dg", "dgamma", "dS0"]
    errors = {name: rel_err(got, want) for name, got, want in zip(names, *runs)}
    bounds = {"dg": 1e-4, "dgamma": 1e-2}
    assert all(error <= bounds.get(name, 0.0) for name, error in errors.items()), \
        ", ".join(f"{name} {error:.2e}" for name, error in errors.items())


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compiled_training_equals_eager(dynamic):
    """torch.compile'd training of the segmented shape, static and dynamic: the traced op keeps
    nothing for the backward (the kept workspace's size follows the kernels' plan, which a
    symbolic shape does not fix), so its backward computes the dq pass's states; the gradients
    equal eager autograd's, which keeps them, to the order of fp32 sums."""
    q, k, v, g, gamma, s0, d_out, d_final = segmented_problem("g+gamma")

    def step(q, k, v, g, gamma, s0):
        out, final = culina.chunk_simple_gla(q, k, v, g=g, g_gamma=gamma, initial_state=s0, output_final_state=True)
        return (out.float() * d_out.float()).sum() + (final * d_final).sum()

    runs = []
    for run in (step, torch.compile(step, backend="aot_eager", fullgraph=True, dynamic=dynamic)):
        leaves = [x.clone().requires_grad_() for x in (q, k, v, g, gamma, s0)]
        run(*leaves).backward()
        runs.append([x.grad for x in leaves])
    names = ["dq", "dk", "dv", "dg", "dgamma", "dS0"]
    errors = {name: rel_err(got, want) for name, got, want in zip(names, *runs)}
    bounds = {"dq": 2e-3, "dg": 1e-2, "dgamma": 1e-1}  # as test_the_dq_pass_reads_what_the_forward_kept's
    assert all(error <= bounds.get(name, 0.0) for name, error in errors.items()), \
        ", ".join(f"{name} {error:.2e}" for name, error in errors.items())


def test_backward_runs_on_the_current_stream():
    """Gradients flowing from a side stream behind a long sleep: a backward on another stream
    would read unfinished data."""
    q, k, v = (torch.randn(2, 4, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    culina.linear_attention(q, k, v, [0.95] * 4).float().square().sum().backward()
    expected = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        out = culina.linear_attention(q * 1, k * 1, v * 1, [0.95] * 4)
        out.float().square().sum().backward()
    side.synchronize()
    for got, want in zip((q.grad, k.grad, v.grad), expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_module_compiles_with_inductor_without_graph_break():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 3 * 64, device="cuda", dtype=torch.bfloat16)

        def forward(self, x, state):
            q, k, v = self.proj(x).unflatten(-1, (3, 2, 32)).permute(2, 0, 3, 1, 4).contiguous().unbind(0)
            out, final = culina.linear_attention(q, k, v, [0.9, 0.8], initial_state=state, output_final_state=True)
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
