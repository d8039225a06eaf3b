"""`make demo` (tools/demo.py): pip's output reaches the reader while pip runs, and the closing
result check computes what the reference does. The demo's own streaming function runs against a
stand-in pip that holds the install open, so this costs seconds, not a release build."""
from __future__ import annotations

import os
import queue
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
    assert done.stdout.startswith("linear_attention on ") and done.stdout.rstrip().endswith(": ok")
