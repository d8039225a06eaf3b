"""`python -m culina` (the `culina` console script): `info [--json]` (also `culina-info`) says what
this copy is, how the install decided it and which GPUs here it can serve; unlike `import
culina`, it asks CUDA itself, which puts a context on every visible GPU while it runs.
`cache list` and `cache purge` show and empty the install's wheel and helper caches. A
CulinaError ends the command with its message and hint on stderr and exit status 1, no traceback;
anything else is a defect and keeps its traceback."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import __version__, _C, _api, _build, _cache, _frameworks
from .errors import CacheError, CulinaError

# The head sizes `info` asks each GPU's kernel path for (Dk = Dv), every dtype: all the kernels take.
KERNEL_PATH_HEAD_SIZES = range(1, _C.MAX_HEAD_DIM + 1)
# The text groups the head sizes that are multiples of this (the tensor-core kernels' step) apart from the rest.
HEAD_SIZE_STEP = 8


def kernel_paths(device: int) -> dict:
    """{"bfloat16": {"1": "generic", ..., "16": "tensor-core, fused (sm_80+)", ...}, ...}: the path
    device `device` takes per dtype and head size, each dtype computed as itself."""
    return {dtype: {str(size): _C.kernel_path(device, code, size, size, code) for size in KERNEL_PATH_HEAD_SIZES}
            for dtype, code in _frameworks.NUMPY_DTYPES.items()}


def path_ranges(paths: dict) -> list:
    """[(path, "8-192 by 8"), (path, "200-256 by 8"), (path, "others")]: the head sizes that are
    multiples of HEAD_SIZE_STEP in runs that share a path, then the rest, by path, as "others"
    when they all share one."""
    aligned = [(int(size), path) for size, path in paths.items() if int(size) % HEAD_SIZE_STEP == 0]
    rest = [(int(size), path) for size, path in paths.items() if int(size) % HEAD_SIZE_STEP]
    runs: list = []
    for size, path in aligned:
        if runs and runs[-1][0] == path:
            runs[-1][2] = size
        else:
            runs.append([path, size, size])
    ranges = [(path, str(first) if first == last else f"{first}-{last} by {HEAD_SIZE_STEP}") for path, first, last in runs]
    rest_paths = list(dict.fromkeys(path for _, path in rest))
    if len(rest_paths) == 1:
        return ranges + [(rest_paths[0], "others")]
    return ranges + [(path, consecutive_runs([size for size, p in rest if p == path])) for path in rest_paths]


def consecutive_runs(sizes: list[int]) -> str:
    """[1, 2, 3, 5] -> "1-3,5"."""
    runs: list = []
    for size in sizes:
        if runs and runs[-1][1] == size - 1:
            runs[-1][1] = size
        else:
            runs.append([size, size])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


# The devices `info` states the float32 rule for (_api.compute_dtype), as torch names them.
FLOAT32_RULE_DEVICES = ("cpu", "cuda")


def float32_compute() -> dict:
    """{"cpu": {"highest": "float32", ...}, "cuda": {..., "medium": "bfloat16"}}: the dtype the
    kernels run float32 PyTorch tensors in, per device and torch.get_float32_matmul_precision(),
    as _api.compute_dtype decides it."""
    return {device: {precision: _api.compute_dtype("float32", device, precision)
                     for precision in _api.FLOAT32_MATMUL_PRECISIONS} for device in FLOAT32_RULE_DEVICES}


def float32_rule_text(rule: dict) -> str:
    """float32_compute's answer in words, one clause per device."""
    clauses = []
    for device, by_precision in rule.items():
        dtypes = list(dict.fromkeys(by_precision.values()))
        if len(dtypes) == 1:
            clauses.append(f"on {device} in {dtypes[0]}")
            continue
        parts = [f"in {dtype} under " + " or ".join(repr(p) for p, d in by_precision.items() if d == dtype)
                 for dtype in dtypes]
        clauses.append(f"on {device} " + ", ".join(parts))
    return ("PyTorch float32 tensors compute " + "; ".join(clauses) + " (by torch.get_float32_matmul_precision(); "
            "rounded: q, k, v only, the gates, states and o stay float32; culina has no TF32 kernels)")


