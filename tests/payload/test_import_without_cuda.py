"""`import culina` initialises no CUDA: the import-time fit check asks NVML, never the CUDA
runtime. Each case imports culina in a fresh interpreter with the fake libcuda.so.1 (which logs
cuInit and cuGetProcAddress, the first things CUDA's runtime asks of it) and the fake
libnvidia-ml.so.1 on the library path, both describing one fake host."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import culina

PACKAGE_DIR = Path(culina.__file__).resolve().parent.parent
RECORD = culina.build_record()
if RECORD.get("cpu_only") is not False:
    pytest.skip("culina was built without CUDA: its import asks neither NVML nor CUDA",
                allow_module_level=True)
# A GPU this build has code for, and one no culina build has (Kepler).
COVERED = RECORD["sass_archs"][0].rstrip("af")
UNCOVERED = "3.5"


@pytest.fixture
def fake_nvml_dir(fake_libcuda_dir):
    folder = fake_libcuda_dir.parent / "fake_nvml"
    if not (folder / "libnvidia-ml.so.1").exists():
        pytest.skip("the fake libnvidia-ml.so.1 is not built: run `make build`")
    return folder


@pytest.fixture
def fake_host(tmp_path, fake_libcuda_dir, fake_nvml_dir):
    """Runs Python code in a fresh interpreter on the fake host; returns (stderr, CUDA calls)."""
    def run(code="import culina", nvml=True, **settings):
        log = tmp_path / "cuda_calls.log"
        log.unlink(missing_ok=True)
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "CUDA_", "CULINA_"))}
        libraries = [str(fake_libcuda_dir)] + ([str(fake_nvml_dir)] if nvml else [])
        env = dict(keep, PYTHONPATH=str(PACKAGE_DIR), LD_LIBRARY_PATH=os.pathsep.join(libraries),
                   FAKE_CUDA_CALL_LOG=str(log), **settings)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr, log.read_text().splitlines() if log.exists() else []
    return run


def test_import_requests_no_cuda_initialisation(fake_host):
    stderr, calls = fake_host("import culina; culina.build_record(); culina.__version__",
                              FAKE_CUDA_GPUS=f"NVIDIA H200={COVERED};Tesla K80={UNCOVERED}")
    assert "BuildMismatchWarning" in stderr  # the check ran, on NVML's facts
    assert calls == []
    # The same host through `python -m culina info`, which asks CUDA: the runtime reaches the
    # fake, so the silence above means the import asked nothing.
    _, calls = fake_host("from culina.__main__ import main; main(['info'])",
                         FAKE_CUDA_GPUS=f"NVIDIA H200={COVERED}")
    assert "cuInit" in calls


def test_without_nvml_the_import_is_quiet_and_still_requests_nothing(fake_host):
    for settings in ({"nvml": False}, {"FAKE_NVML_INIT_ERROR": "9"}):
        stderr, calls = fake_host(FAKE_CUDA_GPUS=f"Tesla K80={UNCOVERED}", FAKE_CUDA_DRIVER_VERSION="11080",
                                  **settings)
        assert "culina" not in stderr and calls == []


def test_a_gpu_without_code_warns_at_import(fake_host):
    stderr, _ = fake_host(FAKE_CUDA_GPUS=f"NVIDIA H200={COVERED};Tesla K80={UNCOVERED}")
    assert (f"BuildMismatchWarning: culina: GPU 1 'Tesla K80' (compute capability {UNCOVERED}) has no code "
            f"in this binary ({culina._build.describe_archs(RECORD)})") in stderr
    assert f"CULINA_CUDA_ARCHS={UNCOVERED} pip install --force-reinstall --no-cache-dir culina" in stderr


def test_a_driver_too_old_for_the_build_warns_at_import(fake_host):
    major = int(RECORD["cuda_version"].split(".")[0])
    stderr, _ = fake_host(FAKE_CUDA_GPUS=f"NVIDIA H200={COVERED}", FAKE_CUDA_DRIVER_VERSION=str((major - 1) * 1000 + 80))
    assert (f"BuildMismatchWarning: culina: this culina is a CUDA {RECORD['cuda_version']} build "
            f"({RECORD['kind']}, {RECORD['variant']}), but the NVIDIA driver here supports CUDA {major - 1}.8 only") in stderr


def test_the_check_looks_only_at_the_gpus_cuda_visible_devices_shows(fake_host):
    gpus = f"NVIDIA H200={COVERED};Tesla K80={UNCOVERED}"
    stderr, _ = fake_host(FAKE_CUDA_GPUS=gpus, CUDA_VISIBLE_DEVICES="0", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    assert "BuildMismatchWarning" not in stderr
    stderr, _ = fake_host(FAKE_CUDA_GPUS=gpus, CUDA_VISIBLE_DEVICES="1", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    assert "GPU 0 'Tesla K80'" in stderr
