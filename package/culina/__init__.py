"""culina: causal linear attention with per-head decay and per-token gates, on CUDA GPUs and on the CPU."""
import importlib as _importlib
from importlib import metadata as _metadata

from ._linear_attention import linear_attention
from ._simple_gla import chunk_simple_gla
from ._build import build_record
from ._fit_check import BuildMismatchWarning, warn_if_mismatched
from .errors import CulinaError, UnsupportedDeviceError

try:
    __version__ = _metadata.version("culina")
except _metadata.PackageNotFoundError:  # an in-place build that pip never installed
    __version__ = "0.1.0+local"

__all__ = ["linear_attention", "chunk_simple_gla", "build_record", "CulinaError", "UnsupportedDeviceError",
           "BuildMismatchWarning", "__version__"]


def __getattr__(name):  # culina.distributed on first use, so that `import culina` imports no torch.distributed
    if name == "distributed":
        return _importlib.import_module(".distributed", __name__)
    raise AttributeError(f"module 'culina' has no attribute {name!r}")


warn_if_mismatched()
