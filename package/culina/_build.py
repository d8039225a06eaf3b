"""What this copy of culina is: its build record and the architectures in its binary."""
from __future__ import annotations

import functools
import json
from importlib import resources

RECORD = "_build_info.json"


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


def describe_archs(record: dict) -> str:
    sass = ", ".join(record.get("sass_archs") or []) or "none"
    ptx = ", ".join(record.get("ptx_archs") or []) or "none"
    return f"SASS for {sass}; PTX for {ptx}"


def how_to_fit(capability: tuple[int, int]) -> str:
    cc = f"{capability[0]}.{capability[1]}"
    return (f"get a build that fits: a release wheel whose architectures cover {cc}, or build "
            f"from source on this machine with CULINA_CUDA_ARCHS={cc} (or 'native'): "
            f"CULINA_CUDA_ARCHS={cc} pip install --no-binary culina --force-reinstall culina")
