"""culina.linear_attention: argument checks, then the CPU reference or the GPU kernels."""
from __future__ import annotations

import math
import numbers
import typing

import numpy as np

from . import _C, _build, _frameworks
from .errors import UnsupportedDeviceError

MAX_HEAD_DIM = _C.MAX_HEAD_DIM
MAX_HEADS = _C.MAX_HEADS
MAX_GRID = 65535  # B*H rides on a CUDA grid dimension of this size
# cu_seqlens element type -> the `seqlen_bits` the extension takes
SEQLEN_BITS = {"int32": 32, "int64": 64}


class Dims(typing.NamedTuple):
    """The checked problem: dims (B, H, T, Dk, Dv) as the extension takes them, the number of
    packed sequences (0 without cu_seqlens) and cu_seqlens' integer width. Hashable: it keys the
    torch route's caches."""

    dims: tuple
    num_seqs: int
    seqlen_bits: int

    @property
    def states(self) -> tuple:
        """Shape of the initial and final states: [B or N, H, Dk, Dv]."""
        batch, heads, _, dk, dv = self.dims
        return (self.num_seqs or batch, heads, dk, dv)


def linear_attention(q, k, v, decay=None, *, scale=None, initial_state=None, output_final_state=False,
                     cu_seqlens=None):
    """Causal linear attention with an optional per-head decay.

    S_t = g_h * S_(t-1) + k_t^T v_t and o_t = scale * q_t S_t, with S_(-1) = initial_state
    (zeros when None).

    q, k: [B, H, T, Dk]; v: [B, H, T, Dv]; float32, float16 or bfloat16, all the same dtype,
    C-contiguous, Dk and Dv at most 256. decay: None (g = 1) or H values in (0, 1], given as
    a list, tuple or NumPy array; it is a fixed per-head constant, not a trainable parameter (no
    gradient flows to it). scale: defaults to Dk ** -0.5. initial_state: float32 [B, H, Dk, Dv] on
    the same device as q.

    cu_seqlens (packed variable-length batches, flash-linear-attention's convention): int32 or
    int64 [N + 1] on q's device, 0 = cu_seqlens[0] <= ... <= cu_seqlens[N] = total_T, with q, k
    and v [1, H, total_T, D]: sequence i is rows cu_seqlens[i]:cu_seqlens[i+1], each starts from
    its own initial state, and the states (initial and final) are [N, H, Dk, Dv]. Host arrays have
    their values checked; CUDA ones are read only by the kernels (no synchronisation).

    NumPy arrays run on the CPU reference and return NumPy. PyTorch tensors (CPU or CUDA) go
    through the custom op culina::linear_attention: differentiable with respect to q, k, v and
    initial_state (backward on the CPU reference or the GPU kernels), and traceable by
    torch.compile(fullgraph=True). CUDA arrays from CuPy or JAX run forward only. GPU calls run on
    the caller's current stream, with no copy, and return arrays of the same framework. Returns
    o [B, H, T, Dv] (v's dtype), or (o, S_T) with S_T float32 [B or N, H, Dk, Dv] when
    output_final_state is true.
    """
    if _frameworks.framework_of(q) == "torch":
        from . import _torch  # here, not at the top: culina without PyTorch never imports it

        return _torch.linear_attention(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens)
    arrays = {"q": q, "k": k, "v": v}
    if initial_state is not None:
        arrays["initial_state"] = initial_state
    if cu_seqlens is not None:
        arrays["cu_seqlens"] = cu_seqlens
    places = {name: _place(name, value) for name, value in arrays.items()}
    first = places["q"]
    for name, place in places.items():
        if place != first:
            raise ValueError(f"arrays on different devices: {name} is on {_place_name(place)} but q is "
                             f"on {_place_name(first)}; move them to one device")
    if first == "cpu":
        return _run_cpu(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens)
    return _run_gpu(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens, device=first[1])


def _place(name, value):
    """'cpu' for NumPy arrays, ('cuda', id) for CUDA DLPack arrays; anything else is refused."""
    if isinstance(value, np.ndarray):
        return "cpu"
    device = _frameworks.dlpack_device(value)
    if device is not None and device[0] == _frameworks.DLPACK_CUDA:
        return ("cuda", device[1])
    where = f" on DLPack device type {device[0]}" if device else ""
    raise TypeError(f"{name}: expected a NumPy array or a CUDA array that supports DLPack (PyTorch, "
                    f"CuPy, JAX), got {type(value).__module__}.{type(value).__name__}{where}; pass "
                    f"np.asarray({name}) for the CPU, or move it to a GPU")


