"""The resolver adopted by configuration alone (docs/ADOPTING.md): examples/tinycu, a second CUDA
extension with its own names and its own variable prefix (TINYCU_), gets culina's resolver/
copied into its tree as an adopter would, is released with tools/release/build_release.py
--project-root (sm_90, CUDA 13.0, this Python; no auditwheel, to stay cheap) and installed with
`pip install tinycu` from the loopback index and release server that culina's own tests use.

Every scenario also sets CULINA_* variables that would change culina's install: they must not
change tinycu's.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import release_server
from conftest import BUILD, REPO, Host, Installer, cached_wheels
from package_index import PackageIndex, fill_index, install_requirements

import pypi_toolkit  # noqa: E402 - conftest puts resolver/adapter on the path

EXAMPLE = REPO / "examples" / "tinycu"
H200_CUDA13 = Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0")
UNREACHABLE = "http://127.0.0.1:1/example/tinycu/releases/download/v0.1.0"
# What would steer culina's install elsewhere; tinycu reads none of it.
CULINA_NOISE = {"CULINA_VARIANT": "bogus", "CULINA_OFFLINE": "maybe", "CULINA_CUDA_ARCHS": "8.0;foo",
                "CULINA_HELPER": "sometimes", "CULINA_CACHE_DIR": "relative", "CULINA_RELEASE_URL": UNREACHABLE,
                "CULINA_TIMEOUT": "abc"}
SAXPY = "import json, tinycu; print(json.dumps(tinycu.saxpy(2.0, [1.0, 2.0, 3.0], [10.0, 20.0, 30.0])))"


@pytest.fixture(scope="module")
def tinycu_tree(tmp_path_factory) -> Path:
    """examples/tinycu with resolver/ copied in: what an adopter's checkout holds."""
    tree = tmp_path_factory.mktemp("adopter") / "tinycu"
    shutil.copytree(EXAMPLE, tree, ignore=shutil.ignore_patterns("build", "resolver", "__pycache__", "*.so",
                                                                 "_build_info.json", "*.egg-info"))
    shutil.copytree(REPO / "resolver", tree / "resolver",
                    ignore=shutil.ignore_patterns("__pycache__", "bundled", "prebuilt"))
    return tree


@pytest.fixture(scope="module")
def tinycu_release(tinycu_tree, tmp_path_factory) -> Path:
    """The folder of the example's release assets: its wheel, manifest and sdist."""
    folder = tmp_path_factory.mktemp("tinycu-release")
    done = subprocess.run([sys.executable, str(REPO / "tools" / "release" / "build_release.py"),
                           "--project-root", str(tinycu_tree), "--out", str(folder), "--archs", "9.0",
                           "--python", sys.executable, "--cuda", "13.0", "--no-auditwheel"],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"build_release.py failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    manifest = json.loads((folder / "release-manifest.json").read_text())
    assert manifest["name"] == "tinycu" and [w["variant"] for w in manifest["wheels"]] == ["cu130"]
    return folder


@pytest.fixture(scope="module")
def tinycu_index(tinycu_release, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tinycu-index")
    # culina's own requirement list, so the download cache that culina's tests filled serves as is.
    fill_index(folder, [*install_requirements(REPO / "pyproject.toml"), *pypi_toolkit.requirements_up_to("13.0")],
               BUILD / "pip-index-cache")
    shutil.copy2(tinycu_release / "tinycu-0.1.0.tar.gz", folder)
    with PackageIndex(folder) as served:
        yield served


@pytest.fixture
def tinycu_server(tinycu_release):
    wheels = json.loads((tinycu_release / "release-manifest.json").read_text())["wheels"]
    with release_server.ReleaseServer({w["file"]: (tinycu_release / w["file"]).read_bytes() for w in wheels}) as served:
        yield served


@pytest.fixture
def installer(tmp_path, tinycu_index, fake_libcuda_dir) -> Installer:
    return Installer(tmp_path, tinycu_index, fake_libcuda_dir, tmp_path / "tinycu-cache", prefix="TINYCU_")


def installed(installer: Installer, host: Host, release_url: str, **extra: str):
    install = installer.install(host, release_url, requirement="tinycu", **{**CULINA_NOISE, **extra})
    assert install.returncode == 0, install.output[-4000:]
    record = json.loads(install.python("import json, tinycu; print(json.dumps(tinycu.build_record()))"))
    result, device = json.loads(install.python(SAXPY))
    assert result == [12.0, 24.0, 36.0]
    return install, record, device


def test_a_prebuilt_wheel_serves_under_tinycus_own_names(installer, tinycu_server, tinycu_release):
    install, record, device = installed(installer, H200_CUDA13, tinycu_server.base_url)
    asset = next(tinycu_release.glob("*-cu130.whl")).name
    assert record["kind"] == "release" and record["resolver"]["action"] == "install_wheel"
    assert record["resolver"]["wheel"]["file"] == asset and record["resolver"]["wheel"]["variant"] == "cu130"
    assert "[tinycu resolver] decision: install_wheel" in install.output
    assert "prebuilt helper from the sdist" in install.output
    # The wheel came from TINYCU_RELEASE_URL into TINYCU_CACHE_DIR, byte for byte the released module.
    assert tinycu_server.object_gets(asset) and cached_wheels(installer.cache) == [asset]
    with zipfile.ZipFile(io.BytesIO((tinycu_release / asset).read_bytes())) as wheel:
        released = wheel.read(next(n for n in wheel.namelist() if n.startswith("tinycu/_C")))
    assert Path(install.python("import tinycu._C as m; print(m.__file__)").strip()).read_bytes() == released
    assert device.startswith("cpu: ")  # the fake driver answers the probe; no GPU runs the kernel here


def test_tinycu_variant_source_builds_locally_for_tinycu_cuda_archs(installer, tinycu_server):
    install, record, _ = installed(installer, H200_CUDA13, tinycu_server.base_url, TINYCU_VARIANT="source",
                                   TINYCU_CUDA_ARCHS="8.0")
    assert record["kind"] == "local" and record["resolver"]["action"] == "build_local"
    assert record["cpu_only"] is False and record["sass_archs"] == ["8.0"]
    assert "building locally for TINYCU_CUDA_ARCHS=8.0 (set by you)" in install.output
    assert "TINYCU_VARIANT=source" in install.output
    assert tinycu_server.requests == []


def test_no_driver_and_no_toolkit_gives_the_cpu_only_module(installer, tinycu_server):
    install, record, device = installed(installer, Host(driver_cuda=None, toolkit=False), tinycu_server.base_url)
    assert record["cpu_only"] is True and record["resolver"]["action"] == "build_cpu"
    assert install.python("import tinycu; print(tinycu.cuda_compiled)").strip() == "False"
    assert device == "cpu: built without CUDA"
    assert tinycu_server.requests == []


@pytest.mark.parametrize("name, value", [("TINYCU_CUDA_ARCHS", "8.0;foo"),  # the adapter's variable
                                         ("TINYCU_VARIANT", "bogus")])       # the helper's
def test_a_bad_tinycu_value_stops_the_install_naming_it(installer, tinycu_server, name, value):
    install = installer.install(H200_CUDA13, tinycu_server.base_url, requirement="tinycu", **{name: value})
    assert install.returncode != 0
    assert f"{name}={value}" in install.output.replace("'", ""), install.output[-3000:]
    assert "decision: " not in install.output and tinycu_server.requests == []
