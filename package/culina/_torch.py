"""PyTorch integration, imported only when a torch tensor reaches culina.linear_attention or
culina.chunk_simple_gla.

Two custom ops, culina::linear_attention and culina::linear_attention_backward, with fake
(meta) implementations and autograd registered, so that culina is differentiable with respect to
q, k, v, the gates (g and the per-head log decay gamma) and initial_state, and
torch.compile(fullgraph=True) traces it without a graph break. Both run on the CPU reference for
CPU tensors and on the GPU kernels for CUDA tensors, reading raw addresses and strides straight
from the tensors (no DLPack round trip, no copy of a strided view) on the caller's current
stream, with scratch memory from PyTorch's caching allocator. An eager forward that trains keeps
its workspace for the backward where the backward reads from it (the forward op's third output).

Eager calls on plain tensors skip PyTorch's dispatcher (tens of microseconds a call for an op
written in Python): straight to the implementation where no autograd is needed, through an
autograd.Function of the op's forward and formula where it is; so does an eager backward.
"""
from __future__ import annotations

import logging
from typing import List, Optional, Tuple

import numpy as np
import torch

from . import _api, _C
from .errors import ArgumentError, ArgumentTypeError

# torch dtype -> the dtype names _api.check_problem speaks (float types, cu_seqlens' integers)
DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
               torch.int32: "int32", torch.int64: "int64"}
# Checked argument layouts and decay lists of eager calls; a model makes few distinct ones.
CACHE_LIMIT = _api.CACHE_LIMIT
_problems: dict = {}
_decays: dict = {}
_workspaces: dict = {}
TORCH_DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}
logger = logging.getLogger("culina")
# (input dtype, compute dtype, precision) roundings already logged: each is logged once.
_logged_roundings: set = set()


def linear_attention(q, k, v, decay, g, scale, initial_state, output_final_state, cu_seqlens, layout):
    """culina.linear_attention for torch tensors (the public docstring describes it)."""
    state_shape = initial_state.shape if isinstance(initial_state, torch.Tensor) else None
    layout = _api.resolve_layout(layout, q.shape, _api.layout_pins(decay, state_shape), _host_total(cu_seqlens))
    gamma = None
    if isinstance(decay, torch.Tensor):
        gamma, decay = log_decay("decay", decay, heads_of(q, layout), q), None
    out, final = run(q, k, v, decay, gamma, g, scale, initial_state, output_final_state, cu_seqlens, layout)
    return (out, final) if output_final_state else out


def heads_of(q, layout: str) -> int:
    return q.shape[_api.AXES[layout][1]] if q.dim() == 4 else 0


def _host_total(cu_seqlens):
    """For resolve_layout: a reader of the total T of offsets on the host, where reading it is
    free (eager, CPU); None elsewhere (a CUDA read would synchronise, a traced one would guard on
    data)."""
    if type(cu_seqlens) is torch.Tensor and cu_seqlens.device.type == "cpu" and cu_seqlens.dim() == 1 \
            and cu_seqlens.numel() and eager():
        return lambda: int(cu_seqlens[-1])
    return None


def log_decay(name: str, decay: torch.Tensor, heads: int, q) -> torch.Tensor:
    """A per-head decay tensor [H] as the float32 natural logarithm the kernels read; autograd
    carries the gradient back through the logarithm. The values are not checked: reading them
    would synchronise (and guard on data under torch.compile)."""
    if decay.dim() != 1 or decay.shape[0] != heads:
        raise ArgumentError(f"{name}: expected a tensor [H] = ({heads},), got shape {tuple(decay.shape)}",
                            "per-token forget gates go in g= (natural logarithms)")
    if not decay.is_floating_point():
        raise ArgumentTypeError(f"{name}: dtype {decay.dtype} is not supported", "pass a floating-point tensor")
    if decay.device != q.device:
        raise ArgumentError(f"arrays on different devices: {name} is on {decay.device} but q is on {q.device}",
                            f"pass {name}.to(q.device) (or {name}.tolist() for fixed values)")
    return decay.log().to(torch.float32)


