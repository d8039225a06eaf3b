"""At import: does this installed build fit this machine and the install settings now in force?
A CUDA build on a driver too old for it, GPUs its binary has no code for, or a build other than
the one CULINA_VARIANT asks for (pip's wheel cache served an earlier decision, or the variable was
set after the install) each get one warning that says why and gives the reinstall command. NumPy
arrays keep working either way, so this warns rather than failing the import; GPU calls then
raise UnsupportedDeviceError with the same reason.

The facts come from NVML, never from CUDA: initialising CUDA here would put a context (about
500 MiB) on every GPU of every process that imports culina and break CUDA in children forked
after the import. Without NVML the check is skipped; the first GPU call still checks."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from typing import Callable, Mapping

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
        problem, fix = driver_problem
        return [f"{problem}. Fix: {fix}"]
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


@dataclasses.dataclass(frozen=True)
class InstallSetting:
    """One install variable this check compares with the build record."""
    name: str
    accepted: str
    # (the value, unset as "") -> what it asks of the build, None for nothing; ValueError: not understood
    parse: Callable[[str], str | None]


def _variant_request(value: str) -> str | None:
    """CULINA_VARIANT as the helper reads it (policy/variant_request.cpp, held together by
    tests/data/variant_request_cases.json): None for auto, "source", or a release label, the CPU
    alias turned into the CPU label. Like the helper, which reads bytes, it trims only ASCII blanks
    and lowers only A-Z: str.strip() and str.lower() would take U+00A0 or the Kelvin sign K."""
    labels = json.loads(_build.CUDA_FACTS.read_text())["variant_label"]
    text = "".join(c.lower() if c.isascii() else c for c in value.strip(" \t\r\n\f\v"))
    if text in ("", "auto"):
        return None
    if text == "source":
        return text
    if text in (labels["cpu"], labels["cpu_alias"]):
        return labels["cpu"]
    if len(text) > labels["max_length"] or not set(text) <= set(labels["characters"]):
        raise ValueError(text)
    return text


# The install settings this check reads, each once: the decision they change is in the build record.
INSTALL_SETTINGS = {
    "variant": InstallSetting("CULINA_VARIANT", "auto, source, null (alias cpu) or a release label such as cu129 "
                              "or cu130", _variant_request),
}


def settings_problems(record: dict, environ: Mapping[str, str]) -> list[str]:
    """Where the build record disagrees with the install settings in `environ`. Only a build the
    resolver decided (a release wheel, or a local build with its decision) is compared: an in-place
    `setup.py build_ext` answers to no install setting."""
    if record.get("kind") != "release" and not isinstance(record.get("resolver"), dict):
        return []
    setting = INSTALL_SETTINGS["variant"]
    value = environ.get(setting.name, "")
    try:
        wanted = setting.parse(value)
    except ValueError:
        return [f"{setting.name}={value!r} is not understood, so the next install will stop on it; accepted: "
                f"{setting.accepted}"]
    installed = f"this copy is the {record.get('variant')} {'release wheel' if record.get('kind') == 'release' else 'local build'}"
    reinstall = f"`{setting.name}={value.strip()} {_build.REINSTALL}`"
    if wanted == "source" and record.get("kind") == "release":
        return [f"{setting.name}=source asks for a local build, but {installed} (pip's wheel cache may have served an "
                f"earlier decision); to build it: {reinstall}"]
    if wanted not in (None, "source") and wanted != record.get("variant"):
        return [f"{setting.name}={value.strip()} asks for the {wanted} variant, but {installed} (pip's wheel cache may "
                f"have served an earlier decision); to install it: {reinstall}"]
    return []


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
    record = _build.build_record()
    reason = _build.local_build_reason(record)
    why_local = f" (this copy was built locally: {reason})" if reason else ""
    for problem in problems():
        warnings.warn(f"culina: {problem}{why_local}", BuildMismatchWarning, stacklevel=3)
    for problem in settings_problems(record, os.environ):
        warnings.warn(f"culina: {problem}", BuildMismatchWarning, stacklevel=3)
