"""A local CUDA build on a host with no toolkit: the backend asks pip for the newest CUDA toolkit
from NVIDIA's PyPI packages that the driver runs, and the build compiles with it. Offline, the
install stops and names what to install instead."""

from __future__ import annotations

from conftest import Host

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