def run(q, k, v, decay, gamma, g, scale, initial_state, output_final_state, cu_seqlens, layout):
    """(o, S_T or None) through the direct route or the op; decay is host values or None, gamma
    the per-head log decay tensor or None, layout resolved."""
    route = _route(q, k, v, gamma, g, initial_state, cu_seqlens)
    heads = heads_of(q, layout)
    scale_value = _api.check_scale(scale, q.shape[-1])
    if route is DIRECT:
        out, final, _ = forward(q, k, v, _cached_decay(decay, heads), gamma, g, scale_value, initial_state,
                                cu_seqlens, output_final_state, layout)
        return out, final
    if route is FUNCTION:
        out, final = _EagerAutograd.apply(q, k, v, _cached_decay(decay, heads), gamma, g, scale_value, initial_state,
                                          cu_seqlens, output_final_state, layout)
        return out, final if output_final_state else None
    # A call that trains keeps the forward's workspace for the backward (_kept_bytes), but not
    # while torch.compile traces: the size follows the kernels' plan, not a formula in the shape,
    # so a traced graph with dynamic shapes could not know it.
    keep = (not torch.compiler.is_compiling() and torch.is_grad_enabled()
            and any(x is not None and x.requires_grad for x in (q, k, v, gamma, g, initial_state)))
    out, final, _ = torch.ops.culina.linear_attention(q, k, v, _api.check_decay(decay, heads), gamma, g, scale_value,
                                                      initial_state, cu_seqlens, output_final_state, layout, keep)
    return out, final if output_final_state else None


# How a call reaches the kernels. PyTorch's dispatcher costs tens of microseconds a call for an op
# written in Python, so eager calls on plain tensors skip it: straight to the kernels where no
# autograd is needed, through an autograd.Function of the same forward and backward where it is
# (a forward+backward pays 45 against the op's 125 us of host time, BENCHMARKS.md). torch.compile,
# tensor subclasses, functorch transforms and dispatch modes see the op.
DIRECT, FUNCTION, DISPATCHER = "direct", "function", "dispatcher"


def _route(q, k, v, gamma, g, initial_state, cu_seqlens) -> str:
    """The dispatcher while torch.compile traces, or where a tensor subclass (fake, functional,
    DTensor, ...), a functorch transform (vmap, grad) or a dispatch mode must see the call; the
    autograd.Function where autograd must (an input that requires grad); else direct. Raises for
    an argument that is no tensor. Written out test by test: this runs on every eager call."""
    tensor = torch.Tensor
    if not (type(q) is tensor and type(k) is tensor and type(v) is tensor
            and (gamma is None or type(gamma) is tensor) and (g is None or type(g) is tensor)
            and (initial_state is None or type(initial_state) is tensor)
            and (cu_seqlens is None or type(cu_seqlens) is tensor)):
        for name, value in (("k", k), ("v", v), ("gamma", gamma), ("g", g), ("initial_state", initial_state),
                            ("cu_seqlens", cu_seqlens)):
            if value is not None and not isinstance(value, tensor):
                raise _not_a_tensor(name, value, q)
        return DISPATCHER
    if not eager():
        return DISPATCHER
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                    or (gamma is not None and gamma.requires_grad)
                                    or (g is not None and g.requires_grad)
                                    or (initial_state is not None and initial_state.requires_grad)):
        return FUNCTION
    return DIRECT


def eager() -> bool:
    """No torch.compile tracing, functorch transform or dispatch mode active."""
    return not (torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()
                or torch._C._len_torch_dispatch_stack())


