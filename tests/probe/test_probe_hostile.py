"""A hostile or broken driver costs the probe its time limit at most, and a line in its errors: a
libcuda claiming two billion GPUs, one that forks a long-lived process inside cuInit (in the
probe's process group or out of it), or one whose GPU name is not text, is contained."""
import json
import os
import stat
import subprocess
import time
from pathlib import Path

PROBE_LIMIT_S = 3
TAG = "cp312-cp312-manylinux_2_28_x86_64"
# What printable makes of the fake's hostile name (tests/fakes/fake_libcuda.c, kHostileName): the
# bytes that are not UTF-8 become U+FFFD, the control characters \xNN; the newline forges no GPU.
HOSTILE_NAME_SHOWN = "Evil\ufffd\ufffd(GPU\\x0agpu 7 12 0 forged\\x1b[2J\\x09\\x7f end"


def probe_env(fake_libcuda_dir, **fake):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CULINA_", "FAKE_CUDA_", "CUDA_VISIBLE"))}
    return {**clean, "LD_LIBRARY_PATH": str(fake_libcuda_dir), "CULINA_PROBE_TIMEOUT": str(PROBE_LIMIT_S), **fake}


def run_probe(resolver, fake_libcuda_dir, args=("--json",), **fake):
    """`probe --json` (or the text report with args=()); stdout as bytes, exactly as written."""
    started = time.monotonic()
    # Popen with our own pipes: communicate() returns only when every holder of the helper's
    # stdout and stderr has closed them, so a leaked grandchild shows up as time.
    done = subprocess.run([str(resolver), "probe", *args], env=probe_env(fake_libcuda_dir, **fake),
                          capture_output=True, timeout=60)
    return done, time.monotonic() - started


def json_report(done) -> dict:
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout.decode("utf-8"))  # strict: the report is UTF-8


def process_is_gone(pid: int) -> bool:
    """Gone, not a zombie: /proc/<pid> lasts until the process is reaped."""
    return not Path(f"/proc/{pid}").exists()


def test_two_billion_gpus_are_capped_within_the_limit(resolver, fake_libcuda_dir):
    done, seconds = run_probe(resolver, fake_libcuda_dir, FAKE_CUDA_GPUS="NVIDIA H200=9.0",
                              FAKE_CUDA_DEVICE_COUNT="2000000000")
    report = json_report(done)
    assert seconds < PROBE_LIMIT_S + 1.5
    assert 0 < len(report["gpus"]) <= 256
    assert any("2000000000 GPUs" in error for error in report["errors"]), report["errors"]


def test_a_process_forked_in_cuinit_does_not_hold_the_probe(resolver, fake_libcuda_dir):
    done, seconds = run_probe(resolver, fake_libcuda_dir, FAKE_CUDA_GPUS="NVIDIA H200=9.0", FAKE_CUDA_MODE="fork",
                              FAKE_CUDA_FORK_SECONDS="20")
    report = json_report(done)
    assert seconds < PROBE_LIMIT_S, "the forked process kept the helper's output open"
    assert [gpu["sm"] for gpu in report["gpus"]] == ["9.0"], report
    # The forked process is a copy of the helper's probe child, so it has the helper's command line.
    leftover = subprocess.run(["pgrep", "-f", f"{resolver} probe --json"], capture_output=True, text=True)
    assert leftover.stdout == "", "the forked process outlived the probe"


def test_a_process_that_leaves_the_session_in_cuinit_dies_with_the_probe(resolver, fake_libcuda_dir, tmp_path):
    """setsid() takes it out of the probe child's process group, which the helper kills; it still
    must not outlive the probe, nor hold it up."""
    pid_file = tmp_path / "lingering.pid"
    done, seconds = run_probe(resolver, fake_libcuda_dir, FAKE_CUDA_GPUS="NVIDIA H200=9.0", FAKE_CUDA_MODE="setsid",
                              FAKE_CUDA_FORK_SECONDS="30", FAKE_CUDA_PID_FILE=str(pid_file))
    report = json_report(done)
    assert seconds < 2, f"the probe took {seconds:.1f} s"
    assert [gpu["sm"] for gpu in report["gpus"]] == ["9.0"], report
    pid = int(pid_file.read_text())
    try:
        assert process_is_gone(pid), f"process {pid}, started by the fake driver in cuInit, outlived the probe"
    finally:
        if not process_is_gone(pid):
            os.kill(pid, 9)


