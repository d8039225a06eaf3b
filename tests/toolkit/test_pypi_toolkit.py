"""A CUDA toolkit from NVIDIA's PyPI packages (resolver/culina_resolver/pypi_toolkit.py): what is asked of
pip, and, with this machine's own toolkit hidden, that the build and the helper's probe both find
the PyPI one and the extension compiles with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "resolver"))
sys.path.insert(0, str(REPO / "tools" / "release"))

import no_toolkit  # noqa: E402
from culina_resolver import pypi_toolkit  # noqa: E402

CUDA = "13.5"  # the install tests' second release build uses the same folder
TAGS = "cp312-cp312-manylinux_2_28_x86_64\n"


def test_requirements_pin_one_toolkit_release():
    assert pypi_toolkit.requirements("13.5") == [
        "nvidia-cuda-nvcc==13.5.*", "nvidia-nvvm==13.5.*", "nvidia-cuda-crt==13.5.*", "nvidia-cuda-runtime==13.5.*",
        "nvidia-cuda-cccl>=13.0,<13.6"]


def test_requirements_up_to_a_driver_take_no_newer_minor():
    assert "nvidia-cuda-nvcc>=13.0,<13.3" in pypi_toolkit.requirements_up_to("13.2")


@pytest.mark.parametrize("cuda, message", [("12.9", "carry no nvcc for CUDA 12"), ("thirteen", "is not like 13.0")])
def test_versions_pypi_cannot_serve_are_refused_with_the_fix(cuda, message):
    with pytest.raises(pypi_toolkit.ToolkitError, match=message):
        pypi_toolkit.requirements(cuda)


@pytest.fixture(scope="session")
def site() -> Path:
    """The packages installed into a folder of their own, once (build/toolkits/cuda-13.5)."""
    target = REPO / "build" / "toolkits" / f"cuda-{CUDA}"
    if pypi_toolkit.root_in(target) is None:
        pypi_toolkit.install(CUDA, target)
    return target


def hidden(command: list[str]) -> list[str]:
    why_not = no_toolkit.can_hide()
    if why_not:
        pytest.skip(f"cannot hide the CUDA toolkit here: {why_not}")
    return no_toolkit.command_without_toolkit(command)


def run(command: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


FIND = "from culina_resolver import cuda_build_ext as b; t = b.find_toolkit(); print(t.full_version, '|', t.source)"


def found_by_both(resolver: Path, site: Path, env: dict[str, str], tmp_path: Path, hide: bool) -> tuple[str, str]:
    """(the build's toolkit, the helper's) for the same environment."""
    (tmp_path / "tags.txt").write_text(TAGS)
    (tmp_path / "manifest.json").write_text(json.dumps({"schema_version": 1, "name": "culina", "version": "0.1.0",
                                                        "wheels": []}))
    env = {**env, "PYTHONPATH": f"{site}:{REPO / 'resolver'}"}
    build = [sys.executable, "-c", FIND]
    helper = [str(resolver), "select", "--manifest", str(tmp_path / "manifest.json"), "--tags",
              str(tmp_path / "tags.txt"), "--json", "--pypi-toolkit", str(pypi_toolkit.root_in(site))]
    wrap = hidden if hide else list
    build_says = run(wrap(build), env).stdout.strip()
    helper_says = json.loads(run(wrap(helper), env).stdout)["host"]["toolkit_cuda"]
    return build_says, helper_says


def test_with_no_system_toolkit_the_build_and_the_helper_take_the_pypi_one(resolver, site, tmp_path):
    env = no_toolkit.env_without_toolkit({**os.environ, "CULINA_OVERRIDE_CUDA": "13.0", "CULINA_OVERRIDE_SM": "9.0"})
    build_says, helper_says = found_by_both(resolver, site, env, tmp_path, hide=True)
    assert build_says.startswith(f"{CUDA}.") and build_says.endswith("| PyPI packages")
    assert helper_says == CUDA


def test_cuda_home_comes_before_the_pypi_toolkit_in_both(resolver, site, tmp_path):
    system = Path("/usr/local/cuda")
    if not (system / "bin" / "nvcc").exists():
        pytest.skip("no system toolkit at /usr/local/cuda to set CUDA_HOME to")
    env = {**os.environ, "CUDA_HOME": str(system), "CULINA_OVERRIDE_CUDA": "13.0", "CULINA_OVERRIDE_SM": "9.0"}
    build_says, helper_says = found_by_both(resolver, site, env, tmp_path, hide=False)
    assert build_says.endswith("| CUDA_HOME")
    assert build_says.split(".")[:2] == helper_says.split(".")
    assert helper_says != CUDA


def test_the_extension_compiles_with_the_pypi_toolkit_alone(site, tmp_path):
    env = no_toolkit.env_without_toolkit({**os.environ, "PYTHONPATH": str(site), "CULINA_CUDA_ARCHS": "9.0",
                                          "CULINA_CCACHE": "0"})
    lib = tmp_path / "lib"
    run(hidden([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(lib), "--build-temp",
                str(tmp_path / "temp")]), env, timeout=900)
    record = json.loads((lib / "culina" / "_build_info.json").read_text())
    assert record["cpu_only"] is False
    assert record["nvcc_version"].startswith(f"{CUDA}.") and record["toolkit_source"] == "PyPI packages"
    assert record["sass_archs"] == ["9.0"]
