"""Runs a command as on a machine without a CUDA toolkit, for the CPU-only build's tests and
benchmark: the build adapter's last-resort /usr/local/cuda is covered by an empty folder in a
private mount namespace (`unshare -m`, needs root), and CUDA_HOME, CUDA_PATH and the PATH
entries holding nvcc are dropped. Nothing changes outside the command."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

DEFAULT_TOOLKIT = Path("/usr/local/cuda")


def can_hide() -> str | None:
    """None when hiding works here, else why not."""
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        return "`unshare -m` is not permitted (needs root or CAP_SYS_ADMIN)"
    return None


def env_without_toolkit(env: dict[str, str]) -> dict[str, str]:
    clean = {k: v for k, v in env.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    clean["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                    if p and not (Path(p) / "nvcc").exists())
    return clean


def command_without_toolkit(command: list[str]) -> list[str]:
    toolkit = DEFAULT_TOOLKIT.resolve()
    script = 'mkdir -p /tmp/culina-no-toolkit && mount --bind /tmp/culina-no-toolkit "$0" && exec "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(toolkit), *command]
