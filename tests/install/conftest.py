"""The real user path, end to end: `make release`-built assets on a local release server, the
sdist and the build requirements on a local package index, and `pip install culina` (or uv) in
fresh venvs, with the host described by the fake libcuda.so.1 or hidden toolkits.

One release build serves the whole session (CUDA for sm_90 only, to keep CI fast). The release
has two real CUDA 13 wheels: cu130 (this machine's toolkit when it is 13.0, else NVIDIA's PyPI
packages) and NEWEST, built with CUDA SECOND_CUDA from PyPI. CUDA 12 has no nvcc on PyPI, so the
cu129 asset is the cu130 wheel relabelled and listed as a CUDA 12.9 build: it stands in for a real
cu129 build in the CUDA 12 scenarios only, and is named as such.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

import release_server
from package_index import PackageIndex, fill_index, install_requirements

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "release"))

import no_toolkit  # noqa: E402 - needs the path above
sys.path.insert(0, str(REPO / "resolver"))
from culina_resolver import pypi_toolkit  # noqa: E402
BUILD = Path(os.environ.get("CULINA_BUILD_DIR", REPO / "build"))
SECOND_CUDA = "13.5"
NEWEST = "cu135"  # what a CUDA 13 driver gets: the newest CUDA 13 build it runs


@dataclasses.dataclass
class Release:
    folder: Path
    sdist: Path
    manifest: dict
    assets: dict[str, bytes]  # asset name -> bytes, as the release server serves them

    def asset(self, variant: str) -> str:
        return next(w["file"] for w in self.manifest["wheels"] if w["variant"] == variant)

    def module_bytes(self, variant: str) -> bytes:
        with zipfile.ZipFile(io.BytesIO(self.assets[self.asset(variant)])) as wheel:
            return wheel.read(next(n for n in wheel.namelist() if n.startswith("culina/_C") and n.endswith(".so")))


def _add_relabelled_cu129(resolver: Path, folder: Path, manifest_path: Path) -> None:
    cu130 = next(folder.glob("*-cu130.whl"))
    cu129 = folder / cu130.name.replace("-cu130.whl", "-cu129.whl")
    shutil.copy2(cu130, cu129)
    sass = ",".join(next(w for w in json.loads(manifest_path.read_text())["wheels"] if w["file"] == cu130.name)["sass"])
    subprocess.run([str(resolver), "manifest", "add", "--manifest", str(manifest_path), "--wheel", str(cu129),
                    "--cuda", "12.9", "--sass", sass], check=True, capture_output=True)


def _replace_manifest_in_sdist(sdist: Path, manifest_path: Path) -> None:
    """The sdist carries the manifest; after adding the stand-in it must carry the new one."""
    with tarfile.open(sdist) as source:
        members = [(m, source.extractfile(m).read() if m.isfile() else None) for m in source.getmembers()]
    data = manifest_path.read_bytes()
    with tarfile.open(sdist, "w:gz") as target:
        for member, content in members:
            if member.name.endswith("/release-manifest.json"):
                member.size = len(data)
                content = data
            target.addfile(member, io.BytesIO(content) if content is not None else None)


def _build_release(folder: Path) -> None:
    """`make release CUDA="13.0 13.5"` for this interpreter and sm_90; CULINA_TEST_RELEASE_DIR reuses the output of
    an earlier run (iterating on these tests need not rebuild it)."""
    reuse = os.environ.get("CULINA_TEST_RELEASE_DIR")
    if reuse:
        shutil.copytree(reuse, folder, dirs_exist_ok=True)
        return
    done = subprocess.run([sys.executable, str(REPO / "tools" / "release" / "build_release.py"), "--out", str(folder),
                           "--archs", "9.0", "--python", sys.executable, "--cuda", "13.0", SECOND_CUDA],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"build_release.py failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="session")
def resolver_wheel(tmp_path_factory) -> Path:
    """culina-resolver's wheel, built from its sdist by tools/release/build_resolver.py (the helper
    compiled from the sdist's sources); CULINA_TEST_RESOLVER_DIST_DIR reuses an earlier run's output."""
    folder = tmp_path_factory.mktemp("resolver-dist")
    reuse = os.environ.get("CULINA_TEST_RESOLVER_DIST_DIR")
    if reuse:
        shutil.copytree(reuse, folder, dirs_exist_ok=True)
    else:
        done = subprocess.run([sys.executable, str(REPO / "tools" / "release" / "build_resolver.py"), "--out", str(folder)],
                              cwd=REPO, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, f"build_resolver.py failed:\n{done.stdout}\n{done.stderr}"
    return next(folder.glob("culina_resolver-*.whl"))


@pytest.fixture(scope="session")
def release(tmp_path_factory, resolver) -> Release:
    folder = tmp_path_factory.mktemp("release")
    _build_release(folder)
    manifest_path = folder / "release-manifest.json"
    _add_relabelled_cu129(resolver, folder, manifest_path)
    sdist = next(folder.glob("culina-*.tar.gz"))
    _replace_manifest_in_sdist(sdist, manifest_path)
    manifest = json.loads(manifest_path.read_text())
    assets = {w["file"]: (folder / w["file"]).read_bytes() for w in manifest["wheels"]}
    return Release(folder, sdist, manifest, assets)


@pytest.fixture(scope="session")
def index(release, tmp_path_factory):
    folder = tmp_path_factory.mktemp("index")
    # The CUDA 13.0 toolkit from PyPI too: what the backend asks for on a host with no toolkit.
    toolkit = pypi_toolkit.requirements_up_to("13.0")
    fill_index(folder, [*install_requirements(REPO / "pyproject.toml"), *toolkit], BUILD / "pip-index-cache")
    shutil.copy2(release.sdist, folder / release.sdist.name)
    with PackageIndex(folder) as served:
        yield served


@pytest.fixture(scope="session")
def warm_helper_cache(release, tmp_path_factory) -> Path:
    """A cache holding the helper compiled from the sdist's sources, for the scenarios that compile
    it (CULINA_HELPER=source, source checkouts); a release sdist's installs use its prebuilt one."""
    cache = tmp_path_factory.mktemp("helper-cache")
    unpacked = tmp_path_factory.mktemp("sdist")
    with tarfile.open(release.sdist) as sdist:
        sdist.extractall(unpacked)
    tree = next(unpacked.glob("culina-*"))
    subprocess.run([sys.executable, "-c", "from culina_resolver import adapter_settings, helper_build; "
                    "helper_build.helper_binary(adapter_settings.current())"], cwd=tree,
                   env={**os.environ, "CULINA_CACHE_DIR": str(cache), "PYTHONPATH": str(tree / "resolver"),
                        "CULINA_HELPER": "source"},
                   check=True, capture_output=True, timeout=900)
    return cache


