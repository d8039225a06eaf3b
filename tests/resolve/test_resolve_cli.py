"""`culina-resolver resolve`: probe (overridden), select and fetch against the local release
server, and the policy's fallback when the chosen wheel cannot be fetched or verified."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

import release_server

TAG = "cp312-cp312-manylinux_2_28_x86_64"
SASS = ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"]


def wheel_entry(file: str, data: bytes, variant: str, cuda: str | None) -> dict:
    sass = SASS if cuda else []
    ptx = ["compute_120"] if cuda else []
    properties = []
    if cuda:
        properties = [f"nvidia :: cuda_version_lower_bound :: {cuda}"]
        properties += [f"nvidia :: sm_arch :: {a[3:]}_real" for a in sass]
        properties += [f"nvidia :: sm_arch :: {a[8:]}_virtual" for a in ptx]
    return {"file": file, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "tags": [TAG],
            "variant": variant, "cuda": cuda, "sass": sass, "ptx": ptx, "variant_properties": properties}


class Release:
    """Three small wheels (cu130, cu129, null) served over HTTPS, and their manifest."""

    def __init__(self, tmp_path: Path, pki):
        self.files = {}
        entries = []
        for seed, (variant, cuda) in enumerate([("cu130", "13.0"), ("cu129", "12.9"), ("null", None)]):
            file = f"culina-0.1.0-{TAG}-{variant}.whl"
            self.files[variant] = (file, release_server.build_wheel(seed=seed))
            entries.append(wheel_entry(file, self.files[variant][1], variant, cuda))
        self.manifest = tmp_path / "release-manifest.json"
        self.manifest.write_text(json.dumps({"schema_version": 1, "name": "culina", "version": "0.1.0",
                                             "wheels": entries}))
        self.tags = tmp_path / "tags.txt"
        self.tags.write_text(TAG + "\n")
        self.server = release_server.ReleaseServer({f: d for f, d in self.files.values()}, cert=pki.cert, key=pki.key)


@pytest.fixture
def release(tmp_path, pki):
    release = Release(tmp_path, pki)
    with release.server:
        yield release


@pytest.fixture
def fake_toolkit(tmp_path) -> Path:
    """A folder with an `nvcc` that reports CUDA 13.0, first on PATH, so the tests do not depend
    on which toolkit this machine has."""
    folder = tmp_path / "toolkit-bin"
    folder.mkdir()
    nvcc = folder / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return folder


def resolve(resolver, release, tmp_path, fake_toolkit, cuda="13.0", sm="9.0", **env):
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("CULINA_")
             and k not in ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "https_proxy", "HTTPS_PROXY", "CUDA_HOME", "CUDA_PATH")}
    clean.update(CULINA_OVERRIDE_CUDA=cuda, CULINA_OVERRIDE_SM=sm, CULINA_CA_BUNDLE=env.pop("ca"),
                 CULINA_TIMEOUT="2", CULINA_RETRIES="1", PATH=f"{fake_toolkit}:{clean['PATH']}")
    clean.update(env)
    done = subprocess.run(
        [str(resolver), "resolve", "--manifest", str(release.manifest), "--tags", str(release.tags),
         "--base-url", release.server.base_url, "--cache-dir", str(tmp_path / "cache"), "--json"],
        env=clean, capture_output=True, text=True, timeout=60)
    decision = json.loads(done.stdout) if done.stdout.strip() else None
    return done, decision


@pytest.fixture
def run(resolver, release, tmp_path, fake_toolkit, pki):
    def run(**kwargs):
        return resolve(resolver, release, tmp_path, fake_toolkit, ca=str(pki.ca), **kwargs)
    return run


def cache_files(tmp_path) -> list[str]:
    wheels = tmp_path / "cache" / "wheels"
    return sorted(p.name for p in wheels.iterdir() if not p.name.endswith(".lock")) if wheels.exists() else []


def test_driver_13_takes_cu130_and_returns_the_verified_file(run, release):
    done, decision = run()
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "install_wheel"
    assert decision["wheel"]["variant"] == "cu130"
    assert Path(decision["wheel_path"]).read_bytes() == release.files["cu130"][1]
    assert decision["fetch_error"] is None
    assert "decided: install_wheel" in done.stderr


def test_driver_12_8_takes_cu129(run, release):
    done, decision = run(cuda="12.8")
    assert done.returncode == 0, done.stderr
    assert decision["wheel"]["variant"] == "cu129"
    assert Path(decision["wheel_path"]).read_bytes() == release.files["cu129"][1]


def test_missing_asset_falls_back_to_a_local_build_with_the_reason(run, release, tmp_path):
    release.server.faults[release.files["cu130"][0]] = release_server.Fault("404")
    done, decision = run()
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "build_local"
    assert decision["local_build_archs"] == ["9.0"]
    assert decision["wheel_path"] is None
    assert "404" in decision["fetch_error"]
    assert "could not be fetched" in decision["reason"]
    assert cache_files(tmp_path) == []


def test_corrupted_asset_stops_the_install_naming_the_file_url_hashes_and_fix(run, release, tmp_path):
    file, data = release.files["cu130"]
    release.server.faults[file] = release_server.Fault("wrong-bytes")
    done, decision = run()
    assert done.returncode == 3, done.stderr
    assert decision["action"] == "error"
    reason = decision["reason"]
    assert file in reason and release.server.base_url in reason
    assert hashlib.sha256(data).hexdigest() in reason  # what the manifest says
    assert "has sha256" in reason                      # what arrived
    assert "CULINA_BUILD_ON_MISMATCH=1" in reason
    assert decision["wheel_path"] is None
    assert cache_files(tmp_path) == []


def test_corrupted_asset_builds_locally_when_build_on_mismatch_allows(run, release, tmp_path):
    release.server.faults[release.files["cu130"][0]] = release_server.Fault("wrong-bytes")
    done, decision = run(CULINA_BUILD_ON_MISMATCH="1")
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "build_local"
    assert "sha256" in decision["fetch_error"]
    assert "could not be verified" in decision["reason"]
    assert cache_files(tmp_path) == []


def test_a_pinned_variant_that_cannot_be_fetched_stops_instead_of_building(run, release):
    file = release.files["cu130"][0]
    release.server.faults[file] = release_server.Fault("404")
    done, decision = run(CULINA_VARIANT="cu130")
    assert done.returncode == 3, done.stderr
    assert decision["action"] == "error"
    assert file in decision["reason"] and "404" in decision["reason"]
    assert "CULINA_VARIANT=cu130 asks for this prebuilt wheel" in decision["reason"]
    assert "CULINA_VARIANT=auto" in decision["reason"]


@pytest.mark.parametrize("setting", [{"CULINA_VARIANT": "source"}, {"CULINA_OVERRIDE_SM": "11.0"}])
def test_only_binary_refuses_every_local_build(run, release, setting):
    sm = setting.pop("CULINA_OVERRIDE_SM", "9.0")
    done, decision = run(CULINA_ONLY_BINARY="1", sm=sm, **setting)
    assert done.returncode == 3, done.stderr
    assert decision["action"] == "error"
    assert "CULINA_ONLY_BINARY=1 forbids a local build" in decision["reason"]
    assert "unset CULINA_ONLY_BINARY" in decision["reason"]


def test_only_binary_refuses_the_build_after_a_failed_download(run, release):
    release.server.faults[release.files["cu130"][0]] = release_server.Fault("404")
    done, decision = run(CULINA_ONLY_BINARY="1")
    assert done.returncode == 3, done.stderr
    assert "CULINA_ONLY_BINARY=1 forbids a local build" in decision["reason"]
    assert "404" in decision["reason"]


def test_only_binary_still_installs_a_fitting_wheel(run, release):
    done, decision = run(CULINA_ONLY_BINARY="1")
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "install_wheel"


def test_the_manifest_comes_from_the_release_url_variable_not_the_command_line(resolver, release, tmp_path,
                                                                                fake_toolkit, pki):
    """--manifest-from-release: the helper fetches <CULINA_RELEASE_URL>/release-manifest.json, so a URL with
    credentials never rides on argv."""
    release.server.assets["release-manifest.json"] = release.manifest.read_bytes()
    user_url = release.server.base_url.replace("https://", "https://user:secret@")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CULINA_")}
    clean.update(CULINA_OVERRIDE_CUDA="13.0", CULINA_OVERRIDE_SM="9.0", CULINA_CA_BUNDLE=str(pki.ca),
                 CULINA_RELEASE_URL=user_url, CULINA_TIMEOUT="2", CULINA_RETRIES="1",
                 PATH=f"{fake_toolkit}:{clean['PATH']}")
    done = subprocess.run([str(resolver), "resolve", "--manifest-from-release", "--project", "culina",
                           "--project-version", "0.1.0", "--tags", str(release.tags),
                           "--cache-dir", str(tmp_path / "cache"), "--json"],
                          env=clean, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["action"] == "install_wheel"
    assert "secret" not in done.stderr and "secret" not in done.stdout
    assert release.server.object_gets("release-manifest.json")


def test_offline_with_an_empty_cache_builds_locally_without_a_request(run, release):
    done, decision = run(CULINA_OFFLINE="1")
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "build_local"
    assert "CULINA_OFFLINE" in decision["fetch_error"]
    assert release.server.requests == []


def test_offline_is_served_by_the_cache(run, release):
    assert run()[1]["action"] == "install_wheel"
    count = len(release.server.requests)
    done, decision = run(CULINA_OFFLINE="1")
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "install_wheel"
    assert len(release.server.requests) == count


def test_pascal_gpu_with_cuda_13_only_is_a_clear_error(run):
    done, decision = run(sm="6.1")
    assert done.returncode == 3
    assert decision["action"] == "error"
    assert "6.1" in decision["reason"] and "sm_75" in decision["reason"]


def test_forced_variant_installs_with_a_warning(run, release):
    done, decision = run(cuda="12.8", CULINA_VARIANT="cu130")
    assert done.returncode == 0, done.stderr
    assert decision["wheel"]["variant"] == "cu130"
    assert any("CULINA_VARIANT=cu130" in w for w in decision["warnings"])


def test_variant_the_release_lacks_names_the_variable_and_the_labels(run):
    done, decision = run(CULINA_VARIANT="bogus")
    assert done.returncode == 3
    assert decision["action"] == "error"
    assert "CULINA_VARIANT=bogus" in decision["reason"] and "cu130, cu129, null" in decision["reason"]


def test_malformed_variant_is_refused_before_anything_runs(run, release):
    done, decision = run(CULINA_VARIANT="cu 130!")
    assert done.returncode == 2
    assert decision is None
    assert "CULINA_VARIANT" in done.stderr and "cu 130!" in done.stderr
    assert release.server.requests == []


def test_source_never_downloads(run, release):
    done, decision = run(CULINA_VARIANT="source")
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "build_local"
    assert release.server.requests == []


def test_a_local_build_names_the_nvcc_the_probe_found(run, fake_toolkit):
    done, decision = run(CULINA_VARIANT="source")
    assert decision["action"] == "build_local"
    assert decision["build_toolkit"] == {"nvcc": str(fake_toolkit / "nvcc"), "root": str(fake_toolkit.parent),
                                         "cuda": "13.0", "found_in": "PATH"}
    assert f"toolkit      CUDA 13.0, {fake_toolkit / 'nvcc'}" in done.stderr

    done, decision = run()
    assert decision["action"] == "install_wheel"
    assert decision["build_toolkit"] is None


def test_on_an_interpreter_without_wheels_hints_suggest_a_local_build(run, release):
    # The issue this guards: on Python 3.13 the hint said CULINA_VARIANT=cu130, which then failed
    # with "no cu130 wheel fits this interpreter".
    release.tags.write_text("cp313-cp313-manylinux_2_28_x86_64\n")
    done, decision = run(sm="", cuda="")
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "build_local"
    hint = decision["override_hint"]
    assert "CULINA_VARIANT to source to build locally (no wheel of culina 0.1.0 is built for this interpreter" in hint
    assert not any(label in hint for label in ("cu130", "cu129", "null"))

    done, decision = run(CULINA_VARIANT="cu118")
    assert decision["action"] == "error"
    assert decision["reason"].endswith("Set CULINA_VARIANT to auto or to source to build locally (no wheel of culina "
                                       "0.1.0 is built for this interpreter and platform)")
