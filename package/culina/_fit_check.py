"""At import: does this installed build fit this machine? A CUDA build on a driver too old for it,
or GPUs its binary has no code for, get one warning that says why and gives the reinstall
command. NumPy arrays keep working either way, so this warns rather than failing the import;
GPU calls then raise UnsupportedDeviceError with the same reason.

The facts come from NVML, never from CUDA: initialising CUDA here would put a context (about
500 MiB) on every GPU of every process that imports culina and break CUDA in children forked
after the import. Without NVML the check is skipped; the first GPU call still checks."""
from __future__ import annotations

import os
import re
import warnings

from . import _C, _build


class BuildMismatchWarning(RuntimeWarning):
    """The installed culina cannot run on some or all of this machine's GPUs."""


def problems() -> list[str]:
    if not _C.built_with_cuda():
        return []
    report = _C.nvml_report()
    if report is None:
        return []
    driver = report["driver_cuda_version"]
    driver_problem = _build.driver_problem(driver)
    if driver_problem:
        return [driver_problem]
    gpus, caveat = visible_gpus(report["gpus"], os.environ.get("CUDA_VISIBLE_DEVICES"),
                                os.environ.get("CUDA_DEVICE_ORDER"))
    found = []
    for ordinal, gpu in gpus:
        if gpu["capability"] is None or _build.has_code_for(gpu["capability"], driver):
            continue
        major, minor = gpu["capability"]
        found.append(f"GPU {ordinal} '{gpu['name']}' (compute capability {major}.{minor}) has no code in "
                     f"this binary ({_build.describe_archs(_build.build_record())}); "
                     f"{_build.how_to_fit((major, minor))}{caveat}")
    return found


def visible_gpus(gpus: list[dict], visible: str | None, order: str | None) -> tuple[list[tuple[int, dict]], str]:
    """The GPUs CUDA will show this process, each with its CUDA ordinal, and a caveat for the
    warning when that could not be worked out exactly.

    NVML lists every GPU in PCI bus order, ignoring CUDA_VISIBLE_DEVICES. CUDA reads that
    variable as a comma-separated list of indices or UUIDs ("GPU-8932f937", a prefix will do),
    stops at the first entry it cannot use, and shows no GPU when one repeats; so does this.
    CUDA's indices follow CUDA_DEVICE_ORDER, which by default puts the fastest GPU first: that
    is NVML's order only with CUDA_DEVICE_ORDER=PCI_BUS_ID or when all the GPUs are alike.
    Where the mapping is out of reach (MIG instances, indices on a mix of GPUs), every GPU is
    checked, numbered as nvidia-smi numbers them, and the caveat says so.
    """
    alike = len({(gpu["name"], gpu["capability"]) for gpu in gpus}) <= 1
    in_nvml_order = alike or order == "PCI_BUS_ID"
    every_gpu = [(gpu["index"], gpu) for gpu in gpus]
    if visible is None:
        caveat = "" if in_nvml_order else (" (numbered as nvidia-smi numbers them; CUDA numbers the fastest GPU "
                                           "first unless CUDA_DEVICE_ORDER=PCI_BUS_ID)")
        return every_gpu, caveat
    entries = [entry.strip() for entry in visible.split(",")]
    if any(entry.startswith("MIG-") for entry in entries):
        why = "names MIG instances, which this check cannot map to GPUs"
    elif not in_nvml_order and any(re.fullmatch(r"\d+", entry) for entry in entries):
        why = ("lists indices, which CUDA counts fastest GPU first on this mix of GPUs; set "
               "CUDA_DEVICE_ORDER=PCI_BUS_ID to count as nvidia-smi does")
    else:
        return [(ordinal, gpu) for ordinal, gpu in enumerate(_named_gpus(gpus, entries))], ""
    return every_gpu, (f" (CUDA_VISIBLE_DEVICES={visible!r} {why}, so every GPU was checked, numbered as "
                       f"nvidia-smi numbers them)")


def _named_gpus(gpus: list[dict], entries: list[str]) -> list[dict]:
    named: list[dict] = []
    for entry in entries:
        if re.fullmatch(r"\d+", entry):
            matches = [gpu for gpu in gpus if gpu["index"] == int(entry)]
        elif entry.startswith("GPU-"):
            matches = [gpu for gpu in gpus if gpu["uuid"].startswith(entry)]
        else:
            matches = []
        if len(matches) != 1:
            break
        if matches[0] in named:
            return []
        named.append(matches[0])
    return named


def warn_if_mismatched() -> None:
    reason = _build.local_build_reason(_build.build_record())
    why_local = f" (this copy was built locally: {reason})" if reason else ""
    for problem in problems():
        warnings.warn(f"culina: {problem}{why_local}", BuildMismatchWarning, stacklevel=3)
