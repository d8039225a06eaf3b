"""What this copy of culina is: its build record and the architectures in its binary."""
from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path

RECORD = "_build_info.json"
# resolver/src/facts/cuda_facts.json, the helper's facts too (docs/ARCHITECTURE.md, "CUDA facts").
CUDA_FACTS = Path(__file__).with_name("cuda_facts.json")


@functools.lru_cache(maxsize=None)
def build_record() -> dict:
    """The record the build wrote (kind, variant, CUDA version, SASS/PTX architectures).

    A tree that was never built by setup.py has none; the result then says so rather than
    guessing.
    """
    try:
        text = resources.files(__package__).joinpath(RECORD).read_text()
    except FileNotFoundError:
        return {"kind": "unknown", "note": f"no {RECORD} beside the module: not built by setup.py"}
    return json.loads(text)


def local_build_reason(record: dict) -> str | None:
    """Why the resolver had this copy built locally (its decision's reason: no wheel fits, the chosen
    wheel could not be fetched, VARIANT=source, ...), or None for a release wheel or a build the
    resolver did not decide (`setup.py build_ext`)."""
    decision = record.get("resolver") if record.get("kind") == "local" else None
    return decision.get("reason") if isinstance(decision, dict) else None


def describe_archs(record: dict) -> str:
    sass = ", ".join(record.get("sass_archs") or []) or "none"
    ptx = ", ".join(record.get("ptx_archs") or []) or "none"
    special = ", ".join(record.get("arch_specific_sass") or [])
    return f"SASS for {sass}; PTX for {ptx}" + (f"; and {special} for the kernels written for it alone" if special else "")


def minimum_linux_driver(cuda_major: int) -> str | None:
    """The first Linux driver release supporting a CUDA major ("580" for 13), or None when the facts
    do not know it."""
    return json.loads(CUDA_FACTS.read_text())["driver_minimum_linux"].get(str(cuda_major))


# The resolver probes the host again on reinstall; pip's own wheel cache must not short-cut it.
REINSTALL = "pip install --force-reinstall --no-cache-dir culina"


def how_to_fit(capability: tuple[int, int]) -> str:
    cc = f"{capability[0]}.{capability[1]}"
    return (f"reinstall so that culina's resolver picks a release wheel covering {cc} or builds for it: "
            f"`{REINSTALL}`; to build from source for exactly this GPU: "
            f"`CULINA_VARIANT=source CULINA_CUDA_ARCHS={cc} {REINSTALL}`")


def driver_problem(driver_version: int) -> tuple[str, str] | None:
    """(why the NVIDIA driver, cudaDriverGetVersion's number, 0 for none, cannot run this build;
    the fix), or None.

    CUDA's minor-version compatibility: a build with CUDA X.Y runs on a driver supporting X.0 or newer.
    """
    record = build_record()
    if record.get("cpu_only") or not record.get("cuda_version") or driver_version == 0:
        return None
    major = int(str(record["cuda_version"]).split(".")[0])
    if driver_version >= major * 1000:
        return None
    driver = f"{driver_version // 1000}.{driver_version % 1000 // 10}"
    minimum = minimum_linux_driver(major) or f"one supporting CUDA {major}.0"
    return (f"this culina is a CUDA {record['cuda_version']} build ({record.get('kind')}, {record.get('variant')}), "
            f"but the NVIDIA driver here supports CUDA {driver} only, so no GPU call can run",
            f"update the driver to {minimum} or newer, or reinstall so that culina's resolver picks the variant "
            f"this driver runs: `{REINSTALL}`")


def _cuda_int(version: str) -> int:
    """"13.0" as the driver API counts it, 13000."""
    major, minor = (int(part) for part in str(version).split(".")[:2])
    return major * 1000 + minor * 10


def _arch_runs_on(label: str, capability: tuple[int, int], ptx: bool) -> bool:
    """Whether code for a build-record target ("8.0", "9.0a", "10.0f") may run on a GPU of
    `capability`, driver aside: the selection policy's rule (policy/arch_coverage.cpp arch_runs_on),
    which the resolver applies at install time; the import-time check needs it without the helper,
    so tests/data/cuda_facts_cases.json ("arch_runs_on") holds both sides to the same cases."""
    match = re.fullmatch(r"(\d+)\.(\d+)([af]?)", label)
    if not match:  # not a target this build writes; the warning then shows it among the archs
        return False
    target, suffix = (int(match[1]), int(match[2])), match[3]
    if suffix == "a":
        return capability == target
    if ptx and not suffix:
        return capability >= target
    return capability[0] == target[0] and capability[1] >= target[1]


def has_code_for(capability: tuple[int, int], driver_version: int) -> bool:
    """Whether this binary holds code a GPU of `capability` runs under a driver supporting
    `driver_version` (as cudaDriverGetVersion counts): SASS for it, or PTX the driver can JIT,
    which needs a driver at least as new as the build's CUDA. True when the record does not say
    (a tree setup.py never built): the first GPU call then asks CUDA."""
    record = build_record()
    if "sass_archs" not in record and "ptx_archs" not in record:
        return True
    if any(_arch_runs_on(label, capability, ptx=False) for label in record.get("sass_archs") or []):
        return True
    jits = bool(record.get("cuda_version")) and driver_version >= _cuda_int(record["cuda_version"])
    return jits and any(_arch_runs_on(label, capability, ptx=True) for label in record.get("ptx_archs") or [])
