"""Builds culina-resolver (pyproject.toml here): the culina_resolver package with the helper's files
inside it, in culina_resolver/helper_files/ (resolver_files.py): its sources (src/, which the
prebuilt helper's record and handshake are checked against, and the CUDA facts), the bundled
nlohmann/json header when this is the sdist (a compile from the wheel needs no nlohmann-json), and the helper compiled for this platform with its
record (prebuilt/). The wheel is a platform wheel: manylinux_<glibc>_<machine> of the glibc the helper
was linked against (static libstdc++, dynamic glibc, as helper_build.build_prebuilt links it).

CULINA_RESOLVER_PREBUILT=DIR packs the helper that build_release.py compiled into DIR (its
helpers.json checked as the release merge checks it) instead of compiling it again.
"""
import os
import platform
import shutil
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 keeps it in the wheel package
    from wheel.bdist_wheel import bdist_wheel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from culina_resolver import bundled_python, helper_build, resolver_files  # noqa: E402
from culina_resolver.adapter_error import exits_with_message  # noqa: E402
from culina_resolver.bundling_sdist import bundle_json_headers  # noqa: E402

PREBUILT_FROM = "CULINA_RESOLVER_PREBUILT"


def log(message: str) -> None:
    print(f"[culina-resolver build] {message}", flush=True)


class BuildWithHelper(build_py):
    """The package, then its helper files: the sources and the helper for this platform."""

    @exits_with_message
    def run(self):
        super().run()
        files = Path(self.build_lib) / resolver_files.PACKAGE_DIR.name / resolver_files.PACKAGED.name
        shutil.rmtree(files, ignore_errors=True)
        shutil.copytree(resolver_files.SOURCE_DIR, files / "src")
        if resolver_files.BUNDLED_DIR.is_dir():  # the sdist's header: a compile here needs no nlohmann-json
            shutil.copytree(resolver_files.BUNDLED_DIR, files / resolver_files.BUNDLED_DIR.name)
        prebuilt = os.environ.get(PREBUILT_FROM)
        if prebuilt:
            platforms = helper_build.merge_prebuilt([Path(prebuilt)], files / "prebuilt")
            if platforms != [helper_build.platform_name()]:
                raise helper_build.HelperBuildError(
                    f"{PREBUILT_FROM}={prebuilt} holds helpers for {platforms}, where this wheel is for "
                    f"{helper_build.platform_name()} alone", f"Fix: point {PREBUILT_FROM} at this platform's helper/ folder")
            log(f"packed the prebuilt helper from {prebuilt}")
        else:
            helper_build.build_prebuilt(files / "prebuilt", log).close()


class WithHelper(Distribution):
    """The package holds a compiled program, so its wheel is a platform wheel (platlib)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """Tagged for this platform and glibc, for any Python 3: the helper is a program, not a module."""

    def get_tag(self):
        libc = helper_build.glibc_version()
        if libc is None:
            raise SystemExit("culina-resolver: the wheel's helper must be linked against glibc (a manylinux container)")
        return "py3", "none", f"manylinux_{libc[0]}_{libc[1]}_{platform.machine()}"


class SdistWithHeaders(sdist):
    """The sdist, with the nlohmann/json header the helper compiles with (bundled/)."""

    @exits_with_message
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        headers = bundle_json_headers(Path(base_dir) / resolver_files.BUNDLED_DIR.name)
        log(f"bundled {headers} and its license into bundled/")


setup(install_requires=bundled_python.REQUIRES, distclass=WithHelper,
      cmdclass={"build_py": BuildWithHelper, "bdist_wheel": PlatformWheel, "sdist": SdistWithHeaders})
