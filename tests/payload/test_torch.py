"""PyTorch on the CPU: the custom op's forward and autograd backward against the float64
recurrence (torch_reference), gradcheck, packed sequences (cu_seqlens) and torch.compile. The
same checks run on CUDA tensors in test_gpu_autograd.py."""
import numpy as np
import pytest

import culina
from seeds import stable_seed

torch = pytest.importorskip("torch", reason="the PyTorch tests need torch (make deps puts it in build/venv-torch)")
from culina_errors import assert_culina_error  # noqa: E402
from float32_case import CALL_IDS, CALLS, RESULTS, fla_call, float32_inputs, matmul_precision, run_call  # noqa: E402
from torch_reference import reference  # noqa: E402  (imports torch)

from culina import _api, _torch  # noqa: E402

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# ||grad - ref|| / ||ref||: 16-bit gradients are rounded to their dtype; accumulation is fp32.
TOLERANCE = {"float32": 2e-5, "float16": 3e-3, "bfloat16": 2e-2}
# (B, H, T, Dk, Dv): odd T, head sizes 1 and 256, Dk != Dv
SHAPES = [(2, 3, 37, 16, 24), (1, 2, 1, 8, 8), (1, 1, 21, 1, 3), (1, 1, 9, 256, 5), (2, 2, 65, 32, 1)]
# (decay, initial_state, final state used in the loss)
MODES = {"plain": (False, False, False), "decay": (True, False, False), "state": (False, True, False),
         "final": (True, False, True), "decay+state+final": (True, True, True)}


def rel_err(got, ref):
    got, ref = got.detach().double(), ref.detach().double()
    assert torch.isfinite(got).all()
    return ((got - ref).norm() / ref.norm()).item()


def make_inputs(seed, shape, dtype, mode, cu_seqlens=None):
    """q, k, v (leaves with requires_grad in `dtype`), decay, initial_state (float32 leaf)."""
    b, h, t, dk, dv = shape
    gen = torch.Generator().manual_seed(seed)
    use_decay, use_state, _ = MODES[mode]
    leaf = lambda *s: (torch.randn(*s, generator=gen) * 0.5).to(TORCH_DTYPES[dtype]).requires_grad_()  # noqa: E731
    q, k, v = leaf(b, h, t, dk), leaf(b, h, t, dk), leaf(b, h, t, dv)
    decay = (0.6 + 0.4 * torch.rand(h, generator=gen)).tolist() if use_decay else None
    states = b if cu_seqlens is None else len(cu_seqlens) - 1
    s0 = torch.randn(states, h, dk, dv, generator=gen).requires_grad_() if use_state else None
    return q, k, v, decay, s0


def check_against_reference(q, k, v, decay, s0, mode, dtype, cu_seqlens=None, scale=None, seed=0):
    """Runs culina and the float64 reference with the same upstream gradients; compares o, S_T
    and every input's gradient."""
    use_final = MODES[mode][2]
    seqlens = None if cu_seqlens is None else torch.tensor(cu_seqlens, dtype=torch.int32)
    out, final = culina.linear_attention(q, k, v, decay, scale=scale, initial_state=s0, output_final_state=True,
                                         cu_seqlens=seqlens, layout="BHTD")
    leaves64 = [x.detach().double().requires_grad_() for x in (q, k, v)]
    s0_64 = s0.detach().double().requires_grad_() if s0 is not None else None
    ref_out, ref_final = reference(*leaves64, decay, scale, s0_64, cu_seqlens)
    gen = torch.Generator().manual_seed(seed + 1)
    d_out = torch.randn(out.shape, generator=gen).to(out.dtype)
    d_final = torch.randn(final.shape, generator=gen) if use_final else None
    loss = (out * d_out).sum() + ((final * d_final).sum() if use_final else 0)
    loss.backward()
    ref_loss = (ref_out * d_out.double()).sum() + ((ref_final * d_final.double()).sum() if use_final else 0)
    ref_loss.backward()
    assert out.dtype == q.dtype and final.dtype == torch.float32
    assert rel_err(out, ref_out) < TOLERANCE[dtype]
    assert rel_err(final, ref_final) < 1e-5
    for name, got, ref in zip("qkv", (q, k, v), leaves64):
        assert got.grad.dtype == got.dtype and got.grad.shape == got.shape
        assert rel_err(got.grad, ref.grad) < TOLERANCE[dtype], name
    if s0 is not None:
        assert s0.grad.dtype == torch.float32
        assert rel_err(s0.grad, s0_64.grad) < 1e-4


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gradients_match_float64_reference(dtype, mode, shape):
    seed = stable_seed(dtype, mode, shape)
    q, k, v, decay, s0 = make_inputs(seed, shape, dtype, mode)
    check_against_reference(q, k, v, decay, s0, mode, dtype, seed=seed)


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("cu_seqlens", [[0, 5, 5, 23, 40], [0, 1], [0, 64, 65, 130]], ids=["4-seqs", "1-row", "3-seqs"])
def test_packed_gradients_match_float64_reference(dtype, mode, cu_seqlens):
    seed = stable_seed(dtype, mode, tuple(cu_seqlens))
    shape = (1, 2, cu_seqlens[-1], 16, 8)
    q, k, v, decay, s0 = make_inputs(seed, shape, dtype, mode, cu_seqlens)
    check_against_reference(q, k, v, decay, s0, mode, dtype, cu_seqlens, scale=0.3, seed=seed)


