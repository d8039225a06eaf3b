"""`make demo`: the main job, end to end on this machine.

Builds the release assets (`tools/release/build_release.py`), serves them on a loopback release
server and the sdist on a loopback package index, runs a real `pip install culina` in a fresh
venv with its output streamed as it comes (the helper's lines marked `helper |`, the build
adapter's `[culina ...]`), shows `python -m culina info`, and runs one small `linear_attention`
against a float64 reference. Where the helper's probe sees an NVIDIA GPU and the installed build
has code for it, the call runs on that GPU through a framework the venv finds (PyTorch or CuPy,
also from the base interpreter, which the venv then sees) or installs from PyPI (CuPy for the
build's CUDA major), and its result is printed against the CPU reference's; elsewhere the demo
says why the call ran on the CPU. Nothing but PyPI (for the build requirements, cached in
build/pip-index-cache, and CuPy) is reached. `--keep` (`make demo KEEP=1`) leaves both servers
running afterwards and prints commands to try by hand, until Ctrl-C.

Usage: python tools/demo.py [--archs 9.0] [--work build/demo] [--resolver PATH] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))

from package_index import PackageIndex, fill_index, install_requirements  # noqa: E402
from release_server import ReleaseServer  # noqa: E402

# pip -v lines worth a reader's eye; the rest (links it skipped, temporary folders, the hook's
# command lines) stays in the full log.
PIP_LINES = ("Collecting", "Processing", "Downloading", "Getting requirements", "Preparing metadata",
             "Building wheel", "Created wheel", "Installing collected", "Successfully", "ERROR", "error:",
             "WARNING")

# One small call on the framework named by DEMO_FRAMEWORK (torch, cupy; empty: NumPy on the CPU),
# checked against the recurrence itself and, on a GPU, against culina's CPU reference.
RESULT_CHECK = """
import os, numpy as np, culina
framework = os.environ.get("DEMO_FRAMEWORK", "")
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 2, 64, 32)).astype(np.float32) for _ in range(3))
decay = [0.95, 1.0]
on_cpu = culina.linear_attention(q, k, v, decay)  # the C++ CPU reference
if framework == "torch":
    import torch
    o = culina.linear_attention(*(torch.from_numpy(x).cuda() for x in (q, k, v)), decay).cpu().numpy()
    device = f"cuda:0 ({torch.cuda.get_device_name(0)}, through PyTorch)"
elif framework == "cupy":
    import cupy
    o = cupy.asnumpy(culina.linear_attention(*(cupy.asarray(x) for x in (q, k, v)), decay))
    device = f"cuda:0 ({cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, through CuPy)"
else:
    o, device = on_cpu, "the CPU (NumPy arrays)"
state = np.zeros((1, 2, 32, 32))
reference = np.empty((1, 2, 64, 32))
g = np.array(decay)[None, :, None, None]
for t in range(64):
    state = g * state + k[:, :, t, :, None].astype(np.float64) * v[:, :, t, None, :]
    reference[:, :, t] = 32 ** -0.5 * np.einsum("bhd,bhde->bhe", q[:, :, t], state)
error = float(np.abs(o - reference).max())
print(f"linear_attention on {device}: q, k, v [1, 2, 64, 32] float32")
print(f"  max |o - float64 reference| = {error:.2e}")
ok = error < 1e-3
if framework:
    apart = float(np.abs(o - on_cpu).max())
    print(f"  max |o on the GPU - o of the CPU reference (culina on NumPy)| = {apart:.2e}")
    ok = ok and apart < 1e-3
print("result: " + ("ok" if ok else "WRONG"))
raise SystemExit(0 if ok else 1)
"""

# Which framework the demo venv can reach the GPU through: the first that imports and sees a GPU.
FIND_FRAMEWORK = """
import importlib.util, sys
for name, sees_gpu in (("torch", "torch.cuda.is_available()"), ("cupy", "cupy.cuda.runtime.getDeviceCount() > 0")):
    if importlib.util.find_spec(name) is None:
        continue
    try:
        module = __import__(name)
        if eval(sees_gpu, {name: module}):
            print(name)
            break
    except Exception as error:
        print(f"{name} is installed but cannot reach the GPU: {error}", file=sys.stderr)