def _not_a_tensor(name: str, value, q) -> Exception:
    if isinstance(value, np.ndarray) and q.device.type != "cpu":
        return ArgumentError(f"arrays on different devices: {name} is on cpu (NumPy) but q is on {q.device}",
                             f"move them to one device ({name} = torch.from_numpy({name}).to(q.device))")
    return ArgumentTypeError(f"{name}: expected a torch.Tensor like q, got "
                             f"{type(value).__module__}.{type(value).__name__}",
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


def problem_of(q, k, v, gamma, g, initial_state, cu_seqlens, layout: str) -> _api.Problem:
    """_api.check_problem on torch tensors, after checking they share q's device."""
    named = {"q": q, "k": k, "v": v}
    for name, tensor in (("gamma", gamma), ("g", g), ("initial_state", initial_state), ("cu_seqlens", cu_seqlens)):
        if tensor is not None:
            named[name] = tensor
    for name, tensor in named.items():
        if not isinstance(tensor, torch.Tensor):
            raise _not_a_tensor(name, tensor, q)
        if tensor.device != q.device:
            raise ArgumentError(f"arrays on different devices: {name} is on {tensor.device} but q is on {q.device}",
                                "move them to one device")
    if q.device.type not in ("cpu", "cuda", "meta"):
        raise ArgumentTypeError(f"q: PyTorch tensors on {q.device} are not supported",
                                "culina runs CPU and CUDA tensors (q.cpu() or q.cuda())")
    return _api.check_problem(
        {n: _api.Operand(tuple(t.shape), tuple(t.stride()), DTYPE_NAMES.get(t.dtype, str(t.dtype).removeprefix("torch.")))
         for n, t in named.items()}, layout)


def _meta(tensor):
    return None if tensor is None else (tensor.shape, tensor.stride(), tensor.dtype, tensor.device)


def _cached_problem(q, k, v, gamma, g, initial_state, cu_seqlens, layout: str, compute: torch.dtype) -> _api.Problem:
    """problem_of's answer, computed in `compute` (compute_dtype's), from a cache keyed by the
    arguments' shapes, strides, dtypes and devices."""
    key = (layout, compute, _meta(q), _meta(k), _meta(v), _meta(gamma), _meta(g), _meta(initial_state),
           _meta(cu_seqlens))
    problem = _problems.get(key)
    if problem is None:
        problem = problem_of(q, k, v, gamma, g, initial_state, cu_seqlens, layout)
        problem = problem._replace(compute=DTYPE_NAMES.get(compute, problem.compute))
        if len(_problems) >= CACHE_LIMIT:
            _problems.clear()
        _problems[key] = problem
    return problem


def _workspace_bytes(size_of, problem: _api.Problem, device: torch.device) -> int:
    """What a query (_C.forward_workspace_bytes, ...) answers for the problem on the device, asked
    once per problem and kernel switch: the families plan apart (the Hopper walk at D64 in fewer
    segments), and a workspace too small for the portable plan sent the pass to the generic kernel
    (25x slower) after _C.set_arch_specific_kernels turned the Hopper family off."""
    key = (size_of, problem, device.index, _C.arch_specific_kernels())
    size = _workspaces.get(key)
    if size is None:
        size = size_of(_api.describe(problem), device.index)
        if len(_workspaces) >= CACHE_LIMIT:
            _workspaces.clear()
        _workspaces[key] = size
    return size


def _kept_bytes(problem: _api.Problem, q) -> int:
    """The workspace a forward that trains keeps for its backward (_C.kept_workspace_bytes; 0:
    none). Only for 16-bit inputs on a CUDA device, whose kernels run in their own dtype: the op's
    fake, which cannot ask compute_dtype while torch.compile traces, answers as the op does."""
    if not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16):
        return 0
    if not all(type(size) is int for size in (*problem.dims, problem.num_seqs, *sum(problem.strides, ()))):
        raise ArgumentError(f"keep_for_backward: the kept workspace's size follows the kernels' plan, which a symbolic "
                            f"shape does not fix (dims {problem.dims})", "pass keep_for_backward=False while tracing")
    _api.ready_device(q.device.index)
    return _workspace_bytes(_C.kept_workspace_bytes, problem, q.device)


def _address(tensor) -> int:
    return 0 if tensor is None else tensor.data_ptr()


