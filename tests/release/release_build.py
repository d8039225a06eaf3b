"""Helpers for the release tests: running build_release.py, fresh venvs that install its sdist,
the build record of what they installed."""
from __future__ import annotations

import dataclasses
import json
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "release"))
sys.path.insert(0, str(ROOT / "resolver"))

BUILD_RELEASE = ROOT / "tools" / "release" / "build_release.py"
TEST_ARCHS = "9.0"


@dataclasses.dataclass
class Release:
    out: Path
    manifest: dict

    @property
    def wheels(self) -> list[Path]:
        return sorted(self.out.glob("*.whl"))

    @property
    def sdist(self) -> Path:
        return self.out / "culina-0.1.0.tar.gz"


def run_release(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUILD_RELEASE), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def fresh_venv(where: Path) -> Path:
    """A new venv whose only extra is a .pth to this interpreter's site-packages, so the build
    requirements (setuptools, pybind11, numpy) import without a network; culina itself is not there."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_culina_build_requirements.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def install_sdist(python: Path, sdist: Path, env: dict[str, str], wrap=lambda cmd: cmd) -> subprocess.CompletedProcess:
    cmd = [str(python), "-m", "pip", "install", "-v", "--no-index", "--no-deps", "--no-build-isolation", str(sdist)]
    return subprocess.run(wrap(cmd), env=env, capture_output=True, text=True, timeout=1200)


def build_record(python: Path, env: dict[str, str] | None = None) -> dict:
    code = "import culina, json; print(json.dumps(culina.build_record()))"
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
