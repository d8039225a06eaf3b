"""`culina-resolver resolve --manifest-url`: a development sdist carries no manifest, so the helper
fetches it through its own libcurl path (CA bundle, timeouts, retries, redirect policy, size cap)
and checks it describes this project. Whatever goes wrong, the install goes on as if the release
listed no wheels (a local build), with the reason in the log; never a traceback, never a hang."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import time

import pytest

import release_server

TAG = "cp312-cp312-manylinux_2_28_x86_64"
MANIFEST = "release-manifest.json"


def cu130_manifest(wheel_file: str, wheel: bytes, name: str = "culina", version: str = "0.1.0") -> bytes:
    entry = {"file": wheel_file, "sha256": hashlib.sha256(wheel).hexdigest(), "size": len(wheel), "tags": [TAG],
             "variant": "cu130", "cuda": "13.0", "sass": ["sm_90"], "ptx": [],
             "variant_properties": ["nvidia :: cuda_version_lower_bound :: 13.0", "nvidia :: sm_arch :: 90_real"]}
    return json.dumps({"schema_version": 1, "name": name, "version": version, "wheels": [entry]}).encode()


class Release:
    """One cu130 wheel and its manifest, both served as release assets over HTTPS."""

    def __init__(self, pki, redirect_base: str | None = None):
        self.wheel_file = f"culina-0.1.0-{TAG}-cu130.whl"
        self.wheel = release_server.build_wheel()
        self.server = release_server.ReleaseServer(
            {self.wheel_file: self.wheel, MANIFEST: cu130_manifest(self.wheel_file, self.wheel)},
            cert=pki.cert, key=pki.key, redirect_base=redirect_base)

    def manifest_gets(self) -> list:
        return self.server.object_gets(MANIFEST)


@pytest.fixture
def release(pki):
    release = Release(pki)
    with release.server:
        yield release


@pytest.fixture
def resolve(resolver, tmp_path, pki):
    """Runs resolve for an H200 on a CUDA 13.0 driver, with an nvcc 13.0 first on PATH."""
    toolkit = tmp_path / "toolkit-bin"
    toolkit.mkdir()
    nvcc = toolkit / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    tags = tmp_path / "tags.txt"
    tags.write_text(TAG + "\n")

    def run(base_url: str, project: str = "culina", version: str = "0.1.0", **env: str):
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith("CULINA_")
                 and k not in ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "https_proxy", "CUDA_HOME", "CUDA_PATH")}
        clean.update(CULINA_OVERRIDE_CUDA="13.0", CULINA_OVERRIDE_SM="9.0", CULINA_CA_BUNDLE=str(pki.ca),
                     CULINA_TIMEOUT="2", CULINA_RETRIES="1", PATH=f"{toolkit}:{clean['PATH']}")
        clean.update(env)
        started = time.monotonic()
        done = subprocess.run(
            [str(resolver), "resolve", "--manifest-url", f"{base_url}/{MANIFEST}", "--project", project,
             "--project-version", version, "--tags", str(tags), "--base-url", base_url,
             "--cache-dir", str(tmp_path / "cache"), "--json"],
            env=clean, capture_output=True, text=True, timeout=60)
        assert "Traceback" not in done.stderr
        decision = json.loads(done.stdout) if done.stdout.strip() else None
        return done, decision, time.monotonic() - started

    return run


def assert_builds_locally(done, decision, why: str) -> None:
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "build_local"
    assert decision["local_build_archs"] == ["9.0"]
    assert why in done.stderr, done.stderr
    assert "no prebuilt wheel can be chosen" in done.stderr


def test_fetched_manifest_serves_the_verified_wheel(resolve, release):
    done, decision, _ = resolve(release.server.base_url)
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "install_wheel"
    assert open(decision["wheel_path"], "rb").read() == release.wheel
    assert "(this sdist carries none)" in done.stderr
    assert [r.status for r in release.manifest_gets()] == [200]


def test_404_builds_locally_without_retrying(resolve, release):
    release.server.faults[MANIFEST] = release_server.Fault("404")
    done, decision, _ = resolve(release.server.base_url)
    assert_builds_locally(done, decision, "HTTP 404")
    assert len(release.manifest_gets()) == 1
    assert release.server.object_gets(release.wheel_file) == []


def test_reset_is_retried(resolve, release):
    release.server.faults[MANIFEST] = release_server.Fault("reset", times=1)
    done, decision, _ = resolve(release.server.base_url)
    assert done.returncode == 0, done.stderr
    assert decision["action"] == "install_wheel"
    assert len(release.manifest_gets()) == 2


def test_stall_gives_up_within_the_timeouts(resolve, release):
    release.server.faults[MANIFEST] = release_server.Fault("stall", times=10)
    done, decision, seconds = resolve(release.server.base_url, CULINA_TIMEOUT="1", CULINA_RETRIES="1")
    assert_builds_locally(done, decision, "no progress for 1 s")
    assert seconds < 15


def test_truncated_manifest_is_not_used(resolve, release):
    release.server.faults[MANIFEST] = release_server.Fault("truncated")
    done, decision, _ = resolve(release.server.base_url)
    assert_builds_locally(done, decision, "is not usable (")


def test_oversized_manifest_is_cut_off(resolve, release):
    release.server.assets[MANIFEST] = b" " * (64 << 20)
    done, decision, _ = resolve(release.server.base_url)
    assert_builds_locally(done, decision, "more than such a file may be")
    assert release.server.body_bytes_sent(MANIFEST) < (64 << 20)


def test_manifest_of_another_version_is_ignored(resolve, release):
    done, decision, _ = resolve(release.server.base_url, version="0.2.0")
    assert_builds_locally(done, decision, "describes culina 0.1.0, not culina 0.2.0")


@pytest.mark.parametrize("target", ["http", "ftp"])
def test_redirect_away_from_https_is_refused(resolve, pki, target):
    release = Release(pki, redirect_base=f"{target}://127.0.0.1:9")
    with release.server:
        done, decision, _ = resolve(release.server.base_url)
    assert_builds_locally(done, decision, f"{target}://127.0.0.1:9/objects/{MANIFEST}")
    assert release.manifest_gets() == []


def test_plain_http_beyond_loopback_is_refused_up_front(resolve, release):
    done, decision, _ = resolve("http://example.invalid/releases")
    assert done.returncode == 2
    assert decision is None
    assert "refusing plain http" in done.stderr


@pytest.mark.parametrize("setting", [{"CULINA_OFFLINE": "1"}, {"CULINA_VARIANT": "source"}])
def test_offline_and_source_builds_fetch_nothing(resolve, release, setting):
    done, decision, _ = resolve(release.server.base_url, **setting)
    assert_builds_locally(done, decision, "not fetched (" + "=".join(next(iter(setting.items()))))
    assert release.server.requests == []


def test_a_manifest_that_cannot_be_fetched_is_the_recorded_reason_for_the_local_build(resolve, release):
    release.server.faults[MANIFEST] = release_server.Fault("404")
    done, decision, _ = resolve(release.server.base_url)
    assert_builds_locally(done, decision, "404")
    assert decision["reason"].startswith("the release manifest is not available from ")
    assert "404" in decision["reason"] and "no prebuilt wheel can be chosen" in decision["reason"]


def test_a_pinned_variant_without_a_manifest_stops_naming_why(resolve, release):
    release.server.faults[MANIFEST] = release_server.Fault("404")
    done, decision, _ = resolve(release.server.base_url, CULINA_VARIANT="cu130")
    assert done.returncode == 3, done.stderr
    assert decision["action"] == "error"
    assert decision["reason"].startswith("CULINA_VARIANT=cu130 asks for a prebuilt wheel, but the release manifest "
                                         "is not available from ")
    assert "CULINA_VARIANT=auto" in decision["reason"]