def _launch(entry, workspace_size_of, problem: _api.Problem, q, cu_seqlens, call: dict,
            keep_for_backward: bool = False) -> Optional[torch.Tensor]:
    """Runs an extension entry point (_C.forward or _C.backward) through _api.launch with `call`,
    the call's values by name, completed here for q's device: cu_seqlens, and on a CUDA device
    the device, its current stream and a workspace from PyTorch's caching allocator (host offsets
    have their values checked first: _api.check_seqlens_values). keep_for_backward (the forward
    of a call that trains): where the backward can use it (_C.kept_workspace_bytes), a workspace
    the forward leaves what the backward's dq pass reads in (_kept_bytes), returned for the
    backward; else None."""
    call["cu_seqlens"] = _address(cu_seqlens)
    workspace = kept_size = None
    if q.is_cuda:
        device = q.device
        _api.ready_device(device.index)
        kept_size = _kept_bytes(problem, q) if keep_for_backward else 0
        size = kept_size or _workspace_bytes(workspace_size_of, problem, device)
        workspace = torch.empty(size, dtype=torch.uint8, device=device) if size else None
        if kept_size:
            call["keep_for_backward"] = True
        call.update(device=device.index, stream=torch._C._cuda_getCurrentRawStream(device.index),
                    workspace=_address(workspace), workspace_bytes=size)
    elif cu_seqlens is not None:
        _api.check_seqlens_values(cu_seqlens.numpy(), problem.dims[2])
    _api.launch(entry, problem, call)
    return workspace if kept_size else None


def compute_dtype(q, k, v) -> torch.dtype:
    """The dtype the kernels multiply q, k and v in, as _api.compute_dtype decides it from their
    dtype, q's device and torch.get_float32_matmul_precision() now. Asked by forward and by
    backward when they run, never while torch.compile traces (it could not read the setting
    there, and a compiled graph would keep a stale answer), so each pass follows the setting in
    force when it runs, as PyTorch's own matmuls do. Mixed or unsupported dtypes are left as
    they are for check_problem to name. A rounding is logged (debug, once per setting). Only
    CPU and CUDA tensors reach here (fake and meta ones take the fake kernels), and is_cuda
    costs a sixth of device.type: this runs on every pass."""
    dtype = q.dtype
    name = DTYPE_NAMES.get(dtype)
    if name is None or k.dtype is not dtype or v.dtype is not dtype:
        return dtype
    precision = torch.get_float32_matmul_precision()
    decided = _api.compute_dtype(name, "cuda" if q.is_cuda else "cpu", precision)
    if decided != name and (name, decided, precision) not in _logged_roundings:
        _logged_roundings.add((name, decided, precision))
        logger.debug("culina: %s %s inputs run on the %s kernels (q, k and v rounded; gates, states and o stay "
                     "%s), as torch.get_float32_matmul_precision() is %r", name, q.device.type, decided, name,
                     precision)
    return TORCH_DTYPES[decided]


def forward(q, k, v, decay: Optional[List[float]], gamma: Optional[torch.Tensor], g: Optional[torch.Tensor],
            scale: float, initial_state: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor],
            output_final_state: bool, layout: str, keep_for_backward: bool = False):
    """The forward on real tensors: o (C-contiguous in the layout, in v's dtype), S_T (None
    unless output_final_state) and, with keep_for_backward, the workspace to hand backward
    (`kept`, where the backward reads from it; else None), computed in compute_dtype's answer
    (float32 rows in bfloat16: the kernels round q, k and v as they load them and o's values as
    they store them)."""
    problem = _cached_problem(q, k, v, gamma, g, initial_state, cu_seqlens, layout, compute_dtype(q, k, v))
    out = torch.empty(problem.shape(problem.dims[4]), dtype=v.dtype, device=q.device)
    final = torch.empty(problem.states, dtype=torch.float32, device=q.device) if output_final_state else None
    kept = _launch(_C.forward, _C.forward_workspace_bytes, problem, q, cu_seqlens,
                   {"q": q.data_ptr(), "k": k.data_ptr(), "v": v.data_ptr(), "out": out.data_ptr(),
                    "initial_state": _address(initial_state), "final_state": _address(final),
                    "gamma": _address(gamma), "g": _address(g), "scale": scale, "decay": decay},
                   keep_for_backward)
    return out, final, kept


