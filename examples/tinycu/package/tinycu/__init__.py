"""tinycu: y = a*x + y on the GPU when one can run it, else on the CPU. The example project of
culina's docs/ADOPTING.md: a CUDA extension whose `pip install` goes through culina's resolver."""
from __future__ import annotations

import json
from importlib import resources

from ._C import cuda_compiled, saxpy

__all__ = ["build_record", "cuda_compiled", "saxpy"]


def build_record() -> dict:
    """How this copy was built: the build adapter's record, with the resolver's decision."""
    return json.loads(resources.files(__name__).joinpath("_build_info.json").read_text())
