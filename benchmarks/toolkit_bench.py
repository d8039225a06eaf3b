"""What a CUDA toolkit from NVIDIA's PyPI packages costs, side by side in one run (medians):

  build    `setup.py build_ext` of culina for one architecture (9.0), no ccache: with this
           machine's toolkit (CUDA_HOME), and with the PyPI toolkit of the same version alone
           (the system toolkit hidden, tools/release/no_toolkit.py)
  install  `CULINA_VARIANT=source pip install culina` for an H200 on a CUDA 13.0 driver (overrides)
           into a venv holding numpy, from a loopback index: with the system toolkit, and with
           none, so the backend has pip fetch the toolkit (about 130 MB, from the loopback index)

Usage: python benchmarks/toolkit_bench.py [--runs 2] [--cuda 13.0] [--release DIR]
(DIR: a build_release.py output whose sdist to install; default: build one, sm_90, no auditwheel)
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))
sys.path.insert(0, str(REPO / "resolver"))
sys.path.insert(0, str(REPO / "tools" / "release"))

import no_toolkit  # noqa: E402
from culina_resolver import pypi_toolkit  # noqa: E402
from install_bench import seconds  # noqa: E402 - one timer for the install benchmarks
from package_index import PackageIndex, fill_index, install_requirements  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--cuda", default="13.0", help="the PyPI toolkit's version; match the system toolkit's")
    parser.add_argument("--release", type=Path)
    args = parser.parse_args()
    if no_toolkit.can_hide():
        raise SystemExit(f"cannot hide the system toolkit: {no_toolkit.can_hide()}")
    work = Path(tempfile.mkdtemp(prefix="culina-toolkit-bench-"))
    site = work / "pypi-toolkit"
    started = time.monotonic()
    root = pypi_toolkit.install(args.cuda, site)
    print(f"PyPI toolkit {args.cuda} installed into {root} in {time.monotonic() - started:.1f} s "
          "(download included)", flush=True)

    release = args.release
    if release is None:
        release = work / "release"
        subprocess.run([sys.executable, str(REPO / "tools" / "release" / "build_release.py"), "--out", str(release),
                        "--archs", "9.0", "--no-auditwheel"], cwd=REPO, check=True, capture_output=True)
    index_dir = work / "index"
    fill_index(index_dir, [*install_requirements(REPO / "pyproject.toml"), *pypi_toolkit.requirements_up_to("13.0")],
               REPO / "build" / "pip-index-cache")
    shutil.copy2(next(release.glob("culina-*.tar.gz")), index_dir)

    base = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "PIP_"))}
    base.update(CULINA_CCACHE="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    hidden = no_toolkit.env_without_toolkit(base)
    times: dict[str, list[float]] = {"build, system toolkit": [], "build, PyPI toolkit": [],
                                     "install, system toolkit": [], "install, toolkit fetched by pip": []}
    with PackageIndex(index_dir) as index:
        for run in range(args.runs):
            for key in times:
                out = work / f"{key.replace(' ', '_').replace(',', '')}-{run}"
                if key.startswith("build"):
                    env = {**base, "CULINA_CUDA_ARCHS": "9.0"} if "system" in key else \
                        {**hidden, "CULINA_CUDA_ARCHS": "9.0", "PYTHONPATH": str(site)}
                    command = [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(out / "lib"),
                               "--build-temp", str(out / "temp")]
                    cwd = REPO
                else:
                    subprocess.run([sys.executable, "-m", "venv", str(out)], check=True)
                    pip = [str(out / "bin" / "pip"), "install", "--no-cache-dir", "--index-url", index.url]
                    subprocess.run(pip + ["numpy"], check=True, capture_output=True, env=base)
                    env = {**(base if "system" in key else hidden), "CULINA_VARIANT": "source",
                           "CULINA_OVERRIDE_CUDA": "13.0", "CULINA_OVERRIDE_SM": "9.0",
                           "CULINA_CACHE_DIR": str(work / "cache")}
                    command, cwd = pip + ["culina"], work
                if "system" not in key:
                    command = no_toolkit.command_without_toolkit(command)
                times[key].append(seconds(command, env, cwd))
                print(f"run {run + 1}: {key:32s} {times[key][-1]:6.1f} s", flush=True)

    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"\nmachine: {platform.node()}, {os.cpu_count()} cores; runs: {args.runs}; PyPI toolkit {args.cuda}")
    for key, value in median.items():
        print(f"{key:32s} median {value:6.1f} s   ({', '.join(f'{t:.1f}' for t in times[key])})")
    print(f"build: PyPI / system {median['build, PyPI toolkit'] / median['build, system toolkit']:.2f}x; "
          f"install: toolkit fetched / system {median['install, toolkit fetched by pip'] / median['install, system toolkit']:.2f}x")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
