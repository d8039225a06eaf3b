"""`culina-resolver probe --json` against the fake libcuda.so.1, through the real dlopen path."""
import json
import os
import subprocess
import time

import pytest


def probe(resolver, env, *args):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "FAKE_CUDA_", "CUDA_VISIBLE"))}
    return subprocess.run(
        [str(resolver), "probe", *args], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def probe_json(resolver, env):
    done = probe(resolver, env, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def fake(fake_libcuda_dir):
    def env(**values):
        return {"LD_LIBRARY_PATH": str(fake_libcuda_dir), **values}

    return env


def test_report_has_every_documented_field(resolver):
    report = probe_json(resolver, {})
    assert set(report) >= {"os", "cpu", "driver", "gpus", "toolkit", "overrides", "errors"}
    assert set(report["os"]) >= {"system", "release", "libc", "wsl", "container"}
    assert set(report["os"]["libc"]) == {"name", "version"}
    assert set(report["cpu"]) >= {"arch", "vendor", "model", "isa_level", "features"}
    assert set(report["driver"]) >= {"version", "cuda", "source"}
    assert report["os"]["system"] == "Linux"
    assert report["os"]["libc"]["name"] == "glibc"
    assert report["cpu"]["isa_level"].startswith(("x86-64", "armv"))


def test_two_gpus_from_fake_driver(resolver, fake):
    report = probe_json(resolver, fake(FAKE_CUDA_GPUS="NVIDIA H200=9.0;NVIDIA GeForce RTX 4090=8.9",
                                           FAKE_CUDA_DRIVER_VERSION="12080"))
    assert report["driver"]["cuda"] == "12.8"
    assert "libcuda.so.1" in report["driver"]["source"]
    assert report["gpus"] == [
        {"index": 0, "name": "NVIDIA H200", "sm": "9.0"},
        {"index": 1, "name": "NVIDIA GeForce RTX 4090", "sm": "8.9"},
    ]
    assert report["errors"] == []


def test_cuda_visible_devices_does_not_hide_gpus(resolver, fake):
    report = probe_json(resolver, fake(FAKE_CUDA_GPUS="A=8.0;B=9.0", CUDA_VISIBLE_DEVICES="1"))
    assert [gpu["sm"] for gpu in report["gpus"]] == ["8.0", "9.0"]


def test_zero_gpus_is_a_valid_report(resolver, fake):
    report = probe_json(resolver, fake())
    assert report["gpus"] == []
    assert report["driver"]["cuda"] == "13.0"
    assert any("CUDA_ERROR_NO_DEVICE" in e for e in report["errors"])


def test_stub_library_is_reported_not_used(resolver, fake):
    report = probe_json(resolver, fake(FAKE_CUDA_MODE="stub", FAKE_CUDA_GPUS="A=9.0"))
    assert report["driver"]["cuda"] is None
    assert report["gpus"] == []
    assert any("CUDA_ERROR_STUB_LIBRARY" in e for e in report["errors"])


def test_cuinit_error_is_reported(resolver, fake):
    report = probe_json(resolver, fake(FAKE_CUDA_INIT_ERROR="999", FAKE_CUDA_GPUS="A=9.0"))
    assert report["gpus"] == []
    assert report["driver"]["cuda"] == "13.0"
    assert any("CUDA_ERROR_UNKNOWN (999)" in e for e in report["errors"])


def test_cuinit_crash_is_reported(resolver, fake):
    report = probe_json(resolver, fake(FAKE_CUDA_MODE="crash"))
    assert report["gpus"] == []
    assert any("crashed with signal 6" in e for e in report["errors"])


def test_hanging_cuinit_is_killed_at_the_limit(resolver, fake):
    start = time.monotonic()
    report = probe_json(resolver, fake(FAKE_CUDA_MODE="hang", CULINA_PROBE_TIMEOUT="1"))
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 10, elapsed
    assert report["gpus"] == []
    assert any("did not return within 1 s and was killed" in e for e in report["errors"])


def test_no_driver_at_all(resolver, tmp_path):
    report = probe_json(resolver, {"LD_LIBRARY_PATH": str(tmp_path)})
    if report["driver"]["version"] is not None:
        pytest.skip("this host has an NVIDIA driver")
    assert report["driver"]["cuda"] is None
    assert report["gpus"] == []


def test_overrides_replace_detected_values(resolver, fake):
    report = probe_json(resolver, fake(FAKE_CUDA_GPUS="A=9.0", CULINA_OVERRIDE_CUDA="12.9",
                                           CULINA_OVERRIDE_SM="8.6,9.0"))
    assert report["driver"]["cuda"] == "12.9"
    assert [gpu["sm"] for gpu in report["gpus"]] == ["8.6", "9.0"]
    assert report["overrides"] == ["CULINA_OVERRIDE_CUDA", "CULINA_OVERRIDE_SM"]


def test_empty_overrides_mean_no_driver_and_no_gpu(resolver, fake):
    report = probe_json(resolver, fake(FAKE_CUDA_GPUS="A=9.0", CULINA_OVERRIDE_CUDA="", CULINA_OVERRIDE_SM=""))
    assert report["driver"]["cuda"] is None
    assert report["driver"]["version"] is None
    assert report["gpus"] == []


@pytest.mark.parametrize(
    "variable,value",
    [("CULINA_OVERRIDE_CUDA", "cu129"), ("CULINA_OVERRIDE_SM", "sm_90"), ("CULINA_PROBE_TIMEOUT", "soon")],
)
def test_malformed_setting_exits_non_zero_naming_it(resolver, variable, value):
    done = probe(resolver, {variable: value}, "--json")
    assert done.returncode == 2
    assert variable in done.stderr and value in done.stderr
    assert done.stdout == ""


def test_table_output_names_each_gpu(resolver, fake):
    done = probe(resolver, fake(FAKE_CUDA_GPUS="NVIDIA H200=9.0"))
    assert done.returncode == 0
    assert "gpu 0     NVIDIA H200, sm 9.0" in done.stdout
    assert "driver" in done.stdout and "CUDA 13.0" in done.stdout


def test_unknown_option_is_refused(resolver):
    done = probe(resolver, {}, "--yaml")
    assert done.returncode == 2
    assert "--yaml" in done.stderr
