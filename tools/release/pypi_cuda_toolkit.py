"""Assembles a CUDA toolkit root (CUDA_HOME) from NVIDIA's PyPI packages, for building a release
variant with a toolkit this machine does not have (the cu129 wheel next to a CUDA 13 install).
It checks that everything nvcc runs to compile culina is there, and says what is missing and in
which package when it is not; pass the printed folder to build_release.py --cuda-home.

Usage: python tools/release/pypi_cuda_toolkit.py --cuda 12.9 --dest build/toolkits/cuda-12.9
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# package -> the folder under nvidia/ it unpacks to; each is merged into one root
PACKAGES = {"nvidia-cuda-nvcc-cu{major}": "cuda_nvcc", "nvidia-cuda-runtime-cu{major}": "cuda_runtime",
            "nvidia-cuda-cccl-cu{major}": "cuda_cccl"}
# what compiling a .cu into a linkable object runs or reads, relative to the root
NEEDED = {"bin/nvcc": "the compiler driver", "nvvm/bin/cicc": "the device front end (CUDA C++ to NVVM/PTX)",
          "bin/cudafe++": "the host/device source splitter", "bin/ptxas": "the PTX assembler",
          "bin/fatbinary": "the fat binary packer", "include/cuda_runtime.h": "the runtime headers",
          "include/cuda/std/type_traits": "libcu++ (CCCL)", "lib/libcudart_static.a": "the static runtime"}


def assemble(cuda: str, dest: Path) -> list[str]:
    """Unpacks the packages into `dest`; returns the missing pieces (empty: usable as CUDA_HOME)."""
    major = cuda.split(".")[0]
    specs = [f"{name.format(major=major)}=={cuda}.*" for name in PACKAGES]
    with tempfile.TemporaryDirectory(prefix="culina-pypi-cuda-") as tmp:
        print(f"[pypi-cuda] pip download {' '.join(specs)}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "-d", tmp, *specs], check=True)
        shutil.rmtree(dest, ignore_errors=True)
        for wheel in sorted(Path(tmp).glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                for info in archive.infolist():
                    parts = Path(info.filename).parts
                    if len(parts) < 4 or parts[0] != "nvidia" or parts[1] not in PACKAGES.values():
                        continue
                    target = dest.joinpath(*parts[2:])
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(info))
                    target.chmod(0o755 if parts[2] == "bin" else 0o644)
            print(f"[pypi-cuda] unpacked {wheel.name}", flush=True)
    return [f"{path} ({what})" for path, what in NEEDED.items() if not (dest / path).exists()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda", required=True, help="toolkit release, e.g. 12.9")
    parser.add_argument("--dest", type=Path, required=True, help="folder to become the toolkit root")
    args = parser.parse_args()
    missing = assemble(args.cuda, args.dest.resolve())
    if missing:
        print(f"pypi_cuda_toolkit: NVIDIA's PyPI packages for CUDA {args.cuda} "
              f"({', '.join(n.format(major=args.cuda.split('.')[0]) for n in PACKAGES)}) cannot compile culina; "
              f"{args.dest} lacks:\n  " + "\n  ".join(missing) +
              "\nInstall the toolkit from NVIDIA's repositories instead (the release workflow uses the rhel8 one) "
              "and pass its root to build_release.py --cuda-home", file=sys.stderr)
        return 1
    print(args.dest.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
