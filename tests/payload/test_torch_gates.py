"""PyTorch on the CPU: per-token gates g, a trainable per-head decay, both layouts, strided views,
packed sequences, torch.compile and culina.chunk_simple_gla, against the float64 recurrence
(gated_case, torch_reference); and the misuse that must raise. The same comparisons run on CUDA
tensors in test_gpu_gates.py."""
import numpy as np
import pytest

import culina
from seeds import stable_seed

torch = pytest.importorskip("torch", reason="the PyTorch tests need torch (make deps puts it in build/venv-torch)")
import gated_case  # noqa: E402  (imports torch)
from gated_case import TORCH_DTYPES, rel_err, to_layout  # noqa: E402
from culina_errors import assert_culina_error  # noqa: E402
from torch_reference import reference  # noqa: E402

# ||got - ref|| / ||ref||, the reference on the unrounded inputs: 16-bit values are rounded to
# their dtype, accumulation is fp32.
TOLERANCE = {"float32": 2e-5, "float16": 3e-3, "bfloat16": 2e-2}
# (per-token g, per-head tensor gate)
GATES = {"neither": (False, False), "g": (True, False), "per-head": (False, True), "both": (True, True)}


def check(pairs, dtype):
    for name, (got, ref) in pairs.items():
        assert rel_err(got, ref) < TOLERANCE[dtype], name


@pytest.mark.parametrize("layout", ["BHTD", "BTHD"])
@pytest.mark.parametrize("gates", list(GATES))
def test_gates_match_float64_reference(gates, layout):
    per_token, per_head = GATES[gates]
    pairs = gated_case.run((2, 3, 21, 16, 24), layout=layout, per_token=per_token, per_head=per_head,
                           seed=stable_seed(gates, layout))
    assert ("dg" in pairs) == per_token and ("ddecay" in pairs) == per_head
    check(pairs, "float32")


@pytest.mark.parametrize("route", gated_case.ZERO_GATE_ROUTES)
@pytest.mark.parametrize("cu_seqlens", [None, [0, 30, 30, 70]], ids=["padded", "packed"])
def test_a_zero_gate_forgets_the_state(route, cu_seqlens):
    """A gate of 0 (g_gamma = -inf, a zero in a decay tensor, g = -inf at some tokens, or a g_gamma
    of -inf beside per-token gates) on the CPU: head 0 forgets, head 1 decays by 0.9
    (test_gpu_gates.py checks the kernels)."""
    shape = (1, 2, 70, 16, 24) if cu_seqlens else (2, 2, 40, 16, 24)
    check(gated_case.run_zero_gate(shape, "float32", route, cu_seqlens=cu_seqlens), "float32")


# (Dk, Dv): every head size class of the kernels, and Dk != Dv
HEAD_SIZES = [(16, 16), (64, 64), (80, 80), (96, 96), (128, 128), (192, 192), (256, 256), (96, 64), (16, 256)]


