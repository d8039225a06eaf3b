"""Which toolkit a local build compiles with. On a host with no toolkit: the backend asks pip for
the newest CUDA toolkit from NVIDIA's PyPI packages that the driver runs, and the build compiles
with it; offline, the install stops and names what to install instead. On a host with two
toolkits (the system's 13.0 and the PyPI 13.5 that the release build installed into
build/toolkits): the build compiles with exactly the nvcc the resolver's decision names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import BUILD, REPO, SECOND_CUDA, Host

from culina_resolver import pypi_toolkit  # noqa: E402 - conftest puts resolver/ on the path

SYSTEM_TOOLKIT = Path("/usr/local/cuda")

H200_NO_TOOLKIT = Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0", toolkit=False)


def test_a_local_build_without_a_toolkit_compiles_with_one_pip_fetched(installer, server):
    install = installer.install(H200_NO_TOOLKIT, server.base_url, CULINA_VARIANT="source")
    assert install.returncode == 0, install.output[-4000:]
    assert "asking pip for the newest CUDA toolkit from PyPI up to 13.0" in install.output
    assert "Collecting nvidia-cuda-nvcc" in install.output
    record = install.build_record()
    assert record["kind"] == "local" and record["cpu_only"] is False
    assert record["sass_archs"] == ["9.0"]
    assert record["nvcc_version"].startswith("13.0.") and record["toolkit_source"] == "PyPI packages"
    assert record["resolver"]["pypi_toolkit"] == "13.0"
    install.computes_like_the_reference()


def test_offline_without_a_toolkit_stops_and_names_what_to_install(installer, server):
    install = installer.install(H200_NO_TOOLKIT, server.base_url, CULINA_VARIANT="source", CULINA_OFFLINE="1")
    assert install.returncode != 0
    assert "CULINA_OFFLINE=1 forbids fetching one from PyPI" in install.output
    assert "toolkit (nvcc on PATH or CUDA_HOME) to build locally" in install.output
    assert "Collecting nvidia-cuda-nvcc" not in install.output


TINY_SETUP = """
import sys
from pathlib import Path
sys.path.insert(0, {adapter!r})
from setuptools import setup
from culina_resolver.cuda_build_ext import BuildPlan, CudaBuildExt, CudaExtension
from culina_resolver.helper_client import Decision

DECIDED = {{"schema_version": 1, "action": "build_local", "reason": "no wheel fits", "wheel": None, "wheel_path": None,
           "local_build_archs": ["9.0"], "pypi_toolkit": None, "host": {{"gpus": ["9.0"]}}, "warnings": [],
           "private_folders": [], "build_toolkit": {{"nvcc": {nvcc!r}, "root": str(Path({nvcc!r}).parent.parent),
                                                    "cuda": "13.5", "found_in": "PATH"}}}}

class DecidedBuildExt(CudaBuildExt):
    def initialize_options(self):
        super().initialize_options()
        self.build_plan = BuildPlan(cpu_only=False, archs="9.0", decision=Decision.from_document(DECIDED))

setup(name="tiny", version="0", ext_modules=[CudaExtension("tiny._C", sources=["kernel.cu", "glue.cpp"])],
      cmdclass={{"build_ext": DecidedBuildExt}})
"""


def second_toolkit() -> Path:
    """The PyPI CUDA SECOND_CUDA toolkit root, installed by the session's release build."""
    root = pypi_toolkit.root_in(BUILD / "toolkits" / f"cuda-{SECOND_CUDA}")
    assert root is not None, f"the release build installs CUDA {SECOND_CUDA} into {BUILD / 'toolkits'}"
    return root


def test_the_build_compiles_with_the_nvcc_the_plan_names_not_the_first_found(release, tmp_path):
    """CUDA_HOME is the system's 13.0, which a search finds first; the plan names 13.5's nvcc."""
    nvcc = second_toolkit() / "bin" / "nvcc"
    (tmp_path / "kernel.cu").write_text("__global__ void k(int* x) { *x = 1; }\n")
    (tmp_path / "glue.cpp").write_text("#include <Python.h>\nPyMODINIT_FUNC PyInit__C(void) { return 0; }\n")
    shutil.copy2(REPO / "pyproject.toml", tmp_path)  # the project is the working folder: culina's names
    (tmp_path / "setup.py").write_text(TINY_SETUP.format(adapter=str(REPO / "resolver"), nvcc=str(nvcc)))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CULINA_")}, "CUDA_HOME": str(SYSTEM_TOOLKIT),
           "CULINA_MAX_JOBS": "2", "CULINA_CCACHE": "0"}
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", "lib", "--build-temp", "tmp"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    record = json.loads((tmp_path / "lib" / "tiny" / "_build_info.json").read_text())
    assert record["nvcc"] == str(nvcc.resolve()) and record["nvcc_version"].startswith(SECOND_CUDA + ".")
    assert record["toolkit_source"].startswith("PyPI packages, through the resolver's probe")


def test_with_two_toolkits_the_build_record_names_the_decisions_nvcc(installer, server):
    """pip install with CUDA_HOME at the system's 13.0 and the PyPI 13.5 first on PATH: whichever
    the probe finds, the build compiles with that nvcc."""
    second = second_toolkit() / "bin"
    install = installer.install(Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0"), server.base_url,
                                CULINA_VARIANT="source", CUDA_HOME=str(SYSTEM_TOOLKIT),
                                PATH=f"{second}{os.pathsep}{os.environ['PATH']}")
    assert install.returncode == 0, install.output[-4000:]
    record = install.build_record()
    decided = record["resolver"]["build_toolkit"]
    assert record["nvcc"] == str(Path(decided["nvcc"]).resolve())
    assert record["nvcc_version"].startswith(decided["cuda"] + ".")
