"""Fixtures every suite shares: the built helper, the fake libcuda and the test PKI.
`make test` sets CULINA_BUILD_DIR to the CMake build of tests/ (the helper is then at
$CULINA_BUILD_DIR/tests/resolver/culina-resolver)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))

import release_server  # noqa: E402 - needs the path above


def _build_dirs() -> list[Path]:
    build = Path(os.environ.get("CULINA_BUILD_DIR", Path(__file__).resolve().parents[1] / "build"))
    return [build / "tests", build]


@pytest.fixture(scope="session")
def resolver() -> Path:
    for folder in _build_dirs():
        candidate = folder / "resolver" / "culina-resolver"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("culina-resolver is not built: run `make build`, or set CULINA_BUILD_DIR to the build folder")


@pytest.fixture(scope="session")
def fake_libcuda_dir() -> Path:
    for folder in _build_dirs():
        if (folder / "fake_libcuda" / "libcuda.so.1").exists():
            return folder / "fake_libcuda"
    pytest.skip("the fake libcuda.so.1 is not built: run `make build`")


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> release_server.Pki:
    return release_server.make_test_pki(tmp_path_factory.mktemp("pki"))
