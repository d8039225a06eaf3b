"""Declares tinycu's extension; the resolver's adapter (resolver/, copied from culina) decides
whether a prebuilt release wheel serves this host, and otherwise compiles csrc/."""
import sys
from pathlib import Path

import pybind11
from setuptools import setup

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "resolver" / "adapter"))
import project_config  # noqa: E402
from bundling_sdist import BundlingSdist  # noqa: E402
from cuda_build_ext import CudaBuildExt, CudaExtension  # noqa: E402
from resolving_bdist_wheel import ResolvingBdistWheel  # noqa: E402

setup(
    ext_modules=[CudaExtension(
        project_config.current().extension,  # tinycu._C
        sources=["csrc/bindings.cpp", "csrc/saxpy_cpu.cpp", "csrc/saxpy.cu"],
        include_dirs=["csrc", pybind11.get_include()],
        language="c++",
        extra_compile_args=["-O2", "-std=c++17", "-fvisibility=hidden"],
    )],
    cmdclass={"build_ext": CudaBuildExt, "bdist_wheel": ResolvingBdistWheel, "sdist": BundlingSdist},
)
