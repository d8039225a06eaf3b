"""The install flow of docs/ARCHITECTURE.md, as a user meets it: `pip install culina` from an index."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

import release_server
from conftest import NEWEST, SECOND_CUDA, Host, cached_wheels

H200_CUDA13 = Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0")
H200_CUDA12_8 = Host(driver_cuda="12.8", gpus="NVIDIA H200=9.0")
UNREACHABLE = "http://127.0.0.1:1/culina-dev/culina/releases/download/v0.1.0"


def assert_installed_release(install, release, variant):
    assert install.returncode == 0, install.output[-4000:]
    record = install.build_record()
    assert record["kind"] == "release"
    assert record["resolver"]["action"] == "install_wheel"
    assert record["resolver"]["wheel"]["variant"] == variant
    assert install.module_bytes() == release.module_bytes(variant)
    install.computes_like_the_reference()


def assert_built_locally(install, archs, reason):
    assert install.returncode == 0, install.output[-4000:]
    record = install.build_record()
    assert record["kind"] == "local"
    assert record["sass_archs"] == archs
    assert record["resolver"]["action"] == "build_local"
    assert reason in record["resolver"]["reason"]
    assert reason in install.output
    install.computes_like_the_reference()


def test_0_the_release_has_two_real_cuda13_builds(release):
    """cu130 and the newer one are each compiled by their own nvcc, not relabelled copies."""
    built = {}
    for variant, cuda in (("cu130", "13.0"), (NEWEST, SECOND_CUDA)):
        entry = next(w for w in release.manifest["wheels"] if w["variant"] == variant)
        # sm_90 from the list, sm_90a from the Hopper kernels' folder (pyproject's arch_specific_sources)
        assert entry["cuda"] == cuda and entry["sass"] == ["sm_90", "sm_90a"]
        with zipfile.ZipFile(io.BytesIO(release.assets[entry["file"]])) as wheel:
            record = json.loads(wheel.read("culina/_build_info.json"))
        assert record["cuda_version"] == cuda and record["nvcc_version"].startswith(cuda + ".")
        built[variant] = (record["toolkit_source"], release.module_bytes(variant))
    assert built[NEWEST][0].startswith("PyPI packages")
    assert built["cu130"][1] != built[NEWEST][1]


def test_1_cuda13_driver_with_sm90_gets_the_newest_cuda13_wheel(installer, server, release):
    install = installer.install(H200_CUDA13, server.base_url)
    assert_installed_release(install, release, NEWEST)
    assert "decision: install_wheel" in install.output
    # The build backend asked for no compile toolchain, and pip's later steps reused the decision.
    assert "no compile toolchain is installed" in install.output
    assert not [name for name in ("packaging", "setuptools", "pybind11") if f"Collecting {name}" in install.output]
    assert "decision (from this build's first step): install_wheel" in install.output


def test_2_cuda12_8_driver_gets_cu129_the_relabelled_stand_in(installer, server, release):
    install = installer.install(H200_CUDA12_8, server.base_url)
    assert_installed_release(install, release, "cu129")


def test_3_forcing_cu130_on_a_cuda12_8_host_installs_it_with_a_warning(installer, server, release):
    install = installer.install(H200_CUDA12_8, server.base_url, CULINA_VARIANT="cu130")
    assert_installed_release(install, release, "cu130")
    assert "WARNING: CULINA_VARIANT=cu130 forces a wheel this host may not run" in install.output


def test_4a_release_server_down_builds_locally(installer):
    install = installer.install(H200_CUDA13, UNREACHABLE)
    assert_built_locally(install, ["9.0"], "could not be fetched")


def test_4b_offline_with_an_empty_cache_builds_locally_without_a_request(installer, server):
    install = installer.install(H200_CUDA13, server.base_url, CULINA_OFFLINE="1")
    assert_built_locally(install, ["9.0"], "CULINA_OFFLINE=1")
    assert server.requests == []
    assert "Collecting pybind11" in install.output  # the toolchain, asked for by the backend


def test_5_corrupted_asset_stops_the_install_and_is_never_cached(installer, server, release):
    server.faults[release.asset(NEWEST)] = release_server.Fault("wrong-bytes")
    install = installer.install(H200_CUDA13, server.base_url)
    assert install.returncode != 0, install.output[-4000:]
    assert f"{release.asset(NEWEST)} from {server.base_url}" in install.output
    assert "fails its checksum stops the install" in install.output
    assert "CULINA_BUILD_ON_MISMATCH=1" in install.output
    assert "Collecting pybind11" not in install.output  # no local build was started
    assert cached_wheels(installer.cache) == []


def test_5b_corrupted_asset_builds_locally_when_the_user_allows_it(installer, server, release):
    server.faults[release.asset(NEWEST)] = release_server.Fault("wrong-bytes")
    install = installer.install(H200_CUDA13, server.base_url, CULINA_BUILD_ON_MISMATCH="1")
    assert_built_locally(install, ["9.0"], "sha256")
    assert cached_wheels(installer.cache) == []


def test_6_stalled_server_falls_back_within_the_timeouts(installer, server, release):
    server.faults[release.asset(NEWEST)] = release_server.Fault("stall", times=10)
    install = installer.install(H200_CUDA13, server.base_url, CULINA_TIMEOUT="2", CULINA_RETRIES="1")
    assert_built_locally(install, ["9.0"], "could not be fetched")
    assert "no progress" in install.output or "stall" in install.output.lower()
    assert cached_wheels(installer.cache) == []


def test_7_no_driver_and_no_toolkit_gives_the_cpu_only_module(installer, server):
    install = installer.install(Host(driver_cuda=None, toolkit=False), server.base_url)
    assert install.returncode == 0, install.output[-4000:]
    record = install.build_record()
    assert record["cpu_only"] is True
    assert record["resolver"]["action"] == "build_cpu"
    assert "assumed a CPU-only host" in install.output
    assert server.requests == []
    install.computes_like_the_reference()


def test_8_pascal_gpu_with_cuda13_only_fails_with_what_is_missing(installer, server):
    install = installer.install(Host(driver_cuda="13.0", gpus="NVIDIA Tesla P100=6.1"), server.base_url)
    assert install.returncode != 0
    assert "culina: cannot install" in install.output
    assert "6.1" in install.output and "sm_75 and newer" in install.output
    assert "CULINA_VARIANT=null" in install.output


def test_9_second_install_in_a_new_venv_is_served_by_the_cache(installer, server, release):
    assert_installed_release(installer.install(H200_CUDA13, server.base_url), release, NEWEST)
    asset_gets = len(server.object_gets(release.asset(NEWEST)))
    second = installer.install(H200_CUDA13, server.base_url)
    assert_installed_release(second, release, NEWEST)
    assert len(server.object_gets(release.asset(NEWEST))) == asset_gets == 1


def test_10_bogus_variant_fails_naming_the_variable(installer, server):
    install = installer.install(H200_CUDA13, server.base_url, CULINA_VARIANT="bogus")
    assert install.returncode != 0
    assert "CULINA_VARIANT=bogus" in install.output
    assert f"cu130, {NEWEST}, cu129" in install.output


def test_11_uv_takes_the_same_path(installer, server, release):
    install = installer.install(H200_CUDA13, server.base_url, tool="uv")
    assert_installed_release(install, release, NEWEST)


def test_12_four_installs_at_once_share_one_download(installer, server, release):
    started = [installer.start(H200_CUDA13, server.base_url) for _ in range(4)]
    installs = [installer.finish(*process) for process in started]
    for install in installs:
        assert_installed_release(install, release, NEWEST)
    assert len(server.object_gets(release.asset(NEWEST))) == 1
    assert cached_wheels(installer.cache) == [release.asset(NEWEST)]


def _command_lines_holding(marker: bytes) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:  # the process ended while we looked
            continue
        if marker in text:
            found.append(text.replace(b"\0", b" ").decode(errors="replace"))
    return found


def test_8_credentials_in_the_release_url_never_reach_a_command_line(installer, server, release):
    """Every local user can read /proc/*/cmdline: the release URL reaches the helper through its
    environment, which only the user and root can read."""
    secret = "hunter2"
    url = server.base_url.replace("://", f"://culina:{secret}-password@", 1) + f"?token={secret}-token"
    process, log, venv, started = installer.start(H200_CUDA13, url)
    seen: list[str] = []
    while process.poll() is None:
        seen += _command_lines_holding(secret.encode())
        time.sleep(0.002)
    install = installer.finish(process, log, venv, started)
    assert_installed_release(install, release, NEWEST)
    assert seen == []
    assert secret not in install.output
