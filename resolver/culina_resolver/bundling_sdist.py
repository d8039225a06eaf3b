"""setuptools `sdist` that puts the nlohmann/json headers (with their license) into the sdist of a
project that carries the resolver in its tree (culina's), so the install helper builds on machines
that have only a C++17 compiler, and the Python packages the install flow imports
(bundled_python). A project that requires culina-resolver gets both from that package. The
repository never carries them: they are copied from the machine that builds the sdist."""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.command.sdist import sdist

from . import adapter_settings
from . import bundled_python
from . import resolver_files
from .adapter_error import exits_with_message
from .bundled_python import SdistError
from .project_config import project_root

BUNDLE_DIR = resolver_files.IN_TREE / "bundled"
HEADER_ROOTS = ("/usr/include", "/usr/local/include")
LICENSE_FILES = ("/usr/share/doc/nlohmann-json3-dev/copyright", "/usr/share/licenses/json-devel/LICENSE.MIT")


def find_json_headers(include_dir: Path | None = None, variable: str = "") -> Path:
    """The nlohmann folder in `include_dir` (<prefix>JSON_INCLUDE_DIR, named `variable`) or the
    system's include folders."""
    roots = [include_dir] if include_dir else []
    for root in [*roots, *map(Path, HEADER_ROOTS)]:
        if (root / "nlohmann" / "json.hpp").is_file():
            return root / "nlohmann"
    setting = f" or set {variable}" if variable else ""
    raise SdistError(f"the nlohmann/json headers to bundle are not in {', '.join(str(r) for r in [*roots, *HEADER_ROOTS])}",
                     f"Fix: install them (Debian/Ubuntu: apt-get install nlohmann-json3-dev){setting}")


def bundle_json_headers(target: Path, include_dir: Path | None = None, variable: str = "") -> Path:
    """Copies the nlohmann/json headers and their license into `target`; returns where they came from."""
    headers = find_json_headers(include_dir, variable)
    shutil.copytree(headers, target / "nlohmann", dirs_exist_ok=True)
    license_file = next((Path(p) for p in LICENSE_FILES if Path(p).is_file()), None)
    if license_file is None:
        raise SdistError(f"found {headers} but not its license ({', '.join(LICENSE_FILES)})",
                         "the sdist must carry nlohmann/json's license beside its headers: install the "
                         "package that provides it (Debian/Ubuntu: nlohmann-json3-dev)")
    shutil.copy2(license_file, target / "nlohmann-json-LICENSE")
    return headers


class BundlingSdist(sdist):
    run = exits_with_message(sdist.run)

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        settings = adapter_settings.current()
        name = settings.project.name
        if not resolver_files.carried_by(project_root()):
            print(f"[{name} sdist] the resolver comes from the culina-resolver build requirement: nothing to bundle")
            return
        target = Path(base_dir) / BUNDLE_DIR
        headers = bundle_json_headers(target, settings.json_include_dir,
                                      settings.var(adapter_settings.JSON_INCLUDE_DIR))
        print(f"[{name} sdist] bundled {headers} and its license into {BUNDLE_DIR}")
        python = bundled_python.bundle_into(target / "python")
        print(f"[{name} sdist] bundled {', '.join(python)} (sources and licenses) into {BUNDLE_DIR / 'python'}")