@pytest.mark.parametrize("dk,dv", HEAD_SIZES, ids=lambda d: str(d))
def test_head_sizes_with_gates(dk, dv):
    check(gated_case.run((1, 2, 9, dk, dv), layout="BTHD", seed=dk * 1000 + dv), "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["BHTD", "BTHD"])
def test_dtypes_with_gates(dtype, layout):
    check(gated_case.run((2, 2, 33, 32, 16), dtype, layout=layout, seed=7), dtype)


# The gates' gradient from the kernels' fp32 dq and dk (the backward's gate dots), on inputs
# exact in 16 bits: fp32 accuracy, measured up to 1.4e-6 (dg) and 4.4e-5 (the per-head sum, whose
# terms cancel). From dq and dk rounded to 16 bits they missed by 8e-4 to 2e-2 (dg) and 2e-3 to
# 0.2 (per head).
EXACT_INPUT_GATE_TOLERANCE = {"dg": 2e-5, "ddecay": 2e-4}


@pytest.mark.parametrize("shape", [(3, 4, 50), (1, 70), (2, 0)], ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
def test_cumulative_sum_is_cumsum_per_row(shape, transposed):
    """_torch.cumulative_sum (one scan over the rows laid end to end, less each row's start)
    against a per-row cumsum, on contiguous rows and on a transposed view (as context parallelism
    passes its [B, H, T] view of g), its gradient included: context parallelism's cumulative
    gates ride on it."""
    from culina import _torch

    gen = torch.Generator().manual_seed(len(shape))
    x = torch.randn(*shape, generator=gen, dtype=torch.float64)
    if transposed:  # the same values, rows strided across memory
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    x.requires_grad_()
    want = x.cumsum(-1) if x.numel() else x
    got = _torch.cumulative_sum(x)
    assert got.dtype == torch.float64 and got.shape == x.shape
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert _torch.cumulative_sum(x.float()).dtype == torch.float64
    if x.numel():
        weights = torch.linspace(-1, 1, x.shape[-1], dtype=torch.float64)
        want_grad, = torch.autograd.grad((want * weights).sum(), x)
        got_grad, = torch.autograd.grad((got * weights).sum(), x)
        torch.testing.assert_close(got_grad, want_grad, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cu_seqlens", [None, [0, 60, 60, 150]], ids=["padded", "packed"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["BHTD", "BTHD"])
def test_16bit_gate_gradients_from_fp32_values(layout, dtype, cu_seqlens):
    gen = torch.Generator().manual_seed(2)
    batch = 1 if cu_seqlens else 2
    sequences = len(cu_seqlens) - 1 if cu_seqlens else batch
    exact = lambda x: x.to(TORCH_DTYPES[dtype]).double()  # noqa: E731
    q, k, v, d_out = (exact(0.5 * torch.randn(batch, 3, 150, 32, generator=gen, dtype=torch.float64))
                      for _ in range(4))
    g = torch.nn.functional.logsigmoid(torch.randn(batch, 3, 150, generator=gen) + 3)
    decay = torch.tensor([0.8, 0.9, 0.97])
    s0, d_final = (torch.randn(sequences, 3, 32, 32, generator=gen) for _ in range(2))
    ours = {"g": to_layout(g.clone(), layout).contiguous().requires_grad_(), "decay": decay.clone().requires_grad_()}
    ref = {"g": g.double().requires_grad_(), "decay": decay.double().requires_grad_()}
    offsets = torch.tensor(cu_seqlens) if cu_seqlens else None
    out, final = culina.linear_attention(*(to_layout(x, layout).to(TORCH_DTYPES[dtype]) for x in (q, k, v)),
                                         ours["decay"], g=ours["g"], initial_state=s0, output_final_state=True,
                                         cu_seqlens=offsets, layout=layout)
    ((to_layout(out, layout).double() * d_out).sum() + (final.double() * d_final).sum()).backward()
    ref_out, ref_final = reference(q, k, v, ref["decay"], None, s0.double(), cu_seqlens, ref["g"])
    ((ref_out * d_out).sum() + (ref_final * d_final.double()).sum()).backward()
    errors = {"dg": rel_err(to_layout(ours["g"].grad, layout), ref["g"].grad),
              "ddecay": rel_err(ours["decay"].grad, ref["decay"].grad)}
    assert all(error < EXACT_INPUT_GATE_TOLERANCE[name] for name, error in errors.items()), errors


@pytest.mark.parametrize("layout", ["BHTD", "BTHD"])
@pytest.mark.parametrize("gates", list(GATES))
def test_packed_sequences_with_gates(gates, layout):
    """Empty sequences, one of a single token, and the final state's term in the gates' gradient."""
    per_token, per_head = GATES[gates]
    cu_seqlens = [0, 5, 5, 23, 24, 40]
    check(gated_case.run((1, 2, 40, 16, 8), layout=layout, per_token=per_token, per_head=per_head,
                         cu_seqlens=cu_seqlens, scale=0.3, seed=11), "float32")


def test_packed_with_gates_equals_separate_calls():
    gen = torch.Generator().manual_seed(5)
    offsets = [0, 3, 10, 10, 31]
    q, k, v = (torch.randn(1, 31, 2, 8, generator=gen) for _ in range(3))
    g = torch.nn.functional.logsigmoid(torch.randn(1, 31, 2, generator=gen))
    s0 = torch.randn(4, 2, 8, 8, generator=gen)
    out, final = culina.chunk_simple_gla(q, k, v, g, torch.tensor([-0.1, -0.2]), initial_state=s0,
                                         output_final_state=True, cu_seqlens=torch.tensor(offsets))
    for i, (start, end) in enumerate(zip(offsets[:-1], offsets[1:])):
        if start == end:
            torch.testing.assert_close(final[i], s0[i])
            continue
        part, part_final = culina.chunk_simple_gla(q[:, start:end], k[:, start:end], v[:, start:end],
                                                   g[:, start:end], torch.tensor([-0.1, -0.2]),
                                                   initial_state=s0[i:i + 1], output_final_state=True)
        torch.testing.assert_close(out[:, start:end], part)
        torch.testing.assert_close(final[i:i + 1], part_final)


@pytest.mark.parametrize("gates", list(GATES))
def test_chunk_simple_gla_matches_float64_reference(gates):
    per_token, per_head = GATES[gates]
    pairs = gated_case.run((2, 3, 21, 16, 24), api="chunk_simple_gla", per_token=per_token, per_head=per_head,
                           seed=3)
    assert ("dg_gamma" in pairs) == per_head  # fla gives g_gamma no gradient; culina does
    check(pairs, "float32")


def test_chunk_simple_gla_packed_matches_float64_reference():
    check(gated_case.run((1, 2, 40, 16, 8), api="chunk_simple_gla", cu_seqlens=[0, 17, 17, 40], seed=4),
          "float32")


def fused_projection(batch, seq_len, heads, dim, generator):
    """q, k, v as fla models make them: slices of one [B, T, 3, H, D] projection, [B, T, H, D]
    views whose token stride is 3 H D."""
    qkv = torch.randn(batch, seq_len, 3 * heads * dim, generator=generator).unflatten(-1, (3, heads, dim))
    return qkv.unbind(2)


def test_strided_views_are_read_in_place():
    """Slices of a fused projection (BTHD) and their transposes (BHTD) run as they are: the same
    result as contiguous copies, with no copy made (no copy, clone or contiguous op runs)."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = fused_projection(2, 19, 3, 16, gen)
    g = torch.nn.functional.logsigmoid(torch.randn(2, 3, 19, generator=gen)).transpose(1, 2)  # [B, T, H], strided
    assert not q.is_contiguous() and q.stride(-1) == 1 and not g.is_contiguous()
    expected = culina.linear_attention(q.contiguous(), k.contiguous(), v.contiguous(), g=g.contiguous(),
                                       layout="BTHD")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        out = culina.linear_attention(q, k, v, g=g, layout="BTHD")
        out_bhtd = culina.linear_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           g=g.transpose(1, 2), layout="BHTD")
    copies = {e.name for e in profile.events()} & {"aten::copy_", "aten::clone", "aten::contiguous"}
    assert not copies, copies
    assert out.is_contiguous() and out.shape == (2, 19, 3, 16)
    assert out_bhtd.is_contiguous() and out_bhtd.shape == (2, 3, 19, 16)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(out_bhtd, expected.transpose(1, 2), rtol=0, atol=0)


def test_strided_views_have_gradients():
    gen = torch.Generator().manual_seed(2)
    proj = torch.randn(2, 19, 3 * 2 * 16, generator=gen, requires_grad=True)
    q, k, v = proj.unflatten(-1, (3, 2, 16)).unbind(2)
    decay = torch.tensor([0.9, 0.95], requires_grad=True)
    culina.chunk_simple_gla(q, k, v, g_gamma=decay.log())[0].square().sum().backward()
    expected = [proj.grad.clone(), decay.grad.clone()]
    proj.grad, decay.grad = None, None
    q, k, v = (x.contiguous() for x in proj.unflatten(-1, (3, 2, 16)).unbind(2))
    culina.chunk_simple_gla(q, k, v, g_gamma=decay.log())[0].square().sum().backward()
    torch.testing.assert_close(proj.grad, expected[0])
    torch.testing.assert_close(decay.grad, expected[1])


def test_module_with_tensor_gates_compiles_without_graph_break():
    """A trainable decay and per-token gates from a projection: torch.compile(fullgraph=True)
    traces forward and backward (no data-dependent guard on the decay), with eager's results."""

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 3 * 2 * 8 + 2)
            self.decay = torch.nn.Parameter(torch.tensor([0.9, 0.8]))

        def forward(self, x, state):
            qkv, gate = self.proj(x).split([48, 2], dim=-1)
            q, k, v = qkv.unflatten(-1, (3, 2, 8)).unbind(2)  # [B, T, H, D] views
            g = torch.nn.functional.logsigmoid(gate)
            out, final = culina.linear_attention(q, k, v, self.decay, g=g, initial_state=state,
                                                 output_final_state=True, layout="BTHD")
            return out.square().sum() + final.square().sum()

    torch.manual_seed(0)
    layer = Layer()
    x, state = torch.randn(2, 12, 8), torch.randn(2, 2, 8, 8, requires_grad=True)
    eager_loss = layer(x, state)
    eager_grads = torch.autograd.grad(eager_loss, [state, *layer.parameters()])
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    loss = compiled(x, state)
    grads = torch.autograd.grad(loss, [state, *layer.parameters()])
    torch.testing.assert_close(loss, eager_loss)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want)
    names = ["state", *(name for name, _ in layer.named_parameters())]
    assert dict(zip(names, grads))["decay"].abs().min() > 0


def test_chunk_simple_gla_compiles_without_graph_break():
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 20, 2, 8, generator=gen, requires_grad=True) for _ in range(3))
    g = torch.nn.functional.logsigmoid(torch.randn(1, 20, 2, generator=gen)).requires_grad_()
    cu_seqlens = torch.tensor([0, 7, 20])

    def loss(q, k, v, g):
        out, final = culina.chunk_simple_gla(q, k, v, g, output_final_state=True, cu_seqlens=cu_seqlens,
                                             cu_seqlens_cpu=cu_seqlens)
        return out.square().sum() + final.sum()

    eager = torch.autograd.grad(loss(q, k, v, g), [q, k, v, g])
    compiled = torch.autograd.grad(torch.compile(loss, backend="aot_eager", fullgraph=True)(q, k, v, g), [q, k, v, g])
    for got, want in zip(compiled, eager):
        torch.testing.assert_close(got, want)