"""


def step(message: str) -> None:
    print(f"\n[demo] {message}", flush=True)


def presented(line: str) -> str | None:
    """How a line of `pip install -v` is shown while it runs, or None to leave it to the log."""
    text = line.rstrip("\n")
    stripped = text.strip()
    if stripped.startswith("| "):  # the helper's own log, decision table included
        return "  helper " + stripped
    if stripped.startswith("[culina"):  # the build adapter (resolution, local build)
        return "  " + stripped
    if text.startswith(PIP_LINES):
        return "  pip    " + stripped
    return None


def stream_install(command: list[str], env: dict[str, str], log: Path) -> int:
    """Runs pip, showing each interesting line the moment pip writes it and keeping every line
    in `log`; returns pip's exit status."""
    with open(log, "w") as everything:
        process = subprocess.Popen(command, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, bufsize=1)
        for line in process.stdout:
            everything.write(line)
            shown = presented(line)
            if shown is not None:
                print(shown, flush=True)
        return process.wait()


def nvidia_gpus(resolver: Path | None) -> tuple[list[dict], str]:
    """The NVIDIA GPUs the helper's probe sees, and why there are none ("" when there are)."""
    if resolver is None:
        return [], "no helper was given to probe the host (--resolver)"
    probed = subprocess.run([str(resolver), "probe", "--json"], capture_output=True, text=True, timeout=120)
    if probed.returncode != 0:
        return [], f"the helper's probe failed: {probed.stderr.strip()[-300:]}"
    host = json.loads(probed.stdout)
    if host["gpus"]:
        return host["gpus"], ""
    return [], "the helper's probe sees no NVIDIA GPU" + (f" ({'; '.join(host['errors'])})" if host["errors"] else "")


def gpu_framework(python: str, build: dict, gpus: list[dict], why_none: str) -> tuple[str, str]:
    """(framework, "") for the GPU call, or ("", why the call runs on the CPU)."""
    if not gpus:
        return "", why_none
    if build.get("cpu_only"):
        reason = (build.get("resolver") or {}).get("reason", "no decision recorded")
        return "", f"the installed build is CPU-only (the resolver: {reason})"
    if not any(gpu["supported"] for gpu in build_gpus(python)):
        return "", "the installed build has no code for this host's GPUs (`culina info` above says why)"
    found = subprocess.run([python, "-c", FIND_FRAMEWORK], capture_output=True, text=True, cwd="/")
    if found.stdout.strip():
        print(f"  GPU framework: {found.stdout.strip()}, found in the venv or its base interpreter")
        return found.stdout.strip(), ""
    cupy = f"cupy-cuda{str(build['cuda_version']).split('.')[0]}x[ctk]"  # CuPy and its CUDA libraries
    print(f"  no framework in the venv reaches the GPU{': ' + found.stderr.strip() if found.stderr.strip() else ''}"
          f"; installing {cupy} from PyPI")
    if subprocess.run([python, "-m", "pip", "install", "-q", cupy]).returncode != 0:
        return "", f"pip could not install {cupy} (see above)"
    found = subprocess.run([python, "-c", FIND_FRAMEWORK], capture_output=True, text=True, cwd="/")
    return (found.stdout.strip(), "") if found.stdout.strip() else ("", f"CuPy cannot reach the GPU: {found.stderr.strip()}")


def build_gpus(python: str) -> list[dict]:
    """`culina info --json`'s GPUs: each with whether the installed build has code for it."""
    info = subprocess.run([python, "-m", "culina", "info", "--json"], capture_output=True, text=True, cwd="/")
    return json.loads(info.stdout)["gpus"] if info.returncode == 0 else []


def commands_to_try(index_url: str, release_url: str, cache_dir: Path, release: Path, work: Path,
                    resolver: Path | None) -> list[tuple[str, str]]:
    """(command, what it shows) for `--keep`, in the order a reader tries them."""
    install = f"pip install --no-cache-dir --force-reinstall --index-url {index_url} -v culina"
    helper = str(resolver) if resolver else "culina-resolver"
    return [
        (f"export CULINA_RELEASE_URL={release_url} CULINA_CACHE_DIR={cache_dir}", "where this demo's assets and cache are"),
        (f"python3 -m venv {work}/try && . {work}/try/bin/activate", "a venv of your own"),
        (install, "the resolver picks a wheel or builds (-v: its live log)"),
        (f"CULINA_VARIANT=source {install}", "never download: a local build for this host's GPUs"),
        (f"CULINA_VARIANT=null {install}", "the CPU-only variant"),
        (f"CULINA_OFFLINE=1 {install}", "no network: the wheel cache, else a local build"),
        (f"{helper} mirror --manifest {release}/release-manifest.json --dest {work}/mirror --base-url {release_url}",
         "fill a release folder for air-gapped installs"),
        (f"CULINA_OFFLINE=1 CULINA_RELEASE_URL={work}/mirror {install}", "install from that folder, offline"),
        ("culina info && culina cache list", "what was decided and why; the caches"),
    ]


