"""Through pip, a bad value of any variable (the adapter's and the helper's) stops the install
before a decision, in one line naming the variable, the value and the accepted form, whichever
path the other settings take (auto, source, cpu, a label, offline).

Cheap by construction: `pip install --dry-run --no-build-isolation --no-index` of a source tree
runs the backend's metadata hook, where the refusal happens, and installs nothing; the helper is
compiled once for the module. Each variable is tried on one path, the paths taken in turn, so
every variable and every path is covered; the control shows that with good values the same
command goes on to a decision.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PATHS = {"auto": {}, "source": {"CULINA_VARIANT": "source"}, "cpu": {"CULINA_VARIANT": "cpu"},
         "label": {"CULINA_VARIANT": "cu130"}, "offline": {"CULINA_OFFLINE": "1"}}
# (variable, bad value, words of its accepted form); the adapter's first, then the helper's.
BAD = [
    ("CULINA_CUDA_ARCHS", "8.0;foo", "'native', 'all'"),
    ("CULINA_MAX_JOBS", "two", "positive whole number"),
    ("MAX_JOBS", "-1", "positive whole number"),
    ("CULINA_CCACHE", "sometimes", "off never uses ccache"),
    ("CULINA_HELPER", "sometimes", "auto (default"),
    ("CULINA_RELEASE_BUILD", "2", "on is the release scripts'"),
    ("CULINA_CACHE_DIR", "relative/cache", "an absolute path"),
    ("CULINA_RELEASE_URL", "releases", "the base URL of the release assets"),
    ("CULINA_JSON_INCLUDE_DIR", "relative/include", "the absolute path of the folder holding"),
    ("CULINA_VARIANT", "bogus!", "auto, source, null (alias cpu)"),
    ("CULINA_OFFLINE", "y", "on means no network"),
    ("CULINA_OVERRIDE_CUDA", "thirteen", "the driver's CUDA version"),
    ("CULINA_OVERRIDE_SM", "9.x", "compute capabilities separated by commas"),
    ("CULINA_PROBE_TIMEOUT", "-1", "seconds between 0 and 3600"),
    ("CULINA_TIMEOUT", "abc", "a whole number from 1 to 3600"),
    ("CULINA_RETRIES", "-2", "a whole number from 0 to 20"),
    ("CULINA_CA_BUNDLE", "/nonexistent/ca.pem", "a readable PEM file"),
]
CASES = [(name, value, accepted, path) for (name, value, accepted), path in zip(BAD, list(PATHS) * len(BAD))]


@pytest.fixture(scope="module")
def source_tree(tmp_path_factory) -> tuple[Path, Path]:
    """(a copy of the source tree, a helper cache that holds the helper compiled from it)."""
    root = tmp_path_factory.mktemp("bad-settings")
    tree = root / "culina"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "_build_info.json", "*.egg-info", "bundled", "prebuilt")
    for part in ("resolver", "package", "csrc"):
        shutil.copytree(REPO / part, tree / part, ignore=ignore)
    for part in ("pyproject.toml", "setup.py", "MANIFEST.in"):
        shutil.copy2(REPO / part, tree / part)
    cache = root / "cache"
    subprocess.run([sys.executable, "-c", "from culina_resolver import adapter_settings, helper_build; "
                    "helper_build.helper_binary(adapter_settings.current())"], cwd=tree,
                   env={**clean_environment(), "CULINA_CACHE_DIR": str(cache), "CULINA_HELPER": "source",
                        "PYTHONPATH": str(tree / "resolver")},
                   check=True, capture_output=True, timeout=900)
    return tree, cache


def clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "PIP_")) and k != "MAX_JOBS"}


def pip_metadata(source_tree: tuple[Path, Path], **env: str) -> subprocess.CompletedProcess:
    tree, cache = source_tree
    shutil.rmtree(tree / "build", ignore_errors=True)  # no resolution kept from an earlier case
    environment = {**clean_environment(), "CULINA_CACHE_DIR": str(cache), "CULINA_OVERRIDE_CUDA": "13.0",
                   "CULINA_OVERRIDE_SM": "9.0", "CULINA_RELEASE_URL": "http://127.0.0.1:1/releases",
                   "CULINA_TIMEOUT": "2", "CULINA_RETRIES": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1", **env}
    return subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", "--no-index",
                           "--no-deps", "-v", str(tree)], env=environment, capture_output=True, text=True, timeout=300)


def test_good_values_reach_a_decision(source_tree):
    """The control: the same command with nothing wrong goes on to the helper's decision."""
    done = pip_metadata(source_tree, CULINA_VARIANT="source")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "decision: build_local" in done.stdout + done.stderr


@pytest.mark.parametrize("name, value, accepted, path", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_a_bad_value_stops_pip_before_a_decision(source_tree, name, value, accepted, path):
    done = pip_metadata(source_tree, **{**PATHS[path], name: value})
    output = done.stdout + done.stderr
    assert done.returncode != 0
    named = [line for line in output.splitlines() if name in line and value in line.replace("'", "")]
    assert named and accepted in named[0] and "ccepted" in named[0], output[-3000:]
    assert "decision" not in output.replace("before a decision", "")