def test_scale_reaches_the_backward():
    q, k, v, decay, s0 = make_inputs(3, (1, 2, 11, 4, 6), "float32", "decay+state+final")
    check_against_reference(q, k, v, decay, s0, "decay+state+final", "float32", scale=1.7, seed=3)


@pytest.mark.parametrize("packed", [False, True], ids=["batched", "packed"])
@pytest.mark.parametrize("use_decay", [False, True], ids=["no-decay", "decay"])
def test_gradcheck(packed, use_decay):
    """Finite differences in fp32: o and S_T are linear in each of q, k, v and S0 alone, so a
    large step has no truncation error and the tolerance only covers fp32 rounding."""
    gen = torch.Generator().manual_seed(11)
    seqlens = torch.tensor([0, 2, 7], dtype=torch.int64) if packed else None
    b, states = (1, 2) if packed else (2, 2)
    make = lambda *s: torch.randn(*s, generator=gen).requires_grad_()  # noqa: E731
    q, k, v, s0 = make(b, 2, 7, 3), make(b, 2, 7, 3), make(b, 2, 7, 4), make(states, 2, 3, 4)
    decay = [0.9, 0.6] if use_decay else None

    def fn(q, k, v, s0):
        return culina.linear_attention(q, k, v, decay, initial_state=s0, output_final_state=True, cu_seqlens=seqlens)

    with pytest.warns(UserWarning, match="double precision"):  # culina has no float64 kernels
        assert torch.autograd.gradcheck(fn, (q, k, v, s0), eps=1e-2, atol=2e-3, rtol=2e-3)


def test_packed_equals_separate_calls():
    """Each packed sequence starts from its own state: the same as one call per sequence."""
    gen = torch.Generator().manual_seed(5)
    offsets = [0, 3, 10, 10, 31]
    q, k, v = (torch.randn(1, 2, 31, 8, generator=gen) for _ in range(3))
    s0 = torch.randn(4, 2, 8, 8, generator=gen)
    decay = [0.9, 0.8]
    out, final = culina.linear_attention(q, k, v, decay, initial_state=s0, output_final_state=True,
                                         cu_seqlens=torch.tensor(offsets))
    for i, (start, end) in enumerate(zip(offsets[:-1], offsets[1:])):
        if start == end:
            torch.testing.assert_close(final[i], s0[i])  # an empty sequence keeps its state
            continue
        part, part_final = culina.linear_attention(q[:, :, start:end].contiguous(), k[:, :, start:end].contiguous(),
                                                   v[:, :, start:end].contiguous(), decay, initial_state=s0[i:i + 1],
                                                   output_final_state=True)
        torch.testing.assert_close(out[:, :, start:end], part)
        torch.testing.assert_close(final[i:i + 1], part_final)
    np_out, np_final = culina.linear_attention(q.numpy(), k.numpy(), v.numpy(), decay, initial_state=s0.numpy(),
                                               output_final_state=True, cu_seqlens=np.array(offsets, dtype=np.int32))
    np.testing.assert_array_equal(np_out, out.numpy())
    np.testing.assert_array_equal(np_final, final.numpy())


