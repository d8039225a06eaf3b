"""setuptools `sdist` that puts the nlohmann/json headers (with their license) into the sdist,
so the install helper builds on machines that have only a C++17 compiler, and the Python packages
the install flow imports (bundled_python). The repository never carries them: they are copied
from the machine that builds the sdist."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools.command.sdist import sdist

import bundled_python
import project_config

BUNDLE_DIR = Path("resolver") / "bundled"
HEADER_ROOTS = ("/usr/include", "/usr/local/include")
LICENSE_FILES = ("/usr/share/doc/nlohmann-json3-dev/copyright", "/usr/share/licenses/json-devel/LICENSE.MIT")


def find_json_headers() -> Path:
    variable = project_config.current().env_prefix + "JSON_INCLUDE_DIR"  # CULINA_JSON_INCLUDE_DIR for culina
    roots = [os.environ[variable]] if os.environ.get(variable) else []
    for root in [*roots, *HEADER_ROOTS]:
        if (Path(root) / "nlohmann" / "json.hpp").is_file():
            return Path(root) / "nlohmann"
    raise SystemExit("building the sdist needs the nlohmann/json headers to bundle: install them "
                     f"(Debian/Ubuntu: apt-get install nlohmann-json3-dev) or set {variable}")


class BundlingSdist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        headers = find_json_headers()
        target = Path(base_dir) / BUNDLE_DIR
        shutil.copytree(headers, target / "nlohmann", dirs_exist_ok=True)
        license_file = next((Path(p) for p in LICENSE_FILES if Path(p).is_file()), None)
        if license_file is None:
            raise SystemExit(f"found {headers} but not its license ({', '.join(LICENSE_FILES)}): "
                             "the sdist must carry nlohmann/json's license beside its headers")
        shutil.copy2(license_file, target / "nlohmann-json-LICENSE")
        name = project_config.current().name
        print(f"[{name} sdist] bundled {headers} and its license into {BUNDLE_DIR}")
        python = bundled_python.bundle_into(target / "python")
        print(f"[{name} sdist] bundled {', '.join(python)} (sources and licenses) into {BUNDLE_DIR / 'python'}")
