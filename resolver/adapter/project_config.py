"""What pyproject.toml tells the build adapter: the project's name and version, and the
`[tool.culina]` table (release URL template, release architectures per CUDA major). The one place
that reads the file."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RELEASE_URL_VAR = "CULINA_RELEASE_URL"


def load_pyproject(root: Path = PROJECT_ROOT) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli (bundled into the sdist, see bundled_python)
        import tomli as tomllib
    with open(root / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


@dataclasses.dataclass(frozen=True)
class ProjectConfig:
    name: str
    version: str
    release_url: str                  # base URL of the release assets (CULINA_RELEASE_URL overrides)
    release_archs: dict[int, str]     # CUDA major -> the list a release wheel carries (CULINA_CUDA_ARCHS=all)

    @classmethod
    def load(cls, root: Path = PROJECT_ROOT) -> "ProjectConfig":
        pyproject = load_pyproject(root)
        project, tool = pyproject["project"], pyproject["tool"]["culina"]
        release_url = os.environ.get(RELEASE_URL_VAR) or tool["release_url"].format(version=project["version"])
        archs = tool["release_archs"]
        if not isinstance(archs, dict) or not all(str(k).isdigit() and isinstance(v, str) for k, v in archs.items()):
            raise ValueError(f"{root / 'pyproject.toml'}: [tool.culina] release_archs = {archs!r} must be a table "
                             'of CUDA major to list, e.g. [tool.culina.release_archs] "13" = "7.5;8.0;12.0+PTX"')
        return cls(project["name"], project["version"], release_url.rstrip("/"),
                   {int(major): value for major, value in archs.items()})

    def release_archs_for(self, cuda_version: str) -> str:
        """The release list for a toolkit of this CUDA version ("13.0"): its major's entry."""
        major = int(cuda_version.split(".")[0])
        if major not in self.release_archs:
            raise ValueError(f"pyproject.toml [tool.culina.release_archs] has no list for CUDA {major} (toolkit "
                             f"{cuda_version}; listed: {', '.join(map(str, sorted(self.release_archs)))}): add a "
                             f'"{major}" entry, or build with a toolkit of a listed major')
        return self.release_archs[major]

    @property
    def newest_release_archs(self) -> str:
        """The list of the newest CUDA major listed."""
        return self.release_archs[max(self.release_archs)]
