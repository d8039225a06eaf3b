"""Builds the `culina-resolver` helper from the sources the sdist carries, once per machine.

The binary is cached under CULINA_CACHE_DIR (or $XDG_CACHE_HOME/culina, ~/.cache/culina) in a
folder named by a hash of the sources, the compiler's identity and the flags, so a second
install (another venv, another project checkout with the same sources) reuses it. It needs only
a C++17 compiler and the nlohmann/json header: the system's, or the copy bundled into the sdist.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESOLVER_DIR = Path(__file__).resolve().parents[1]
SOURCE_DIR = RESOLVER_DIR / "src"
BUNDLED_INCLUDE = RESOLVER_DIR / "bundled"  # nlohmann/json.hpp, added to the sdist when it is built
HELPER_NAME = "culina-resolver"


class HelperBuildError(RuntimeError):
    """The helper cannot be built here; the message names the compiler or header and the fix."""


def say(message: str) -> None:
    print(f"[culina resolver] {message}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    if os.environ.get("CULINA_CACHE_DIR"):
        return Path(os.environ["CULINA_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "culina"
    return Path.home() / ".cache" / "culina"


def find_compiler() -> str:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise HelperBuildError("no C++ compiler found (CXX, c++, g++, clang++): install one "
                           "(Debian/Ubuntu: apt-get install g++) to build culina's install helper")


def _has_header(compiler: str, header: str, include_dirs: list[str]) -> bool:
    probe = subprocess.run([compiler, "-std=c++17", "-x", "c++", "-fsyntax-only", *[f"-I{d}" for d in include_dirs], "-"],
                           input=f"#include <{header}>\n", capture_output=True, text=True)
    return probe.returncode == 0


def _cpuinfo_flags(compiler: str) -> tuple[list[str], list[str]]:
    """cpuinfo is optional: used when both its header and library are here."""
    if not _has_header(compiler, "cpuinfo.h", []):
        return [], []
    link = subprocess.run([compiler, "-x", "c++", "-", "-lcpuinfo", "-o", os.devnull],
                          input="#include <cpuinfo.h>\nint main(){return cpuinfo_initialize()?0:1;}\n",
                          capture_output=True, text=True)
    return (["-DCULINA_HAVE_CPUINFO=1"], ["-lcpuinfo"]) if link.returncode == 0 else ([], [])


def build_settings(compiler: str) -> tuple[list[str], list[str]]:
    """(compile flags, link flags) for this machine."""
    include_dirs = [str(SOURCE_DIR)]
    if BUNDLED_INCLUDE.is_dir():
        include_dirs.append(str(BUNDLED_INCLUDE))
    if not _has_header(compiler, "nlohmann/json.hpp", include_dirs[1:]):
        raise HelperBuildError(f"nlohmann/json.hpp not found for {compiler}: install it (Debian/Ubuntu: "
                               "apt-get install nlohmann-json3-dev), or build from the released sdist, which bundles it")
    cpuinfo_compile, cpuinfo_link = _cpuinfo_flags(compiler)
    compile_flags = ["-std=c++17", "-O2", *[f"-I{d}" for d in include_dirs], *cpuinfo_compile]
    return compile_flags, [*cpuinfo_link, "-ldl", "-lpthread"]


def sources() -> list[Path]:
    return sorted(SOURCE_DIR.rglob("*.cpp"))


def cache_key(compiler: str) -> str:
    """Sources and compiler identity. Optional extras found at build time (cpuinfo) are not part
    of it: a helper built without them stays valid, so a warm install probes nothing."""
    digest = hashlib.sha256()
    identity = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    for part in (compiler, identity, str(BUNDLED_INCLUDE.is_dir())):
        digest.update(part.encode() + b"\0")
    for path in sorted(SOURCE_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(SOURCE_DIR).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def helper_binary() -> Path:
    """The helper for these sources: from the cache, or built now (and cached)."""
    compiler = find_compiler()
    target = cache_root() / "helper" / cache_key(compiler) / HELPER_NAME
    if target.is_file() and os.access(target, os.X_OK):
        say(f"helper from the cache: {target}")
        return target
    compile_flags, link_flags = build_settings(compiler)
    say(f"building the helper with {compiler} ({len(sources())} files) -> {target}")
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        objects = _compile_all(compiler, compile_flags, Path(work))
        staged = Path(work) / HELPER_NAME
        link = subprocess.run([compiler, *map(str, objects), *link_flags, "-o", str(staged)],
                              capture_output=True, text=True)
        if link.returncode != 0:
            raise HelperBuildError(f"linking {HELPER_NAME} failed:\n{link.stderr}")
        os.replace(staged, target)  # atomic: a concurrent install sees the old state or the whole binary
    say(f"helper built in {time.monotonic() - started:.1f} s")
    return target


def _compile_all(compiler: str, flags: list[str], work: Path) -> list[Path]:
    import concurrent.futures  # only for a cold build: a cache hit skips its import time

    files = sources()

    def compile_one(index_and_source):
        index, source = index_and_source
        obj = work / f"{index:03d}.o"
        done = subprocess.run([compiler, *flags, "-c", str(source), "-o", str(obj)], capture_output=True, text=True)
        return source, obj, done

    objects = []
    with concurrent.futures.ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
        for source, obj, done in pool.map(compile_one, enumerate(files)):
            if done.returncode != 0:
                raise HelperBuildError(f"compiling {source.relative_to(RESOLVER_DIR)} failed:\n{done.stderr}")
            objects.append(obj)
    return objects
