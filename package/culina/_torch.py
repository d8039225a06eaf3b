"""PyTorch integration, imported only when a torch tensor reaches culina.linear_attention.

Two custom ops, culina::linear_attention and culina::linear_attention_backward, with fake
(meta) implementations and autograd registered, so that culina is differentiable with respect to
q, k, v and initial_state and torch.compile(fullgraph=True) traces it without a graph break. Both
run on the CPU reference for CPU tensors and on the GPU kernels for CUDA tensors, reading raw
addresses straight from the tensors (no DLPack round trip) on the caller's current stream, with
scratch memory from PyTorch's caching allocator.

An eager call that neither autograd nor a tensor subclass, functorch transform or dispatch mode
needs to see goes straight to the implementation, skipping PyTorch's dispatcher (tens of
microseconds a call for an op written in Python); so does an eager backward on plain tensors.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import torch

from . import _api, _C, _frameworks

# torch dtype -> the dtype names _api.check_shapes speaks (float types, cu_seqlens' integers)
DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
               torch.int32: "int32", torch.int64: "int64"}
DTYPE_CODES = {t: _frameworks.NUMPY_DTYPES[n] for t, n in DTYPE_NAMES.items() if n in _frameworks.NUMPY_DTYPES}
# Checked argument layouts and decay lists of eager calls; a model makes few distinct ones.
CACHE_LIMIT = 256
_problems: dict = {}
_decays: dict = {}
_workspaces: dict = {}


def linear_attention(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens):
    """culina.linear_attention for torch tensors (the public docstring describes it)."""
    route = _route(q, k, v, initial_state, cu_seqlens)
    heads = q.shape[1] if q.dim() == 4 else 0
    scale_value = _api.check_scale(scale, q.shape[-1])
    if route is DIRECT:
        out, final = forward(q, k, v, _cached_decay(decay, heads), scale_value, initial_state, cu_seqlens,
                             output_final_state)
    else:
        out, final = torch.ops.culina.linear_attention(q, k, v, _api.check_decay(decay, heads), scale_value,
                                                       initial_state, cu_seqlens, output_final_state)
    return (out, final) if output_final_state else out


# How a call reaches the kernels. PyTorch's dispatcher costs tens of microseconds a call for an op
# written in Python, so an eager call that needs no autograd skips it. One that does goes through
# the op: an autograd.Function of culina's own measured slower still (160 against 110 us a call
# on the CPU, BENCHMARKS.md).
DIRECT, DISPATCHER = "direct", "dispatcher"


def _route(q, k, v, initial_state, cu_seqlens) -> str:
    """The dispatcher while torch.compile traces, where autograd (an input that requires grad),
    a tensor subclass (fake, functional, DTensor, ...), a functorch transform (vmap, grad) or a
    dispatch mode must see the call; else direct. Raises for an argument that is no tensor.
    Written out test by test: this runs on every eager call."""
    tensor = torch.Tensor
    if not (type(q) is tensor and type(k) is tensor and type(v) is tensor
            and (initial_state is None or type(initial_state) is tensor)
            and (cu_seqlens is None or type(cu_seqlens) is tensor)):
        for name, value in (("k", k), ("v", v), ("initial_state", initial_state), ("cu_seqlens", cu_seqlens)):
            if value is not None and not isinstance(value, tensor):
                raise _not_a_tensor(name, value, q)
        return DISPATCHER
    if not _eager():
        return DISPATCHER
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                    or (initial_state is not None and initial_state.requires_grad)):
        return DISPATCHER
    return DIRECT


def _eager() -> bool:
    """No torch.compile tracing, functorch transform or dispatch mode active."""
    return not (torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()
                or torch._C._len_torch_dispatch_stack())


def _not_a_tensor(name: str, value, q) -> Exception:
    if isinstance(value, np.ndarray) and q.device.type != "cpu":
        return ValueError(f"arrays on different devices: {name} is on cpu (NumPy) but q is on {q.device}; move "
                          f"them to one device ({name} = torch.from_numpy({name}).to(q.device))")
    return TypeError(f"{name}: expected a torch.Tensor like q, got {type(value).__module__}.{type(value).__name__}; "
                     f"convert it with torch.as_tensor({name}, device=q.device)")


def _cached_decay(decay, heads: int):
    if not isinstance(decay, (list, tuple)):
        return _api.check_decay(decay, heads)
    try:
        key = (heads, tuple(decay))
        return _decays[key]
    except (KeyError, TypeError):  # TypeError: unhashable items, which check_decay reports
        values = _api.check_decay(decay, heads)
        if len(_decays) >= CACHE_LIMIT:
            _decays.clear()
        _decays[key] = values
        return values


def problem_of(q, k, v, initial_state, cu_seqlens) -> _api.Dims:
    """_api.check_shapes on torch tensors, after checking they share q's device."""
    named = {"q": q, "k": k, "v": v}
    for name, tensor in (("initial_state", initial_state), ("cu_seqlens", cu_seqlens)):
        if tensor is not None:
            named[name] = tensor
    for name, tensor in named.items():
        if not isinstance(tensor, torch.Tensor):
            raise _not_a_tensor(name, tensor, q)
        if tensor.device != q.device:
            raise ValueError(f"arrays on different devices: {name} is on {tensor.device} but q is on "
                             f"{q.device}; move them to one device")
    if q.device.type not in ("cpu", "cuda", "meta"):
        raise TypeError(f"q: PyTorch tensors on {q.device} are not supported; culina runs CPU and CUDA "
                        "tensors (q.cpu() or q.cuda())")
    return _api.check_shapes({n: t.shape for n, t in named.items()},
                             {n: DTYPE_NAMES.get(t.dtype, str(t.dtype).removeprefix("torch.")) for n, t in named.items()},
                             {n: t.is_contiguous() for n, t in named.items()})


