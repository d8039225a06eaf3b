"""The import-time check: a CUDA build on a driver too old for it, or a GPU the binary lacks,
gets a warning with the reason and the reinstall command (the GPU path is faked here)."""
import pytest

import culina
from culina import _build, _fit_check

CU130_RELEASE = {"kind": "release", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0",
                 "sass_archs": ["7.5", "8.0", "9.0"], "ptx_archs": []}


@pytest.fixture
def host(monkeypatch):
    """Sets the build record, the driver's CUDA version and the GPUs the binary reports."""
    def configure(record=CU130_RELEASE, driver=13000, devices=()):
        monkeypatch.setattr(_build, "build_record", lambda: record)
        monkeypatch.setattr(_fit_check._C, "built_with_cuda", lambda: not record.get("cpu_only"))
        monkeypatch.setattr(_fit_check._C, "driver_version", lambda: driver)
        monkeypatch.setattr(_fit_check._C, "devices", lambda: list(devices))
    return configure


def gpu(ordinal, cc, supported):
    return {"ordinal": ordinal, "name": f"GPU{ordinal}", "capability": cc, "supported": supported}


def test_a_cuda13_build_on_a_cuda12_8_driver_says_why_and_how_to_reinstall(host):
    host(driver=12080)
    (problem,) = _fit_check.problems()
    assert "CUDA 13.0 build (release, cu130)" in problem
    assert "supports CUDA 12.8 only" in problem
    assert "580 or newer" in problem
    assert "pip install --force-reinstall --no-cache-dir culina" in problem


def test_a_fitting_driver_and_covered_gpus_raise_nothing(host):
    host(driver=13000, devices=[gpu(0, (9, 0), True)])
    assert _fit_check.problems() == []


def test_no_driver_or_a_cpu_build_is_not_a_mismatch(host):
    host(driver=0)
    assert _fit_check.problems() == []
    host(record={"kind": "local", "cpu_only": True, "cuda_version": None}, driver=12080)
    assert _fit_check.problems() == []


def test_a_gpu_the_binary_lacks_names_it_and_the_fix(host):
    host(driver=13000, devices=[gpu(0, (9, 0), True), gpu(1, (6, 1), False)])
    (problem,) = _fit_check.problems()
    assert "GPU 1 'GPU1' (compute capability 6.1)" in problem
    assert "SASS for 7.5, 8.0, 9.0" in problem
    assert "CULINA_VARIANT=source CULINA_CUDA_ARCHS=6.1 pip install --force-reinstall --no-cache-dir culina" in problem


def test_the_warning_is_a_build_mismatch_warning(host):
    host(driver=12080)
    with pytest.warns(culina.BuildMismatchWarning, match="supports CUDA 12.8 only"):
        _fit_check.warn_if_mismatched()
