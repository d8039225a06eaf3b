"""Declares tinycu's extension; culina-resolver's setuptools commands (the build requirement that
is tinycu's PEP 517 backend) decide whether a prebuilt release wheel serves this host, and
otherwise compile csrc/."""
import pybind11
from setuptools import setup

from culina_resolver import project_config
from culina_resolver.bundling_sdist import BundlingSdist
from culina_resolver.cuda_build_ext import CudaBuildExt, CudaExtension
from culina_resolver.resolving_bdist_wheel import ResolvingBdistWheel

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
