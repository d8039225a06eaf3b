"""The install helper a release sdist carries: a runtime container (a GPU, a driver, no compiler,
no toolkit) installs the prebuilt wheel through it, and the helper itself is portable."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
import tarfile
from pathlib import Path

import pytest

from conftest import NEWEST, Host, Installer
from test_install_e2e import assert_installed_release

COMPILERS = ("c++", "g++", "gcc", "cc", "clang", "clang++", "ld", "CC", "CXX")
# What the no-toolkit wrapper (tools/release/no_toolkit.py) runs; none of them compiles.
TOOLS = ("sh", "unshare", "mount", "mkdir")


def runtime_container_path(folder: Path) -> str:
    """A PATH with the few tools the test harness needs and no compiler or linker."""
    folder.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), folder / tool)
    assert not [c for c in COMPILERS if shutil.which(c, path=str(folder))]
    return str(folder)


def test_runtime_container_installs_the_prebuilt_wheel_with_the_prebuilt_helper(tmp_path, index, fake_libcuda_dir,
                                                                                  server, release):
    empty_cache = tmp_path / "empty-cache"
    installer = Installer(tmp_path, index, fake_libcuda_dir, empty_cache)
    install = installer.install(Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0", toolkit=False), server.base_url,
                                PATH=runtime_container_path(tmp_path / "bin"))
    assert_installed_release(install, release, NEWEST)
    assert "prebuilt helper from the sdist" in install.output
    assert "building the helper" not in install.output
    assert not (empty_cache / "helper").exists()


def test_source_choice_compiles_the_helper_and_installs_the_same_wheel(installer, server, release):
    install = installer.install(Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0"), server.base_url,
                                CULINA_HELPER="source")
    assert_installed_release(install, release, NEWEST)
    assert "helper from the cache" in install.output
    assert "prebuilt helper from the sdist" not in install.output


def test_the_sdist_carries_a_portable_verified_helper_for_this_platform(release, tmp_path):
    with tarfile.open(release.sdist) as sdist:
        sdist.extractall(tmp_path)
    prebuilt = next(tmp_path.glob("culina-*")) / "resolver" / "prebuilt"
    record = json.loads((prebuilt / "helpers.json").read_text())
    (entry,) = record["helpers"]
    binary = prebuilt / entry["file"]
    assert entry["platform"] == sysconfig.get_platform()
    assert hashlib.sha256(binary.read_bytes()).hexdigest() == entry["sha256"]
    assert os.access(binary, os.X_OK)
    needed = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    libraries = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line]
    assert libraries and not [lib for lib in libraries if "stdc++" in lib or "gcc_s" in lib or "cpuinfo" in lib]
    answer = json.loads(subprocess.run([str(binary), "version", "--json"], capture_output=True, text=True,
                                       check=True).stdout)
    assert answer["source_hash"] == entry["source_hash"]


@pytest.fixture
def installer_without_compiler_or_prebuilt(tmp_path, index, fake_libcuda_dir):
    return Installer(tmp_path, index, fake_libcuda_dir, tmp_path / "empty-cache")


def test_no_compiler_and_a_refused_prebuilt_helper_fail_naming_both(installer_without_compiler_or_prebuilt, server):
    install = installer_without_compiler_or_prebuilt.install(
        Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0", toolkit=False), server.base_url,
        PATH=runtime_container_path(installer_without_compiler_or_prebuilt.tmp_path / "bin"), CULINA_HELPER="source")
    assert install.returncode != 0
    assert "culina: cannot install" in install.output
    assert "no C++ compiler found" in install.output and "CULINA_HELPER=source" in install.output
