"""What every route to the extension shares: the argument checks, the checked Problem and its
description for the extension (describe), the one way to call an entry point (launch), and the
runs of NumPy arrays (the CPU reference) and CUDA DLPack arrays (CuPy, JAX). culina's PyTorch
route (_torch) and public functions (_linear_attention, _simple_gla) build on it; it imports none
of them."""
from __future__ import annotations

import functools
import math
import numbers
import os
import typing

import numpy as np

from . import _C, _build, _frameworks
from .errors import ArgumentError, ArgumentTypeError, CulinaError, UnsupportedDeviceError

MAX_HEAD_DIM = _C.MAX_HEAD_DIM
MAX_HEADS = _C.MAX_HEADS
MAX_GRID = 65535  # B*H rides on a CUDA grid dimension of this size
# Distinct problems whose descriptions are kept; a model makes few.
CACHE_LIMIT = 256
# cu_seqlens element type -> the `seqlen_bits` the extension takes
SEQLEN_BITS = {"int32": 32, "int64": 64}
# PyTorch's float32 matmul precisions (torch.get_float32_matmul_precision()), most exact first,
# and the one under which PyTorch lets float32 matmuls round their operands to bfloat16.
FLOAT32_MATMUL_PRECISIONS = ("highest", "high", "medium")
ROUNDS_TO_BFLOAT16 = "medium"
# The layouts q, k, v (and o) may have, and where their B, H and T axes are (the feature axis is
# last): culina's own [B, H, T, D], and flash-linear-attention's [B, T, H, D]. The gates g have
# the first three axes of the same layout.
AXES = {"BHTD": (0, 1, 2), "BTHD": (0, 2, 1)}
AXIS_NAMES = {"BHTD": ("B", "H", "T"), "BTHD": ("B", "T", "H")}


class Operand(typing.NamedTuple):
    """What the checks need of one array: its shape, its strides in elements (None: C-contiguous)
    and its dtype name."""

    shape: tuple
    strides: tuple | None
    dtype: str


class Problem(typing.NamedTuple):
    """The checked problem: dims (B, H, T, Dk, Dv) as the extension takes them, the dtype name
    of q, k and v, the number of packed sequences (0 without cu_seqlens), cu_seqlens' integer
    width, the layout, the (batch, head, token) element strides of q, k, v and g ((0, 0, 0)
    without g), whether the gates vary with the token (g: the GPU workspace keeps the chunks'
    cumulative gates; a gamma alone is a constant per head), and the dtype the tensor-core
    kernels multiply in: dtype, or "bfloat16" for float32 rows they round as they load
    (compute_dtype's rule; check_problem gives dtype). Hashable: it keys the caches of its
    description and of the torch route."""

    dims: tuple
    dtype: str
    num_seqs: int
    seqlen_bits: int
    layout: str
    strides: tuple
    token_gated: bool
    compute: str

    @property
    def states(self) -> tuple:
        """Shape of the initial and final states: [B or N, H, Dk, Dv]."""
        batch, heads, _, dk, dv = self.dims
        return (self.num_seqs or batch, heads, dk, dv)

    def shape(self, features: int) -> tuple:
        """The shape of a [B, H, T, features] tensor in this layout (o: features = Dv)."""
        batch, heads, seq_len = self.dims[:3]
        return (batch, heads, seq_len, features) if self.layout == "BHTD" else (batch, seq_len, heads, features)

    def output_strides(self, features: int) -> tuple:
        """(batch, head, token) strides of an output culina makes: C-contiguous, shape(features)."""
        return rows_strides(compact_strides(self.shape(features)), self.layout)


@functools.lru_cache(maxsize=CACHE_LIMIT)
def describe(problem: Problem):
    """The problem as the extension's entry points take it (_C.Description), made once per
    distinct problem: every stride but do's, o, dq, dk and dv C-contiguous in the layout, and the
    backward's gate dots [B, H, T] C-contiguous in either layout (the gates' gradient then sums
    them along the innermost axis)."""
    batch, heads, seq_len, dk, dv = problem.dims
    q, k, v, g = problem.strides
    key_rows, value_rows = problem.output_strides(dk), problem.output_strides(dv)
    return _C.Description(dims=problem.dims, dtype=_frameworks.NUMPY_DTYPES[problem.dtype],
                          compute=_frameworks.NUMPY_DTYPES[problem.compute], num_seqs=problem.num_seqs,
                          seqlen_bits=problem.seqlen_bits, token_gated=problem.token_gated, q=q, k=k, v=v, g=g,
                          out=value_rows, dq=key_rows, dk=key_rows, dv=value_rows, gate_dots=(heads * seq_len, seq_len, 1))


