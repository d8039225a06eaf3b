"""Fixtures for the fetch tests: the built helper, a test PKI, a local release server and a
runner that calls `culina-resolver fetch` in a clean, loopback-only environment."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import release_server  # tests/conftest.py puts tests/fixtures on the path

# Variables that would change what the helper does; the tests set what they need explicitly.
_SCRUBBED_PREFIXES = ("CULINA_",)
_SCRUBBED = {"SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "XDG_CACHE_HOME", "http_proxy", "https_proxy",
             "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"}


@dataclasses.dataclass
class Wheel:
    file: str
    data: bytes


@pytest.fixture
def wheel() -> Wheel:
    return Wheel(release_server.wheel_file_name(), release_server.build_wheel())


@pytest.fixture
def release(pki, wheel):
    """An HTTPS release server holding `wheel`, trusted through CULINA_CA_BUNDLE."""
    with release_server.ReleaseServer({wheel.file: wheel.data}, cert=pki.cert, key=pki.key) as server:
        yield server


@dataclasses.dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cache: Path

    def leftovers(self) -> list[str]:
        """Files in the wheel cache other than lock files."""
        wheels = self.cache / "wheels"
        return sorted(p.name for p in wheels.iterdir() if not p.name.endswith(".lock")) if wheels.is_dir() else []


class Fetcher:
    def __init__(self, resolver: Path, pki: release_server.Pki, tmp_path: Path) -> None:
        self.resolver = resolver
        self.pki = pki
        self.tmp_path = tmp_path
        self.cache = tmp_path / "cache"
        self.manifest = tmp_path / "release-manifest.json"

    def write_manifest(self, assets: dict[str, bytes]) -> None:
        self.manifest.write_text(json.dumps(release_server.manifest_for(assets)))

    def env(self, **overrides: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in _SCRUBBED and not k.startswith(_SCRUBBED_PREFIXES)}
        env.update(HOME=str(self.tmp_path / "home"), CULINA_CA_BUNDLE=str(self.pki.ca), CULINA_TIMEOUT="5",
                   CULINA_RETRIES="3")
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def command(self, file: str, base_url: str | None, *extra: str) -> list[str]:
        command = [str(self.resolver), "fetch", "--manifest", str(self.manifest), "--file", file,
                   "--cache-dir", str(self.cache)]
        if base_url is not None:
            command += ["--base-url", base_url]
        return command + list(extra)

    def run(self, file: str, base_url: str | None, *extra: str, timeout: float = 60, **env: str | None) -> Outcome:
        started = time.monotonic()
        done = subprocess.run(self.command(file, base_url, *extra), env=self.env(**env), capture_output=True,
                              text=True, timeout=timeout)
        return Outcome(done.returncode, done.stdout, done.stderr, time.monotonic() - started, self.cache)


@pytest.fixture
def fetcher(resolver, pki, tmp_path, wheel) -> Fetcher:
    fetcher = Fetcher(resolver, pki, tmp_path)
    fetcher.write_manifest({wheel.file: wheel.data})
    return fetcher