def test_chunk_simple_gla_states_and_returns():
    """Always a pair; final_state None unless asked; a bf16 initial state in [N, H, V, K]
    (state_v_first) gets its gradient in bf16, and the final state comes as [N, H, V, K]."""
    gen = torch.Generator().manual_seed(6)
    q, k = (torch.randn(2, 10, 2, 8, generator=gen) for _ in range(2))
    v = torch.randn(2, 10, 2, 4, generator=gen)
    s0 = torch.randn(2, 2, 8, 4, generator=gen)
    out, final = culina.chunk_simple_gla(q, k, v)
    assert final is None and out.shape == (2, 10, 2, 4)
    s0_v_first = s0.transpose(-1, -2).contiguous().bfloat16().requires_grad_()
    out_v, final_v = culina.chunk_simple_gla(q, k, v, initial_state=s0_v_first, output_final_state=True,
                                             state_v_first=True, chunk_size=64)
    assert final_v.shape == (2, 2, 4, 8) and final_v.dtype == torch.float32
    expected_out, expected_final = culina.chunk_simple_gla(q, k, v, initial_state=s0_v_first.detach().float().mT,
                                                           output_final_state=True)
    torch.testing.assert_close(out_v, expected_out)
    torch.testing.assert_close(final_v, expected_final.mT)
    final_v.sum().backward()
    assert s0_v_first.grad.dtype == torch.bfloat16 and s0_v_first.grad.shape == (2, 2, 4, 8)
    assert isinstance(culina.linear_attention(q, k, v, layout="BTHD"), torch.Tensor)  # a bare o


