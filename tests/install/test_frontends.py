"""Other ways into the same bdist_wheel: `pip wheel --no-build-isolation` on a source tree, whose
sdist carries no manifest, so the resolver reads it from the release URL."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile

import release_server
from conftest import Host


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
    assert wheel.name == release.asset("cu130").replace("-cu130.whl", ".whl")
    with zipfile.ZipFile(wheel) as built:
        module = next(n for n in built.namelist() if n.startswith("culina/_C") and n.endswith(".so"))
        assert built.read(module) == release.module_bytes("cu130")
        record = json.loads(built.read("culina/_build_info.json"))
    assert record["kind"] == "release" and record["resolver"]["wheel"]["variant"] == "cu130"