def compute_dtype(dtype: str, device: str, precision: str) -> str:
    """The dtype the kernels run q, k and v in, for inputs of `dtype` on `device` ("cpu",
    "cuda", ...) under PyTorch's float32 matmul precision `precision`: "bfloat16" for float32
    CUDA inputs under "medium", where PyTorch itself rounds float32 matmul operands to bfloat16
    (the bf16 tensor-core kernels, 20-25x faster by BENCHMARKS.md; the gates, the states and o
    stay float32), else `dtype`. "highest" and "high" keep the exact float32 kernels: "high" lets PyTorch use
    TF32, but culina has no TF32 kernels. CPU tensors are always exact. The one owner of this
    rule: the torch route (_torch.compute_dtype) and `culina info` ask it."""
    if dtype == "float32" and device == "cuda" and precision == ROUNDS_TO_BFLOAT16:
        return "bfloat16"
    return dtype


def launch(entry, problem: Problem, call: dict) -> None:
    """Runs an entry point of the extension (_C.forward or _C.backward) on the problem's
    description and `call`, the call's values by name (csrc/bindings.cpp lists them; no device,
    or -1: the CPU reference), turning the extension's UnsupportedDevice into culina's error.
    One dict passed as it is, not keywords: this runs on every call."""
    try:
        entry(describe(problem), call)
    except _C.UnsupportedDevice as exc:
        raise _unsupported(call["device"], str(exc)) from None


def compact_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def rows_strides(strides: tuple, layout: str) -> tuple:
    """(batch, head, token) of a tensor's element strides in `layout`."""
    batch, head, token = AXES[layout]
    return (strides[batch], strides[head], strides[token])


def layout_shape(layout: str, features: str) -> str:
    return f"[{', '.join(AXIS_NAMES[layout])}, {features}]"


def resolve_layout(layout, q_shape: tuple, pins: dict, tokens=None) -> str:
    """The layout of q, k and v: `layout` when named, else the one that facts pin. `pins` maps a
    fact's description to the H it implies; `tokens`, if given, is a callable returning the total
    T that cu_seqlens implies, asked only when the head counts pin nothing. A fact that fits
    neither layout, or both, pins nothing here (the shape checks report a misfit). With no fact
    deciding, q.shape[1] < q.shape[2] means [B, H, T, D]; anything else is refused."""
    if layout is not None:
        if layout not in AXES:
            raise ArgumentError(f"layout: expected \"BHTD\" ([B, H, T, D], culina's own) or \"BTHD\" ([B, T, H, D], "
                                f"flash-linear-attention's), got {layout!r}",
                                "pass layout=\"BHTD\", layout=\"BTHD\" or None (decided from the shapes)")
        return layout
    if len(q_shape) != 4:
        return "BHTD"  # the shape checks report the rank
    second, third = q_shape[1], q_shape[2]
    pinned, facts = None, []
    for fact, heads in pins.items():
        says = "BHTD" if heads == second != third else "BTHD" if heads == third != second else None
        if says is None:
            continue
        facts.append(f"{fact} gives H={heads}")
        if pinned not in (None, says):
            raise ArgumentError(f"layout: the facts disagree on q's layout ({'; '.join(facts)}, q has shape "
                                f"{tuple(q_shape)})",
                                "pass layout=\"BHTD\" or layout=\"BTHD\" and fix the one that is wrong")
        pinned = says
    if pinned is None and tokens is not None:
        total = tokens()
        pinned = "BHTD" if total == third != second else "BTHD" if total == second != third else None
    if pinned is not None:
        return pinned
    if second < third:
        return "BHTD"
    raise ArgumentError(f"q: shape {tuple(q_shape)} is ambiguous: [B, H, T, D] with H={second}, T={third}, or "
                        f"flash-linear-attention's [B, T, H, D] with T={second}, H={third}, and no decay, "
                        f"initial_state or host cu_seqlens tells which",
                        "pass layout=\"BHTD\" or layout=\"BTHD\" (culina.chunk_simple_gla takes fla's layout as fla "
                        "does)")


