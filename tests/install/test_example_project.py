"""The resolver adopted by configuration alone (docs/ADOPTING.md): examples/tinycu, a second CUDA
extension with its own names and its own variable prefix (TINYCU_), requires culina-resolver as
its build backend and holds no resolver code. It is released with tools/release/build_release.py
--project-root (sm_90, CUDA 13.0, this Python; no auditwheel, to stay cheap) and installed with
`pip install tinycu` from the loopback index, which also serves the culina-resolver wheel built in
this session (tools/release/build_resolver.py), and the release server that culina's own tests use.

Every scenario also sets CULINA_* variables that would change culina's install: they must not
change tinycu's.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import release_server
from conftest import BUILD, REPO, Host, Installer, cached_wheels
from package_index import PackageIndex, fill_index, install_requirements

from culina_resolver import pypi_toolkit  # noqa: E402 - conftest puts resolver/ on the path

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
    """examples/tinycu as its checkout holds it: no resolver in it."""
    tree = tmp_path_factory.mktemp("adopter") / "tinycu"
    shutil.copytree(EXAMPLE, tree, ignore=shutil.ignore_patterns("build", "__pycache__", "*.so", "_build_info.json",
                                                                 "*.egg-info"))
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
    with tarfile.open(folder / "tinycu-0.1.0.tar.gz") as sdist:
        assert not [name for name in sdist.getnames() if "/resolver/" in name], "the sdist carries no resolver"
    return folder


def index_folder(folder: Path, tinycu_release: Path, *extra: Path) -> Path:
    # culina's own requirement list, so the download cache that culina's tests filled serves as is.
    fill_index(folder, [*install_requirements(REPO / "pyproject.toml"), *pypi_toolkit.requirements_up_to("13.0")],
               BUILD / "pip-index-cache")
    for distribution in (tinycu_release / "tinycu-0.1.0.tar.gz", *extra):
        shutil.copy2(distribution, folder)
    return folder


@pytest.fixture(scope="module")
def tinycu_index(tinycu_release, resolver_wheel, tmp_path_factory):
    with PackageIndex(index_folder(tmp_path_factory.mktemp("tinycu-index"), tinycu_release, resolver_wheel)) as served:
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
    return installed_from(installer, host, release_url, "tinycu", **extra)


def installed_from(installer: Installer, host: Host, release_url: str, requirement: str, **extra: str):
    install = installer.install(host, release_url, requirement=requirement, **{**CULINA_NOISE, **extra})
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
    assert "prebuilt helper from the culina-resolver package" in install.output
    assert "culina_resolver-0.1.0-py3-none-manylinux" in install.output  # from the index, into the build env
    # The wheel came from TINYCU_RELEASE_URL into TINYCU_CACHE_DIR, byte for byte the released module.
    assert tinycu_server.object_gets(asset) and cached_wheels(installer.cache) == [asset]
    assert record["cache_root"] == str(installer.cache)  # what `culina cache` lists and purges
    with zipfile.ZipFile(io.BytesIO((tinycu_release / asset).read_bytes())) as wheel:
        released = wheel.read(next(n for n in wheel.namelist() if n.startswith("tinycu/_C")))
    assert Path(install.python("import tinycu._C as m; print(m.__file__)").strip()).read_bytes() == released
    assert device.startswith("cpu: ")  # the fake driver answers the probe; no GPU runs the kernel here


def test_tinycu_variant_source_builds_locally_for_tinycu_cuda_archs(installer, tinycu_server):
    install, record, _ = installed(installer, H200_CUDA13, tinycu_server.base_url, TINYCU_VARIANT="source",
                                   TINYCU_CUDA_ARCHS="8.0")
    assert record["kind"] == "local" and record["resolver"]["action"] == "build_local"
    assert record["cpu_only"] is False and record["sass_archs"] == ["8.0"]
    assert record["cache_root"] == str(installer.cache)
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


def test_pip_install_of_the_checkout_takes_culina_resolver_from_the_index(installer, tinycu_release, tinycu_tree):
    """`pip install ./examples/tinycu`: the checkout holds no resolver and no manifest; the backend
    comes from the index and fetches the manifest from TINYCU_RELEASE_URL."""
    manifest = tinycu_release / "release-manifest.json"
    assets = {w["file"]: (tinycu_release / w["file"]).read_bytes() for w in json.loads(manifest.read_text())["wheels"]}
    with release_server.ReleaseServer({**assets, manifest.name: manifest.read_bytes()}) as server:
        install, record, _ = installed_from(installer, H200_CUDA13, server.base_url, str(tinycu_tree))
    assert record["kind"] == "release" and record["resolver"]["action"] == "install_wheel"
    assert "culina_resolver-0.1.0-py3-none-manylinux" in install.output
    assert "prebuilt helper from the culina-resolver package" in install.output


def test_without_culina_resolver_on_the_index_pip_stops_naming_it(tmp_path, tinycu_release, fake_libcuda_dir,
                                                                   tinycu_server, tinycu_tree):
    with PackageIndex(index_folder(tmp_path / "index", tinycu_release)) as bare:
        installer = Installer(tmp_path, bare, fake_libcuda_dir, tmp_path / "cache", prefix="TINYCU_")
        install = installer.install(H200_CUDA13, tinycu_server.base_url, requirement=str(tinycu_tree))
    assert install.returncode != 0
    assert "No matching distribution found for culina-resolver>=0.1" in install.output, install.output[-3000:]
    assert "Traceback" not in install.output and tinycu_server.requests == []