def test_layout_from_facts():
    """With no layout named, the decay's length, initial_state's H and host cu_seqlens' total T
    decide; q.shape[1] < q.shape[2] alone means [B, H, T, D]."""
    gen = torch.Generator().manual_seed(8)
    q = torch.randn(1, 12, 3, 8, generator=gen)  # [B, T, H, D] with T = 12 > H = 3
    expected = culina.linear_attention(q, q, q, [0.9, 0.8, 0.7], layout="BTHD")
    torch.testing.assert_close(culina.linear_attention(q, q, q, [0.9, 0.8, 0.7]), expected, rtol=0, atol=0)
    state = torch.zeros(1, 3, 8, 8)
    torch.testing.assert_close(culina.linear_attention(q, q, q, [0.9, 0.8, 0.7], initial_state=state), expected,
                               rtol=0, atol=0)
    packed = culina.linear_attention(q, q, q, cu_seqlens=torch.tensor([0, 5, 12]))
    torch.testing.assert_close(packed, culina.linear_attention(q, q, q, cu_seqlens=torch.tensor([0, 5, 12]),
                                                               layout="BTHD"), rtol=0, atol=0)
    bhtd = q.transpose(1, 2).contiguous()  # [1, 3, 12, 8]: H < T
    torch.testing.assert_close(culina.linear_attention(bhtd, bhtd, bhtd, [0.9, 0.8, 0.7]),
                               expected.transpose(1, 2), rtol=0, atol=0)


