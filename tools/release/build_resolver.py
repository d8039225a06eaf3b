"""Builds culina-resolver's distributions from resolver/ (resolver/pyproject.toml, resolver/setup.py):
its sdist, then its platform wheel built from that sdist, so the wheel is what pip makes of the
sdist on this platform: the culina_resolver package, the helper's sources and the helper compiled
for this platform (or, with --prebuilt, the one build_release.py compiled, checked against its
record and these sources). Both go to PyPI; a project that adopts the resolver requires them
(docs/ADOPTING.md). `make release` calls this after build_release.py.

Usage: python tools/release/build_resolver.py --out DIR [--prebuilt RELEASE_DIR/helper]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESOLVER = REPO / "resolver"
sys.path.insert(0, str(RESOLVER))

from culina_resolver import helper_build, resolver_files  # noqa: E402
from culina_resolver.project_config import load_pyproject  # noqa: E402

# What the sdist is made from is what resolver/MANIFEST.in grafts; the rest stays out of the staged copy.
STAGE_IGNORE = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "prebuilt", "bundled",
                                      resolver_files.PACKAGED.name)
PREBUILT_FROM = "CULINA_RESOLVER_PREBUILT"  # resolver/setup.py's setting


class ResolverBuildError(RuntimeError):
    """A step of the build failed; the message names it and the fix."""


def say(message: str) -> None:
    print(f"[culina-resolver release] {message}", flush=True)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise ResolverBuildError(f"`{' '.join(cmd)}` in {cwd} failed (exit {done.returncode}):\n"
                                 f"{done.stdout[-3000:]}{done.stderr[-3000:]}")


def distribution_name() -> str:
    """culina_resolver-0.1.0: the stem of both files, from resolver/pyproject.toml."""
    project = load_pyproject(RESOLVER)["project"]
    return f"{project['name'].replace('-', '_')}-{project['version']}"


def build(out: Path, prebuilt: Path | None) -> tuple[Path, Path]:
    stem = distribution_name()
    for stale in out.glob(f"{stem}*"):
        stale.unlink()
    with tempfile.TemporaryDirectory(prefix="culina-resolver-release-") as tmp:
        work = Path(tmp)
        stage = work / "resolver"
        shutil.copytree(RESOLVER, stage, ignore=STAGE_IGNORE)
        run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(out)], stage)
        sdist = out / f"{stem}.tar.gz"
        if not sdist.is_file():
            raise ResolverBuildError(f"the sdist build left no {sdist.name} in {out}")
        say(f"sdist {sdist.name}")
        with tarfile.open(sdist) as archive:
            archive.extractall(work / "unpacked", filter="data")
        env = {key: value for key, value in os.environ.items() if key != PREBUILT_FROM}
        if prebuilt:
            env[PREBUILT_FROM] = str(prebuilt.resolve())
        started = time.monotonic()
        run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(out),
             str(work / "unpacked" / stem)], work, env)
    wheels = list(out.glob(f"{stem}-*.whl"))
    if len(wheels) != 1:
        raise ResolverBuildError(f"pip wheel left {[w.name for w in wheels]} in {out}, not one wheel")
    helper = f"{resolver_files.PACKAGE_DIR.name}/{resolver_files.PACKAGED.name}/prebuilt/{helper_build.PREBUILT_RECORD}"
    with zipfile.ZipFile(wheels[0]) as wheel:
        if helper not in wheel.namelist():
            raise ResolverBuildError(f"{wheels[0].name} lacks {helper}: the wheel carries no helper")
    how = f"the helper from {prebuilt}" if prebuilt else "the helper compiled from the sdist"
    say(f"wheel {wheels[0].name} with {how} ({time.monotonic() - started:.0f} s)")
    return sdist, wheels[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="folder for the sdist and the wheel")
    parser.add_argument("--prebuilt", type=Path, help="build_release.py's helper/ folder: pack its helper for this "
                                                      "platform instead of compiling one")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        build(args.out.resolve(), args.prebuilt)
    except ResolverBuildError as error:
        print(f"build_resolver: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