def test_torch_cpu_equals_numpy():
    q, k, v = (torch.randn(2, 3, 17, 8) for _ in range(3))
    out = culina.linear_attention(q, k, v, [0.5, 0.9, 1.0])
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), culina.linear_attention(q.numpy(), k.numpy(), v.numpy(), [0.5, 0.9, 1.0]))


@pytest.mark.parametrize("gated", [False, True], ids=["decay-list", "gates"])
def test_routes_agree(gated):
    """An eager call without grad and an eager backward skip the dispatcher; the op
    (torch.ops.culina.*), which autograd, torch.compile and tensor subclasses reach, gives the same
    bits, forward and backward."""
    from culina import _torch

    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 9, 4, generator=gen) for _ in range(3))
    s0, d_final = torch.randn(1, 2, 4, 4, generator=gen), torch.randn(1, 2, 4, 4, generator=gen)
    d_out = torch.randn(1, 2, 9, 4, generator=gen)
    decay = torch.tensor([0.9, 0.7]) if gated else [0.9, 0.7]
    g = torch.nn.functional.logsigmoid(torch.randn(1, 2, 9, generator=gen)) if gated else None
    decay_list, gamma = (None, decay.log()) if gated else (decay, None)
    direct = culina.linear_attention(q, k, v, decay, g=g, scale=0.5, initial_state=s0, output_final_state=True)
    dispatched = torch.ops.culina.linear_attention(q, k, v, decay_list, gamma, g, 0.5, s0, None, True, "BHTD")[:2]
    direct_grads = _torch.backward(q, k, v, d_out, decay_list, gamma, g, 0.5, s0, d_final, None, True, "BHTD")
    dispatched_grads = torch.ops.culina.linear_attention_backward(q, k, v, d_out, decay_list, gamma, g, 0.5, s0,
                                                                  d_final, None, True, "BHTD")
    for got, want in zip((*direct, *direct_grads), (*dispatched, *dispatched_grads)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    with_grad = culina.linear_attention(q.requires_grad_(), k, v, decay, g=g, scale=0.5, initial_state=s0)
    assert with_grad.grad_fn is not None and direct[0].grad_fn is None


def test_eager_autograd_equals_the_op():
    """An eager call with grad runs an autograd.Function (no dispatcher); autograd through the op
    gives the same bits, every gradient included (q, k, v, the gates, decay, S0)."""
    gen = torch.Generator().manual_seed(3)
    inputs = [torch.randn(1, 2, 9, 4, generator=gen) for _ in range(3)]
    inputs += [torch.rand(2, generator=gen) * 0.2 + 0.7, torch.nn.functional.logsigmoid(torch.randn(1, 2, 9,
                                                                                                     generator=gen)),
               torch.randn(1, 2, 4, 4, generator=gen)]
    d_out, d_final = torch.randn(1, 2, 9, 4, generator=gen), torch.randn(1, 2, 4, 4, generator=gen)
    runs = []
    for route in ("function", "op"):
        q, k, v, decay, g, s0 = leaves = [x.clone().requires_grad_() for x in inputs]
        if route == "function":
            out, final = culina.linear_attention(q, k, v, decay, g=g, scale=0.5, initial_state=s0,
                                                 output_final_state=True)
            assert "EagerAutograd" in type(out.grad_fn).__name__
        else:
            out, final, kept = torch.ops.culina.linear_attention(q, k, v, None, decay.log(), g, 0.5, s0, None, True,
                                                                 "BHTD", True)
            assert kept.numel() == 0  # the CPU keeps nothing for the backward
        ((out * d_out).sum() + (final * d_final).sum()).backward()
        runs.append([out, final] + [x.grad for x in leaves])
    for got, want in zip(*runs):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_unused_final_state_and_no_state_grad():
    """S_T asked for but not in the loss, and an initial state that needs no gradient."""
    q, k, v = (torch.randn(1, 1, 6, 4, requires_grad=True) for _ in range(3))
    s0 = torch.randn(1, 1, 4, 4)
    out, _ = culina.linear_attention(q, k, v, initial_state=s0, output_final_state=True)
    out.sum().backward()
    leaves64 = [x.detach().double().requires_grad_() for x in (q, k, v)]
    reference(*leaves64, initial_state=s0.double())[0].sum().backward()
    for got, ref in zip((q, k, v), leaves64):
        assert rel_err(got.grad, ref.grad) < 2e-5
    assert s0.grad is None


def test_module_compiles_without_graph_break():
    """torch.compile(fullgraph=True) fails on any graph break; aot_eager traces the forward and
    the backward through the fake implementations (the GPU test uses inductor)."""

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 24)

        def forward(self, x, state):
            q, k, v = self.proj(x).unflatten(-1, (3, 8)).permute(2, 0, 1, 3).contiguous().unbind(0)
            out, final = culina.linear_attention(q[None], k[None], v[None], [0.9, 0.8], initial_state=state,
                                                 output_final_state=True, cu_seqlens=torch.tensor([0, 5, 12]))
            return out.sum() + final.square().sum()

    torch.manual_seed(0)
    layer = Layer()
    x, state = torch.randn(2, 12, 8), torch.randn(2, 2, 8, 8, requires_grad=True)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    eager_loss = layer(x, state)
    eager_grads = torch.autograd.grad(eager_loss, [state, *layer.parameters()])
    loss = compiled(x, state)
    grads = torch.autograd.grad(loss, [state, *layer.parameters()])
    torch.testing.assert_close(loss, eager_loss)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want)


