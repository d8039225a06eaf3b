"""setuptools `sdist` that puts the nlohmann/json headers (with their license) into the sdist,
so the install helper builds on machines that have only a C++17 compiler, and the Python packages
the install flow imports (bundled_python). The repository never carries them: they are copied
from the machine that builds the sdist."""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.command.sdist import sdist

import adapter_settings
import bundled_python
from adapter_error import exits_with_message
from bundled_python import SdistError

BUNDLE_DIR = Path("resolver") / "bundled"
HEADER_ROOTS = ("/usr/include", "/usr/local/include")
LICENSE_FILES = ("/usr/share/doc/nlohmann-json3-dev/copyright", "/usr/share/licenses/json-devel/LICENSE.MIT")


def find_json_headers(settings: adapter_settings.AdapterSettings) -> Path:
    roots = [settings.json_include_dir] if settings.json_include_dir else []
    for root in [*roots, *map(Path, HEADER_ROOTS)]:
        if (root / "nlohmann" / "json.hpp").is_file():
            return root / "nlohmann"
    raise SdistError(f"the nlohmann/json headers to bundle are not in {', '.join(str(r) for r in [*roots, *HEADER_ROOTS])}",
                     "Fix: install them (Debian/Ubuntu: apt-get install nlohmann-json3-dev) or set "
                     f"{settings.var(adapter_settings.JSON_INCLUDE_DIR)}")


class BundlingSdist(sdist):
    run = exits_with_message(sdist.run)

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        settings = adapter_settings.current()
        headers = find_json_headers(settings)
        target = Path(base_dir) / BUNDLE_DIR
        shutil.copytree(headers, target / "nlohmann", dirs_exist_ok=True)
        license_file = next((Path(p) for p in LICENSE_FILES if Path(p).is_file()), None)
        if license_file is None:
            raise SdistError(f"found {headers} but not its license ({', '.join(LICENSE_FILES)})",
                             "the sdist must carry nlohmann/json's license beside its headers: install the "
                             "package that provides it (Debian/Ubuntu: nlohmann-json3-dev)")
        shutil.copy2(license_file, target / "nlohmann-json-LICENSE")
        name = settings.project.name
        print(f"[{name} sdist] bundled {headers} and its license into {BUNDLE_DIR}")
        python = bundled_python.bundle_into(target / "python")
        print(f"[{name} sdist] bundled {', '.join(python)} (sources and licenses) into {BUNDLE_DIR / 'python'}")