def backward(q, k, v, d_out, decay: Optional[List[float]], gamma: Optional[torch.Tensor], g: Optional[torch.Tensor],
             scale: float, initial_state: Optional[torch.Tensor], d_final_state: Optional[torch.Tensor],
             cu_seqlens: Optional[torch.Tensor], need_d_initial_state: bool, layout: str,
             need_d_g: bool = False, need_d_gamma: bool = False, gate_ends: Optional[torch.Tensor] = None,
             kept: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, ...]:
    """dq, dk, dv (C-contiguous in the layout), dS0, dg and dgamma on real tensors; `kept`: what
    the forward kept for it (forward's keep_for_backward; empty or None: nothing), untouched since.
    The gates' gradients come from the extension (common/problem.h: Gradients::d_gates): dg in
    g's shape (float32), dgamma float64 per head, with `gate_ends` (float64 [sequences, H], or
    None) the final state's term <dS_T, S_T>. As the op returns tensors only, those not asked for
    are empty tensors. Computed in compute_dtype's answer, as the forward is; where that rounds,
    q, k, v and do are rounded here, once, and dq, dk and dv brought back: each of the three
    passes reads three of them again, and rounding at every load was slower (BENCHMARKS.md)."""
    input_dtype = q.dtype
    compute = compute_dtype(q, k, v)
    rounded = compute is not input_dtype
    if rounded:
        q, k, v, d_out = q.to(compute), k.to(compute), v.to(compute), d_out.to(compute)
    problem = _cached_problem(q, k, v, gamma, g, initial_state, cu_seqlens, layout, compute)
    d_out = _gradient_rows(d_out, problem)
    if d_final_state is not None and (tuple(d_final_state.shape) != problem.states
                                      or d_final_state.dtype != torch.float32 or not d_final_state.is_contiguous()):
        raise ArgumentError(f"d_final_state: expected a contiguous float32 tensor of shape {problem.states}, got "
                            f"{d_final_state.dtype} {tuple(d_final_state.shape)}",
                            "pass the final state's gradient as float32 .contiguous()")
    if gate_ends is not None and (tuple(gate_ends.shape) != problem.states[:2] or gate_ends.dtype != torch.float64
                                  or gate_ends.device != q.device or not gate_ends.is_contiguous()):
        raise ArgumentError(f"gate_ends: expected a contiguous float64 tensor of shape {problem.states[:2]} on "
                            f"{q.device}, got {gate_ends.dtype} {tuple(gate_ends.shape)} on {gate_ends.device}",
                            "pass <dS_T, S_T> per sequence and head: (d_final.double() * final).sum((-2, -1))")
    kept = kept if kept is not None and kept.numel() else None
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=q.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=q.device)
    d_initial = torch.empty(problem.states if need_d_initial_state else (0,), dtype=torch.float32, device=q.device)
    d_g = torch.empty(g.shape if need_d_g else (0,), dtype=torch.float32, device=q.device)
    d_gamma = torch.empty((problem.dims[1],) if need_d_gamma else (0,), dtype=torch.float64, device=q.device)
    call = {"q": q.data_ptr(), "k": k.data_ptr(), "v": v.data_ptr(), "do": d_out.data_ptr(),
            "do_strides": _api.rows_strides(d_out.stride(), layout), "initial_state": _address(initial_state),
            "d_final_state": _address(d_final_state), "dq": dq.data_ptr(), "dk": dk.data_ptr(), "dv": dv.data_ptr(),
            "d_initial_state": d_initial.data_ptr() if need_d_initial_state else 0, "gamma": _address(gamma),
            "g": _address(g), "scale": scale, "decay": decay, "kept": _address(kept),
            "kept_bytes": 0 if kept is None else kept.numel()}
    if need_d_g or need_d_gamma:
        # The passes' q_t.dq_t - k_t.dk_t per token, [B, H, T] in either layout; zeroed: both
        # passes add their terms. The extension sums them into dg and dgamma.
        gate_dots = torch.zeros(problem.dims[:3], dtype=torch.float32, device=q.device)
        call.update(gate_dots=gate_dots.data_ptr(), d_g=d_g.data_ptr() if need_d_g else 0,
                    d_gamma=d_gamma.data_ptr() if need_d_gamma else 0, gate_ends=_address(gate_ends))
        if need_d_g:
            call["d_g_strides"] = _api.rows_strides(d_g.stride(), layout)
    _launch(_C.backward, _C.backward_workspace_bytes, problem, q, cu_seqlens, call)
    if rounded:
        dq, dk, dv = dq.to(input_dtype), dk.to(input_dtype), dv.to(input_dtype)
    return dq, dk, dv, d_initial, d_g, d_gamma


