"""Other ways into the same build backend: `pip wheel --no-build-isolation` on an unpacked sdist
without its manifest (so the resolver reads it from the release URL), `pip install` of a source
checkout (no bundle of the resolver's imports), `python -m build --wheel`, and an editable
install, which always builds locally."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import zipfile

import release_server
from conftest import NEWEST, REPO, Host


def _checkout(tmp_path):
    """A copy of the files git tracks: what a clone holds (no bundle, no manifest, no build/)."""
    tree = tmp_path / "checkout"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, tracked.split("\0")):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tree / name)
    return tree


def test_pip_wheel_on_a_source_tree_takes_the_manifest_from_the_release_url(release, installer, tmp_path):
    with tarfile.open(release.sdist) as sdist:
        sdist.extractall(tmp_path / "src")
    tree = next((tmp_path / "src").glob("culina-*"))
    (tree / "release-manifest.json").unlink()
    assets = {**release.assets, "release-manifest.json": json.dumps(release.manifest).encode()}
    with release_server.ReleaseServer(assets) as server:
        env = installer.environment(Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0"), server.base_url)
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
                               "-w", str(tmp_path / "out"), str(tree)],
                              env=env, capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "this sdist carries none" in output
    assert "decision: install_wheel" in output
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert wheel.name == release.asset(NEWEST).replace(f"-{NEWEST}.whl", ".whl")
    with zipfile.ZipFile(wheel) as built:
        module = next(n for n in built.namelist() if n.startswith("culina/_C") and n.endswith(".so"))
        assert built.read(module) == release.module_bytes(NEWEST)
        record = json.loads(built.read("culina/_build_info.json"))
    assert record["kind"] == "release" and record["resolver"]["wheel"]["variant"] == NEWEST


def test_pip_install_of_a_source_checkout_asks_for_the_resolver_imports_then_takes_the_wheel(release, installer,
                                                                                               tmp_path):
    tree = _checkout(tmp_path)
    assets = {**release.assets, "release-manifest.json": json.dumps(release.manifest).encode()}
    with release_server.ReleaseServer(assets) as server:
        install = installer.install(Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0"), server.base_url,
                                    requirement=str(tree))
    assert install.returncode == 0, install.output[-4000:]
    assert "a source checkout (no bundled packaging): asking for it and the compile toolchain" in install.output
    assert "decision: install_wheel" in install.output
    assert install.module_bytes() == release.module_bytes(NEWEST)


def test_python_m_build_on_the_sdist_hands_back_the_release_wheel(release, installer, server, tmp_path):
    with tarfile.open(release.sdist) as sdist:
        sdist.extractall(tmp_path / "src")
    tree = next((tmp_path / "src").glob("culina-*"))
    env = installer.environment(Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0"), server.base_url,
                                PIP_INDEX_URL=installer.index.url)
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "out"), str(tree)],
                          env=env, capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "no compile toolchain is installed" in output
    (wheel,) = (tmp_path / "out").glob("*.whl")
    with zipfile.ZipFile(wheel) as built:
        module = next(n for n in built.namelist() if n.startswith("culina/_C") and n.endswith(".so"))
        assert built.read(module) == release.module_bytes(NEWEST)


def test_editable_install_builds_locally(installer, server, tmp_path):
    tree = _checkout(tmp_path)
    install = installer.install(Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0"), server.base_url,
                                requirement=f"--editable={tree}", CULINA_CUDA_ARCHS="9.0")
    assert install.returncode == 0, install.output[-4000:]
    record = install.build_record()
    assert record["kind"] == "local" and record["sass_archs"] == ["9.0"]
    assert install.python("import culina; print(culina.__file__)").startswith(str(tree))
    install.computes_like_the_reference()