def raises(exc, pattern, *args, **kwargs):
    with pytest.raises(exc, match=pattern) as caught:
        culina.linear_attention(*args, **kwargs)
    assert_culina_error(caught.value)


def test_fla_layout_without_facts_is_refused():
    """fla's [B, T, H, D] with nothing pinning H or T used to run with H and T swapped."""
    q = torch.zeros(2, 64, 4, 16)
    raises(ValueError, r'^q: shape \(2, 64, 4, 16\) is ambiguous: .* pass layout="BHTD" or layout="BTHD"', q, q, q)
    square = torch.zeros(1, 4, 4, 8)  # H = T: even a named fact cannot tell
    raises(ValueError, r"is ambiguous", square, square, square, [0.5] * 4)
    g = torch.zeros(2, 64, 4)
    raises(ValueError, r"is ambiguous", q, q, q, g=g)  # g has q's first three axes in both layouts


def test_layout_errors():
    q = torch.zeros(1, 12, 3, 8)
    raises(ValueError, r"^layout: expected \"BHTD\" .* got 'bthd'", q, q, q, layout="bthd")
    raises(ValueError, r"^layout: the facts disagree on q's layout \(decay's length gives H=12; initial_state "
           r"gives H=3", q, q, q, [0.5] * 12, initial_state=torch.zeros(1, 3, 8, 8))
    raises(ValueError, r"^v: shape \(1, 3, 12, 8\) must be \[B, T, H, Dv\]", q, q, torch.zeros(1, 3, 12, 8),
           layout="BTHD")
    raises(ValueError, r"^cu_seqlens: packed sequences need q, k and v as \[1, total_T, H, D\], got B=2",
           *[torch.zeros(2, 12, 3, 8)] * 3, cu_seqlens=torch.tensor([0, 12]), layout="BTHD")


def test_gate_errors():
    q = torch.zeros(1, 2, 12, 8)
    raises(ValueError, r"^g: shape \(1, 12, 2\) must be \[B, H, T\] = \(1, 2, 12\)", q, q, q, g=torch.zeros(1, 12, 2))
    raises(TypeError, r"^g: dtype bfloat16 is not supported; the gates are float32", q, q, q,
           g=torch.zeros(1, 2, 12, dtype=torch.bfloat16))
    raises(TypeError, r"^g: expected a torch.Tensor like q, got numpy.ndarray", q, q, q, g=np.zeros((1, 2, 12)))
    raises(ValueError, r"^decay: expected a tensor \[H\] = \(2,\), got shape \(1, 2, 12\); per-token forget gates "
           r"go in g=", q, q, q, torch.full((1, 2, 12), 0.9))
    raises(ValueError, r"^arrays on different devices: decay is on meta but q is on cpu; pass decay.to\(q.device\)",
           q, q, q, torch.full((2,), 0.9, device="meta"))
    raises(TypeError, r"^decay: dtype torch.int64 is not supported", q, q, q, torch.ones(2, dtype=torch.int64))


