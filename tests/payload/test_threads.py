"""Concurrent calls from many Python threads (the free-threaded 3.13t/3.14t case, where _C runs
without the GIL; on a GIL build the calls still overlap, since _C releases it while computing):
every result must equal, bit for bit, what one thread computes for the same inputs."""
import os
import subprocess
import sys
import sysconfig
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import culina

THREADS = 8
ROUNDS = 4  # calls per thread, each on its own problem


def problems(rng):
    """Problems of different shapes, dtypes and options, so that concurrent calls do not all take one path."""
    dtypes = [np.float32, np.float16]
    shapes = [(2, 3, 33, 16, 24), (1, 2, 70, 32, 8), (3, 1, 9, 8, 40), (1, 4, 128, 64, 64)]
    made = []
    for number in range(THREADS * ROUNDS):
        b, h, t, dk, dv = shapes[number % len(shapes)]
        dtype = dtypes[number % len(dtypes)]
        q, k = (rng.standard_normal((b, h, t, dk)).astype(dtype) * 0.5 for _ in range(2))
        v = rng.standard_normal((b, h, t, dv)).astype(dtype) * 0.5
        decay = rng.uniform(0.6, 1.0, size=h) if number % 3 else None
        initial = rng.standard_normal((b, h, dk, dv)).astype(np.float32) if number % 4 == 1 else None
        made.append(dict(q=q, k=k, v=v, decay=decay, initial_state=initial))
    return made


def run(problem):
    return culina.linear_attention(problem["q"], problem["k"], problem["v"], problem["decay"],
                                   initial_state=problem["initial_state"], output_final_state=True)


def test_concurrent_cpu_calls_equal_single_threaded_results(rng):
    work = problems(rng)
    expected = [run(p) for p in work]
    start = threading.Barrier(THREADS)  # all threads enter culina together

    def thread_calls(first: int):
        start.wait()
        return [(n, run(work[n])) for n in range(first, len(work), THREADS)]

    with ThreadPoolExecutor(THREADS) as pool:
        results = [r for chunk in pool.map(thread_calls, range(THREADS)) for r in chunk]
    assert sorted(n for n, _ in results) == list(range(len(work)))
    for n, (out, state) in results:
        np.testing.assert_array_equal(out, expected[n][0], err_msg=f"problem {n}: output differs")
        np.testing.assert_array_equal(state, expected[n][1], err_msg=f"problem {n}: final state differs")


@pytest.mark.skipif(not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="needs a free-threaded Python (3.13t+)")
def test_free_threaded_python_keeps_the_gil_off_after_import():
    # A module that does not declare itself free-threading safe turns the GIL back on (with a RuntimeWarning).
    code = "import sys, culina._C; print(sys._is_gil_enabled())"
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(culina.__file__))}  # this culina
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code], capture_output=True,
                          text=True, timeout=60, env=env)
    assert (proc.returncode, proc.stdout.strip()) == (0, "False"), proc.stderr
