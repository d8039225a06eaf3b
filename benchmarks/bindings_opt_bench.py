"""What the optimisation level of the pybind11 glue (csrc/bindings.cpp) costs and saves, in one
run: its compile time (the compile pool's per-file line) and the cost of one call through it
(`_C.forward` on a one-token problem, min of 7 x 20000 calls), at -O0, -O1 (setup.py's
choice) and -O3. CPU-only builds (toolkit hidden), since only the C++ side differs.

Usage: python benchmarks/bindings_opt_bench.py
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "release"))
import no_toolkit  # noqa: E402

LEVELS = ("-O0", "-O1", "-O3")
# setup.py as it is, but with the bindings' flags replaced
BUILD = """
import runpy, sys
sys.path.insert(0, "resolver")
from culina_resolver import cuda_build_ext
plain = cuda_build_ext.CudaExtension.__init__
def with_level(self, *args, source_flags=None, **kwargs):
    plain(self, *args, source_flags={{"csrc/bindings.cpp": ["{level}"]}}, **kwargs)
cuda_build_ext.CudaExtension.__init__ = with_level
sys.argv = ["setup.py", "build_ext", "--build-temp", "{tmp}/temp", "--build-lib", "{tmp}/lib"]
runpy.run_path("setup.py", run_name="__main__")
"""
CALL = """
import timeit, numpy as np, culina._C as C
from culina import _api
x = np.zeros((1, 1, 1, 64), np.float32); out = np.zeros_like(x)
rows = (64, 64, 64)  # (batch, head, token) of q, k, v and out; ungated, the gates' strides unread
problem = _api.Problem((1, 1, 1, 64, 64), "bfloat16", 0, 0, "BHTD", (rows, rows, rows, (0, 0, 0)), False)
description = _api.describe(problem)
q, o = x.ctypes.data, out.ctypes.data  # outside the timed call: each .ctypes costs a microsecond
values = {"q": q, "k": q, "v": q, "out": o, "scale": 0.125, "decay": [0.9], "threads": 1}
call = lambda: C.forward(description, values)
print(min(timeit.repeat(call, number=20000, repeat=7)) / 20000)
"""
BINDINGS_LINE = re.compile(r"\] csrc/bindings\.cpp \(([\d.]+) s\)")


def measure(level: str, tmp: Path) -> tuple[float, float]:
    env = no_toolkit.env_without_toolkit({**os.environ, "CULINA_CCACHE": "0"})
    command = no_toolkit.command_without_toolkit([sys.executable, "-c", BUILD.format(level=level, tmp=tmp)])
    built = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"bindings_opt_bench: the {level} build failed:\n{built.stderr[-3000:]}")
    compile_seconds = float(BINDINGS_LINE.search(built.stderr).group(1))
    package = tmp / "package" / "culina"
    shutil.copytree(ROOT / "package" / "culina", package, ignore=shutil.ignore_patterns("*.so", "_build_info.json"))
    for built_file in (tmp / "lib" / "culina").iterdir():
        shutil.copy2(built_file, package)
    call = subprocess.run([sys.executable, "-c", CALL], env={**os.environ, "PYTHONPATH": str(package.parent)},
                          cwd="/", capture_output=True, text=True, check=True)
    return compile_seconds, float(call.stdout)


def main() -> int:
    why_not = no_toolkit.can_hide()
    if why_not:
        sys.exit(f"bindings_opt_bench: the CPU-only builds hide the toolkit, but {why_not}")
    print(f"machine: {os.cpu_count()} cores")
    print("| bindings flags | compile | one call |")
    print("| --- | --- | --- |")
    for level in LEVELS:
        with tempfile.TemporaryDirectory(prefix="culina-bindings-bench-") as tmp:
            seconds, call = measure(level, Path(tmp))
        print(f"| {level} | {seconds:.1f} s | {call * 1e6:.2f} us |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