def check_problem(operands: dict, layout: str) -> Problem:
    """The one owner of the argument checks every framework shares, on the Operands of q, k, v
    and, where given, g, gamma, initial_state and cu_seqlens. Raises ArgumentError (a ValueError)
    or ArgumentTypeError (a TypeError) naming the argument and the value, the fix in the hint.
    cu_seqlens: the Python side's one owner of its checks (shape, dtype, packing, the
    (sequence, head) limit) but for its values, which need the offsets themselves
    (check_seqlens_values); the extension's Description only guards the counts it indexes with
    (csrc/bindings.cpp)."""
    qkv_shape = {name: layout_shape(layout, "Dv" if name == "v" else "Dk") for name in ("q", "k", "v")}
    for name in ("q", "k", "v"):
        if len(operands[name].shape) != 4:
            raise ArgumentError(f"{name}: expected 4 dimensions {qkv_shape[name]}, got shape "
                                f"{tuple(operands[name].shape)}",
                                "add the missing axes (a batch of one: x[None]) or pass the other layout")
    q_shape = tuple(operands["q"].shape)
    batch, heads, seq_len = (q_shape[axis] for axis in AXES[layout])
    dk = q_shape[3]
    if tuple(operands["k"].shape) != q_shape:
        raise ArgumentError(f"k: shape {tuple(operands['k'].shape)} must equal q's shape {q_shape}",
                            "q and k share every axis: check the projection that makes them")
    if tuple(operands["v"].shape[:3]) != q_shape[:3]:
        raise ArgumentError(f"v: shape {tuple(operands['v'].shape)} must be {qkv_shape['v']} with "
                            f"{', '.join(AXIS_NAMES[layout])} = {q_shape[:3]} from q",
                            "v shares q's first three axes; only its feature axis may differ")
    dv = operands["v"].shape[3]
    if min(batch, heads, seq_len) < 1:
        raise ArgumentError(f"q: B, H and T must be at least 1, got shape {q_shape} ({qkv_shape['q']})",
                            "skip the call for an empty batch")
    for name, size in (("q", dk), ("v", dv)):
        if not 1 <= size <= MAX_HEAD_DIM:
            axis = "Dv" if name == "v" else "Dk"
            raise ArgumentError(f"{name}: head size {axis}={size} is not supported",
                                f"culina handles 1 to {MAX_HEAD_DIM} (multiples of 8 from 16 up run on the tensor "
                                "cores)")
    if heads > MAX_HEADS:
        raise ArgumentError(f"q: H={heads} heads is more than culina's limit of {MAX_HEADS}",
                            "split the heads across calls")
    for name in ("q", "k", "v"):
        if operands[name].dtype not in _frameworks.NUMPY_DTYPES:
            raise ArgumentTypeError(f"{name}: dtype {operands[name].dtype} is not supported",
                                    "use float32, float16 or bfloat16")
    for name in ("k", "v"):
        if operands[name].dtype != operands["q"].dtype:
            raise ArgumentTypeError(f"{name}: dtype {operands[name].dtype} differs from q's {operands['q'].dtype}",
                                    "cast all three to one dtype")
    strides = []
    for name in ("q", "k", "v"):
        element_strides = operands[name].strides or compact_strides(operands[name].shape)
        if operands[name].shape[3] > 1 and element_strides[3] != 1:
            raise ArgumentError(f"{name}: the feature axis (the last) has stride {element_strides[3]}",
                                f"culina reads any view whose last axis has stride 1 without a copy, others need "
                                f"one: pass {name}.contiguous() in PyTorch, np.ascontiguousarray({name})")
        strides.append(rows_strides(element_strides, layout))
    token_gated = "g" in operands
    if "g" in operands:
        gates = operands["g"]
        if tuple(gates.shape) != q_shape[:3]:
            raise ArgumentError(f"g: shape {tuple(gates.shape)} must be [{', '.join(AXIS_NAMES[layout])}] = "
                                f"{q_shape[:3]}, q's first three axes (one natural-log forget gate per token and head)",
                                "a per-head decay goes in decay= (chunk_simple_gla: g_gamma=)")
        if gates.dtype != "float32":
            raise ArgumentTypeError(f"g: dtype {gates.dtype} is not supported",
                                    "the gates are float32 (g.float())")
        strides.append(rows_strides(gates.strides or compact_strides(gates.shape), layout))
    else:
        strides.append((0, 0, 0))
    if "gamma" in operands:
        gamma = operands["gamma"]
        if tuple(gamma.shape) != (heads,):
            raise ArgumentError(f"gamma: shape {tuple(gamma.shape)} must be [H] = ({heads},), one log decay per head",
                                "per-token gates go in g")
        if gamma.dtype != "float32":
            raise ArgumentTypeError(f"gamma: dtype {gamma.dtype} is not supported",
                                    "the log decays are float32 (gamma.float())")
        if not _frameworks.is_compact(gamma.shape, gamma.strides):
            raise ArgumentError(f"gamma: a strided [H] tensor (strides {gamma.strides}) is not supported",
                                "pass gamma.contiguous()")
    num_seqs, seqlen_bits = 0, 0
    if "cu_seqlens" in operands:
        offsets = operands["cu_seqlens"]
        if len(offsets.shape) != 1 or offsets.shape[0] < 2:
            raise ArgumentError(f"cu_seqlens: expected a 1-D array of N + 1 >= 2 offsets [0, ..., total_T], "
                                f"got shape {tuple(offsets.shape)}",
                                "pass the cumulative sequence lengths with a leading 0")
        if offsets.dtype not in SEQLEN_BITS:
            raise ArgumentTypeError(f"cu_seqlens: dtype {offsets.dtype} is not supported",
                                    "pass int32 or int64 offsets (.to(torch.int32) / .astype(np.int32))")
        if not _frameworks.is_compact(offsets.shape, offsets.strides):
            raise ArgumentError(f"cu_seqlens: non-contiguous offsets (strides {offsets.strides}) are not supported",
                                "pass cu_seqlens.contiguous()")
        if batch != 1:
            packed = layout_shape(layout, "D").replace("B", "1").replace("T", "total_T")
            raise ArgumentError(f"cu_seqlens: packed sequences need q, k and v as {packed}, got B={batch} (shape "
                                f"{q_shape})", "concatenate the batch along T (flash-linear-attention's packing)")
        num_seqs, seqlen_bits = offsets.shape[0] - 1, SEQLEN_BITS[offsets.dtype]
    problem = Problem((batch, heads, seq_len, dk, dv), operands["q"].dtype, num_seqs, seqlen_bits, layout,
                      tuple(strides), token_gated, operands["q"].dtype)
    sequences = problem.states[0]
    if sequences * heads > MAX_GRID:
        what = f"cu_seqlens: N*H={sequences}*{heads}" if num_seqs else f"q: B*H={sequences}*{heads}"
        raise ArgumentError(f"{what}={sequences * heads} is more than culina's limit of {MAX_GRID} (sequence, head) "
                            "pairs", "split the batch across calls")
    if "initial_state" in operands:
        state = operands["initial_state"]
        if tuple(state.shape) != problem.states:
            what = "[N, H, Dk, Dv] (N sequences in cu_seqlens)" if num_seqs else "[B, H, Dk, Dv]"
            raise ArgumentError(f"initial_state: shape {tuple(state.shape)} must be {what} = {problem.states}",
                                "one [Dk, Dv] state per sequence and head")
        if state.dtype != "float32":
            raise ArgumentTypeError(f"initial_state: dtype {state.dtype} is not supported",
                                    "the state is float32 (cast it with .astype / .to(float32))")
        if not _frameworks.is_compact(state.shape, state.strides):
            raise ArgumentError(f"initial_state: non-contiguous states (strides {state.strides}) are not supported",
                                "pass a C-contiguous array (initial_state.contiguous() in PyTorch, "
                                "np.ascontiguousarray(initial_state))")
    return problem


