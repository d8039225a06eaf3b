"""One release build for the whole session (tools/release/build_release.py for this Python and
the CUDA toolkit found, sm_90 only so it stays fast), shared by every test here."""
from __future__ import annotations

import json
import os

import pytest

from release_build import TEST_ARCHS, Release, run_release

from culina_resolver import cuda_build_ext  # noqa: E402 - found through the path release_build sets


@pytest.fixture(scope="session")
def toolkit():
    found = cuda_build_ext.find_toolkit()
    if found is None:
        pytest.skip("no CUDA toolkit (nvcc): the release build needs one")
    return found


@pytest.fixture(scope="session")
def release(toolkit, tmp_path_factory) -> Release:
    out = tmp_path_factory.mktemp("release")
    proc = run_release("--out", str(out), "--archs", TEST_ARCHS, "--cuda-home", str(toolkit.root))
    assert proc.returncode == 0, f"build_release.py failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return Release(out, json.loads((out / "release-manifest.json").read_text()))


@pytest.fixture
def clean_env() -> dict[str, str]:
    """The environment without any CULINA_ setting of the caller, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CULINA_") and k != "PIP_INDEX_URL"}
    env["CULINA_OFFLINE"] = "1"
    return env