def test_a_hostile_gpu_name_is_data_in_the_json_report(resolver, fake_libcuda_dir):
    done, _ = run_probe(resolver, fake_libcuda_dir, FAKE_CUDA_GPUS="NVIDIA H200=9.0", FAKE_CUDA_MODE="hostile_name")
    report = json_report(done)
    assert report["gpus"] == [{"index": 0, "name": HOSTILE_NAME_SHOWN, "sm": "9.0"}], report["gpus"]


def test_a_hostile_gpu_name_forges_no_line_in_the_text_report(resolver, fake_libcuda_dir):
    done, _ = run_probe(resolver, fake_libcuda_dir, (), FAKE_CUDA_GPUS="NVIDIA H200=9.0", FAKE_CUDA_MODE="hostile_name")
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("utf-8")
    assert "\x1b" not in text and "\x7f" not in text
    gpu_rows = [line for line in text.splitlines() if line.startswith("  gpu ")]
    assert gpu_rows == [f"  gpu 0     {HOSTILE_NAME_SHOWN}, sm 9.0"], gpu_rows


def test_a_hostile_gpu_name_neither_stops_nor_steers_resolve(resolver, fake_libcuda_dir, tmp_path):
    """`resolve --json` reports the name as data, and the GPU the newline would forge (sm 12.0) is not
    built for. (No wheel fits the interpreter's tags here, so nothing is fetched: a local build.)"""
    manifest = tmp_path / "release-manifest.json"
    manifest.write_text(json.dumps({"schema_version": 1, "name": "culina", "version": "0.1.0", "wheels": [{
        "file": f"culina-0.1.0-{TAG}-cu130.whl", "sha256": "0" * 64, "size": 1, "tags": [TAG], "variant": "cu130",
        "cuda": "13.0", "sass": ["sm_90"], "ptx": [],
        "variant_properties": ["nvidia :: cuda_version_lower_bound :: 13.0", "nvidia :: sm_arch :: 90_real"]}]}))
    tags = tmp_path / "tags.txt"
    tags.write_text("cp311-cp311-manylinux_2_28_x86_64\n")
    toolkit = tmp_path / "toolkit-bin"
    toolkit.mkdir()
    nvcc = toolkit / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    env = probe_env(fake_libcuda_dir, FAKE_CUDA_GPUS="NVIDIA H200=9.0", FAKE_CUDA_MODE="hostile_name",
                    CULINA_OVERRIDE_CUDA="13.0")
    env = {k: v for k, v in env.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{toolkit}:{env['PATH']}"
    done = subprocess.run([str(resolver), "resolve", "--manifest", str(manifest), "--tags", str(tags),
                           "--cache-dir", str(tmp_path / "cache"), "--json"], env=env, capture_output=True, timeout=60)
    decision = json_report(done)
    assert decision["action"] == "build_local", decision["reason"]
    assert decision["local_build_archs"] == ["9.0"]
    assert decision["probe"]["gpus"] == [{"index": 0, "name": HOSTILE_NAME_SHOWN, "sm": "9.0"}]
    assert b"\x1b" not in done.stderr


def test_an_nvcc_whose_path_is_not_text_is_skipped_with_a_reason(resolver, fake_libcuda_dir, tmp_path):
    """The decision hands nvcc's path to the build; a path that JSON or a log line cannot carry as it
    is would name another file there."""
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/bin\xff\n  error     forged"))
    folder.mkdir()
    nvcc = folder / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    env = {"CUDA_HOME": "", "CUDA_PATH": "", "PATH": f"{folder}:{os.environ['PATH']}"}
    report = json_report(run_probe(resolver, fake_libcuda_dir, **env)[0])
    assert report["toolkit"] is None or "forged" not in report["toolkit"]["nvcc"], report["toolkit"]
    skipped = [error for error in report["errors"] if "bin\ufffd\\x0a  error     forged/nvcc" in error]
    assert len(skipped) == 1 and "skipped" in skipped[0], report["errors"]
    text, _ = run_probe(resolver, fake_libcuda_dir, (), **env)
    forged = [line for line in text.stdout.decode("utf-8").splitlines() if "forged" in line]
    assert len(forged) == 1 and forged[0].startswith("  error     toolkit: '"), forged
