"""What a user types after or around `pip install culina`: the `culina-info` console script, a
closed pipe, and pip's error box when nothing can serve the host."""

from __future__ import annotations

import os
import subprocess

from conftest import Host

H200_CUDA13 = Host(driver_cuda="13.0", gpus="NVIDIA H200=9.0")
PASCAL_CUDA13 = Host(driver_cuda="13.0", gpus="NVIDIA Tesla P100=6.1")


def into_closed_pipe(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Runs `command` with stdout a pipe whose reader is already gone, as `... | head -1` ends."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, cwd="/",
                              timeout=120)
    finally:
        os.close(write_end)


def test_culina_info_script_is_python_m_culina_info_and_a_closed_pipe_ends_quietly(installer, server):
    host_env = installer.environment(H200_CUDA13, server.base_url)
    install = installer.install(H200_CUDA13, server.base_url)
    assert install.returncode == 0, install.output[-4000:]
    bin_dir = install.venv / "bin"
    script = subprocess.run([str(bin_dir / "culina-info")], capture_output=True, text=True, env=host_env, cwd="/",
                            timeout=120)
    module = subprocess.run([str(bin_dir / "python"), "-m", "culina", "info"], capture_output=True, text=True,
                            env=host_env, cwd="/", timeout=120)
    assert script.returncode == 0, script.stderr
    assert script.stdout == module.stdout and script.stdout.startswith("culina 0.1.0")
    assert subprocess.run([str(bin_dir / "culina-info"), "--json"], capture_output=True, env=host_env,
                          timeout=120).returncode == 0
    for command in ([str(bin_dir / "culina-info")], [str(bin_dir / "python"), "-m", "culina", "info", "--json"]):
        closed = into_closed_pipe(command, host_env)
        assert closed.returncode == 0, closed.stderr
        assert "Traceback" not in closed.stderr and "BrokenPipe" not in closed.stderr


def test_pips_error_box_says_each_sentence_once(installer, server):
    venv = installer.new_venv()
    command = [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--index-url", installer.index.url, "culina"]
    done = subprocess.run(command, env=installer.environment(PASCAL_CUDA13, server.base_url), capture_output=True,
                          text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "did not run successfully" in output  # pip's error box, which quotes the hook's output
    assert output.count("no wheel of culina 0.1.0 fits this host") == 1, output
    assert output.count("Fix: install a CUDA 11.x or 12.x toolkit") == 1, output
    assert output.count("culina: cannot install") == 1, output
    assert "GPU 0 (6.1) not covered" in output  # the helper's evidence is still there
