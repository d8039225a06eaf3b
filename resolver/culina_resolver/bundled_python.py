"""The pure-Python packages the install flow itself imports: packaging (the interpreter's wheel
tags) and, on Python 3.10, tomli (pyproject.toml). Like the nlohmann/json header, they are
bundled into the sdist when it is built, so a prebuilt install needs no build environment at all:
nothing from the index but the sdist, and no pip subprocess to install requirements. The
repository never carries them; a source checkout asks the frontend for them instead (REQUIRES).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import sys
from pathlib import Path

from .adapter_error import AdapterError
from .resolver_files import BUNDLED_DIR

PYTHON_BUNDLE = BUNDLED_DIR / "python"
PACKAGES = ("packaging", "tomli")
REQUIRES = ["packaging", "tomli>=1.1; python_version < '3.11'"]


class SdistError(AdapterError):
    """What building the sdist needs (a package to bundle, a header, a license) is missing here."""

    context = "cannot build the sdist"


def make_importable() -> bool:
    """Puts the bundle behind the installed packages (a newer installed copy wins); True when the
    install flow's imports resolve."""
    if PYTHON_BUNDLE.is_dir() and str(PYTHON_BUNDLE) not in sys.path:
        sys.path.append(str(PYTHON_BUNDLE))
    toml = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    return all(importlib.util.find_spec(name) is not None for name in ("packaging", toml))


def bundle_into(target: Path) -> list[str]:
    """Copies each package's Python sources and license files from this environment into target;
    compiled accelerator modules (tomli ships mypyc builds) are left out, their .py twins serve."""
    bundled = []
    for name in PACKAGES:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise SdistError(f"the sdist bundles {name}, which is not installed here",
                             f"Fix: {sys.executable} -m pip install {' '.join(PACKAGES)}") from None
        licenses = [f for f in dist.files or [] if ".dist-info/" in str(f) and "LICEN" in f.name.upper()]
        sources = [f for f in dist.files or [] if f.parts[0] == name and f.suffix in (".py", ".typed")
                   and "__pycache__" not in f.parts]
        if not licenses or not sources:
            raise SdistError(f"{name} {dist.version} here lacks its {'license' if not licenses else 'sources'}",
                             f"Fix: reinstall it ({sys.executable} -m pip install --force-reinstall {name})")
        for file in sources:
            (target / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(dist.locate_file(file), target / file)
        for file in licenses:
            shutil.copy2(dist.locate_file(file), target / f"{name}-{file.name}")
        bundled.append(f"{name} {dist.version}")
    return bundled