def _cached_problem(q, k, v, initial_state, cu_seqlens) -> _api.Dims:
    key = (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.device, k.device, v.device,
           q.is_contiguous(), k.is_contiguous(), v.is_contiguous(),
           None if initial_state is None else (initial_state.shape, initial_state.dtype, initial_state.device,
                                               initial_state.is_contiguous()),
           None if cu_seqlens is None else (cu_seqlens.shape, cu_seqlens.dtype, cu_seqlens.device,
                                            cu_seqlens.is_contiguous()))
    problem = _problems.get(key)
    if problem is None:
        problem = problem_of(q, k, v, initial_state, cu_seqlens)
        if len(_problems) >= CACHE_LIMIT:
            _problems.clear()
        _problems[key] = problem
    return problem


def _workspace(size_of, problem: _api.Dims, dtype_code: int, device: torch.device):
    """Scratch memory for one GPU call from PyTorch's caching allocator: (tensor or None, bytes)."""
    key = (size_of, problem, dtype_code, device.index)
    size = _workspaces.get(key)
    if size is None:
        size = size_of(problem.dims, dtype_code, device.index, num_seqs=problem.num_seqs)
        if len(_workspaces) >= CACHE_LIMIT:
            _workspaces.clear()
        _workspaces[key] = size
    return (torch.empty(size, dtype=torch.uint8, device=device) if size else None), size


def _address(tensor) -> int:
    return 0 if tensor is None else tensor.data_ptr()


def _launch(cpu_entry, gpu_entry, workspace_size_of, problem: _api.Dims, q, cu_seqlens, args: tuple) -> None:
    """Runs one extension entry point: args are the leading arguments both share (addresses,
    dims, dtype, scale, decay); the device, stream, workspace and cu_seqlens follow here."""
    packing = (_address(cu_seqlens), problem.num_seqs, problem.seqlen_bits)
    if q.is_cuda:
        device = q.device
        _api.ready_device(device.index)
        workspace, size = _workspace(workspace_size_of, problem, DTYPE_CODES[q.dtype], device)
        stream = torch._C._cuda_getCurrentRawStream(device.index)
        _api.launch_gpu(gpu_entry, device.index, *args, device.index, stream, _address(workspace), size, *packing)
    else:
        if cu_seqlens is not None:
            _api.check_seqlens_values(cu_seqlens.numpy(), problem.dims[2])
        cpu_entry(*args, 0, *packing)


def forward(q, k, v, decay: Optional[List[float]], scale: float, initial_state: Optional[torch.Tensor],
            cu_seqlens: Optional[torch.Tensor], output_final_state: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """The forward on real tensors: o, and S_T (None unless output_final_state)."""
    problem = _cached_problem(q, k, v, initial_state, cu_seqlens)
    out = torch.empty_like(v)  # o is [B, H, T, Dv] in v's dtype, v's own (checked contiguous) layout
    final = torch.empty(problem.states, dtype=torch.float32, device=q.device) if output_final_state else None
    _launch(_C.cpu_forward, _C.gpu_forward, _C.gpu_workspace_bytes, problem, q, cu_seqlens,
            (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), _address(initial_state), _address(final),
             problem.dims, DTYPE_CODES[q.dtype], scale, decay))
    return out, final


