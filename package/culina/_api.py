"""culina.linear_attention: argument checks, then the CPU reference or the GPU kernels."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _C, _build, _frameworks
from .errors import UnsupportedDeviceError

MAX_HEAD_DIM = _C.MAX_HEAD_DIM
MAX_HEADS = _C.MAX_HEADS
MAX_GRID = 65535  # B*H rides on a CUDA grid dimension of this size


def linear_attention(q, k, v, decay=None, *, scale=None, initial_state=None, output_final_state=False):
    """Causal linear attention with an optional per-head decay.

    S_t = g_h * S_(t-1) + k_t^T v_t and o_t = scale * q_t S_t, with S_0 = initial_state (zeros
    when None).

    q, k: [B, H, T, Dk]; v: [B, H, T, Dv]; float32, float16 or bfloat16, all the same dtype,
    C-contiguous, Dk and Dv at most 256. decay: None (g = 1) or H values in (0, 1], given as
    a list, tuple or NumPy array. scale: defaults to Dk ** -0.5. initial_state: float32
    [B, H, Dk, Dv] on the same device as q.

    NumPy arrays run on the CPU reference and return NumPy. CUDA arrays from PyTorch, CuPy
    or JAX run on their GPU on the caller's current stream, with no copy, and return arrays of
    the same framework. Returns o [B, H, T, Dv] (v's dtype), or (o, S_T) with S_T float32
    [B, H, Dk, Dv] when output_final_state is true.
    """
    arrays = {"q": q, "k": k, "v": v}
    if initial_state is not None:
        arrays["initial_state"] = initial_state
    places = {name: _place(name, value) for name, value in arrays.items()}
    first = places["q"]
    for name, place in places.items():
        if place != first:
            raise ValueError(f"arrays on different devices: {name} is on {_place_name(place)} but q is "
                             f"on {_place_name(first)}; move them to one device")
    if first == "cpu":
        return _run_cpu(q, k, v, decay, scale, initial_state, output_final_state)
    return _run_gpu(q, k, v, decay, scale, initial_state, output_final_state, device=first[1])


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


def _check_shapes(shapes: dict, dtypes: dict, compact: dict, state: tuple | None):
    """Shared checks on shapes (tuples), dtype names and layout; returns (B, H, T, Dk, Dv)."""
    for name, shape in shapes.items():
        if len(shape) != 4:
            want = "[B, H, T, Dv]" if name == "v" else "[B, H, T, Dk]"
            raise ValueError(f"{name}: expected 4 dimensions {want}, got shape {tuple(shape)}")
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
    if batch * heads > MAX_GRID:
        raise ValueError(f"q: B*H={batch * heads} is more than culina's limit of {MAX_GRID}; split "
                         "the batch across calls")
    for name in ("q", "k", "v"):
        if dtypes[name] not in _frameworks.NUMPY_DTYPES:
            raise TypeError(f"{name}: dtype {dtypes[name]} is not supported; use float32, float16 "
                            f"or bfloat16")
    for name in ("k", "v"):
        if dtypes[name] != dtypes["q"]:
            raise TypeError(f"{name}: dtype {dtypes[name]} differs from q's {dtypes['q']}; cast all "
                            "three to one dtype")
    if state is not None:
        state_shape, state_dtype = state
        if tuple(state_shape) != (batch, heads, dk, dv):
            raise ValueError(f"initial_state: shape {tuple(state_shape)} must be [B, H, Dk, Dv] = "
                             f"{(batch, heads, dk, dv)}")
        if state_dtype != "float32":
            raise TypeError(f"initial_state: dtype {state_dtype} is not supported; the state is "
                            "float32 (cast it with .astype / .to(float32))")
    for name, ok in compact.items():
        if not ok:
            raise ValueError(f"{name}: non-contiguous layouts are not supported; pass a C-contiguous "
                             f"array ({name}.contiguous() in PyTorch, np.ascontiguousarray({name}))")
    return batch, heads, seq_len, dk, dv


def _check_decay(decay, heads: int):
    if decay is None:
        return None
    try:
        values = np.asarray(decay, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"decay: expected H={heads} host values (a list, tuple or NumPy array), got "
                        f"{type(decay).__name__} ({exc}); pass decay.tolist() or decay.cpu()") from exc
    if values.shape != (heads,):
        raise ValueError(f"decay: expected shape [H] = ({heads},), got {values.shape}")
    bad = ~((values > 0) & (values <= 1))
    if bad.any():
        head = int(np.argmax(bad))
        raise ValueError(f"decay: every value must be in (0, 1], head {head} has {values[head]!r}; "
                         "pass per-head decay factors such as 1 - 2**-5 (None means 1)")
    return [float(x) for x in values]


def _check_scale(scale, dk: int) -> float:
    if scale is None:
        return dk ** -0.5
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite real number, got {scale!r} (None means Dk**-0.5)")
    return float(scale)


def _run_cpu(q, k, v, decay, scale, initial_state, output_final_state):
    arrays = {"q": q, "k": k, "v": v}
    if initial_state is not None:
        arrays["initial_state"] = initial_state
    state = (initial_state.shape, initial_state.dtype.name) if initial_state is not None else None
    batch, heads, seq_len, dk, dv = _check_shapes(
        {n: a.shape for n, a in arrays.items() if n != "initial_state"},
        {n: a.dtype.name for n, a in arrays.items()},
        {n: a.flags.c_contiguous for n, a in arrays.items()}, state)
    decay_values = _check_decay(decay, heads)
    scale_value = _check_scale(scale, dk)
    out = np.empty((batch, heads, seq_len, dv), dtype=v.dtype)
    final = np.empty((batch, heads, dk, dv), dtype=np.float32) if output_final_state else None
    _C.cpu_forward(q.ctypes.data, k.ctypes.data, v.ctypes.data, out.ctypes.data,
                   initial_state.ctypes.data if initial_state is not None else 0,
                   final.ctypes.data if final is not None else 0,
                   [batch, heads, seq_len, dk, dv], _frameworks.NUMPY_DTYPES[q.dtype.name],
                   scale_value, decay_values)
    return (out, final) if output_final_state else out


def _device_support(device: int) -> dict:
    """CUDA's answer for one device: asking puts a context on that device alone (the extension
    remembers the answer, so later calls cost nothing)."""
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


def _run_gpu(q, k, v, decay, scale, initial_state, output_final_state, device: int):
    if not _C.built_with_cuda():
        raise _unsupported(device, "this culina was built without CUDA (no nvcc at build time)")
    driver_problem = _build.driver_problem(_C.driver_version())
    if driver_problem:
        raise UnsupportedDeviceError(driver_problem)
    support = _device_support(device)
    if not support["supported"]:
        raise _unsupported(device, support["error"])
    framework = _frameworks.framework_of(q)
    with _frameworks.device_scope(framework, device):
        return _launch_gpu(q, k, v, decay, scale, initial_state, output_final_state, device, framework)


def _launch_gpu(q, k, v, decay, scale, initial_state, output_final_state, device: int, framework: str):
    stream = _frameworks.current_stream(framework, device)
    named = {"q": q, "k": k, "v": v}
    if initial_state is not None:
        named["initial_state"] = initial_state
    borrowed = {name: _frameworks.borrow(value, stream) for name, value in named.items()}
    frameworks = {b.framework for b in borrowed.values()}
    if len(frameworks) > 1:
        raise TypeError(f"q, k, v and initial_state must come from one framework (outputs are made "
                        f"in it), got {sorted(frameworks)}; convert with from_dlpack first")
    state = borrowed.get("initial_state")
    batch, heads, seq_len, dk, dv = _check_shapes(
        {n: b.shape for n, b in borrowed.items() if n != "initial_state"},
        {n: b.dtype for n, b in borrowed.items()},
        {n: _frameworks.is_compact(b.shape, b.strides) for n, b in borrowed.items()},
        (state.shape, state.dtype) if state else None)
    decay_values = _check_decay(decay, heads)
    scale_value = _check_scale(scale, dk)
    like = borrowed["q"]
    out = _frameworks.empty_like_framework(like, (batch, heads, seq_len, dv), borrowed["v"].dtype)
    final = (_frameworks.empty_like_framework(like, (batch, heads, dk, dv), "float32")
             if output_final_state else None)
    dtype_code = _frameworks.NUMPY_DTYPES[like.dtype]
    dims = [batch, heads, seq_len, dk, dv]
    workspace_bytes = _C.gpu_workspace_bytes(dims, dtype_code, device)
    workspace = (_frameworks.empty_like_framework(like, (workspace_bytes,), "uint8")
                 if workspace_bytes else None)
    workspace_view = _frameworks.borrow(workspace, stream) if workspace is not None else None
    out_view = _frameworks.borrow(out, stream)
    final_view = _frameworks.borrow(final, stream) if final is not None else None
    launch_stream = 0 if stream in (None, _frameworks.LEGACY_DEFAULT_STREAM) else stream
    try:
        _C.gpu_forward(borrowed["q"].address, borrowed["k"].address, borrowed["v"].address,
                       out_view.address, state.address if state else 0,
                       final_view.address if final_view else 0, dims, dtype_code, scale_value,
                       decay_values, device, launch_stream,
                       workspace_view.address if workspace_view else 0, workspace_bytes)
    except _C.UnsupportedDevice as exc:
        raise _unsupported(device, str(exc)) from None
    return (out, final) if output_final_state else out
