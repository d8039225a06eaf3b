"""Tests release wheels where they were built, the cibuildwheel way: for each wheel in a job's
release manifest, a fresh venv of the target Python, the wheel installed into it, `python -m
culina info`, and the payload's CPU tests run against that installed copy (not the source tree).
When every wheel passes it writes tested.json beside the manifest with each wheel's sha256;
`build_release.py --merge` refuses a wheel that record does not name with the same hash.

Usage: python tools/release/wheel_smoke.py --python PY --manifest DIR/release-manifest.json [--test-deps pypi|inherit]
  --test-deps pypi     (the release jobs) pip installs numpy, pytest and ml_dtypes into the venv
  --test-deps inherit  (offline tests) the venv sees PY's site-packages for them; the wheel alone is installed
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import install_asset

ROOT = Path(__file__).resolve().parents[2]
TESTED = "tested.json"
# The payload tests that need nothing but an installed culina: no build tree, no GPU.
CPU_TESTS = [ROOT / "tests" / "payload" / name for name in ("test_cpu.py", "test_errors.py", "test_threads.py")]
TEST_REQUIREMENTS = ["numpy", "pytest"]
# bfloat16 cases only; its wheels lag new interpreters (3.14t), so a missing one skips those cases, said in the log.
OPTIONAL_TEST_REQUIREMENT = "ml_dtypes"


class SmokeError(RuntimeError):
    """A wheel failed its test; the message names the wheel, the step and its output."""


def say(message: str) -> None:
    print(f"[wheel test] {message}", flush=True)


def run(cmd: list, step: str, wheel: Path, **kwargs) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise SmokeError(f"{wheel.name}: {step} failed (exit {proc.returncode}): `{' '.join(map(str, cmd))}`\n"
                         f"{proc.stdout[-6000:]}{proc.stderr[-6000:]}")
    return proc.stdout


def fresh_venv(python: str, where: Path, test_deps: str, wheel: Path) -> Path:
    run([python, "-m", "venv", where], "creating the venv", wheel)
    venv_python = where / "bin" / "python"
    if test_deps == "inherit":
        paths = run([python, "-c", "import site; print('\\n'.join(site.getsitepackages()))"], "reading site-packages",
                    wheel)
        purelib = run([venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                      "reading the venv's site-packages", wheel).strip()
        Path(purelib, "_culina_test_requirements.pth").write_text(paths)
    return venv_python


def test_wheel(python: str, wheel: Path, manifest: Path, test_deps: str, work: Path) -> None:
    venv_python = fresh_venv(python, work / "venv", test_deps, wheel)
    try:  # pip refuses the labelled asset name: the checked copy under the standard name, as a user would
        installable = install_asset.installable_copy(wheel, manifest, work / "wheel")
    except install_asset.AssetError as error:
        raise SmokeError(str(error)) from None
    pip = [venv_python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if test_deps == "pypi":
        run([*pip, "--only-binary=:all:", installable, *TEST_REQUIREMENTS], "installing the wheel and the test requirements",
            wheel)
        optional = subprocess.run([*map(str, pip), "--only-binary=:all:", OPTIONAL_TEST_REQUIREMENT], capture_output=True,
                                  text=True)
        if optional.returncode != 0:
            say(f"{OPTIONAL_TEST_REQUIREMENT} has no wheel for this Python: the bfloat16 cases are skipped")
    else:
        run([*pip, "--no-deps", "--no-index", installable], "installing the wheel", wheel)
    # Outside the checkout and without PYTHONPATH, so that only the installed copy can be imported.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CULINA_BUILD_DIR")}
    env["CULINA_TEST_INSTALLED"] = "1"
    where = run([venv_python, "-c", "import culina; print(culina.__file__)"], "import culina", wheel, cwd=work,
                env=env).strip()
    if not where.startswith(str(work / "venv")):
        raise SmokeError(f"{wheel.name}: import culina found {where}, not the copy installed in {work / 'venv'}")
    info = run([venv_python, "-m", "culina", "info", "--json"], "python -m culina info", wheel, cwd=work, env=env)
    record = json.loads(info)["build"]
    if record.get("kind") != "release":
        raise SmokeError(f"{wheel.name}: its build record says kind {record.get('kind')!r}, not 'release': build it "
                         "with tools/release/build_release.py")
    say(f"{wheel.name}: python -m culina info: {record.get('variant')}, CUDA {record.get('cuda_version')}, "
        f"SASS {record.get('sass_archs')}, PTX {record.get('ptx_archs')}")
    tests = run([venv_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--confcutdir", CPU_TESTS[0].parent,
                 "--rootdir", CPU_TESTS[0].parent, *CPU_TESTS], "the CPU tests", wheel, cwd=work, env=env)
    say(f"{wheel.name}: CPU tests: {tests.strip().splitlines()[-1]}")


def tested_wheels(job_dir: Path) -> dict[str, str] | None:
    """file name -> sha256 of the wheels that passed in the job whose artifact is `job_dir`; None without a record."""
    record = job_dir / TESTED
    if not record.is_file():
        return None
    return {entry["file"]: entry["sha256"] for entry in json.loads(record.read_text())["wheels"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--python", required=True, help="the interpreter the wheels were built for")
    parser.add_argument("--manifest", type=Path, required=True,
                        help="the release manifest build_release.py wrote; the wheels lie beside it")
    parser.add_argument("--test-deps", choices=["pypi", "inherit"], default="pypi")
    args = parser.parse_args()
    manifest = args.manifest.resolve()
    out = manifest.parent
    (out / TESTED).unlink(missing_ok=True)
    try:
        if not manifest.is_file():
            raise SmokeError(f"--manifest {manifest}: no such file; run tools/release/build_release.py --out "
                             f"{out} first")
        passed = []
        for entry in json.loads(manifest.read_text())["wheels"]:
            with tempfile.TemporaryDirectory(prefix="culina-wheel-test-") as tmp:
                test_wheel(args.python, out / entry["file"], manifest, args.test_deps, Path(tmp))
            passed.append({"file": entry["file"], "sha256": entry["sha256"]})
    except SmokeError as error:
        print(f"wheel_smoke: {error}", file=sys.stderr)
        return 1
    (out / TESTED).write_text(json.dumps({"wheels": passed}, indent=2) + "\n")
    say(f"{len(passed)} wheel(s) passed; recorded in {out / TESTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
