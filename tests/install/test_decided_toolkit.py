"""The local build carries out the decision's toolkit (issue 25): on a GPU host with no working
toolkit, where a broken `nvcc` wrapper (one that runs a removed toolkit) comes first on PATH, the
helper's probe skips the wrapper and decides a build with NVIDIA's PyPI toolkit; pip installs that
toolkit between its hooks, and the build compiles with it and never looks at PATH again.

pip's two steps, run as pip runs them, in new processes on examples/tinycu with resolver/ copied
in (the smallest CUDA extension that adopts the resolver): get_requires_for_build_wheel resolves
in an environment without the toolkit, then build_wheel runs where the PyPI toolkit is importable,
as pip's build environment has it once the requirements are installed. The host is the fake
libcuda (an H200 with a CUDA 13.5 driver); /usr/local/cuda is hidden (tools/release/no_toolkit.py).
No index, release or network is needed: the PyPI toolkit is the CUDA 13.5 one tests/toolkit
installs into build/toolkits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

import no_toolkit  # noqa: E402 - conftest puts tools/release on the path
from culina_resolver import pypi_toolkit  # noqa: E402 - conftest puts resolver/ on the path

CUDA = "13.5"  # tests/toolkit's PyPI toolkit, in the same folder
DRIVER = "13050"  # what the fake libcuda reports: CUDA 13.5
PYPI_REQUIREMENT = "nvidia-cuda-nvcc>=13.0,<13.6"


@pytest.fixture(scope="module")
def tinycu_tree(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("adopter") / "tinycu"
    shutil.copytree(REPO / "examples" / "tinycu", tree, ignore=shutil.ignore_patterns(
        "build", "resolver", "__pycache__", "*.so", "_build_info.json", "*.egg-info"))
    return tree


@pytest.fixture(scope="module")
def pypi_site() -> Path:
    """A site-packages folder holding the CUDA 13.5 toolkit from PyPI (installed once, shared with tests/toolkit)."""
    site = REPO / "build" / "toolkits" / f"cuda-{CUDA}"
    if pypi_toolkit.root_in(site) is None:
        pypi_toolkit.install(CUDA, site)
    return site


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """TINYCU_CACHE_DIR: the helper is compiled into it once for the module."""
    return tmp_path_factory.mktemp("tinycu-cache")


@pytest.fixture
def broken_wrapper(tmp_path) -> Path:
    """A folder whose `nvcc` runs a toolkit that was removed, as /usr/local/bin/nvcc did in the issue."""
    folder = tmp_path / "wrapper-bin"
    folder.mkdir()
    nvcc = folder / "nvcc"
    nvcc.write_text('#!/bin/sh\nexec /opt/cuda-removed/bin/nvcc "$@"\n')
    nvcc.chmod(0o755)
    return folder


def environment(tree: Path, fake_libcuda_dir: Path, wrapper: Path, cache: Path, python_path: list[Path]) -> dict:
    env = no_toolkit.env_without_toolkit({k: v for k, v in os.environ.items()
                                          if not k.startswith(("CULINA_", "TINYCU_", "FAKE_CUDA_", "PYTHON"))})
    env.update(PATH=f"{wrapper}{os.pathsep}{env['PATH']}", PYTHONPATH=os.pathsep.join(map(str, python_path)),
               LD_LIBRARY_PATH=str(fake_libcuda_dir), FAKE_CUDA_GPUS="NVIDIA H200=9.0", FAKE_CUDA_DRIVER_VERSION=DRIVER,
               TINYCU_VARIANT="source", TINYCU_HELPER="source", TINYCU_CACHE_DIR=str(cache), TINYCU_MAX_JOBS="2",
               TINYCU_CCACHE="0")
    return env


def hook(tree: Path, code: str, env: dict) -> subprocess.CompletedProcess:
    why_not = no_toolkit.can_hide()
    if why_not:
        pytest.skip(f"cannot hide the CUDA toolkit here: {why_not}")
    command = no_toolkit.command_without_toolkit([sys.executable, "-c", f"from culina_resolver import backend as b; {code}"])
    return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=1200)


def test_the_build_compiles_with_the_pypi_toolkit_the_decision_named_not_the_broken_nvcc_on_path(
        tinycu_tree, pypi_site, broken_wrapper, fake_libcuda_dir, cache, tmp_path):
    adapter = REPO / "resolver"  # culina_resolver, as the build requirement installs it
    first = hook(tinycu_tree, "print(b.get_requires_for_build_wheel())",
                 environment(tinycu_tree, fake_libcuda_dir, broken_wrapper, cache, [adapter]))
    assert first.returncode == 0, first.stderr[-4000:]
    assert "GPUs 9.0, toolkit none" in first.stderr  # the probe ran the wrapper, which failed ...
    assert PYPI_REQUIREMENT in first.stdout, first.stdout  # ... and the PyPI toolkit was decided

    dist = tmp_path / "dist"
    built = hook(tinycu_tree, f"print(b.build_wheel({str(dist)!r}))",
                 environment(tinycu_tree, fake_libcuda_dir, broken_wrapper, cache, [adapter, pypi_site]))
    assert built.returncode == 0, built.stderr[-4000:]
    assert "Traceback" not in built.stderr
    with zipfile.ZipFile(dist / built.stdout.strip().splitlines()[-1]) as wheel:
        record = json.loads(wheel.read("tinycu/_build_info.json"))
    assert record["toolkit_source"] == "PyPI packages" and record["nvcc_version"].startswith(f"{CUDA}.")
    assert record["nvcc"] == str((pypi_toolkit.root_in(pypi_site) / "bin" / "nvcc").resolve())
    assert record["sass_archs"] == ["9.0"] and record["cpu_only"] is False
    assert record["resolver"]["pypi_toolkit"] == CUDA and record["resolver"]["build_toolkit"] is None


def test_a_decided_toolkit_that_fails_to_run_stops_the_build_with_one_message(
        tinycu_tree, broken_wrapper, fake_libcuda_dir, cache, tmp_path):
    """The decision names a PyPI toolkit whose nvcc then fails: one line naming it, the exit status
    and the fix, and no traceback."""
    site = tmp_path / "site"
    nvcc = site / "nvidia" / "cu13" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho 'nvcc: libnvvm.so: cannot open shared object file' >&2\nexit 3\n")
    nvcc.chmod(0o755)
    adapter = REPO / "resolver"  # culina_resolver, as the build requirement installs it
    first = hook(tinycu_tree, "print(b.get_requires_for_build_wheel())",
                 environment(tinycu_tree, fake_libcuda_dir, broken_wrapper, cache, [adapter]))
    assert first.returncode == 0 and PYPI_REQUIREMENT in first.stdout, first.stderr[-4000:]
    built = hook(tinycu_tree, f"print(b.build_wheel({str(tmp_path / 'dist')!r}))",
                 environment(tinycu_tree, fake_libcuda_dir, broken_wrapper, cache, [adapter, site]))
    assert built.returncode != 0
    assert "Traceback" not in built.stderr, built.stderr[-4000:]
    last = built.stderr.strip().splitlines()[-1]
    assert last == (f"tinycu: cannot build: `{nvcc} --version` (the nvcc from PyPI packages) failed with exit status "
                    "3, saying: nvcc: libnvvm.so: cannot open shared object file. Fix: repair or remove that toolkit, "
                    "or set CUDA_HOME to a working one (the folder holding bin/nvcc), and install again"), last
