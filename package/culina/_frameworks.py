"""DLPack glue: what an array is, where it lives, which stream its framework is on, and how
to make outputs in the caller's framework."""
from __future__ import annotations

import contextlib
import dataclasses
import importlib

import numpy as np

from . import _C
from .errors import ArgumentTypeError

DLPACK_CPU, DLPACK_CUDA = 1, 2
# DLPack (code, bits) -> dtype name (the float types of q, k, v and the state; cu_seqlens' integers)
DTYPES = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (0, 32): "int32", (0, 64): "int64"}
NUMPY_DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
# DLPack's stream values: 1 is the legacy default stream (0 is not allowed there).
LEGACY_DEFAULT_STREAM = 1


@dataclasses.dataclass
class CudaArray:
    """A CUDA array borrowed through DLPack for the length of one call."""

    obj: object
    framework: str
    capsule: object
    shape: tuple
    strides: tuple | None
    dtype: str | None
    device: int
    address: int


def framework_of(obj) -> str:
    return type(obj).__module__.split(".")[0]


def dlpack_device(obj) -> tuple[int, int] | None:
    """(device type, id) for DLPack producers, None for anything else."""
    probe = getattr(obj, "__dlpack_device__", None)
    if probe is None or not hasattr(obj, "__dlpack__"):
        return None
    device_type, device_id = probe()
    return int(device_type), int(device_id)


def device_scope(framework: str, device: int):
    """The framework's current device set to `device` for the length of a call: PyTorch exports
    a tensor for a stream only from its own device, and its guard gives the caller's device
    back without creating a context there."""
    if framework == "torch":
        import torch

        return torch.cuda.device(device)
    if framework == "cupy":
        import cupy

        return cupy.cuda.Device(device)
    return contextlib.nullcontext()


def current_stream(framework: str, device: int) -> int | None:
    """The caller's current CUDA stream in its framework, as DLPack's stream value."""
    if framework == "torch":
        import torch

        handle = torch.cuda.current_stream(device).cuda_stream
    elif framework == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            handle = cupy.cuda.get_current_stream().ptr
    else:
        return None  # no stream notion (e.g. JAX): the producer makes its data ready itself
    return handle or LEGACY_DEFAULT_STREAM


def borrow(obj, stream: int | None) -> CudaArray:
    """Asks the producer for a DLPack capsule ready on `stream`, and reads its header."""
    capsule = obj.__dlpack__(stream=stream)
    info = _C.dlpack_info(capsule)
    dtype = None
    if info["dtype_lanes"] == 1:
        dtype = DTYPES.get((info["dtype_code"], info["dtype_bits"]))
    if dtype is None:
        dtype = f"dlpack(code={info['dtype_code']}, bits={info['dtype_bits']}, lanes={info['dtype_lanes']})"
    return CudaArray(obj, framework_of(obj), capsule, tuple(info["shape"]), info["strides"], dtype,
                     info["device_id"], info["address"])


def is_compact(shape: tuple, strides: tuple | None) -> bool:
    """Row-major and dense (strides of size-1 dimensions do not matter)."""
    if strides is None:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def empty_like_framework(like: CudaArray, shape: tuple, dtype: str):
    """A new uninitialised array in the framework and on the device of `like`."""
    if like.framework == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=f"cuda:{like.device}")
    if like.framework == "cupy":
        import cupy

        with cupy.cuda.Device(like.device):
            return cupy.empty(shape, dtype=dtype)
    if like.framework in ("jax", "jaxlib"):
        import jax
        import jax.numpy as jnp

        device = next(d for d in jax.devices("gpu") if d.id == like.device)
        return jnp.empty(shape, dtype=getattr(jnp, dtype), device=device)
    module = importlib.import_module(like.framework)
    raise ArgumentTypeError(f"culina returns outputs in the caller's framework and cannot make arrays of "
                            f"{module.__name__!r}",
                            "pass torch, CuPy or JAX arrays, or convert with torch.from_dlpack(x)")


def numpy_dtype_code(array: np.ndarray) -> int | None:
    return NUMPY_DTYPES.get(array.dtype.name)