def keep_serving(commands: list[tuple[str, str]]) -> int:
    """Prints `commands` and waits for Ctrl-C (SIGINT) or SIGTERM; the caller's servers run meanwhile."""
    step("the release server and the package index stay up until Ctrl-C; in another shell, try:")
    for command, what in commands:
        print(f"  # {what}\n  {command}")
    print("  (--no-cache-dir: pip's wheel cache would hand back the first install's wheel, and a changed "
          "CULINA_* setting would never reach the resolver)", flush=True)
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    while not stopped.wait(0.5):
        pass
    step("stopping the servers")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", default="9.0", help="architectures of the release wheel (default 9.0; 'all' for the release list)")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "demo")
    parser.add_argument("--resolver", type=Path, help="the helper, to see whether the host has an NVIDIA GPU")
    parser.add_argument("--keep", action="store_true", help="leave the servers running afterwards, until Ctrl-C")
    args = parser.parse_args()

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    # the wheel cache must start empty, so that the demo shows a real download
    cache_dir = REPO / "build" / "demo-cache"
    shutil.rmtree(cache_dir / "wheels", ignore_errors=True)
    release, index_dir, venv = args.work / "release", args.work / "index", args.work / "venv"
    step(f"building the release assets for {args.archs} into {release}")
    built = subprocess.run([sys.executable, str(REPO / "tools" / "release" / "build_release.py"), "--out", str(release),
                            "--archs", args.archs, "--python", sys.executable], cwd=REPO)
    if built.returncode != 0:
        return built.returncode  # build_release said why

    step("filling a local package index with the sdist and the build requirements")
    fill_index(index_dir, install_requirements(REPO / "pyproject.toml"), REPO / "build" / "pip-index-cache")
    for sdist in release.glob("culina-*.tar.gz"):
        shutil.copy2(sdist, index_dir / sdist.name)
    assets = {p.name: p.read_bytes() for p in release.glob("*.whl")}
    gpus, why_no_gpu = nvidia_gpus(args.resolver)

    with ReleaseServer(assets) as server, PackageIndex(index_dir) as index:
        step(f"release server {server.base_url}\n       package index  {index.url}")
        # On a GPU host the venv also sees its base interpreter's packages: a framework there serves.
        subprocess.run([sys.executable, "-m", "venv", *(["--system-site-packages"] if gpus else []), str(venv)], check=True)
        command = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--index-url", index.url, "-v", "culina"]
        step("$ " + " ".join(command) + "   (pip's output as it comes; all of it in the log)")
        # The cache outlives the demo folder, so a second `make demo` finds the helper built.
        env = {**os.environ, "CULINA_RELEASE_URL": server.base_url,
               "CULINA_CACHE_DIR": str(cache_dir), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        log = args.work / "pip-install.log"
        started = time.monotonic()
        returncode = stream_install(command, env, log)
        print(f"  (pip exited {returncode} after {time.monotonic() - started:.1f} s; full log: {log})")
        if returncode != 0:
            return returncode
        fetched = [r for r in server.requests if r.path.startswith("/objects/")]
        print(f"  asset downloads from the release server: {len(fetched)}")

        python = str(venv / "bin" / "python")
        step("$ python -m culina info")
        info = subprocess.run([python, "-m", "culina", "info"], cwd="/")
        record = json.loads(subprocess.run([python, "-c", "import culina, json; print(json.dumps(culina.build_record()))"],
                                           capture_output=True, text=True, check=True, cwd="/").stdout)
        step("one small linear_attention, checked against a float64 reference")
        framework, why_cpu = gpu_framework(python, record, gpus, why_no_gpu)
        if why_cpu:
            print(f"  on the CPU: {why_cpu}")
        check = subprocess.run([python, "-c", RESULT_CHECK], cwd="/", env={**os.environ, "DEMO_FRAMEWORK": framework})
        if args.keep:
            keep_serving(commands_to_try(index.url, server.base_url, cache_dir, release, args.work, args.resolver))
    return info.returncode or check.returncode


if __name__ == "__main__":
    sys.exit(main())
