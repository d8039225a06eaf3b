"""What pyproject.toml tells the build adapter: the project's name and version, and the
`[tool.culina]` table (release URL template, release architectures). The one place that reads
the file."""
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
    release_archs: str                # what CULINA_CUDA_ARCHS=all means

    @classmethod
    def load(cls, root: Path = PROJECT_ROOT) -> "ProjectConfig":
        pyproject = load_pyproject(root)
        project, tool = pyproject["project"], pyproject["tool"]["culina"]
        release_url = os.environ.get(RELEASE_URL_VAR) or tool["release_url"].format(version=project["version"])
        return cls(project["name"], project["version"], release_url.rstrip("/"), tool["release_archs"])
