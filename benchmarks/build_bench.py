"""Wall time of building culina._C from clean, three ways, side by side in one run:
  one-arch  CULINA_CUDA_ARCHS=<one architecture> (what `native` gives on a one-GPU-model host)
  release   CULINA_CUDA_ARCHS=all (pyproject's release_archs: what a fat release wheel carries)
  cpu-only  no CUDA toolkit visible (hidden with no_toolkit.py): the C++ sources alone
Each build gets fresh build folders and no ccache, so no object is reused; the scenarios
alternate per round.
Target (BENCHMARKS.md): one-arch at least 3x faster than release.

Usage: python benchmarks/build_bench.py [--one-arch 9.0] [--rounds 1]
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "release"))
import no_toolkit  # noqa: E402


# the compile pool's progress line per CUDA source: "[2/8] csrc/cuda/launch.cu (4.1 s)"
NVCC_LINE = re.compile(r"\[\d+/\d+\] (\S+\.cu) \(([\d.]+) s\)")


def build_once(archs: str | None) -> tuple[float, int, float]:
    """(seconds, module bytes, nvcc seconds summed over the CUDA sources); archs None: the CPU-only
    build with the toolkit hidden."""
    with tempfile.TemporaryDirectory(prefix="culina-build-bench-") as tmp:
        cmd = [sys.executable, "setup.py", "-q", "build_ext", "--build-temp", f"{tmp}/temp", "--build-lib", f"{tmp}/lib"]
        env = {**os.environ, "CULINA_CCACHE": "0"}  # every object compiled, never served from a cache
        env.pop("CULINA_CUDA_ARCHS", None)
        if archs is None:
            cmd, env = no_toolkit.command_without_toolkit(cmd), no_toolkit.env_without_toolkit(env)
        else:
            env["CULINA_CUDA_ARCHS"] = archs
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"build_bench: {' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        modules = list(Path(tmp, "lib", "culina").glob("_C*.so"))
        nvcc = sum(float(m.group(2)) for m in NVCC_LINE.finditer(proc.stderr))
        return seconds, modules[0].stat().st_size, nvcc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one-arch", default="9.0", help="the single architecture (default 9.0, the H200's)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    why_not = no_toolkit.can_hide()
    if why_not:
        sys.exit(f"build_bench: the CPU-only scenario hides the toolkit, but {why_not}")
    scenarios = {"one-arch": args.one_arch, "release": "all", "cpu-only": None}
    times: dict[str, list[float]] = {name: [] for name in scenarios}
    sizes: dict[str, int] = {}
    nvcc: dict[str, list[float]] = {name: [] for name in scenarios}
    order = list(scenarios)
    for round_ in range(args.rounds):
        for name in order if round_ % 2 == 0 else reversed(order):
            print(f"[bench] round {round_ + 1}/{args.rounds}: {name} build ...", file=sys.stderr, flush=True)
            seconds, sizes[name], nvcc_seconds = build_once(scenarios[name])
            times[name].append(seconds)
            nvcc[name].append(nvcc_seconds)
            print(f"[bench]   {seconds:.1f} s", file=sys.stderr, flush=True)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"CULINA_MAX_JOBS={os.environ.get('CULINA_MAX_JOBS', 'unset')}; rounds {args.rounds}")
    print("| build | CULINA_CUDA_ARCHS | median wall | nvcc s, summed over sources | module size | runs (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, archs in scenarios.items():
        runs = ", ".join(f"{t:.1f}" for t in times[name])
        print(f"| {name} | {archs or '(toolkit hidden)'} | {statistics.median(times[name]):.1f} s | "
              f"{statistics.median(nvcc[name]):.1f} s | {sizes[name] / 2**20:.2f} MiB | {runs} |")
    median = {name: statistics.median(runs) for name, runs in times.items()}
    ratio = median["release"] / median["one-arch"]
    print(f"release / one-arch = {ratio:.2f}x (target >= 3x: {'met' if ratio >= 3 else 'NOT met'})")
    # The C++ sources cost the same in every build; what the architecture list changes is the rest.
    cuda_one, cuda_release = median["one-arch"] - median["cpu-only"], median["release"] - median["cpu-only"]
    print(f"CUDA part (build minus CPU-only): one-arch {cuda_one:.1f} s, release {cuda_release:.1f} s, "
          f"{cuda_release / cuda_one:.2f}x" if cuda_one > 0 else "CUDA part: not measurable (one-arch <= CPU-only)")
    print(f"nvcc alone (seconds summed over sources): release / one-arch = "
          f"{statistics.median(nvcc['release']) / statistics.median(nvcc['one-arch']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
