"""Where the helper's files are: its C++ sources (src/, the CUDA facts among them), the headers an
sdist bundles to compile them (bundled/) and the prebuilt helpers with their record (prebuilt/).

Two deliveries of one code base: in a checkout and in a sdist that carries the resolver in its
tree (culina's own), they are in resolver/, beside this package; in the culina-resolver wheel they
are inside the package, in helper_files/ (resolver/setup.py puts them there).
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGED = PACKAGE_DIR / "helper_files"
HELPER_FILES = PACKAGED if PACKAGED.is_dir() else PACKAGE_DIR.parent
SOURCE_DIR = HELPER_FILES / "src"
BUNDLED_DIR = HELPER_FILES / "bundled"    # nlohmann/json.hpp (and, in a project's sdist, python/)
PREBUILT_DIR = HELPER_FILES / "prebuilt"  # helpers compiled for a release, with their record
FACTS_FILE = SOURCE_DIR / "facts" / "cuda_facts.json"
SETTINGS_TABLE_FILE = SOURCE_DIR / "settings" / "settings_table.json"  # the helper's settings, embedded in it too
# Where a project that carries the resolver in its tree (culina) keeps it, relative to its root.
IN_TREE = Path("resolver")


def carried_by(project_root: Path) -> bool:
    """Whether the project at `project_root` carries the resolver in its tree (its sdist then
    bundles the helper's headers and prebuilt helpers), rather than requiring culina-resolver."""
    return (project_root / IN_TREE / PACKAGE_DIR.name).is_dir()


def origin() -> str:
    """Where the helper's files come from, for the log."""
    return "the culina-resolver package" if HELPER_FILES == PACKAGED else "the sdist"