def gather() -> dict:
    record = _build.build_record()
    driver = _C.driver_version()
    kernels = _api.apply_kernel_choice()
    devices = []
    for info in _C.devices():
        major, minor = info["capability"]
        entry = {"index": info["ordinal"], "name": info["name"], "capability": f"{major}.{minor}",
                 "supported": info["supported"]}
        if info["supported"]:
            bv, arch_specific = info["binary_version"], info["arch_specific_version"]
            entry["runs"] = f"sm_{bv} code" if bv else "unknown"
            if arch_specific:
                entry["runs"] += f" and sm_{arch_specific}a code" + (" (off: CULINA_KERNELS=portable)"
                                                                      if kernels == "portable" else "")
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
        "float32_compute": float32_compute(),
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
        lines += decision_lines(record.get("resolver"))
        if not record.get("cpu_only"):
            toolkit = f", from {record['toolkit_source']}" if record.get("toolkit_source") else ""
            lines.append(f"  CUDA:    {record.get('cuda_version')} (nvcc {record.get('nvcc_version')}{toolkit})")
            lines.append(f"  archs:   {_build.describe_archs(record)}")
        lines.append(f"  compiler: {record.get('compiler')}")
    if facts["binary_arch_list"]:
        lines.append(f"  binary:  __CUDA_ARCH_LIST__ = {facts['binary_arch_list']}")
    lines.append(f"  driver:  " + (f"supports CUDA {facts['driver_cuda_version']}"
                                   if facts["driver_cuda_version"] else "none found"))
    lines.append(f"  float32: {float32_rule_text(float32_compute())}")  # this copy's rule, not the host's
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


def decision_lines(decision: dict | None) -> list[str]:
    """The install decision the build record holds: what was decided and why, what a prebuilt
    wheel's failed fetch said before the local build served, the assumption made for a host with
    no GPU, and the decision's warnings. None: a build the resolver did not decide."""
    if not isinstance(decision, dict):
        return ["  decided: nothing (installed without the resolver: `setup.py build_ext`, a release build or a "
                "release wheel installed by hand)"]
    lines = [f"  decided: {decision.get('action')}",
             f"  why:     {decision.get('reason')}"]
    if decision.get("fetch_error"):
        lines.append(f"  fallback: the chosen wheel was not used: {decision['fetch_error']}")
    if decision.get("assumption"):
        lines.append(f"  assumed: {decision['assumption']}")
    lines += [f"  warning: {warning}" for warning in decision.get("warnings") or []]
    return lines


def render_cache(root: Path, found: list) -> str:
    lines = [f"culina cache: {root}"]
    for folder in _cache.CACHE_FOLDERS:
        inside = [entry for entry in found if entry.name.startswith(folder + "/")]
        lines.append(f"  {folder}/: {len(inside)} entr{'y' if len(inside) == 1 else 'ies'}, "
                     f"{_cache.size_text(sum(entry.size for entry in inside))}")
        lines += [f"    {entry.name.split('/', 1)[1]}  {_cache.size_text(entry.size)}"
                  + (f"  (not purged: {entry.foreign})" if entry.foreign else "") for entry in inside]
    lines.append(f"  total: {_cache.size_text(sum(entry.size for entry in found))}")
    return "\n".join(lines)


def cache_command(action: str, cache_dir: str | None) -> int:
    try:
        root = _cache.cache_root(_build.build_record(), cache_dir)
        if action == "list":
            write_stdout(render_cache(root, _cache.entries(root)))
            return 0
        freed, kept = _cache.purge(root)
    except OSError as error:  # a folder or file of the cache that could not be read or removed
        raise CacheError(f"{error.filename}: {error.strerror}", "check that folder's owner and mode") from None
    write_stdout(f"culina cache purge: {root}: freed {_cache.size_text(freed)}"
                 + "".join(f"\n  left alone: {problem}" for problem in kept))
    return 0


INFO_SCRIPT = "culina-info"  # pyproject.toml's [project.scripts] entry for `python -m culina info`


def write_stdout(text: str) -> None:
    """Prints `text`; a reader that closed the pipe early (`culina-info | head -1`) is not an
    error: the rest is dropped quietly instead of ending in a BrokenPipeError traceback."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Python flushes stdout again at exit; pointing it at /dev/null keeps that flush quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def error_text(command: str, error: CulinaError) -> str:
    """What a command that failed prints: `<command>: <message>`, then the hint on a line of its own."""
    return f"{command}: {error.message}" + (f"\n  hint: {error.hint}" if error.hint else "")


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
    about_cache = ("the install's caches under its cache root: wheels/ (verified release wheels) and helper/ "
                   "(compiled install helpers). purge removes only your own entries and follows no link")
    cache = sub.add_parser("cache", help=about_cache, description=about_cache)
    cache.add_argument("action", choices=("list", "purge"))
    cache.add_argument("--cache-dir", help="the cache root (default: the one the install used, from the build record)")
    args = parser.parse_args(argv)
    try:
        if args.command == "cache":
            return cache_command(args.action, args.cache_dir)
        facts = gather()
        write_stdout(json.dumps(facts, indent=2) if args.json else render(facts))
        return 0
    except CulinaError as error:
        command = f"culina cache {args.action}" if args.command == "cache" else f"culina {args.command}"
        print(error_text(command, error), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
