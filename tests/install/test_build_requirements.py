"""A build requirement missing from the build environment (pip --no-build-isolation) stops the
install with one culina line naming what to install, before the helper or the extension is
compiled: packaging (the resolver reads the interpreter's wheel tags with it) before the helper is
chosen, setuptools, wheel and pybind11 before setuptools runs setup.py.

Each test installs a copy of culina's tree with `pip install --no-build-isolation --no-index` from
a venv that sees this venv's packages but the one left out (links in a folder on its path)."""
from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TREE_IGNORE = shutil.ignore_patterns("__pycache__", "*.so", "_build_info.json", "*.egg-info", "bundled", "prebuilt",
                                     "build", "dist")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """culina's tree as a checkout holds it (the resolver in resolver/, no prebuilt helper)."""
    root = tmp_path_factory.mktemp("checkout") / "culina"
    for part in ("resolver", "package", "csrc"):
        shutil.copytree(REPO / part, root / part, ignore=TREE_IGNORE)
    for part in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / part, root / part)
    return root


def venv_without(where: Path, left_out: str) -> Path:
    """A venv whose path holds this venv's packages, less `left_out` and its metadata."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    links = where / "links"
    links.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if entry.name.split("-")[0].lower() != left_out and entry.suffix != ".pth":
            (links / entry.name).symlink_to(entry)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_links.pth").write_text(f"{links}\n")
    return python


def install(python: Path, tree: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "PIP_", "PYTHON"))}
    return subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                           "--no-cache-dir", "-v", str(tree)], env={**clean, **env}, cwd=tree.parent,
                          capture_output=True, text=True, timeout=600)


def culina_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip().startswith("culina: ")]


def test_without_packaging_the_install_stops_before_the_helper_is_chosen(tree, tmp_path):
    done = install(venv_without(tmp_path / "venv", "packaging"), tree)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    lines = culina_lines(output)
    assert len(lines) == 1 and lines[0].startswith("culina: cannot build: packaging is not installed"), output[-3000:]
    assert '-m pip install "packaging")' in lines[0]
    assert "helper" not in output and "Traceback" not in output


@pytest.mark.parametrize("left_out, requirement", [("pybind11", "pybind11>=2.13"), ("setuptools", "setuptools>=68"),
                                                   ("wheel", "wheel")])
def test_without_a_compile_requirement_the_build_stops_before_setuptools_runs(tree, tmp_path, left_out, requirement):
    """CULINA_RELEASE_BUILD: the build compiles whatever the host, so it goes straight to the check."""
    done = install(venv_without(tmp_path / "venv", left_out), tree, CULINA_RELEASE_BUILD="1")
    assert done.returncode != 0
    output = done.stdout + done.stderr
    lines = culina_lines(output)
    assert len(lines) == 1 and lines[0].startswith(f"culina: cannot build: {left_out} is not installed"), output[-3000:]
    assert f'-m pip install "{requirement}")' in lines[0]
    assert "Traceback" not in output and "ModuleNotFoundError" not in output and "nvcc" not in output
