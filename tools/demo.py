"""`make demo`: the main job, end to end on this machine.

Builds the release assets (`tools/release/build_release.py`), serves them on a loopback release
server and the sdist on a loopback package index, runs a real `pip install culina` in a fresh
venv with its output streamed as it comes (the helper's lines marked `helper |`, the build
adapter's `[culina ...]`), shows `python -m culina info`, and runs one small `linear_attention`
on what the host has (the GPU through PyTorch when the venv has both, else NumPy on the CPU)
against a NumPy reference. Nothing but PyPI (for the build requirements, cached in
build/pip-index-cache) is reached.

Usage: python tools/demo.py [--archs 9.0] [--work build/demo]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
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

# One small call on the best device the venv can reach, checked against the recurrence itself.
RESULT_CHECK = """
import numpy as np, culina
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 2, 64, 32)).astype(np.float32) for _ in range(3))
decay = [0.95, 1.0]
device = "cpu (NumPy)"
try:
    import torch
    if torch.cuda.is_available():
        device = "cuda:0 (PyTorch)"
except ImportError:
    torch = None
if device.startswith("cuda"):
    o = culina.linear_attention(*(torch.from_numpy(x).cuda() for x in (q, k, v)), decay).cpu().numpy()
else:
    o = culina.linear_attention(q, k, v, decay)
state = np.zeros((1, 2, 32, 32))
reference = np.empty((1, 2, 64, 32))
g = np.array(decay)[None, :, None, None]
for t in range(64):
    state = g * state + k[:, :, t, :, None].astype(np.float64) * v[:, :, t, None, :]
    reference[:, :, t] = 32 ** -0.5 * np.einsum("bhd,bhde->bhe", q[:, :, t], state)
error = float(np.abs(o - reference).max())
ok = error < 1e-3
print(f"linear_attention on {device}: q, k, v [1, 2, 64, 32] float32, max |o - reference| = {error:.2e}: "
      + ("ok" if ok else "WRONG"))
raise SystemExit(0 if ok else 1)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", default="9.0", help="architectures of the release wheel (default 9.0; 'all' for the release list)")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "demo")
    args = parser.parse_args()

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    # the wheel cache must start empty, so that the demo shows a real download
    shutil.rmtree(REPO / "build" / "demo-cache" / "wheels", ignore_errors=True)
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

    with ReleaseServer(assets) as server, PackageIndex(index_dir) as index:
        step(f"release server {server.base_url}\n       package index  {index.url}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        command = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--index-url", index.url, "-v", "culina"]
        step("$ " + " ".join(command) + "   (pip's output as it comes; all of it in the log)")
        # The cache outlives the demo folder, so a second `make demo` finds the helper built.
        env = {**os.environ, "CULINA_RELEASE_URL": server.base_url,
               "CULINA_CACHE_DIR": str(REPO / "build" / "demo-cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
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
    step("one small linear_attention, checked against a NumPy reference")
    check = subprocess.run([python, "-c", RESULT_CHECK], cwd="/")
    return info.returncode or check.returncode


if __name__ == "__main__":
    sys.exit(main())
