"""Every setting of the helper's one table (`culina-resolver version --json` lists it) with a bad
value stops `culina-resolver resolve` before any probe output or decision, on every path (auto,
source, cpu, a label, offline): exit status bad_input, nothing on stdout, no request to the
release server, one line naming the variable, the value and the accepted form. The exit-status
map is the one the adapter reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import release_server

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "resolver"))

TAG = "cp312-cp312-manylinux_2_28_x86_64"  # the tag of release_server.wheel_file_name()

# One bad value per setting; a setting added to the table without one here fails
# test_every_setting_has_a_bad_value.
BAD_VALUE = {
    "VARIANT": "cuda 13",
    "OFFLINE": "enabled",
    "OVERRIDE_CUDA": "twelve",
    "OVERRIDE_SM": "sm_90",
    "PROBE_TIMEOUT": "10s",
    "TIMEOUT": "0x10",
    "RETRIES": "-2",
    "MIN_RATE": "0",
    "CA_BUNDLE": "/nonexistent/ca.pem",
    "CACHE_DIR": "relative/cache",
    "RELEASE_URL": "releases",
    "ONLY_BINARY": "never",
    "BUILD_ON_MISMATCH": "onn",
}

# What each path sets, as suffixes; the bad setting is added on top.
PATHS = {
    "auto": {},
    "source": {"VARIANT": "source"},
    "cpu": {"VARIANT": "cpu"},
    "label": {"VARIANT": "cu130"},
    "offline": {"OFFLINE": "1"},
}


def version_json(resolver: Path) -> dict:
    done = subprocess.run([str(resolver), "version", "--json"], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def table(resolver) -> list[dict]:
    return version_json(resolver)["settings"]


@pytest.fixture(scope="module")
def statuses(resolver) -> dict[str, int]:
    return version_json(resolver)["exit_statuses"]


@pytest.fixture
def release(tmp_path):
    wheel = release_server.build_wheel(seed=1)
    file = release_server.wheel_file_name()
    manifest = release_server.manifest_for({file: wheel})
    (tmp_path / "release-manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "tags.txt").write_text(TAG + "\n")
    server = release_server.ReleaseServer({file: wheel})
    with server:
        yield tmp_path, server


def run_resolve(resolver: Path, release, prefix: str | None, settings: dict[str, str]):
    folder, server = release
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "OTHER_PROJECT_"))}
    env.update({(prefix or "CULINA_") + suffix: value for suffix, value in settings.items()})
    env.update(HOME=str(folder))
    command = [str(resolver), *(["--env-prefix", prefix] if prefix else []), "resolve",
               "--manifest", str(folder / "release-manifest.json"), "--tags", str(folder / "tags.txt"),
               "--base-url", server.base_url, "--json"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_every_setting_has_a_bad_value(table):
    assert sorted(entry["suffix"] for entry in table) == sorted(BAD_VALUE)


@pytest.mark.parametrize("command", ["resolve", "select", "fetch", "mirror"])
def test_the_table_and_the_usage_texts_name_the_callers_variables(resolver, command):
    """The helper holds no project name: under --env-prefix, `version --json` lists each setting by
    its full name with a type and a default, and the usage texts name the caller's variables."""
    done = subprocess.run([str(resolver), "--env-prefix", "OTHER_PROJECT_", "version", "--json"], capture_output=True,
                          text=True, timeout=30, check=True)
    listed = json.loads(done.stdout)["settings"]
    assert [entry["name"] for entry in listed] == [f"OTHER_PROJECT_{entry['suffix']}" for entry in listed]
    assert all(entry["type"] and entry["default"] for entry in listed)
    usage = subprocess.run([str(resolver), "--env-prefix", "OTHER_PROJECT_", command, "--help"], capture_output=True,
                           text=True, timeout=30)
    assert usage.returncode == 0 and "OTHER_PROJECT_" in usage.stdout and "CULINA" not in usage.stdout, usage.stdout


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_bad_value_stops_resolve_before_any_decision(resolver, release, table, statuses, path):
    for entry in table:
        suffix = entry["suffix"]
        if suffix in PATHS[path]:
            continue  # the path is that setting's good value; its bad value is the other paths' case
        for prefix in (None, "OTHER_PROJECT_"):
            name = (prefix or "CULINA_") + suffix
            done = run_resolve(resolver, release, prefix, {**PATHS[path], suffix: BAD_VALUE[suffix]})
            case = f"{name}={BAD_VALUE[suffix]!r} on the {path} path"
            assert done.returncode == statuses["bad_input"], f"{case}: {done.returncode}\n{done.stderr}"
            assert done.stdout == "", case
            lines = done.stderr.splitlines()
            assert len(lines) == 1, f"{case}: {done.stderr}"
            assert lines[0] == (f"culina-resolver resolve: {name}='{BAD_VALUE[suffix]}' is not understood; "
                                f"accepted: {entry['accepted']}"), case
    assert release[1].requests == []


def test_good_values_under_another_prefix_are_read(resolver, release):
    done = run_resolve(resolver, release, "OTHER_PROJECT_",
                       {"VARIANT": "source", "OVERRIDE_CUDA": "13.0", "OVERRIDE_SM": "9.0"})
    assert done.returncode in (0, 3), done.stderr
    decision = json.loads(done.stdout)
    assert decision["variant_request"] == "source"
    assert decision["host"]["gpus"] == ["9.0"]
    assert "request      OTHER_PROJECT_VARIANT=source" in done.stderr


def test_a_bad_env_prefix_is_bad_input(resolver, statuses):
    for prefix in ("culina_", "CULINA", "1X_", ""):
        done = subprocess.run([str(resolver), "--env-prefix", prefix, "probe"], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == statuses["bad_input"], prefix
        assert "--env-prefix" in done.stderr and done.stdout == ""


def test_the_exit_statuses_are_the_adapters(statuses):
    from culina_resolver import helper_client

    assert statuses == {"ok": 0, "failed": 1, "bad_input": helper_client.EXIT_BAD_INPUT,
                        "no_way_to_serve": helper_client.EXIT_NO_WAY_TO_SERVE}
