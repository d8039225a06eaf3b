"""A hostile or broken driver costs the probe its time limit at most: a libcuda claiming two
billion GPUs, or one that forks a long-lived process inside cuInit, is contained."""
import json
import os
import subprocess
import time

PROBE_LIMIT_S = 3


def run_probe(resolver, fake_libcuda_dir, **fake):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "FAKE_CUDA_", "CUDA_VISIBLE"))}
    env = {**clean, "LD_LIBRARY_PATH": str(fake_libcuda_dir), "CULINA_PROBE_TIMEOUT": str(PROBE_LIMIT_S), **fake}
    started = time.monotonic()
    # Popen with our own pipes: communicate() returns only when every holder of the helper's
    # stdout and stderr has closed them, so a leaked grandchild shows up as time.
    done = subprocess.run([str(resolver), "probe", "--json"], env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_two_billion_gpus_are_capped_within_the_limit(resolver, fake_libcuda_dir):
    done, seconds = run_probe(resolver, fake_libcuda_dir, FAKE_CUDA_GPUS="NVIDIA H200=9.0",
                              FAKE_CUDA_DEVICE_COUNT="2000000000")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert seconds < PROBE_LIMIT_S + 1.5
    assert 0 < len(report["gpus"]) <= 256
    assert any("2000000000 GPUs" in error for error in report["errors"]), report["errors"]


def test_a_process_forked_in_cuinit_does_not_hold_the_probe(resolver, fake_libcuda_dir):
    done, seconds = run_probe(resolver, fake_libcuda_dir, FAKE_CUDA_GPUS="NVIDIA H200=9.0", FAKE_CUDA_MODE="fork",
                              FAKE_CUDA_FORK_SECONDS="20")
    assert done.returncode == 0, done.stderr
    assert seconds < PROBE_LIMIT_S, "the forked process kept the helper's output open"
    report = json.loads(done.stdout)
    assert [gpu["sm"] for gpu in report["gpus"]] == ["9.0"], report
    # The forked process is a copy of the helper's probe child, so it has the helper's command line.
    leftover = subprocess.run(["pgrep", "-f", f"{resolver} probe --json"], capture_output=True, text=True)
    assert leftover.stdout == "", "the forked process outlived the probe"
