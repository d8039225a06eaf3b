"""`python -m culina info` reads the build record and reports the devices."""
import json
import os
import subprocess
import sys
from pathlib import Path

import culina

PACKAGE_DIR = Path(culina.__file__).resolve().parent.parent


def run_info(*args):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    return subprocess.run([sys.executable, "-m", "culina", "info", *args], capture_output=True, text=True,
                          env=env, check=True, timeout=120).stdout


def test_json_reports_build_record_and_gpus():
    facts = json.loads(run_info("--json"))
    assert facts["version"] == culina.__version__
    assert facts["build"] == culina.build_record()
    assert facts["build"]["kind"] == "local"
    assert isinstance(facts["gpus"], list)
    if not facts["build"]["cpu_only"]:
        assert facts["binary_arch_list"]
        expected = {int(a.rstrip("af").replace(".", "")) * 10 for a in facts["build"]["sass_archs"]}
        assert {int(x) for x in facts["binary_arch_list"].split(",")} >= expected
    for gpu in facts["gpus"]:
        assert set(gpu) >= {"index", "name", "capability", "supported"}
        if gpu["supported"]:  # the kernel path of every dtype at every head size the kernels take, 1 to 256
            assert set(gpu["kernel_paths"]) == {"float32", "float16", "bfloat16"}, gpu
            for paths in gpu["kernel_paths"].values():
                assert list(paths) == [str(size) for size in range(1, 257)] and all(paths.values()), gpu


def test_text_names_build_and_driver():
    text = run_info()
    assert text.startswith(f"culina {culina.__version__}")
    assert "build:" in text and "driver:" in text


def test_text_says_why_a_copy_was_built_locally():
    from culina.__main__ import render
    facts = {"version": "0.1.0", "binary_arch_list": None, "driver_cuda_version": None, "gpus": [],
             "build": {"kind": "local", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0",
                       "nvcc_version": "13.0.88", "sass_archs": ["9.0"], "ptx_archs": [], "compiler": "g++",
                       "resolver": {"action": "build_local",
                                    "reason": "the chosen wheel x.whl could not be fetched (HTTP 404)"}}}
    assert "  why:     the chosen wheel x.whl could not be fetched (HTTP 404)" in render(facts).splitlines()
    facts["build"].update(kind="release", resolver={"action": "install_wheel", "reason": "cu130 covers every GPU"})
    assert "  why:     cu130 covers every GPU" in render(facts).splitlines()


def test_text_shows_the_decision_its_fallback_and_the_toolkit():
    from culina.__main__ import render
    decision = {"action": "build_local", "reason": "the chosen wheel x.whl could not be fetched (HTTP 404)",
                "fetch_error": "HTTP 404 from http://127.0.0.1:1/objects/x.whl", "warnings": ["w1"],
                "assumption": None}
    facts = {"version": "0.1.0", "binary_arch_list": None, "driver_cuda_version": None, "gpus": [],
             "build": {"kind": "local", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0",
                       "nvcc_version": "13.0.88", "toolkit_source": "the resolver's probe, in CUDA_HOME",
                       "sass_archs": ["9.0"], "ptx_archs": [], "compiler": "g++", "resolver": decision}}
    lines = render(facts).splitlines()
    assert "  decided: build_local" in lines
    assert "  fallback: the chosen wheel was not used: HTTP 404 from http://127.0.0.1:1/objects/x.whl" in lines
    assert "  warning: w1" in lines
    assert "  CUDA:    13.0 (nvcc 13.0.88, from the resolver's probe, in CUDA_HOME)" in lines
    facts["build"]["resolver"] = None
    assert any(line.startswith("  decided: nothing (installed without the resolver") for line in render(facts).splitlines())


def test_text_groups_head_sizes_by_kernel_path():
    from culina.__main__ import render
    paths = {str(size): "tensor-core, fused (sm_80+)" if size % 8 == 0 and 16 <= size <= 192 else "generic"
             for size in range(1, 257)}
    facts = {"version": "0.1.0", "binary_arch_list": "900", "driver_cuda_version": "13.0",
             "build": {"kind": "local", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0",
                       "nvcc_version": "13.0.88", "sass_archs": ["9.0"], "ptx_archs": [], "compiler": "g++",
                       "resolver": None},
             "gpus": [{"index": 0, "name": "H100", "capability": "9.0", "supported": True, "runs": "sm_90 code",
                       "kernel_paths": {"bfloat16": paths}}]}
    assert ("    kernels, bfloat16: D=8 generic, D=16-192 by 8 tensor-core, fused (sm_80+), D=200-256 by 8 generic, "
            "D=others generic" in render(facts).splitlines())


def test_head_sizes_off_the_step_are_listed_when_their_paths_differ():
    from culina.__main__ import path_ranges
    paths = {str(size): "generic" if size < 12 else "other" for size in range(1, 17)}
    assert path_ranges(paths) == [("generic", "8"), ("other", "16"), ("generic", "1-7,9-11"), ("other", "12-15")]
