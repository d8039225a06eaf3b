"""A CUDA toolkit from NVIDIA's PyPI packages: enough of CUDA 13 to compile a CUDA extension (nvcc and its
tools, NVVM, the CRT headers, the runtime, CCCL) at one version, installed into site-packages
as `nvidia/cu13/`, a folder laid out like a toolkit root (bin/nvcc, nvvm/, include/, lib/).

Used by `make deps` (a machine with no system toolkit), `make release CUDA="13.0 13.5"` (a variant
this machine has no toolkit for) and the PEP 517 backend (a local build on a host with no toolkit).
CUDA 12's PyPI packages have no bin/nvcc, so CUDA 12 builds need NVIDIA's installers.

Usage: python pypi_toolkit.py --requirements 13.5     (the pip requirements, one per line)
       python pypi_toolkit.py --install 13.5 --target DIR   (install; prints the toolkit root)
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from . import cuda_facts
from .adapter_error import AdapterError

# The packages of one toolkit; CCCL is versioned on its own and lags behind, so any 13.x of it up
# to the toolkit's minor serves.
VERSIONED_PACKAGES = ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime")
CCCL_PACKAGE = "nvidia-cuda-cccl"
# What compiling a .cu into a linkable object runs or reads, relative to the root.
NEEDED = {"bin/nvcc": "the compiler driver", "nvvm/bin/cicc": "the device front end",
          "bin/cudafe++": "the host/device source splitter", "bin/ptxas": "the PTX assembler",
          "bin/fatbinary": "the fat binary packer", "include/cuda_runtime.h": "the runtime headers",
          "include/cccl/cuda/std/type_traits": "libcu++ (CCCL)", "lib/libcudart_static.a": "the static runtime"}


class ToolkitError(AdapterError):
    """No toolkit from PyPI can serve; the message says what to install instead."""

    context = "cannot build"


def _major_minor(cuda: str) -> tuple[int, int]:
    try:
        major, minor = (int(part) for part in cuda.split(".")[:2])
    except ValueError:
        raise ToolkitError(f"CUDA version {cuda!r} is not like 13.0") from None
    return major, minor


def requirements(cuda: str) -> list[str]:
    """pip requirements for the toolkit of CUDA `cuda` (major.minor, its newest patch release)."""
    major, minor = _major_minor(cuda)
    if major < int(cuda_facts.facts()["pypi_nvcc"]["first_major"]):
        raise ToolkitError(f"NVIDIA's PyPI packages carry no nvcc for CUDA {major}: install the CUDA {cuda} "
                           "toolkit from NVIDIA (https://developer.nvidia.com/cuda-downloads) and set CUDA_HOME")
    return [*(f"{name}=={major}.{minor}.*" for name in VERSIONED_PACKAGES),
            f"{CCCL_PACKAGE}>={major}.0,<{major}.{minor + 1}"]


def requirements_up_to(cuda: str) -> list[str]:
    """The newest toolkit of CUDA `cuda`'s major whose minor is at most `cuda`'s: what a driver
    supporting CUDA `cuda` runs (minor-version compatibility)."""
    major, minor = _major_minor(cuda)
    requirements(cuda)  # refuses a major with no nvcc on PyPI
    return [f"{name}>={major}.0,<{major}.{minor + 1}" for name in (*VERSIONED_PACKAGES, CCCL_PACKAGE)]


def root_in(site: Path) -> Path | None:
    """The toolkit root inside one site-packages folder, when a PyPI toolkit is installed there."""
    for root in sorted(site.glob("nvidia/cu*"), reverse=True):
        if (root / "bin" / "nvcc").is_file():
            return root
    return None


def is_pypi_root(root: Path) -> bool:
    """Whether a toolkit root is one of these packages' (site-packages/nvidia/cu13 beside its dist-info)."""
    return root.parent.name == "nvidia" and any(root.parent.parent.glob("nvidia_cuda_nvcc-*.dist-info"))


def installed_root() -> Path | None:
    """The PyPI toolkit this interpreter can import from (its venv, or pip's build environment)."""
    for entry in sys.path:
        root = root_in(Path(entry)) if entry else None
        if root is not None:
            return root
    return None


def missing(root: Path) -> list[str]:
    return [f"{path} ({what})" for path, what in NEEDED.items() if not (root / path).exists()]


def install(cuda: str, target: Path) -> Path:
    """Installs the toolkit of CUDA `cuda` into `target` (a folder of its own) and returns its root."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:",
                           "--upgrade", "--target", str(target), *requirements(cuda)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ToolkitError(f"pip could not install the CUDA {cuda} toolkit from PyPI into {target}:\n"
                           f"{done.stderr.strip()[-2000:]}")
    root = root_in(target)
    lacking = missing(root) if root else list(NEEDED)
    if lacking:
        raise ToolkitError(f"the CUDA {cuda} packages from PyPI in {target} lack {', '.join(lacking)}")
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--requirements", metavar="CUDA", help="print the pip requirements for CUDA X.Y")
    action.add_argument("--install", metavar="CUDA", help="install CUDA X.Y into --target and print its root")
    parser.add_argument("--target", type=Path, help="folder to install into (with --install)")
    args = parser.parse_args()
    try:
        if args.requirements:
            print("\n".join(requirements(args.requirements)))
        else:
            if args.target is None:
                parser.error("--install needs --target")
            print(install(args.install, args.target.resolve()))
    except ToolkitError as error:
        print(f"pypi_toolkit: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
