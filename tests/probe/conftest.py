import os
import pathlib

import pytest


def _build_dir():
    return pathlib.Path(os.environ.get("CULINA_BUILD_DIR", pathlib.Path(__file__).parents[2] / "build"))


@pytest.fixture(scope="session")
def resolver_exe():
    path = _build_dir() / "tests" / "resolver" / "culina-resolver"
    if not path.exists():
        pytest.skip(f"{path} is not built: run `make build` (or set CULINA_BUILD_DIR)")
    return path


@pytest.fixture(scope="session")
def fake_libcuda_dir():
    path = _build_dir() / "tests" / "fake_libcuda"
    if not (path / "libcuda.so.1").exists():
        pytest.skip(f"{path}/libcuda.so.1 is not built: run `make build`")
    return path