def backward(q, k, v, d_out, decay: Optional[List[float]], scale: float, initial_state: Optional[torch.Tensor],
             d_final_state: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
             need_d_initial_state: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv and dS0 (None unless need_d_initial_state) on real tensors."""
    problem = _cached_problem(q, k, v, initial_state, cu_seqlens)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    d_initial = torch.empty(problem.states, dtype=torch.float32, device=q.device) if need_d_initial_state else None
    _launch(_C.cpu_backward, _C.gpu_backward, _C.gpu_backward_workspace_bytes, problem, q, cu_seqlens,
            (q.data_ptr(), k.data_ptr(), v.data_ptr(), d_out.data_ptr(), _address(initial_state),
             _address(d_final_state), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), _address(d_initial),
             problem.dims, DTYPE_CODES[q.dtype], scale, decay))
    return dq, dk, dv, d_initial


@torch.library.custom_op("culina::linear_attention", mutates_args=())
def _forward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: Optional[List[float]], scale: float,
                initial_state: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
                output_final_state: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    out, final = forward(q, k, v, decay, scale, initial_state, cu_seqlens, output_final_state)
    # An op returns tensors only: an S_T nobody asked for is an empty one.
    return out, final if final is not None else q.new_empty((0,), dtype=torch.float32)


@_forward_op.register_fake
def _forward_fake(q, k, v, decay, scale, initial_state, cu_seqlens, output_final_state):
    problem = problem_of(q, k, v, initial_state, cu_seqlens)
    batch, heads, seq_len, _, dv = problem.dims
    return (q.new_empty((batch, heads, seq_len, dv), dtype=v.dtype),
            q.new_empty(problem.states if output_final_state else (0,), dtype=torch.float32))


@torch.library.custom_op("culina::linear_attention_backward", mutates_args=())
def _backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d_out: torch.Tensor,
                 decay: Optional[List[float]], scale: float, initial_state: Optional[torch.Tensor],
                 d_final_state: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
                 need_d_initial_state: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    dq, dk, dv, d_initial = backward(q, k, v, d_out, decay, scale, initial_state, d_final_state, cu_seqlens,
                                     need_d_initial_state)
    # An op returns tensors only: a dS0 nobody asked for is an empty one.
    return dq, dk, dv, d_initial if d_initial is not None else q.new_empty((0,), dtype=torch.float32)


@_backward_op.register_fake
def _backward_fake(q, k, v, d_out, decay, scale, initial_state, d_final_state, cu_seqlens, need_d_initial_state):
    problem = problem_of(q, k, v, initial_state, cu_seqlens)
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            q.new_empty(problem.states if need_d_initial_state else (0,), dtype=torch.float32))


def _setup_context(ctx, inputs, output):
    q, k, v, decay, scale, initial_state, cu_seqlens, _ = inputs
    ctx.save_for_backward(q, k, v, initial_state, cu_seqlens)
    ctx.decay, ctx.scale = decay, scale


def _backward_formula(ctx, d_out, d_final):
    q, k, v, initial_state, cu_seqlens = ctx.saved_tensors
    # An unused S_T (or one never asked for, an empty tensor) adds nothing to the gradients.
    d_final = d_final.contiguous() if d_final is not None and d_final.numel() else None
    d_out = torch.zeros_like(v) if d_out is None else d_out.contiguous()
    need_d_initial = initial_state is not None and ctx.needs_input_grad[5]
    # Eager backward on plain tensors skips the dispatcher, as the forward does.
    tensors = (q, k, v, d_out, initial_state, d_final, cu_seqlens)
    if _eager() and all(t is None or type(t) is torch.Tensor for t in tensors):
        dq, dk, dv, d_initial = backward(q, k, v, d_out, ctx.decay, ctx.scale, initial_state, d_final, cu_seqlens,
                                         need_d_initial)
    else:
        dq, dk, dv, d_initial = torch.ops.culina.linear_attention_backward(
            q, k, v, d_out, ctx.decay, ctx.scale, initial_state, d_final, cu_seqlens, need_d_initial)
    return dq, dk, dv, None, None, d_initial if need_d_initial else None, None, None


_forward_op.register_autograd(_backward_formula, setup_context=_setup_context)

