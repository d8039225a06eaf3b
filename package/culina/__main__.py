"""`python -m culina info [--json]` (and the `culina-info` console script, the same command):
what this copy is and which GPUs here it can serve. Unlike `import culina`, it asks CUDA itself,
which puts a context on every visible GPU while it runs."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import __version__, _C, _build, _frameworks

# The head sizes `info` asks each GPU's kernel path for (Dk = Dv), every dtype: the multiples of
# 8 over the range the kernels take.
KERNEL_PATH_HEAD_SIZES = range(16, _C.MAX_HEAD_DIM + 1, 8)


def kernel_paths(device: int) -> dict:
    """{"bfloat16": {"16": "tensor-core, fused (sm_80+)", ...}, ...}: the path device `device`
    takes per dtype and head size."""
    return {dtype: {str(size): _C.kernel_path(device, code, size, size) for size in KERNEL_PATH_HEAD_SIZES}
            for dtype, code in _frameworks.NUMPY_DTYPES.items()}


def path_ranges(paths: dict) -> list:
    """[(path, "16-120"), (path, "128"), ...]: runs of consecutive head sizes that share a path."""
    runs: list = []
    for size, path in paths.items():
        if runs and runs[-1][0] == path:
            runs[-1][2] = size
        else:
            runs.append([path, size, size])
    return [(path, first if first == last else f"{first}-{last}") for path, first, last in runs]


def gather() -> dict:
    record = _build.build_record()
    driver = _C.driver_version()
    devices = []
    for info in _C.devices():
        major, minor = info["capability"]
        entry = {"index": info["ordinal"], "name": info["name"], "capability": f"{major}.{minor}",
                 "supported": info["supported"]}
        if info["supported"]:
            bv = info["binary_version"]
            entry["runs"] = f"sm_{bv} code" if bv else "unknown"
            entry["kernel_paths"] = kernel_paths(info["ordinal"])
        else:
            entry["reason"] = info["error"]
            entry["fix"] = _build.how_to_fit((major, minor))
        devices.append(entry)
    return {
        "version": __version__,
        "build": record,
        "binary_arch_list": _C.compiled_arch_list() or None,
        "driver_cuda_version": f"{driver // 1000}.{driver % 1000 // 10}" if driver else None,
        "gpus": devices,
    }


def render(facts: dict) -> str:
    record = facts["build"]
    lines = [f"culina {facts['version']}"]
    if record.get("kind") == "unknown":
        lines.append(f"  build:   unknown ({record['note']})")
    else:
        how = {"local": "local build", "release": "release wheel"}.get(record["kind"], record["kind"])
        lines.append(f"  build:   {how}, variant {record.get('variant')}"
                     + (" (CPU only)" if record.get("cpu_only") else ""))
        reason = _build.local_build_reason(record)
        if reason:
            lines.append(f"  why:     {reason}")
        if not record.get("cpu_only"):
            lines.append(f"  CUDA:    {record.get('cuda_version')} (nvcc {record.get('nvcc_version')})")
            lines.append(f"  archs:   {_build.describe_archs(record)}")
        lines.append(f"  compiler: {record.get('compiler')}")
    if facts["binary_arch_list"]:
        lines.append(f"  binary:  __CUDA_ARCH_LIST__ = {facts['binary_arch_list']}")
    lines.append(f"  driver:  " + (f"supports CUDA {facts['driver_cuda_version']}"
                                   if facts["driver_cuda_version"] else "none found"))
    if not facts["gpus"]:
        lines.append("  GPUs:    none visible (NumPy arrays still run on the CPU)")
    for gpu in facts["gpus"]:
        status = (f"supported ({gpu['runs']})" if gpu["supported"]
                  else f"NOT supported: {gpu['reason']}; {gpu['fix']}")
        lines.append(f"  GPU {gpu['index']}:   {gpu['name']}, compute capability {gpu['capability']}: {status}")
        for dtype, paths in gpu.get("kernel_paths", {}).items():
            runs = ", ".join(f"D={sizes} {path}" for path, sizes in path_ranges(paths))
            lines.append(f"    kernels, {dtype}: {runs}")
    return "\n".join(lines)


INFO_SCRIPT = "culina-info"  # pyproject.toml's [project.scripts] entry for `python -m culina info`


def write_stdout(text: str) -> None:
    """Prints `text`; a reader that closed the pipe early (`culina-info | head -1`) is not an
    error: the rest is dropped quietly instead of ending in a BrokenPipeError traceback."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Python flushes stdout again at exit; pointing it at /dev/null keeps that flush quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
        if Path(sys.argv[0]).name == INFO_SCRIPT:
            argv = ["info", *argv]
    parser = argparse.ArgumentParser(prog="python -m culina")
    sub = parser.add_subparsers(dest="command", required=True)
    about_info = ("version, how this copy was built, and the GPUs it can serve. It initialises CUDA on every "
                  "visible GPU (a context each, about 500 MiB, while it runs), which `import culina` never does")
    info = sub.add_parser("info", help=about_info, description=about_info)
    info.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    facts = gather()
    write_stdout(json.dumps(facts, indent=2) if args.json else render(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