def test_fake_tensors_give_shapes_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, v = torch.empty(1, 3, 50, 16), torch.empty(1, 3, 50, 24)
        out, final = culina.linear_attention(q, q, v, output_final_state=True,
                                             cu_seqlens=torch.empty(5, dtype=torch.int32))
    assert out.shape == (1, 3, 50, 24) and final.shape == (4, 3, 16, 24) and final.dtype == torch.float32


def raises(exc, pattern, *args, **kwargs):
    with pytest.raises(exc, match=pattern) as caught:
        culina.linear_attention(*args, **kwargs)
    assert_culina_error(caught.value)


def test_packed_argument_errors():
    q = torch.zeros(1, 2, 10, 4)
    raises(TypeError, r"^cu_seqlens: dtype float32 is not supported; pass int32 or int64", q, q, q,
           cu_seqlens=torch.tensor([0.0, 10.0]))
    raises(ValueError, r"^cu_seqlens: expected a 1-D array of N \+ 1 >= 2 offsets .* got shape \(1,\)", q, q, q,
           cu_seqlens=torch.tensor([0]))
    raises(ValueError, r"^cu_seqlens: packed sequences need q, k and v as \[1, H, total_T, D\], got B=2", *[
        torch.zeros(2, 2, 10, 4)] * 3, cu_seqlens=torch.tensor([0, 10]))
    raises(ValueError, r"^cu_seqlens: expected offsets rising from 0 to total_T=10 \(q's T\), got \[0, 4, 2, 10\]",
           q, q, q, cu_seqlens=torch.tensor([0, 4, 2, 10]))
    raises(ValueError, r"^cu_seqlens: expected offsets rising from 0 to total_T=10 .* got \[0, 4, 9\]", q, q, q,
           cu_seqlens=torch.tensor([0, 4, 9]))
    raises(ValueError, r"^initial_state: shape \(1, 2, 4, 4\) must be \[N, H, Dk, Dv\] \(N sequences in "
           r"cu_seqlens\) = \(2, 2, 4, 4\)", q, q, q, initial_state=torch.zeros(1, 2, 4, 4),
           cu_seqlens=torch.tensor([0, 4, 10]))
    raises(TypeError, r"^cu_seqlens: expected a torch.Tensor like q, got numpy.ndarray", q, q, q,
           cu_seqlens=np.array([0, 10]))


def test_torch_argument_errors():
    q = torch.zeros(1, 2, 10, 4)
    raises(ValueError, r"^k: the feature axis \(the last\) has stride 10; culina reads any view whose last axis has "
           r"stride 1", q, torch.zeros(1, 2, 4, 10).mT, q)
    raises(TypeError, r"^v: dtype float16 differs from q's float32", q, q, q.half())
    raises(TypeError, r"^q: dtype float64 is not supported; use float32, float16 or bfloat16", *[q.double()] * 3)
    raises(ValueError, r"^decay: every value must be in \(0, 1\], head 1 has 1.5", q, q, q, [0.5, 1.5])
    raises(ValueError, r"^decay: expected shape \[H\] = \(2,\), got \(3,\)", q, q, q, (0.5, 0.5, 0.5))
    raises(TypeError, r"^initial_state: dtype float16 is not supported; the state is float32", q, q, q,
           initial_state=torch.zeros(1, 2, 4, 4, dtype=torch.float16))


