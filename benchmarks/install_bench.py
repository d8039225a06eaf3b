"""What culina's install-time resolution costs, side by side in one run (medians, ratios):

  first     `pip install culina` as a first install on a new machine: empty CULINA_CACHE_DIR,
            so the helper is the sdist's prebuilt one and the wheel is downloaded
  prebuilt  the same with a helper cache warm from an earlier install (CULINA_HELPER=source:
            the compiled helper, as on a platform the sdist carries none for)
  direct    `pip install <that wheel>`: the floor, no resolution at all
  source    `CULINA_VARIANT=source CULINA_CUDA_ARCHS=all pip install culina`: the release list
            compiled locally

each twice: into a venv that already holds numpy (culina's own cost: what the ratios are about),
and into an empty venv (numpy installed by the same command, the same ~3 s in every scenario).
Plus the helper itself: the prebuilt one's checks (hash, handshake), the compile fallback from
cold, and a warm cache hit. Every install runs in a fresh
venv against a loopback package index and release server; the host is described with
CULINA_OVERRIDE_CUDA=13.0 / CULINA_OVERRIDE_SM=9.0; nothing comes from ccache or pip's cache.

Usage: python benchmarks/install_bench.py [--runs 3] [--release DIR] [--wheels DIR]
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))
sys.path.insert(0, str(REPO / "resolver"))

from package_index import PackageIndex, fill_index, install_requirements  # noqa: E402
from culina_resolver.prebuilt_wheel import standard_name  # noqa: E402
from release_server import ReleaseServer  # noqa: E402


def seconds(command: list[str], env: dict, cwd: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return time.monotonic() - started


def helper_times(sdist: Path, work: Path) -> dict[str, float]:
    """The helper from the sdist's own files: the prebuilt one (median of 5, with its checks),
    compiled from cold (CULINA_HELPER=source, empty cache), and a warm cache hit (median of 5)."""
    with tarfile.open(sdist) as archive:
        archive.extractall(work / "sdist")
    adapter = next((work / "sdist").glob("culina-*"))
    env = {**os.environ, "CULINA_CACHE_DIR": str(work / "helper-cache"), "PYTHONPATH": str(adapter / "resolver")}
    command = [sys.executable, "-c", "from culina_resolver import adapter_settings, helper_build; "
               "helper_build.helper_binary(adapter_settings.current()).close()"]
    prebuilt = statistics.median(seconds(command, env, adapter) for _ in range(5))
    env["CULINA_HELPER"] = "source"
    return {"prebuilt": prebuilt, "cold compile": seconds(command, env, adapter),
            "warm cache hit": statistics.median(seconds(command, env, adapter) for _ in range(5))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--release", type=Path, help="an existing build_release.py output (default: build one, sm_90)")
    parser.add_argument("--wheels", type=Path, help="the index's requirements as wheels, for a machine with no "
                                                    "network (default: downloaded from PyPI once, cached)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="culina-install-bench-"))
    release = args.release
    if release is None:
        release = work / "release"
        subprocess.run([sys.executable, str(REPO / "tools" / "release" / "build_release.py"), "--out", str(release),
                        "--archs", "9.0", "--no-auditwheel"], cwd=REPO, check=True, capture_output=True)
    sdist = next(release.glob("culina-*.tar.gz"))
    wheel = next(release.glob("*-cu130.whl"))
    direct_wheel = work / standard_name(wheel.name)
    shutil.copy2(wheel, direct_wheel)

    index_dir = work / "index"
    if args.wheels:
        index_dir.mkdir(parents=True)
        for requirement in args.wheels.glob("*.whl"):
            shutil.copy2(requirement, index_dir)
    else:
        fill_index(index_dir, install_requirements(REPO / "pyproject.toml"), REPO / "build" / "pip-index-cache")
    shutil.copy2(sdist, index_dir)
    helper = helper_times(sdist, work)

    scenarios = ["first", "prebuilt", "direct", "source"]
    times: dict[str, list[float]] = {f"{name}{numpy}": [] for numpy in ("", "+numpy") for name in scenarios}
    with ReleaseServer({wheel.name: wheel.read_bytes()}) as server, PackageIndex(index_dir) as index:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "PIP_"))}
        base.update(CULINA_OVERRIDE_CUDA="13.0", CULINA_OVERRIDE_SM="9.0", CULINA_RELEASE_URL=server.base_url,
                    PIP_DISABLE_PIP_VERSION_CHECK="1", CULINA_CCACHE="0")
        for run in range(args.runs):
            for key in times:
                name, with_numpy = key.removesuffix("+numpy"), key.endswith("+numpy")
                venv = work / f"venv-{key}-{run}"
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
                pip = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--index-url", index.url]
                if not with_numpy:
                    subprocess.run(pip + ["numpy"], check=True, capture_output=True, env=base)
                cache = work / f"cache-{key}-{run}"
                env = {**base, "CULINA_CACHE_DIR": str(cache)}
                if name != "first":
                    shutil.copytree(work / "helper-cache", cache)
                    env["CULINA_HELPER"] = "source"
                command = pip + [str(direct_wheel) if name == "direct" else "culina"]
                if name == "source":
                    env.update(CULINA_VARIANT="source", CULINA_CUDA_ARCHS="all")
                times[key].append(seconds(command, env, work))
                print(f"run {run + 1}: {key:15s} {times[key][-1]:7.1f} s", flush=True)

    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"\nmachine: {platform.node()}, {os.cpu_count()} cores; runs: {args.runs}")
    for key, value in median.items():
        print(f"{key:15s} median {value:7.1f} s   ({', '.join(f'{t:.1f}' for t in times[key])})")
    for numpy, label in (("", "numpy already installed"), ("+numpy", "numpy installed by the same command")):
        first, prebuilt, direct, source = (median[f"{name}{numpy}"] for name in scenarios)
        print(f"{label}: first / direct {first / direct:.2f}x (target <= 2), prebuilt / direct "
              f"{prebuilt / direct:.2f}x (target <= 3), source / prebuilt {source / prebuilt:.1f}x (target >= 10)")
    print(f"helper: prebuilt with its checks {helper['prebuilt']:.3f} s, cold compile {helper['cold compile']:.1f} s "
          f"(target <= 12 s on 2 cores), warm cache hit {helper['warm cache hit']:.3f} s (target < 1 s)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