def _place_name(place) -> str:
    return "cpu (NumPy)" if place == "cpu" else f"cuda:{place[1]}"


def check_shapes(shapes: dict, dtypes: dict, compact: dict) -> Dims:
    """The one owner of the argument checks every framework shares, on shapes (tuples), dtype
    names and layout (C-contiguous or not) of q, k, v and, where given, initial_state and
    cu_seqlens. Raises ValueError/TypeError naming the argument, the value and the fix."""
    for name in ("q", "k", "v"):
        if len(shapes[name]) != 4:
            want = "[B, H, T, Dv]" if name == "v" else "[B, H, T, Dk]"
            raise ValueError(f"{name}: expected 4 dimensions {want}, got shape {tuple(shapes[name])}")
    batch, heads, seq_len, dk = shapes["q"]
    if tuple(shapes["k"]) != tuple(shapes["q"]):
        raise ValueError(f"k: shape {tuple(shapes['k'])} must equal q's shape {tuple(shapes['q'])}")
    if tuple(shapes["v"][:3]) != (batch, heads, seq_len):
        raise ValueError(f"v: shape {tuple(shapes['v'])} must be [B, H, T, Dv] with B, H, T = "
                         f"{(batch, heads, seq_len)} from q")
    dv = shapes["v"][3]
    if min(batch, heads, seq_len) < 1:
        raise ValueError(f"q: B, H and T must be at least 1, got shape {tuple(shapes['q'])}")
    for name, size in (("q", dk), ("v", dv)):
        if not 1 <= size <= MAX_HEAD_DIM:
            axis = "Dv" if name == "v" else "Dk"
            raise ValueError(f"{name}: head size {axis}={size} is not supported; culina handles "
                             f"1 to {MAX_HEAD_DIM} (64 and 128 are the fast cases)")
    if heads > MAX_HEADS:
        raise ValueError(f"q: H={heads} heads is more than culina's limit of {MAX_HEADS}; split the "
                         "heads across calls")
    for name in ("q", "k", "v"):
        if dtypes[name] not in _frameworks.NUMPY_DTYPES:
            raise TypeError(f"{name}: dtype {dtypes[name]} is not supported; use float32, float16 "
                            f"or bfloat16")
    for name in ("k", "v"):
        if dtypes[name] != dtypes["q"]:
            raise TypeError(f"{name}: dtype {dtypes[name]} differs from q's {dtypes['q']}; cast all "
                            "three to one dtype")
    num_seqs, seqlen_bits = 0, 0
    if "cu_seqlens" in shapes:
        seqlens_shape, seqlens_dtype = tuple(shapes["cu_seqlens"]), dtypes["cu_seqlens"]
        if len(seqlens_shape) != 1 or seqlens_shape[0] < 2:
            raise ValueError(f"cu_seqlens: expected a 1-D array of N + 1 >= 2 offsets [0, ..., total_T], "
                             f"got shape {seqlens_shape}")
        if seqlens_dtype not in SEQLEN_BITS:
            raise TypeError(f"cu_seqlens: dtype {seqlens_dtype} is not supported; pass int32 or int64 "
                            "offsets (.to(torch.int32) / .astype(np.int32))")
        if batch != 1:
            raise ValueError(f"cu_seqlens: packed sequences need q, k and v as [1, H, total_T, D], got "
                             f"B={batch} (shape {tuple(shapes['q'])}); concatenate the batch along T "
                             "(flash-linear-attention's layout)")
        num_seqs, seqlen_bits = seqlens_shape[0] - 1, SEQLEN_BITS[seqlens_dtype]
    dims = Dims((batch, heads, seq_len, dk, dv), num_seqs, seqlen_bits)
    sequences = dims.states[0]
    if sequences * heads > MAX_GRID:
        what = f"cu_seqlens: N*H={sequences}*{heads}" if num_seqs else f"q: B*H={sequences}*{heads}"
        raise ValueError(f"{what}={sequences * heads} is more than culina's limit of {MAX_GRID} (sequence, "
                         "head) pairs; split the batch across calls")
    if "initial_state" in shapes:
        if tuple(shapes["initial_state"]) != dims.states:
            what = "[N, H, Dk, Dv] (N sequences in cu_seqlens)" if num_seqs else "[B, H, Dk, Dv]"
            raise ValueError(f"initial_state: shape {tuple(shapes['initial_state'])} must be {what} = "
                             f"{dims.states}")
        if dtypes["initial_state"] != "float32":
            raise TypeError(f"initial_state: dtype {dtypes['initial_state']} is not supported; the state "
                            "is float32 (cast it with .astype / .to(float32))")
    for name, ok in compact.items():
        if not ok:
            raise ValueError(f"{name}: non-contiguous layouts are not supported; pass a C-contiguous "
                             f"array ({name}.contiguous() in PyTorch, np.ascontiguousarray({name}))")
    return dims


