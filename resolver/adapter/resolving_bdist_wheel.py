"""setuptools `bdist_wheel` that asks the resolver first (docs/ARCHITECTURE.md, the flow of one install). Under
pip it runs only for local builds (resolving_backend serves prebuilt wheels itself) and reuses
the backend's resolution; `python setup.py bdist_wheel` resolves here.

install_wheel: the verified release wheel goes into dist_dir and nothing is compiled.
build_local:   the usual build, for the decision's architectures (unless CULINA_CUDA_ARCHS says).
build_cpu:     the usual build without CUDA.
error:         the install stops with the reason, which names what is missing.
Editable installs do not come here (they use editable_wheel) and always build locally.
The release scripts set CULINA_RELEASE_BUILD=1: a fat wheel for CULINA_CUDA_ARCHS, no resolution.
"""
from __future__ import annotations

import os
from pathlib import Path

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 keeps it in the wheel package
    from wheel.bdist_wheel import bdist_wheel

from cuda_build_ext import ARCHS_VAR
from helper_build import say
from install_resolution import RELEASE_BUILD_VAR, ResolutionError, current_resolution, deliver, is_release_build


class ResolvingBdistWheel(bdist_wheel):
    def run(self):
        if is_release_build():
            say(f"{RELEASE_BUILD_VAR}=1: release build for {ARCHS_VAR}={os.environ.get(ARCHS_VAR, 'all')}, no resolution")
            super().run()
            return
        try:
            resolution = current_resolution()
        except ResolutionError as error:
            raise SystemExit(f"culina: cannot install: {error}") from None
        self.distribution.culina_decision = resolution.decision
        if resolution.action == "install_wheel":
            deliver(resolution, Path(self.dist_dir))
            return
        if resolution.action == "build_cpu":
            self.distribution.culina_cpu_only = True
            say(f"building the CPU-only module locally: {resolution.reason}")
        elif os.environ.get(ARCHS_VAR):
            say(f"building locally for {ARCHS_VAR}={os.environ[ARCHS_VAR]} (set by you): {resolution.reason}")
        else:
            os.environ[ARCHS_VAR] = ";".join(resolution.local_build_archs)
            say(f"building locally for {os.environ[ARCHS_VAR]}: {resolution.reason}")
        super().run()
