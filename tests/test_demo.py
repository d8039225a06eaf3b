"""`make demo` (tools/demo.py): pip's output reaches the reader while pip runs, the closing result
check computes what the reference does, a host without an NVIDIA GPU is told why the call ran on
the CPU, and `make demo KEEP=1` keeps its servers up with commands to try until Ctrl-C. The demo's
own functions run against stand-ins (a pip that holds the install open, a helper that prints a
probe), so this costs seconds, not a release build."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import demo  # noqa: E402

# Writes like pip -v with the resolver inside, without flushing (as pip does into a pipe), and
# finishes only once the test lets it.
STAND_IN_PIP = """
import pathlib, sys, time
print("Collecting culina")
print("  Created temporary directory: /tmp/pip-unpack-x")
print("      | decision     install_wheel  culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl", file=sys.stderr)
print("  [culina resolver] decision: install_wheel - cu130 covers every GPU", file=sys.stderr)
finish = pathlib.Path(sys.argv[1])
while not finish.exists():
    time.sleep(0.02)
print("Successfully installed culina-0.1.0")
"""

RUN_STREAM = """
import sys
from pathlib import Path
sys.path.insert(0, {tools!r})
import demo
sys.exit(demo.stream_install([sys.executable, "-c", {pip!r}, {finish!r}], {{"PATH": "/usr/bin:/bin"}}, Path({log!r})))
"""


def lines_of(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def read():
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def next_line(lines: queue.Queue) -> str | None:
    return lines.get(timeout=30)


def test_the_decision_is_shown_while_pip_still_runs(tmp_path):
    finish, log = tmp_path / "finish", tmp_path / "pip.log"
    code = RUN_STREAM.format(tools=str(REPO / "tools"), pip=STAND_IN_PIP, finish=str(finish), log=str(log))
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        lines = lines_of(process)
        shown = []
        while not shown or "helper | decision" not in shown[-1]:
            line = next_line(lines)
            assert line is not None, f"the demo's output ended before the decision: {shown}"
            shown.append(line)
        assert not finish.exists() and process.poll() is None  # pip has not finished: the line was streamed
        assert shown == ["  pip    Collecting culina",
                         "  helper | decision     install_wheel  culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl"]
        assert next_line(lines) == "  [culina resolver] decision: install_wheel - cu130 covers every GPU"
        finish.touch()
        assert next_line(lines) == "  pip    Successfully installed culina-0.1.0"
        assert next_line(lines) is None
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    assert "Created temporary directory" in log.read_text()  # left out of the screen, kept in the log


def test_the_result_check_passes_on_this_build(tmp_path):
    if not list((REPO / "package" / "culina").glob("_C*.so")):
        pytest.skip("culina._C is not built in place: run `make extension`")
    env = {**os.environ, "PYTHONPATH": str(REPO / "package")}
    done = subprocess.run([sys.executable, "-c", demo.RESULT_CHECK], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("linear_attention on the CPU (NumPy arrays)")
    assert done.stdout.rstrip().endswith("result: ok")


def fake_helper(tmp_path, probe: dict) -> Path:
    helper = tmp_path / "culina-resolver"
    helper.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(probe)}\nEOF\n")
    helper.chmod(0o755)
    return helper


def test_a_host_without_an_nvidia_gpu_is_told_why_the_call_runs_on_the_cpu(tmp_path):
    helper = fake_helper(tmp_path, {"gpus": [], "errors": ["libcuda.so.1 was not found"]})
    gpus, why = demo.nvidia_gpus(helper)
    assert gpus == [] and why == "the helper's probe sees no NVIDIA GPU (libcuda.so.1 was not found)"
    assert demo.gpu_framework(sys.executable, {"cpu_only": False}, gpus, why) == ("", why)


def test_a_cpu_only_build_on_a_gpu_host_says_so_with_the_resolvers_reason(tmp_path):
    gpus, why = demo.nvidia_gpus(fake_helper(tmp_path, {"gpus": [{"index": 0, "name": "H100", "sm": "9.0"}],
                                                         "errors": []}))
    assert why == "" and gpus[0]["sm"] == "9.0"
    record = {"cpu_only": True, "resolver": {"reason": "CULINA_VARIANT=null"}}
    assert demo.gpu_framework(sys.executable, record, gpus, why) == (
        "", "the installed build is CPU-only (the resolver: CULINA_VARIANT=null)")


KEEP_SERVING = """
import sys
from pathlib import Path
sys.path.insert(0, {tools!r})
import demo
from package_index import PackageIndex
from release_server import ReleaseServer
with ReleaseServer({{}}) as server, PackageIndex(Path({index!r})) as index:
    print("index", index.url, flush=True)
    demo.keep_serving(demo.commands_to_try(index.url, server.base_url, Path("/c"), Path("/r"), Path("/w"), None))
print("servers stopped", flush=True)
"""


def test_keep_leaves_the_servers_up_with_commands_to_try_until_ctrl_c(tmp_path):
    (tmp_path / "index").mkdir()
    code = KEEP_SERVING.format(tools=str(REPO / "tools"), index=str(tmp_path / "index"))
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        lines = lines_of(process)
        index_url = next_line(lines).split()[1]
        shown = []
        while not shown or not shown[-1].startswith("  (--no-cache-dir"):
            line = next_line(lines)
            assert line is not None, f"the demo ended before waiting: {shown}"
            shown.append(line)
        text = "\n".join(shown)
        install = f"pip install --no-cache-dir --force-reinstall --index-url {index_url} -v culina"
        for command in (install, f"CULINA_VARIANT=source {install}", f"CULINA_OFFLINE=1 {install}",
                        "culina-resolver mirror --manifest /r/release-manifest.json --dest /w/mirror",
                        f"CULINA_OFFLINE=1 CULINA_RELEASE_URL=/w/mirror {install}"):
            assert command in text
        assert subprocess.run(["curl", "-sf", index_url], capture_output=True, timeout=30).returncode == 0  # still up
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        assert next_line(lines) == ""
        assert next_line(lines) == "[demo] stopping the servers"
        assert next_line(lines) == "servers stopped"
        assert process.wait(timeout=30) == 0
        assert subprocess.run(["curl", "-sf", index_url], capture_output=True, timeout=30).returncode != 0  # down
    finally:
        process.kill()