# float32 on the tensor cores, opt in through torch.set_float32_matmul_precision("medium"): the
# rule (_api.compute_dtype) and the rounding's plumbing here; on a GPU in test_gpu_float32.py.
@pytest.mark.parametrize("dtype,device,precision,expected", [
    ("float32", "cuda", "medium", "bfloat16"),
    ("float32", "cuda", "high", "float32"),  # TF32 in PyTorch; culina has no TF32 kernels
    ("float32", "cuda", "highest", "float32"),
    ("float32", "cpu", "medium", "float32"),
    ("float32", "meta", "medium", "float32"),
    ("bfloat16", "cuda", "medium", "bfloat16"),
    ("float16", "cuda", "medium", "float16"),
    ("float16", "cuda", "highest", "float16"),
])
def test_compute_dtype(dtype, device, precision, expected):
    assert _api.compute_dtype(dtype, device, precision) == expected


@pytest.mark.parametrize("call", CALLS, ids=CALL_IDS)
def test_cpu_float32_under_medium_stays_exact(call):
    """CPU tensors never round: "medium" gives the "highest" result bit for bit."""
    inputs = float32_inputs()
    with matmul_precision("highest"):
        exact = run_call(call, inputs)
    with matmul_precision("medium"):
        rounded = run_call(call, inputs)
    for name, got, want in zip(RESULTS, rounded, exact):
        assert got.dtype == want.dtype == torch.float32, name
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)


def rounding_on_cpu(dtype: str, device: str, precision: str, rule=_api.compute_dtype) -> str:
    """The rule with the CPU taken for CUDA: the rounding's plumbing, checked where no GPU is."""
    return rule(dtype, "cuda" if device == "cpu" else device, precision)


@pytest.mark.parametrize("call", CALLS, ids=CALL_IDS)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_rounded_float32_is_the_bfloat16_run_with_float32_results(call, compiled, monkeypatch):
    """Rounded, a float32 call is the bfloat16 call on q, k, v rounded to bfloat16: o and dq, dk,
    dv come back float32 (autograd through the cast), the gates, states and their gradients were
    float32 all along. Eager (the autograd.Function) and compiled (the op, its fake kernel)."""
    inputs = float32_inputs()
    want = run_call(call, inputs, torch.bfloat16)
    monkeypatch.setattr(_api, "compute_dtype", rounding_on_cpu)
    with matmul_precision("medium"):
        got = run_call(torch.compile(call, backend="aot_eager", fullgraph=True) if compiled else call, inputs)
    for name, x, y in zip(RESULTS, got, want):
        assert x.dtype == torch.float32, name
        torch.testing.assert_close(x, y.float(), rtol=0, atol=0, msg=name)
    with matmul_precision("high"):  # the setting in force when a pass runs decides: exact again
        exact = run_call(call, inputs)[0]
    torch.testing.assert_close(exact, run_call(call, inputs)[0], rtol=0, atol=0)
    assert not torch.equal(exact, got[0])


def test_a_rounding_is_logged_once_with_the_setting_that_decided_it(monkeypatch, caplog):
    monkeypatch.setattr(_api, "compute_dtype", rounding_on_cpu)
    monkeypatch.setattr(_torch, "_logged_roundings", set())
    caplog.set_level("DEBUG", logger="culina")
    inputs = float32_inputs()
    with matmul_precision("medium"):
        for _ in range(2):
            fla_call(*(inputs[name] for name in ("q", "k", "v", "g", "g_gamma", "initial_state")))
    lines = [record.getMessage() for record in caplog.records if record.name == "culina"]
    assert lines == ["culina: float32 cpu inputs run on the bfloat16 kernels (q, k and v rounded; gates, states and "
                     "o stay float32), as torch.get_float32_matmul_precision() is 'medium'"]