@pytest.fixture
def server(release):
    with release_server.ReleaseServer(release.assets) as served:
        yield served


@dataclasses.dataclass
class Install:
    returncode: int
    output: str
    seconds: float
    venv: Path

    def python(self, code: str) -> str:
        done = subprocess.run([str(self.venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                              timeout=120, cwd="/")
        assert done.returncode == 0, done.stderr
        return done.stdout

    def build_record(self) -> dict:
        return json.loads(self.python("import json, culina; print(json.dumps(culina.build_record()))"))

    def module_bytes(self) -> bytes:
        path = self.python("import culina._C as m; print(m.__file__)").strip()
        return Path(path).read_bytes()

    def computes_like_the_reference(self) -> None:
        self.python(
            "import numpy as np, culina\n"
            "rng = np.random.default_rng(0)\n"
            "q, k, v = (rng.standard_normal((1, 2, 37, 16)).astype(np.float32) for _ in range(3))\n"
            "g = np.array([0.9, 1.0], dtype=np.float32)\n"
            "o = culina.linear_attention(q, k, v, g)\n"
            "S = np.zeros((1, 2, 16, 16)); ref = np.empty((1, 2, 37, 16))\n"
            "for t in range(37):\n"
            "    S = g[None, :, None, None] * S + k[:, :, t, :, None] * v[:, :, t, None, :]\n"
            "    ref[:, :, t] = 16 ** -0.5 * np.einsum('bhd,bhde->bhe', q[:, :, t], S)\n"
            "assert np.allclose(o, ref, rtol=1e-4, atol=1e-4), np.abs(o - ref).max()\n")


def _clean_environment(prefix: str) -> dict[str, str]:
    dropped = ("CULINA_", prefix, "FAKE_CUDA_", "PIP_", "UV_", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(dropped)}


@dataclasses.dataclass
class Host:
    """What the install sees: the fake driver's answer, and whether a CUDA toolkit is visible."""

    driver_cuda: str | None = "13.0"   # None: no libcuda at all
    gpus: str = "NVIDIA H200=9.0"
    toolkit: bool = True


class Installer:
    """`pip install <project>` in fresh venvs; `prefix` is the project's variable prefix."""

    def __init__(self, tmp_path: Path, index: PackageIndex, fake_libcuda_dir: Path, cache: Path,
                 prefix: str = "CULINA_"):
        self.tmp_path = tmp_path
        self.index = index
        self.fake_libcuda_dir = fake_libcuda_dir
        self.cache = cache
        self.prefix = prefix
        self.count = 0

    def environment(self, host: Host, release_url: str, **extra: str) -> dict[str, str]:
        env = _clean_environment(self.prefix)
        env.update({self.prefix + name: value for name, value in (
            ("CACHE_DIR", str(self.cache)), ("RELEASE_URL", release_url), ("TIMEOUT", "5"), ("RETRIES", "1"),
            ("MAX_JOBS", "2"))})
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        if host.driver_cuda is not None:
            major, minor = host.driver_cuda.split(".")
            env.update(LD_LIBRARY_PATH=str(self.fake_libcuda_dir), FAKE_CUDA_GPUS=host.gpus,
                       FAKE_CUDA_DRIVER_VERSION=str(int(major) * 1000 + int(minor) * 10))
        if not host.toolkit:
            env = no_toolkit.env_without_toolkit(env)
        env.update(extra)
        return env

    def new_venv(self) -> Path:
        self.count += 1
        venv = self.tmp_path / f"venv{self.count}"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        return venv

    def command(self, venv: Path, tool: str, requirement: str = "culina") -> list[str]:
        if tool == "uv":
            uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
            if uv is None:
                pytest.skip("uv is not installed (tools/requirements.txt lists it)")
            return [uv, "pip", "install", "--no-cache", "--python", str(venv / "bin" / "python"),
                    "--index-url", self.index.url, "-v", requirement]
        return [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--index-url", self.index.url, "-v", requirement]

    def start(self, host: Host, release_url: str, tool: str = "pip", requirement: str = "culina", **extra: str):
        venv = self.new_venv()
        command = self.command(venv, tool, requirement)
        if not host.toolkit:
            why_not = no_toolkit.can_hide()
            if why_not:
                pytest.skip(f"cannot hide the CUDA toolkit here: {why_not}")
            command = no_toolkit.command_without_toolkit(command)
        log = (self.tmp_path / f"install{self.count}.log").open("w")
        started = time.monotonic()
        process = subprocess.Popen(command, env=self.environment(host, release_url, **extra), stdout=log,
                                   stderr=subprocess.STDOUT, cwd=self.tmp_path)
        return process, log, venv, started

    @staticmethod
    def finish(process, log, venv, started) -> Install:
        returncode = process.wait(timeout=1800)
        log.close()
        return Install(returncode, Path(log.name).read_text(), time.monotonic() - started, venv)

    def install(self, host: Host, release_url: str, tool: str = "pip", requirement: str = "culina",
                **extra: str) -> Install:
        return self.finish(*self.start(host, release_url, tool, requirement, **extra))


@pytest.fixture
def installer(tmp_path, index, fake_libcuda_dir, warm_helper_cache) -> Installer:
    cache = tmp_path / "cache"
    shutil.copytree(warm_helper_cache, cache)
    return Installer(tmp_path, index, fake_libcuda_dir, cache)


def cached_wheels(cache: Path) -> list[str]:
    folder = cache / "wheels"
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) if folder.exists() else []
