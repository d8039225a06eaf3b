"""`culina info` states the float32 rule from the function that applies it (_api.compute_dtype)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import culina
from culina.__main__ import float32_compute, float32_rule_text

PACKAGE_DIR = Path(culina.__file__).resolve().parent.parent


def test_the_rule_per_device_and_precision():
    assert float32_compute() == {"cpu": {"highest": "float32", "high": "float32", "medium": "float32"},
                                 "cuda": {"highest": "float32", "high": "float32", "medium": "bfloat16"}}
    assert float32_rule_text(float32_compute()) == (
        "PyTorch float32 tensors compute on cpu in float32; on cuda in float32 under 'highest' or 'high', in "
        "bfloat16 under 'medium' (by torch.get_float32_matmul_precision(); rounded: q, k, v only, the gates, "
        "states and o stay float32; culina has no TF32 kernels)")


def test_info_prints_it_and_its_json_holds_it():
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    run = lambda *args: subprocess.run([sys.executable, "-m", "culina", "info", *args], capture_output=True,  # noqa: E731
                                       text=True, env=env, check=True, timeout=120).stdout
    assert f"  float32: {float32_rule_text(float32_compute())}" in run().splitlines()
    assert json.loads(run("--json"))["float32_compute"] == float32_compute()
