"""culina: causal linear attention with per-head decay and per-token gates, on CUDA GPUs and on the CPU."""
from importlib import metadata as _metadata

from ._api import linear_attention
from ._simple_gla import chunk_simple_gla
from ._build import build_record
from ._fit_check import BuildMismatchWarning, warn_if_mismatched
from .errors import UnsupportedDeviceError

try:
    __version__ = _metadata.version("culina")
except _metadata.PackageNotFoundError:  # an in-place build that pip never installed
    __version__ = "0.1.0+local"

__all__ = ["linear_attention", "chunk_simple_gla", "build_record", "UnsupportedDeviceError", "BuildMismatchWarning",
           "__version__"]

warn_if_mismatched()