def _gradient_rows(d_out, problem: _api.Problem):
    """The gradient of o, read in place where its feature axis has stride 1 (an expanded
    gradient, such as sum()'s, is made contiguous)."""
    shape = problem.shape(problem.dims[4])
    if tuple(d_out.shape) != shape:
        raise ArgumentError(f"do: shape {tuple(d_out.shape)} must be o's shape {shape}",
                            "pass the gradient of o as the forward returned it")
    return d_out if d_out.stride(-1) == 1 or shape[-1] == 1 else d_out.contiguous()


def cumulative_sum(x: torch.Tensor) -> torch.Tensor:
    """Inclusive cumulative sums of x along its last axis, in float64.

    One 1-D scan of the rows laid end to end, less the total before each row: PyTorch's CUDA
    cumsum scans a lone axis device-wide (CUB), but along an outer axis gives each column one
    thread. On the H100 the log gates of a context-parallel shard, [1, 131072, 16] summed over
    the tokens, took 46 ms through g.cumsum(1) and 0.125 ms here (BENCHMARKS.md). On CUDA the
    last bits are not reproducible from run to run (CUB's scan), as with PyTorch's cumsum, unless
    torch.use_deterministic_algorithms is on; the error is about 1e-16 of the running total."""
    if x.numel() == 0:
        return x.double()
    rows = x.double().reshape(-1, x.shape[-1])
    through = rows.reshape(-1).cumsum(0).view_as(rows)
    return (through - torch.cat([through.new_zeros(1), through[:-1, -1]]).unsqueeze(1)).view(x.shape)


def _forward_outputs(q, k, v, decay, gamma, g, scale, initial_state, cu_seqlens, output_final_state, layout,
                     keep_for_backward):
    """The op's outputs: o, S_T and what the forward keeps for the backward (forward's
    keep_for_backward). An op returns tensors only: an S_T nobody asked for, and nothing kept,
    are empty ones."""
    out, final, kept = forward(q, k, v, decay, gamma, g, scale, initial_state, cu_seqlens, output_final_state, layout,
                               keep_for_backward)
    return (out, final if final is not None else q.new_empty((0,), dtype=torch.float32),
            kept if kept is not None else q.new_empty((0,), dtype=torch.uint8))


@torch.library.custom_op("culina::linear_attention", mutates_args=())
def _forward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: Optional[List[float]],
                gamma: Optional[torch.Tensor], g: Optional[torch.Tensor], scale: float,
                initial_state: Optional[torch.Tensor], cu_seqlens: Optional[torch.Tensor], output_final_state: bool,
                layout: str, keep_for_backward: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _forward_outputs(q, k, v, decay, gamma, g, scale, initial_state, cu_seqlens, output_final_state, layout,
                            keep_for_backward)


@_forward_op.register_fake
def _forward_fake(q, k, v, decay, gamma, g, scale, initial_state, cu_seqlens, output_final_state, layout,
                  keep_for_backward=False):
    problem = problem_of(q, k, v, gamma, g, initial_state, cu_seqlens, layout)
    kept = _kept_bytes(problem, q) if keep_for_backward else 0
    return (q.new_empty(problem.shape(problem.dims[4]), dtype=v.dtype),
            q.new_empty(problem.states if output_final_state else (0,), dtype=torch.float32),
            q.new_empty((kept,), dtype=torch.uint8))


@torch.library.custom_op("culina::linear_attention_backward", mutates_args=())
def _backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d_out: torch.Tensor,
                 decay: Optional[List[float]], gamma: Optional[torch.Tensor], g: Optional[torch.Tensor],
                 scale: float, initial_state: Optional[torch.Tensor], d_final_state: Optional[torch.Tensor],
                 cu_seqlens: Optional[torch.Tensor], need_d_initial_state: bool, layout: str,
                 need_d_g: bool = False, need_d_gamma: bool = False, gate_ends: Optional[torch.Tensor] = None,
                 kept: Optional[torch.Tensor] = None
                 ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return backward(q, k, v, d_out, decay, gamma, g, scale, initial_state, d_final_state, cu_seqlens,
                    need_d_initial_state, layout, need_d_g, need_d_gamma, gate_ends, kept)