def check_seqlens_values(offsets, total: int) -> None:
    """Offsets a host can read without a synchronisation: 0 first, total_T last, never falling."""
    offsets = np.asarray(offsets)
    steps = np.diff(offsets)
    if offsets[0] != 0 or offsets[-1] != total or (steps < 0).any():
        raise ValueError(f"cu_seqlens: expected offsets rising from 0 to total_T={total} (q's T), got "
                         f"{offsets.tolist()[:8]}{' ...' if offsets.size > 8 else ''}; pass the cumulative "
                         "sequence lengths with a leading 0")


def check_decay(decay, heads: int):
    """None, or the H decay values as a list of floats in (0, 1]. Plain Python, so that
    torch.compile traces it without a graph break."""
    if decay is None:
        return None
    if isinstance(decay, np.ndarray):
        if decay.ndim != 1:
            raise ValueError(f"decay: expected shape [H] = ({heads},), got {decay.shape}")
        decay = decay.tolist()
    try:
        values = [float(x) for x in decay]
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"decay: expected H={heads} host values (a list, tuple or NumPy array), got "
                        f"{type(decay).__name__} ({exc}); pass decay.tolist() or decay.cpu()") from exc
    if len(values) != heads:
        raise ValueError(f"decay: expected shape [H] = ({heads},), got ({len(values)},)")
    for head, value in enumerate(values):
        if not 0 < value <= 1:
            raise ValueError(f"decay: every value must be in (0, 1], head {head} has {value!r}; pass "
                             "per-head decay factors such as 1 - 2**-5 (None means 1)")
    return values


def check_scale(scale, dk: int) -> float:
    if scale is None:
        return dk ** -0.5
    if type(scale) is float and math.isfinite(scale):  # the common case, first: this runs on every call
        return scale
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite real number, got {scale!r} (None means Dk**-0.5)")
    return float(scale)


def _run_cpu(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens):
    arrays = {"q": q, "k": k, "v": v}
    if initial_state is not None:
        arrays["initial_state"] = initial_state
    if cu_seqlens is not None:
        arrays["cu_seqlens"] = cu_seqlens
    problem = check_shapes({n: a.shape for n, a in arrays.items()}, {n: a.dtype.name for n, a in arrays.items()},
                           {n: a.flags.c_contiguous for n, a in arrays.items()})
    if cu_seqlens is not None:
        check_seqlens_values(cu_seqlens, problem.dims[2])
    decay_values = check_decay(decay, problem.dims[1])
    scale_value = check_scale(scale, problem.dims[3])
    out = np.empty((*problem.dims[:3], problem.dims[4]), dtype=v.dtype)
    final = np.empty(problem.states, dtype=np.float32) if output_final_state else None
    _C.cpu_forward(q.ctypes.data, k.ctypes.data, v.ctypes.data, out.ctypes.data,
                   initial_state.ctypes.data if initial_state is not None else 0,
                   final.ctypes.data if final is not None else 0,
                   problem.dims, _frameworks.NUMPY_DTYPES[q.dtype.name], scale_value, decay_values,
                   cu_seqlens=cu_seqlens.ctypes.data if cu_seqlens is not None else 0,
                   num_seqs=problem.num_seqs, seqlen_bits=problem.seqlen_bits)
    return (out, final) if output_final_state else out


_ready_devices: set = set()


def ready_device(device: int) -> None:
    """Raises UnsupportedDeviceError unless this culina can run on CUDA device `device`. CUDA's
    answer for one device puts a context on that device alone; a device found fit is remembered,
    so later calls cost a set lookup."""
    if device in _ready_devices:
        return
    if not _C.built_with_cuda():
        raise _unsupported(device, "this culina was built without CUDA (no nvcc at build time)")
    driver_problem = _build.driver_problem(_C.driver_version())
    if driver_problem:
        raise UnsupportedDeviceError(driver_problem)
    support = _device_support(device)
    if not support["supported"]:
        raise _unsupported(device, support["error"])
    _ready_devices.add(device)