def check_seqlens_values(offsets, total: int) -> None:
    """Offsets a host can read without a synchronisation: 0 first, total_T last, never falling.
    The Python side's one check of cu_seqlens' values (check_problem owns the rest), run before
    the CPU reference reads host offsets (which checks them again for C++ callers) and on
    chunk_simple_gla's cu_seqlens_cpu; CUDA offsets are read by the kernels alone."""
    offsets = np.asarray(offsets)
    steps = np.diff(offsets)
    if offsets[0] != 0 or offsets[-1] != total or (steps < 0).any():
        raise ArgumentError(f"cu_seqlens: expected offsets rising from 0 to total_T={total} (q's T), got "
                            f"{offsets.tolist()[:8]}{' ...' if offsets.size > 8 else ''}",
                            "pass the cumulative sequence lengths with a leading 0")


def check_decay(decay, heads: int):
    """None, or the H decay values as a list of floats in (0, 1]. Plain Python, so that
    torch.compile traces it without a graph break."""
    if decay is None:
        return None
    if isinstance(decay, np.ndarray):
        if decay.ndim != 1:
            raise ArgumentError(f"decay: expected shape [H] = ({heads},), got {decay.shape}",
                                "per-token forget gates go in g= (natural logarithms)")
        decay = decay.tolist()
    try:
        values = [float(x) for x in decay]
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ArgumentTypeError(f"decay: expected H={heads} host values (a list, tuple or NumPy array), got "
                                f"{type(decay).__name__} ({exc})",
                                "pass decay.tolist(), or with PyTorch tensors q, k and v a torch tensor [H] on q's "
                                "device") from exc
    if len(values) != heads:
        raise ArgumentError(f"decay: expected shape [H] = ({heads},), got ({len(values)},)",
                            "pass one decay factor per head")
    for head, value in enumerate(values):
        if not 0 < value <= 1:
            raise ArgumentError(f"decay: every value must be in (0, 1], head {head} has {value!r}",
                                "pass per-head decay factors such as 1 - 2**-5 (None means 1)")
    return values


