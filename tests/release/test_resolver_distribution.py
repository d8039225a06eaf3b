"""culina-resolver as its own distribution (tools/release/build_resolver.py): an sdist that
compiles the helper from resolver/'s sources, and the platform wheel pip builds from it, which
holds the backend, those sources and the helper compiled for this platform. Installed, the
package finds its packaged helper and checks it as a release sdist's prebuilt helper is checked
(record sha256, source hash, glibc, handshake)."""
from __future__ import annotations

import json
import platform
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from release_build import ROOT

from culina_resolver import helper_build  # noqa: E402 - release_build puts resolver/ on the path

BUILD_RESOLVER = ROOT / "tools" / "release" / "build_resolver.py"
FILES = "culina_resolver/helper_files"


@pytest.fixture(scope="module")
def distributions(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("culina-resolver")
    done = subprocess.run([sys.executable, str(BUILD_RESOLVER), "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    return next(out.glob("culina_resolver-0.1.0.tar.gz")), next(out.glob("culina_resolver-0.1.0-*.whl"))


def test_the_sdist_carries_the_sources_and_the_header_to_compile_them(distributions):
    with tarfile.open(distributions[0]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for needed in ("pyproject.toml", "setup.py", "culina_resolver/backend.py", "src/cli/main.cpp",
                   "src/facts/cuda_facts.json", "bundled/nlohmann/json.hpp", "bundled/nlohmann-json-LICENSE"):
        assert needed in names, needed
    assert not [name for name in names if name.startswith(("prebuilt/", "bundled/python", FILES))]


def test_the_wheel_is_for_this_platform_and_holds_a_helper_built_from_its_sources(distributions):
    wheel_path = distributions[1]
    libc = helper_build.glibc_version()
    assert wheel_path.name.endswith(f"-py3-none-manylinux_{libc[0]}_{libc[1]}_{platform.machine()}.whl")
    with zipfile.ZipFile(wheel_path) as wheel:
        names = set(wheel.namelist())
        record = json.loads(wheel.read(f"{FILES}/prebuilt/helpers.json"))
    [entry] = record["helpers"]
    assert entry["platform"] == helper_build.platform_name()
    assert entry["source_hash"] == helper_build.source_hash()  # resolver/src of this checkout
    assert f"{FILES}/prebuilt/{entry['file']}" in names and f"{FILES}/src/cli/main.cpp" in names
    assert "culina_resolver/backend.py" in names


def test_the_installed_package_checks_and_uses_its_own_helper(distributions, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(distributions[1])], check=True, timeout=300)
    code = ("from culina_resolver import helper_build, resolver_files; "
            "helper, checked = helper_build.prebuilt_helper(helper_build.source_hash()); "
            "print(resolver_files.origin()); print(checked); helper.close()")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    origin, checked = done.stdout.splitlines()
    assert origin == "the culina-resolver package"
    assert str(target / FILES / "prebuilt") in checked and "handshake checked" in checked


def test_make_release_packs_the_helper_build_release_compiled(release, tmp_path):
    """`make release`: build_resolver.py --prebuilt takes build_release.py's helper/ (checked against its
    record and these sources) instead of compiling another."""
    helpers = release.out / "helper"
    done = subprocess.run([sys.executable, str(BUILD_RESOLVER), "--out", str(tmp_path), "--prebuilt", str(helpers)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"with the helper from {helpers}" in done.stdout
    [entry] = json.loads((helpers / "helpers.json").read_text())["helpers"]
    with zipfile.ZipFile(next(tmp_path.glob("culina_resolver-0.1.0-*.whl"))) as wheel:
        packed = json.loads(wheel.read(f"{FILES}/prebuilt/helpers.json"))["helpers"]
        binary = wheel.read(f"{FILES}/prebuilt/{entry['file']}")
    assert packed == [entry] and binary == (helpers / entry["file"]).read_bytes()
