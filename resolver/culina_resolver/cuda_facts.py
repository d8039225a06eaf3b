"""The CUDA facts file, resolver/src/facts/cuda_facts.json, for the adapter and the release tools.
The helper embeds the same file at compile time; the installed package carries it as
culina/cuda_facts.json (docs/ARCHITECTURE.md, "CUDA facts")."""
from __future__ import annotations

import functools
import json

from .resolver_files import FACTS_FILE


@functools.lru_cache(maxsize=None)
def facts() -> dict:
    return json.loads(FACTS_FILE.read_text())


def variant_label(cuda_version: str | None) -> str:
    """cu130 for a CUDA 13.0 build, null for a CPU-only one."""
    rule = facts()["variant_label"]
    return rule["cpu"] if cuda_version is None else rule["cuda_prefix"] + cuda_version.replace(".", "")


def is_variant_label(label: str) -> bool:
    rule = facts()["variant_label"]
    return 0 < len(label) <= rule["max_length"] and all(c in rule["characters"] for c in label)
