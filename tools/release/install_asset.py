"""Installs a culina release asset by hand with plain pip. pip does not read wheel-variant labels
yet (PEP 825), so `pip install culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl` fails
with "not a valid wheel filename". This checks the file against the release manifest (size and
sha256), copies it under the standard wheel name (the label dropped) and installs that copy.

Usage: python tools/release/install_asset.py WHEEL [--manifest FILE] [--python PY] [--dest DIR]
                                             [-- PIP_INSTALL_ARGS ...]
  --manifest  the release's release-manifest.json (default: the one beside WHEEL)
  --python    the interpreter whose pip installs it (default: this one)
  --dest      only write the checked copy into DIR and print its path; install nothing

The install is what the asset is: no resolver runs, so pick the variant for the host yourself
(README, "Requirements"); `python -m culina info` afterwards says whether it serves the GPUs here.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "resolver"))

from culina_resolver.prebuilt_wheel import file_sha256, standard_name  # noqa: E402 - the resolver's own renaming, so both agree

MANIFEST = "release-manifest.json"


class AssetError(RuntimeError):
    """The asset cannot be installed as given; the message names the file, the value and the fix."""


def checked_entry(wheel: Path, manifest_path: Path) -> dict:
    """The manifest's entry for `wheel`, after checking the file's size and sha256 against it."""
    if not wheel.is_file():
        raise AssetError(f"{wheel}: no such file; download the asset from the release page first")
    try:
        manifest = json.loads(manifest_path.read_text())
    except OSError as error:
        raise AssetError(f"--manifest {manifest_path}: {error.strerror}; download {MANIFEST} from the same "
                         "release page, or pass --manifest FILE") from None
    except ValueError as error:
        raise AssetError(f"--manifest {manifest_path} is not JSON ({error}); download it again") from None
    entry = next((w for w in manifest.get("wheels", []) if w["file"] == wheel.name), None)
    if entry is None:
        listed = ", ".join(w["file"] for w in manifest.get("wheels", [])) or "no wheels"
        raise AssetError(f"{wheel.name} is not listed in {manifest_path} (it lists: {listed}); use the manifest "
                         "of the release the wheel came from, under the asset's own file name")
    size = wheel.stat().st_size
    if size != entry["size"]:
        raise AssetError(f"{wheel.name} is {size} bytes; {manifest_path} says {entry['size']}: the download is "
                         "incomplete or not this release's file; download it again")
    digest = file_sha256(wheel)
    if digest != entry["sha256"]:
        raise AssetError(f"{wheel.name} has sha256 {digest}; {manifest_path} says {entry['sha256']}: the file is "
                         "damaged or not this release's; download it again")
    return entry


def installable_copy(wheel: Path, manifest_path: Path, dest: Path) -> Path:
    """The checked asset copied into `dest` under the name pip accepts."""
    checked_entry(wheel, manifest_path)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / standard_name(wheel.name)
    shutil.copyfile(wheel, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("wheel", type=Path, help="the release asset (name ends in -<variant>.whl)")
    parser.add_argument("--manifest", type=Path, help=f"the release's {MANIFEST} (default: beside WHEEL)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to install into (default: this one)")
    parser.add_argument("--dest", type=Path, help="write the checked copy here and install nothing")
    argv = sys.argv[1:] if argv is None else argv
    # Everything after `--` is pip's: argparse would take its options for this script's.
    own, pip_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(own)
    manifest = args.manifest or args.wheel.parent / MANIFEST
    try:
        if args.dest:
            print(installable_copy(args.wheel, manifest, args.dest))
            return 0
        with tempfile.TemporaryDirectory(prefix="culina-asset-") as work:
            copy = installable_copy(args.wheel, manifest, Path(work))
            print(f"install_asset: {args.wheel.name} matches {manifest}; installing it as {copy.name}", flush=True)
            return subprocess.run([args.python, "-m", "pip", "install", str(copy), *pip_args]).returncode
    except AssetError as error:
        print(f"install_asset: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
