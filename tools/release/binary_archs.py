"""Reads the GPU architectures actually inside a built extension module (culina._C, or the module a
project's pyproject.toml names): SASS from `cuobjdump
--list-elf`, PTX from `cuobjdump --list-ptx`. The release manifest records these, never the
requested list, so a build that silently dropped a target cannot be published as covering it.

Usage: python tools/release/binary_archs.py FILE.so|FILE.whl [--extension MODULE] [--cuda-home DIR]  (prints JSON)
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PYPI_CUOBJDUMP = "nvidia-cuda-cuobjdump"


class ArchError(RuntimeError):
    """The architectures cannot be read, or are not the requested ones."""


def find_cuobjdump(cuda_home: Path | None) -> Path:
    """cuobjdump of the toolkit that built the module; else NVIDIA's PyPI package in this Python."""
    if cuda_home is not None and (Path(cuda_home) / "bin" / "cuobjdump").is_file():
        return Path(cuda_home) / "bin" / "cuobjdump"
    for entry in map(Path, sys.path):
        for candidate in sorted(entry.glob("nvidia/cu*/bin/cuobjdump")):
            return candidate
    raise ArchError(f"cuobjdump is neither in {cuda_home}/bin nor installed from PyPI in {sys.executable}: "
                    f"install the toolkit's cuobjdump (cuda-cuobjdump-X-Y) or `{sys.executable} -m pip "
                    f"install {PYPI_CUOBJDUMP}`")


def _sort_key(name: str) -> tuple[int, str]:
    digits = re.search(r"\d+", name).group()
    return int(digits), name


def read_archs(module: Path, cuobjdump: Path) -> tuple[list[str], list[str]]:
    """(["sm_90", ...], ["compute_120", ...]) found in `module`'s fat binaries."""
    found = []
    for flag, pattern in (("--list-elf", r"\.(sm_\d+[af]?)\.cubin$"), ("--list-ptx", r"\.(sm_\d+[af]?)\.ptx$")):
        proc = subprocess.run([str(cuobjdump), flag, str(module)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ArchError(f"`{cuobjdump} {flag} {module}` failed (exit {proc.returncode}): {proc.stderr.strip()}")
        names = {m.group(1) for line in proc.stdout.splitlines() if (m := re.search(pattern, line.strip()))}
        found.append(sorted(names, key=_sort_key))
    sass, ptx_as_sm = found
    return sass, [name.replace("sm_", "compute_", 1) for name in ptx_as_sm]


def wheel_archs(wheel: Path, cuobjdump: Path, extension: str) -> tuple[list[str], list[str]]:
    """read_archs for the extension module (dotted name, "culina._C") inside a wheel."""
    stem = extension.replace(".", "/")
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory() as tmp:
        modules = [n for n in archive.namelist() if re.fullmatch(re.escape(stem) + r"\.[^/]*\.so", n)]
        if len(modules) != 1:
            raise ArchError(f"{wheel.name} holds {len(modules)} {stem}*.so modules ({modules}); expected exactly one")
        return read_archs(Path(archive.extract(modules[0], tmp)), cuobjdump)


def check_requested(read: tuple[list[str], list[str]], requested: tuple[list[str], list[str]], what: str) -> None:
    """Fails, naming each difference, unless the module holds exactly the requested targets."""
    problems = []
    for kind, got, want in (("SASS", read[0], requested[0]), ("PTX", read[1], requested[1])):
        missing = sorted(set(want) - set(got), key=_sort_key)
        extra = sorted(set(got) - set(want), key=_sort_key)
        if missing:
            problems.append(f"{kind} requested but missing: {', '.join(missing)}")
        if extra:
            problems.append(f"{kind} present but not requested: {', '.join(extra)}")
    if problems:
        raise ArchError(f"{what}: {'; '.join(problems)} (read {read[0]} / {read[1]}, requested {requested[0]} / "
                        f"{requested[1]}). The build did not honour the requested list (<prefix>CUDA_ARCHS); check the nvcc lines in its log")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="a built .so, or a wheel holding the extension module")
    parser.add_argument("--extension", default="culina._C", help="the module inside a wheel (default culina._C)")
    parser.add_argument("--cuda-home", type=Path, help="toolkit whose cuobjdump to use")
    args = parser.parse_args()
    try:
        cuobjdump = find_cuobjdump(args.cuda_home)
        if args.file.suffix == ".whl":
            sass, ptx = wheel_archs(args.file, cuobjdump, args.extension)
        else:
            sass, ptx = read_archs(args.file, cuobjdump)
    except ArchError as error:
        print(f"binary_archs: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"sass": sass, "ptx": ptx}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
