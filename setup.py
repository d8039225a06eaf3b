"""Declares the culina extension. The resolver's adapter decides at bdist_wheel time whether a
prebuilt release wheel serves this host, and otherwise compiles the CUDA sources."""
import sys
from pathlib import Path

import pybind11
from setuptools import setup

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "resolver"))  # culina carries the resolver in its tree (pyproject's backend-path)
from culina_resolver import project_config  # noqa: E402
from culina_resolver.bundling_sdist import BundlingSdist  # noqa: E402
from culina_resolver.cuda_build_ext import CudaBuildExt, CudaExtension  # noqa: E402
from culina_resolver.resolving_bdist_wheel import ResolvingBdistWheel  # noqa: E402

sources = sorted(p.relative_to(ROOT).as_posix()
                 for pattern in ("*.cpp", "*.cu") for p in (ROOT / "csrc").rglob(pattern))

setup(
    ext_modules=[CudaExtension(
        project_config.current().extension,  # culina._C, from pyproject.toml
        sources=sources,
        include_dirs=["csrc", pybind11.get_include()],
        language="c++",
        extra_compile_args=["-O3", "-std=c++17", "-fvisibility=hidden"],
        # The pybind11 glue only unpacks arguments, once per call; at -O1 it compiles in two
        # thirds of the time, and it is the longest job of a one-architecture build.
        source_flags={"csrc/bindings.cpp": ["-O1"]},
    )],
    cmdclass={"build_ext": CudaBuildExt, "bdist_wheel": ResolvingBdistWheel, "sdist": BundlingSdist},
)