@_backward_op.register_fake
def _backward_fake(q, k, v, d_out, decay, gamma, g, scale, initial_state, d_final_state, cu_seqlens,
                   need_d_initial_state, layout, need_d_g=False, need_d_gamma=False, gate_ends=None, kept=None):
    problem = problem_of(q, k, v, gamma, g, initial_state, cu_seqlens, layout)
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            q.new_empty(problem.states if need_d_initial_state else (0,), dtype=torch.float32),
            q.new_empty(g.shape if need_d_g else (0,), dtype=torch.float32),
            q.new_empty((problem.dims[1],) if need_d_gamma else (0,), dtype=torch.float64))


# The op's inputs, by position, as autograd's needs_input_grad lists them.
GAMMA, GATES, INITIAL_STATE = 4, 5, 7


def _setup_context(ctx, inputs, output):
    q, k, v, decay, gamma, g, scale, initial_state, cu_seqlens, output_final_state, layout, _ = inputs
    # The gates' gradient has a term in S_T where S_T has a gradient of its own.
    gated_final = output[1] if output_final_state and (gamma is not None or g is not None) else None
    # What the forward kept for the backward, saved as it is (empty where nothing: backward()
    # tells, on real tensors).
    ctx.save_for_backward(q, k, v, gamma, g, initial_state, cu_seqlens, gated_final, output[2])
    ctx.decay, ctx.scale, ctx.layout = decay, scale, layout


def _backward_formula(ctx, d_out, d_final, _d_kept=None):
    q, k, v, gamma, g, initial_state, cu_seqlens, final, kept = ctx.saved_tensors
    # An unused S_T (or one never asked for, an empty tensor) adds nothing to the gradients.
    d_final = d_final.contiguous() if d_final is not None and d_final.numel() else None
    d_out = torch.zeros(v.shape, dtype=v.dtype, device=v.device) if d_out is None else d_out
    need_d_initial = initial_state is not None and ctx.needs_input_grad[INITIAL_STATE]
    need_d_g, need_d_gamma = ctx.needs_input_grad[GATES], ctx.needs_input_grad[GAMMA]
    # The gates' gradient has a term in S_T where S_T has a gradient: every cumulative gate of a
    # sequence scales its final state, so each of its tokens gets <dS_T, S_T>. [sequences, H]
    gate_ends = ((d_final.double() * final).sum((-2, -1)) if (need_d_g or need_d_gamma) and final is not None
                 and d_final is not None else None)
    # Eager backward on plain tensors skips the dispatcher, as the forward does.
    tensors = (q, k, v, d_out, gamma, g, initial_state, d_final, cu_seqlens, gate_ends)
    if eager() and all(t is None or type(t) is torch.Tensor for t in tensors):
        dq, dk, dv, d_initial, d_g, d_gamma = backward(q, k, v, d_out, ctx.decay, gamma, g, ctx.scale, initial_state,
                                                       d_final, cu_seqlens, need_d_initial, ctx.layout, need_d_g,
                                                       need_d_gamma, gate_ends, kept)
    else:
        dq, dk, dv, d_initial, d_g, d_gamma = torch.ops.culina.linear_attention_backward(
            q, k, v, d_out, ctx.decay, gamma, g, ctx.scale, initial_state, d_final, cu_seqlens, need_d_initial,
            ctx.layout, need_d_g, need_d_gamma, gate_ends, kept)
    return (dq, dk, dv, None, d_gamma.to(gamma.dtype) if need_d_gamma else None, d_g if need_d_g else None, None,
            d_initial if need_d_initial else None, None, None, None, None)


_forward_op.register_autograd(_backward_formula, setup_context=_setup_context)


class _EagerAutograd(torch.autograd.Function):
    """The op's forward and autograd formula, for eager calls on plain tensors (_route)."""

    @staticmethod
    def forward(ctx, q, k, v, decay, gamma, g, scale, initial_state, cu_seqlens, output_final_state, layout):
        inputs = (q, k, v, decay, gamma, g, scale, initial_state, cu_seqlens, output_final_state, layout, True)
        output = _forward_outputs(*inputs)
        _setup_context(ctx, inputs, output)
        return output[:2]

    backward = staticmethod(_backward_formula)
