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
        if gpu["supported"]:  # the kernel path of every dtype at every head size 16, 24, ..., 256
            assert set(gpu["kernel_paths"]) == {"float32", "float16", "bfloat16"}, gpu
            for paths in gpu["kernel_paths"].values():
                assert list(paths) == [str(size) for size in range(16, 257, 8)] and all(paths.values()), gpu


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
    assert "why:" not in render(facts)


def test_text_groups_head_sizes_by_kernel_path():
    from culina.__main__ import render
    paths = {str(size): "tensor-core, fused (sm_80+)" if size <= 192 else "generic" for size in range(16, 257, 8)}
    facts = {"version": "0.1.0", "binary_arch_list": "900", "driver_cuda_version": "13.0",
             "build": {"kind": "local", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0",
                       "nvcc_version": "13.0.88", "sass_archs": ["9.0"], "ptx_archs": [], "compiler": "g++",
                       "resolver": None},
             "gpus": [{"index": 0, "name": "H100", "capability": "9.0", "supported": True, "runs": "sm_90 code",
                       "kernel_paths": {"bfloat16": paths}}]}
    assert ("    kernels, bfloat16: D=16-192 tensor-core, fused (sm_80+), D=200-256 generic"
            in render(facts).splitlines())