def check_scale(scale, dk: int) -> float:
    if scale is None:
        return dk ** -0.5
    if type(scale) is float and math.isfinite(scale):  # the common case, first: this runs on every call
        return scale
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ArgumentError(f"scale: expected a finite real number, got {scale!r}",
                            "pass a float, or None for Dk**-0.5")
    return float(scale)


def decay_heads(decay) -> int | None:
    """The head count a decay argument implies, for resolve_layout (None: it implies none)."""
    if decay is None:
        return None
    shape = getattr(decay, "shape", None)
    if shape is not None:
        return shape[0] if len(shape) == 1 else None
    try:
        return len(decay)
    except TypeError:
        return None


def run_arrays(q, k, v, decay, g, scale, initial_state, output_final_state, cu_seqlens, layout):
    """culina.linear_attention for NumPy arrays (the CPU reference) and CUDA DLPack arrays."""
    arrays = {"q": q, "k": k, "v": v}
    for name, value in (("g", g), ("initial_state", initial_state), ("cu_seqlens", cu_seqlens)):
        if value is not None:
            arrays[name] = value
    places = {name: _place(name, value) for name, value in arrays.items()}
    first = places["q"]
    for name, place in places.items():
        if place != first:
            raise ArgumentError(f"arrays on different devices: {name} is on {_place_name(place)} but q is "
                                f"on {_place_name(first)}", "move them to one device")
    if first == "cpu":
        return _run_cpu(arrays, decay, scale, output_final_state, layout)
    return _run_gpu(arrays, decay, scale, output_final_state, layout, device=first[1])


def layout_pins(decay, initial_state_shape) -> dict:
    """The head counts decay and initial_state imply, for resolve_layout."""
    pins = {}
    heads = decay_heads(decay)
    if heads is not None:
        pins["decay's length"] = heads
    if initial_state_shape is not None and len(initial_state_shape) == 4:
        pins["initial_state"] = initial_state_shape[1]
    return pins


