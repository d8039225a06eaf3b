"""Names a release wheel in the wheel-variant style (README.md, "Installing a release asset by hand"):
culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl -> culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl.
The metadata inside is unchanged; the resolver drops the label when it hands the wheel to pip."""
from __future__ import annotations

import re
from pathlib import Path

from culina_resolver import cuda_facts

# name-version[-build]-python-abi-platform.whl, with no variant label yet
PLAIN_WHEEL = re.compile(r"(?P<stem>[^-]+-[^-]+(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+)\.whl")


variant_label = cuda_facts.variant_label


def labelled_name(wheel_name: str, label: str) -> str:
    if not cuda_facts.is_variant_label(label):
        raise ValueError(f"variant label {label!r}: expected 1-16 characters of [0-9a-z._], e.g. cu130")
    match = PLAIN_WHEEL.fullmatch(wheel_name)
    if not match:
        raise ValueError(f"{wheel_name!r} is not a wheel name without a label "
                         "(name-version[-build]-python-abi-platform.whl)")
    return f"{match['stem']}-{label}.whl"


def apply_label(wheel: Path, label: str) -> Path:
    """Renames `wheel` in place; returns the new path."""
    target = wheel.with_name(labelled_name(wheel.name, label))
    wheel.rename(target)
    return target