def _device_support(device: int) -> dict:
    count = _C.device_count()
    if not 0 <= device < count:
        raise UnsupportedDeviceError(f"CUDA device {device} is not visible to culina (CUDA sees "
                                     f"{count} device(s)); check CUDA_VISIBLE_DEVICES")
    return _C.device(device)


def _unsupported(device: int, detail: str) -> UnsupportedDeviceError:
    record = _build.build_record()
    if not _C.built_with_cuda():
        return UnsupportedDeviceError(detail)
    info = _device_support(device)
    cap = info["capability"]
    return UnsupportedDeviceError(
        f"culina has no code for GPU {device} '{info['name']}' (compute capability {cap[0]}.{cap[1]}): "
        f"this binary holds {_build.describe_archs(record)} (build: {record.get('kind')}, "
        f"{record.get('variant')}, compiled list {_C.compiled_arch_list()}); CUDA says: {detail}. "
        f"To fix, {_build.how_to_fit(cap)}")


def launch_gpu(entry, device: int, *args, **kwargs):
    """Calls a GPU entry point of the extension, turning its UnsupportedDevice into culina's error."""
    try:
        entry(*args, **kwargs)
    except _C.UnsupportedDevice as exc:
        raise _unsupported(device, str(exc)) from None


def _run_gpu(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens, device: int):
    ready_device(device)
    framework = _frameworks.framework_of(q)
    with _frameworks.device_scope(framework, device):
        return _launch_dlpack(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens, device,
                              framework)


def _launch_dlpack(q, k, v, decay, scale, initial_state, output_final_state, cu_seqlens, device: int,
                   framework: str):
    stream = _frameworks.current_stream(framework, device)
    named = {"q": q, "k": k, "v": v}
    if initial_state is not None:
        named["initial_state"] = initial_state
    if cu_seqlens is not None:
        named["cu_seqlens"] = cu_seqlens
    borrowed = {name: _frameworks.borrow(value, stream) for name, value in named.items()}
    frameworks = {b.framework for b in borrowed.values()}
    if len(frameworks) > 1:
        raise TypeError(f"q, k, v, initial_state and cu_seqlens must come from one framework (outputs are "
                        f"made in it), got {sorted(frameworks)}; convert with from_dlpack first")
    problem = check_shapes({n: b.shape for n, b in borrowed.items()}, {n: b.dtype for n, b in borrowed.items()},
                           {n: _frameworks.is_compact(b.shape, b.strides) for n, b in borrowed.items()})
    decay_values = check_decay(decay, problem.dims[1])
    scale_value = check_scale(scale, problem.dims[3])
    like = borrowed["q"]
    out = _frameworks.empty_like_framework(like, (*problem.dims[:3], problem.dims[4]), borrowed["v"].dtype)
    final = _frameworks.empty_like_framework(like, problem.states, "float32") if output_final_state else None
    dtype_code = _frameworks.NUMPY_DTYPES[like.dtype]
    workspace_bytes = _C.gpu_workspace_bytes(problem.dims, dtype_code, device, num_seqs=problem.num_seqs)
    workspace = (_frameworks.empty_like_framework(like, (workspace_bytes,), "uint8")
                 if workspace_bytes else None)
    workspace_view = _frameworks.borrow(workspace, stream) if workspace is not None else None
    out_view = _frameworks.borrow(out, stream)
    final_view = _frameworks.borrow(final, stream) if final is not None else None
    launch_stream = 0 if stream in (None, _frameworks.LEGACY_DEFAULT_STREAM) else stream
    address = lambda name: borrowed[name].address if name in borrowed else 0  # noqa: E731
    launch_gpu(_C.gpu_forward, device, address("q"), address("k"), address("v"), out_view.address,
               address("initial_state"), final_view.address if final_view else 0, problem.dims, dtype_code,
               scale_value, decay_values, device, launch_stream,
               workspace_view.address if workspace_view else 0, workspace_bytes,
               cu_seqlens=address("cu_seqlens"), num_seqs=problem.num_seqs, seqlen_bits=problem.seqlen_bits)
    return (out, final) if output_final_state else out