def _place(name, value):
    """'cpu' for NumPy arrays, ('cuda', id) for CUDA DLPack arrays; anything else is refused."""
    if isinstance(value, np.ndarray):
        return "cpu"
    device = _frameworks.dlpack_device(value)
    if device is not None and device[0] == _frameworks.DLPACK_CUDA:
        return ("cuda", device[1])
    where = f" on DLPack device type {device[0]}" if device else ""
    raise ArgumentTypeError(f"{name}: expected a NumPy array or a CUDA array that supports DLPack (PyTorch, "
                            f"CuPy, JAX), got {type(value).__module__}.{type(value).__name__}{where}",
                            f"pass np.asarray({name}) for the CPU, or move it to a GPU")


def _place_name(place) -> str:
    return "cpu (NumPy)" if place == "cpu" else f"cuda:{place[1]}"


def _numpy_operand(name: str, array: np.ndarray) -> Operand:
    item = array.itemsize
    if any(stride % item for stride in array.strides):
        raise ArgumentError(f"{name}: strides {array.strides} (bytes) are not whole {item}-byte elements",
                            f"pass np.ascontiguousarray({name})")
    return Operand(array.shape, tuple(stride // item for stride in array.strides), array.dtype.name)


def _run_cpu(arrays: dict, decay, scale, output_final_state, layout):
    operands = {name: _numpy_operand(name, array) for name, array in arrays.items()}
    q, cu_seqlens, initial_state = arrays["q"], arrays.get("cu_seqlens"), arrays.get("initial_state")
    host_total = None
    if cu_seqlens is not None and cu_seqlens.ndim == 1 and cu_seqlens.size:
        host_total = lambda: int(cu_seqlens[-1])  # noqa: E731
    layout = resolve_layout(layout, q.shape, layout_pins(decay, None if initial_state is None else initial_state.shape),
                            host_total)
    problem = check_problem(operands, layout)
    if cu_seqlens is not None:
        check_seqlens_values(cu_seqlens, problem.dims[2])
    decay_values = check_decay(decay, problem.dims[1])
    scale_value = check_scale(scale, problem.dims[3])
    out = np.empty(problem.shape(problem.dims[4]), dtype=arrays["v"].dtype)
    final = np.empty(problem.states, dtype=np.float32) if output_final_state else None
    address = lambda array: 0 if array is None else array.ctypes.data  # noqa: E731
    launch(_C.forward, problem, {"q": address(q), "k": address(arrays["k"]), "v": address(arrays["v"]),
                                 "out": address(out), "initial_state": address(initial_state),
                                 "final_state": address(final), "g": address(arrays.get("g")),
                                 "cu_seqlens": address(cu_seqlens), "scale": scale_value, "decay": decay_values})
    return (out, final) if output_final_state else out
_ready_devices: set = set()

# Which kernel families GPU calls may run, read once, before the first: `auto` lets a device
# run the kernels built for its architecture alone (Hopper's sm_90a kernels on compute
# capability 9.0) where this binary holds them; `portable` runs every pass on the kernels every
# GPU shares (for comparing the two, or working around a defect in one).
KERNELS_SETTING = "CULINA_KERNELS"
KERNELS_CHOICES = ("auto", "portable")


def kernel_choice(environ: typing.Mapping[str, str]) -> str:
    """CULINA_KERNELS in `environ` as one of KERNELS_CHOICES (unset or empty: auto)."""
    raw = environ.get(KERNELS_SETTING, "")
    value = raw.strip().lower() or "auto"
    if value not in KERNELS_CHOICES:
        raise CulinaError(f"{KERNELS_SETTING}={raw!r} is not understood",
                          f"set it to {' or '.join(KERNELS_CHOICES)}, or unset it (auto)")
    return value


@functools.cache
def apply_kernel_choice() -> str:
    """Reads CULINA_KERNELS once and hands the extension its value."""
    choice = kernel_choice(os.environ)
    _C.set_arch_specific_kernels(choice == "auto")
    return choice


def ready_device(device: int) -> None:
    """Raises UnsupportedDeviceError unless this culina can run on CUDA device `device`. CUDA's
    answer for one device puts a context on that device alone; a device found fit is remembered,
    so later calls cost a set lookup."""
    if device in _ready_devices:
        return
    if not _C.built_with_cuda():
        raise _unsupported(device, "this culina was built without CUDA (no nvcc at build time)")
    apply_kernel_choice()
    driver_problem = _build.driver_problem(_C.driver_version())
    if driver_problem:
        raise UnsupportedDeviceError(*driver_problem)
    support = _device_support(device)
    if not support["supported"]:
        raise _unsupported(device, support["error"])
    _ready_devices.add(device)


def _device_support(device: int) -> dict:
    count = _C.device_count()
    if not 0 <= device < count:
        raise UnsupportedDeviceError(f"CUDA device {device} is not visible to culina (CUDA sees {count} device(s))",
                                     "check CUDA_VISIBLE_DEVICES")
    return _C.device(device)


def _unsupported(device: int, detail: str) -> UnsupportedDeviceError:
    record = _build.build_record()
    if not _C.built_with_cuda():
        return UnsupportedDeviceError(detail, f"reinstall a CUDA build on this host: `{_build.REINSTALL}`, with "
                                              "CULINA_VARIANT unset or naming a CUDA variant")
    info = _device_support(device)
    cap = info["capability"]
    return UnsupportedDeviceError(
        f"culina has no code for GPU {device} '{info['name']}' (compute capability {cap[0]}.{cap[1]}): "
        f"this binary holds {_build.describe_archs(record)} (build: {record.get('kind')}, "
        f"{record.get('variant')}, compiled list {_C.compiled_arch_list()}); CUDA says: {detail}",
        _build.how_to_fit(cap))


def _run_gpu(arrays: dict, decay, scale, output_final_state, layout, device: int):
    ready_device(device)
    framework = _frameworks.framework_of(arrays["q"])
    with _frameworks.device_scope(framework, device):
        return _launch_dlpack(arrays, decay, scale, output_final_state, layout, device, framework)


def _launch_dlpack(arrays: dict, decay, scale, output_final_state, layout, device: int, framework: str):
    stream = _frameworks.current_stream(framework, device)
    borrowed = {name: _frameworks.borrow(value, stream) for name, value in arrays.items()}
    frameworks = {b.framework for b in borrowed.values()}
    if len(frameworks) > 1:
        raise ArgumentTypeError(f"q, k, v, g, initial_state and cu_seqlens must come from one framework (outputs "
                                f"are made in it), got {sorted(frameworks)}", "convert with from_dlpack first")
    state = borrowed.get("initial_state")
    layout = resolve_layout(layout, borrowed["q"].shape, layout_pins(decay, None if state is None else state.shape))
    problem = check_problem({n: Operand(b.shape, b.strides, b.dtype) for n, b in borrowed.items()}, layout)
    decay_values = check_decay(decay, problem.dims[1])
    scale_value = check_scale(scale, problem.dims[3])
    like = borrowed["q"]
    out = _frameworks.empty_like_framework(like, problem.shape(problem.dims[4]), borrowed["v"].dtype)
    final = _frameworks.empty_like_framework(like, problem.states, "float32") if output_final_state else None
    workspace_bytes = _C.forward_workspace_bytes(describe(problem), device)
    workspace = (_frameworks.empty_like_framework(like, (workspace_bytes,), "uint8")
                 if workspace_bytes else None)
    for name, made in (("out", out), ("final", final), ("workspace", workspace)):
        if made is not None:
            borrowed[name] = _frameworks.borrow(made, stream)
    launch_stream = 0 if stream in (None, _frameworks.LEGACY_DEFAULT_STREAM) else stream
    address = lambda name: borrowed[name].address if name in borrowed else 0  # noqa: E731
    launch(_C.forward, problem, {"q": address("q"), "k": address("k"), "v": address("v"), "out": address("out"),
                                 "initial_state": address("initial_state"), "final_state": address("final"),
                                 "g": address("g"), "cu_seqlens": address("cu_seqlens"), "scale": scale_value,
                                 "decay": decay_values, "device": device, "stream": launch_stream,
                                 "workspace": address("workspace"), "workspace_bytes": workspace_bytes})
    return (out, final) if output_final_state else out
