"""On a GPU machine (the H200 through the device tool): the real user path with the real probe.

1. builds the cu130 release wheel for this interpreter (release architecture list), or takes the
   release that --release names (built elsewhere: its prebuilt helper then proves it is portable);
2. serves it on a loopback release server and the sdist plus build requirements (from --wheels,
   carried there since that machine has no network) on a loopback package index;
3. `pip install culina` in a fresh venv: must choose the prebuilt wheel; then import, `python -m
   culina info`, and compare GPU results (torch, bf16 and fp32) with the CPU reference;
4. the same as a runtime container would: PATH without any compiler, an empty helper cache, so
   the sdist's prebuilt helper must serve;
5. `CULINA_VARIANT=source pip install culina` in another fresh venv: must build for this GPU's
   architecture only, and run.
Prints the timing of each step.
Usage: python3 tools/gpu_install_check.py --wheels DIR --work DIR [--release DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))

from package_index import PackageIndex  # noqa: E402
from release_server import ReleaseServer  # noqa: E402

GPU_CHECK = r"""
import json, numpy as np, torch, culina
rng = np.random.default_rng(0)
for dtype, tol in ((torch.float32, 2e-3), (torch.bfloat16, 3e-2)):
    q, k, v = (rng.standard_normal((2, 4, 300, 128)).astype(np.float32) * 0.3 for _ in range(3))
    g = [0.99, 0.95, 1.0, 0.9]
    ref = culina.linear_attention(q, k, v, g)
    gpu = [torch.from_numpy(x).to("cuda", dtype) for x in (q, k, v)]
    out = culina.linear_attention(*gpu, g)
    assert isinstance(out, torch.Tensor) and out.is_cuda and out.dtype == dtype
    err = float((out.float().cpu() - torch.from_numpy(ref)).abs().max() / np.abs(ref).max())
    print(f"GPU vs CPU reference, {dtype}: max relative error {err:.2e} (tolerance {tol})")
    assert err < tol
print("build record:", json.dumps({k: culina.build_record()[k] for k in ("kind", "variant", "sass_archs", "ptx_archs")}))
"""


def timed(label: str, command: list[str], **kwargs) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    print(f"[{label}] exit {done.returncode} in {time.monotonic() - started:.1f} s: {' '.join(command[:4])} ...", flush=True)
    return done


def show_resolver_lines(output: str) -> None:
    for line in output.splitlines():
        if "[culina" in line and ("decision" in line or "installing" in line or "building" in line
                                  or "helper" in line or "nvcc" in line):
            print("    " + line.strip())


def fresh_venv(path: Path) -> Path:
    """A new venv that also sees this interpreter's packages (after its own), since the GPU check
    needs torch, which that machine has and cannot download."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    Path(own, "host-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheels", type=Path, required=True, help="build requirements as wheels (no network there)")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--release", type=Path, help="a build_release.py output to serve instead of building one")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    release, index_dir = args.release or args.work / "release", args.work / "index"
    index_dir.mkdir(parents=True)
    no_compiler = args.work / "bin-without-compiler"
    no_compiler.mkdir()

    if args.release is None:
        done = timed("release build", [sys.executable, str(REPO / "tools" / "release" / "build_release.py"), "--out",
                                       str(release), "--no-auditwheel", "--python", sys.executable], cwd=REPO)
        print(done.stdout[-3000:], done.stderr[-3000:])
        if done.returncode != 0:
            return 1
    for wheel in args.wheels.glob("*.whl"):
        shutil.copy2(wheel, index_dir)
    shutil.copy2(next(release.glob("culina-*.tar.gz")), index_dir)
    assets = {p.name: p.read_bytes() for p in release.glob("*.whl")}
    failures = 0
    with ReleaseServer(assets) as server, PackageIndex(index_dir) as index:
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "PIP_"))}
        base_env.update(CULINA_RELEASE_URL=server.base_url, CULINA_CACHE_DIR=str(args.work / "cache"),
                        PIP_DISABLE_PIP_VERSION_CHECK="1")
        scenarios = (("prebuilt", {}, "install_wheel"),
                     ("runtime container", {"PATH": str(no_compiler), "CULINA_CACHE_DIR": str(args.work / "empty")},
                      "install_wheel"),
                     ("source", {"CULINA_VARIANT": "source"}, "build_local"))
        for name, extra, expected_action in scenarios:
            python = fresh_venv(args.work / f"venv-{name.replace(' ', '-')}")
            done = timed(f"pip install culina ({name})",
                         [str(python), "-m", "pip", "install", "--no-cache-dir", "--index-url", index.url, "-v", "culina"],
                         env={**base_env, **extra})
            show_resolver_lines(done.stdout + done.stderr)
            if name == "runtime container" and "prebuilt helper from the sdist" not in done.stdout + done.stderr:
                print("    the sdist's prebuilt helper did not serve")
                failures += 1
            if done.returncode != 0:
                print((done.stdout + done.stderr)[-5000:])
                failures += 1
                continue
            record = json.loads(subprocess.run([str(python), "-c", "import json, culina; print(json.dumps(culina.build_record()))"],
                                               capture_output=True, text=True, cwd="/").stdout)
            action = (record.get("resolver") or {}).get("action")
            print(f"    resolver action: {action} (expected {expected_action}); build: {record['kind']} "
                  f"{record['variant']} SASS {record['sass_archs']} PTX {record['ptx_archs']}")
            failures += action != expected_action
            info = timed("python -m culina info", [str(python), "-m", "culina", "info"], cwd="/")
            print(info.stdout + info.stderr)
            check = timed("GPU check", [str(python), "-c", GPU_CHECK], cwd="/")
            print(check.stdout + check.stderr[-3000:])
            failures += check.returncode != 0
        print(f"asset downloads from the release server: {len([r for r in server.requests if r.path.startswith('/objects/')])}")
    print(f"{len(scenarios) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
