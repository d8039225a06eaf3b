"""setuptools `bdist_wheel` that asks the resolver first (docs/ARCHITECTURE.md, the flow of one install). Under
pip it runs only for local builds (culina_resolver.backend serves prebuilt wheels itself) and reuses
the backend's resolution; `python setup.py bdist_wheel` resolves here.

install_wheel: the verified release wheel goes into dist_dir and nothing is compiled.
build_local:   the usual build, for the decision's architectures (unless <prefix>CUDA_ARCHS says).
build_cpu:     the usual build without CUDA.
error:         the install stops with the reason, which names what is missing.
Editable installs do not come here (they use editable_wheel) and always build locally.
The release scripts set <prefix>RELEASE_BUILD=1: a fat wheel for <prefix>CUDA_ARCHS, no resolution.
"""
from __future__ import annotations

from pathlib import Path

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 keeps it in the wheel package
    from wheel.bdist_wheel import bdist_wheel

from . import adapter_settings
from .adapter_error import exits_with_message
from .adapter_settings import ARCHS, RELEASE_BUILD
from .cuda_build_ext import BuildPlan
from .helper_build import say
from .install_resolution import current_resolution, deliver


class ResolvingBdistWheel(bdist_wheel):
    @exits_with_message
    def run(self):
        settings = adapter_settings.current()  # a bad setting stops before the resolver runs
        if settings.release_build:
            say(f"{settings.var(RELEASE_BUILD)} is on: release build for {settings.cuda_archs_variable or settings.var(ARCHS)}="
                f"{settings.cuda_archs or 'all'}, no resolution")
            super().run()
            return
        decision = current_resolution(settings)
        if decision.action == "install_wheel":
            deliver(decision, Path(self.dist_dir), settings)
            return
        if decision.action == "build_cpu":
            plan = BuildPlan(cpu_only=True, archs="", decision=decision)
            say(f"building the CPU-only module locally: {decision.reason}")
        elif settings.cuda_archs:
            plan = BuildPlan(cpu_only=False, archs=settings.cuda_archs, decision=decision,
                             archs_variable=settings.cuda_archs_variable)
            unset_ours = "" if settings.cuda_archs_variable == settings.var(ARCHS) else f", as {settings.var(ARCHS)} is unset"
            say(f"building locally for {settings.cuda_archs_variable}={settings.cuda_archs} (set by you{unset_ours}): "
                f"{decision.reason}")
        else:
            plan = BuildPlan(cpu_only=False, archs=";".join(decision.local_build_archs), decision=decision)
            say(f"building locally for {plan.archs}: {decision.reason}")
        # The build_ext that bdist_wheel's build runs next is this object: the plan reaches it as a value.
        self.distribution.get_command_obj("build_ext").build_plan = plan
        super().run()