def test_chunk_simple_gla_errors():
    q = torch.zeros(1, 12, 2, 8)

    def refused(exc, pattern, *args, **kwargs):
        with pytest.raises(exc, match=pattern) as caught:
            culina.chunk_simple_gla(*args, **kwargs)
        assert_culina_error(caught.value)

    refused(DeprecationWarning, r"^head_first: flash-linear-attention 0.6 removed it", q, q, q, head_first=False)
    refused(ValueError, r"^chunk_size: culina's kernels work in chunks of 64 tokens, got 32", q, q, q, chunk_size=32)
    refused(TypeError, r"unexpected keyword arguments \['initial_states'\]", q, q, q, initial_states=None)
    refused(TypeError, r"^q: culina.chunk_simple_gla takes PyTorch tensors", *[np.zeros((1, 12, 2, 8))] * 3)
    refused(ValueError, r"^g_gamma: expected shape \[H\] = \(2,\), got \(1, 12, 2\)", q, q, q,
            g_gamma=torch.zeros(1, 12, 2))
    refused(ValueError, r"^initial_state: shape \(1, 2, 8, 8\) must be \[N, H, K, V\] = \(2, 2, 8, 8\), N being the "
            r"number of sequences in cu_seqlens", q, q, q, initial_state=torch.zeros(1, 2, 8, 8),
            cu_seqlens=torch.tensor([0, 5, 12]))
    refused(ValueError, r"^initial_state: shape \(1, 2, 8, 4\) must be \[N, H, V, K\] \(state_v_first\) = "
            r"\(1, 2, 4, 8\)", q, q, torch.zeros(1, 12, 2, 4), initial_state=torch.zeros(1, 2, 8, 4),
            state_v_first=True)
    refused(ValueError, r"^cu_seqlens: expected offsets rising from 0 to total_T=12 \(q's T\), got \[0, 5, 11\]", q,
            q, q, cu_seqlens=torch.tensor([0, 5, 12]), cu_seqlens_cpu=torch.tensor([0, 5, 11]))
    refused(ValueError, r"^cu_seqlens_cpu: given without cu_seqlens", q, q, q, cu_seqlens_cpu=torch.tensor([0, 12]))
    refused(ValueError, r"^cu_seqlens: packed sequences need q, k and v as \[1, total_T, H, D\], got B=2",
            *[torch.zeros(2, 12, 2, 8)] * 3, cu_seqlens=torch.tensor([0, 12]))


def test_ops_pass_opcheck():
    """torch.library.opcheck: the schemas, the fake implementations (shapes and strides equal to
    the real ones) and the autograd registration, on gated, strided BTHD inputs."""
    from culina import _torch  # its import registers the ops

    gen = torch.Generator().manual_seed(9)
    q, k, v = torch.randn(1, 9, 3, 2, 8, generator=gen, requires_grad=True).unbind(2)  # strided [B, T, H, D]
    g = torch.nn.functional.logsigmoid(torch.randn(1, 9, 2, generator=gen)).requires_grad_()
    gamma = torch.tensor([-0.1, -0.2], requires_grad=True)
    s0 = torch.randn(1, 2, 8, 8, generator=gen, requires_grad=True)
    for args in ((q, k, v, [0.9, 0.8], gamma, g, 0.3, s0, None, True, "BTHD", True),
                 (q, k, v, None, None, g, 0.3, None, torch.tensor([0, 4, 9]), False, "BTHD")):
        result = torch.library.opcheck(torch.ops.culina.linear_attention.default, args)
        assert set(result.values()) == {"SUCCESS"}, result
    d_out, d_final = torch.randn(1, 9, 2, 8, generator=gen), torch.randn(1, 2, 8, 8, generator=gen)
    plain = [x.detach() for x in (q, k, v, g, gamma, s0)]
    args = (*plain[:3], d_out, [0.9, 0.8], plain[4], plain[3], 0.3, plain[5], d_final, None, True, "BTHD")
    gate_ends = torch.randn(1, 2, generator=gen, dtype=torch.float64)
    for gates in ((False, False), (True, False), (False, True), (True, True, gate_ends)):
        result = torch.library.opcheck(torch.ops.culina.linear_attention_backward.default, (*args, *gates))
        assert set(result.values()) == {"SUCCESS"}, result
    # The final state's term is read as [sequences, H] float64: anything else is refused, not read.
    for wrong in (gate_ends.float(), gate_ends.T.contiguous(), torch.zeros(2, 2, dtype=torch.float64)):
        with pytest.raises(ValueError, match=r"^gate_ends: expected a contiguous float64 tensor of shape \(1, 2\)"):
            _torch.backward(*args, True, True, wrong)
