"""`make demo`: the main job, end to end on this machine.

Builds the release assets (`tools/release/build_release.py`), serves them on a loopback release
server and the sdist on a loopback package index, runs a real `pip install culina` in a fresh
venv, and shows the resolver's decision and `python -m culina info`. Nothing but PyPI (for the
build requirements, cached in build/pip-index-cache) is reached.

Usage: python tools/demo.py [--archs 9.0] [--work build/demo]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))

from package_index import PackageIndex, fill_index, install_requirements  # noqa: E402
from release_server import ReleaseServer  # noqa: E402


def step(message: str) -> None:
    print(f"\n[demo] {message}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", default="9.0", help="architectures of the release wheel (default 9.0; 'all' for the release list)")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "demo")
    args = parser.parse_args()

    shutil.rmtree(args.work, ignore_errors=True)
    # the wheel cache must start empty, so that the demo shows a real download
    shutil.rmtree(REPO / "build" / "demo-cache" / "wheels", ignore_errors=True)
    release, index_dir, venv = args.work / "release", args.work / "index", args.work / "venv"
    step(f"building the release assets for {args.archs} into {release}")
    subprocess.run([sys.executable, str(REPO / "tools" / "release" / "build_release.py"), "--out", str(release),
                    "--archs", args.archs, "--python", sys.executable], cwd=REPO, check=True)

    step("filling a local package index with the sdist and the build requirements")
    fill_index(index_dir, install_requirements(REPO / "pyproject.toml"), REPO / "build" / "pip-index-cache")
    for sdist in release.glob("culina-*.tar.gz"):
        shutil.copy2(sdist, index_dir / sdist.name)
    assets = {p.name: p.read_bytes() for p in release.glob("*.whl")}

    with ReleaseServer(assets) as server, PackageIndex(index_dir) as index:
        step(f"release server {server.base_url}\n       package index  {index.url}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        command = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--index-url", index.url, "-v", "culina"]
        step("$ " + " ".join(command))
        # The cache outlives the demo folder, so a second `make demo` finds the helper built.
        env = {**os.environ, "CULINA_RELEASE_URL": server.base_url,
               "CULINA_CACHE_DIR": str(REPO / "build" / "demo-cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        started = time.monotonic()
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log = args.work / "pip-install.log"
        log.write_text(done.stdout)
        for line in done.stdout.splitlines():
            # "[culina ...]": the build adapter; "| ": the helper's own log, decision table included
            if "[culina" in line or line.lstrip().startswith("| ") or line.startswith(("Successfully", "ERROR")):
                print("  " + line.strip())
        print(f"  (pip exited {done.returncode} after {time.monotonic() - started:.1f} s; full log: {log})")
        if done.returncode != 0:
            return done.returncode
        fetched = [r for r in server.requests if r.path.startswith("/objects/")]
        print(f"  asset downloads from the release server: {len(fetched)}")

    step("$ python -m culina info")
    return subprocess.run([str(venv / "bin" / "python"), "-m", "culina", "info"], cwd="/").returncode


if __name__ == "__main__":
    sys.exit(main())
