"""The import-time check: a CUDA build on a driver too old for it, or a GPU the binary lacks,
gets a warning with the reason and the reinstall command. Its facts come from NVML (faked here
in-process; test_import_without_cuda.py drives the real path through a fake libnvidia-ml)."""
import pytest

import culina
from culina import _build, _fit_check

CU130_RELEASE = {"kind": "release", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0",
                 "sass_archs": ["7.5", "8.0", "9.0"], "ptx_archs": []}
CU129_WITH_PTX = {"kind": "release", "variant": "cu129", "cpu_only": False, "cuda_version": "12.9",
                  "sass_archs": ["8.0", "9.0a"], "ptx_archs": ["9.0"]}


def gpu(index, cc, name=None):
    return {"index": index, "name": name or f"GPU{index}", "uuid": f"GPU-{index:08x}-0000", "capability": cc}


@pytest.fixture
def host(monkeypatch):
    """Sets the build record and what NVML reports: the driver's CUDA version and the GPUs
    (nvml=False: no NVML at all)."""
    def configure(record=CU130_RELEASE, driver=13000, gpus=(), nvml=True):
        monkeypatch.setattr(_build, "build_record", lambda: record)
        monkeypatch.setattr(_fit_check._C, "built_with_cuda", lambda: not record.get("cpu_only"))
        report = {"driver_cuda_version": driver, "gpus": list(gpus)} if nvml else None
        monkeypatch.setattr(_fit_check._C, "nvml_report", lambda: report)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return configure


def test_a_cuda13_build_on_a_cuda12_8_driver_says_why_and_how_to_reinstall(host):
    host(driver=12080, gpus=[gpu(0, (9, 0))])
    (problem,) = _fit_check.problems()
    assert "CUDA 13.0 build (release, cu130)" in problem
    assert "supports CUDA 12.8 only" in problem
    assert "580 or newer" in problem
    assert "pip install --force-reinstall --no-cache-dir culina" in problem


def test_a_fitting_driver_and_covered_gpus_raise_nothing(host):
    host(driver=13000, gpus=[gpu(0, (9, 0)), gpu(1, (8, 6))])
    assert _fit_check.problems() == []


def test_no_nvml_or_a_cpu_build_is_not_a_mismatch(host):
    host(driver=12080, gpus=[gpu(0, (6, 1))], nvml=False)
    assert _fit_check.problems() == []
    host(record={"kind": "local", "cpu_only": True, "cuda_version": None}, driver=12080, gpus=[gpu(0, (6, 1))])
    assert _fit_check.problems() == []


def test_a_gpu_the_binary_lacks_names_it_and_the_fix(host):
    host(driver=13000, gpus=[gpu(0, (9, 0)), gpu(1, (6, 1))])
    (problem,) = _fit_check.problems()
    assert problem.startswith("GPU 1 'GPU1' (compute capability 6.1) has no code in this binary "
                              "(SASS for 7.5, 8.0, 9.0; PTX for none)")
    assert "CULINA_VARIANT=source CULINA_CUDA_ARCHS=6.1 pip install --force-reinstall --no-cache-dir culina" in problem


def test_a_gpu_nvml_cannot_describe_is_left_to_the_first_gpu_call(host):
    host(driver=13000, gpus=[gpu(0, None)])
    assert _fit_check.problems() == []


@pytest.mark.parametrize("cc,driver,runs", [
    ((8, 0), 12090, True),     # SASS 8.0
    ((8, 6), 12090, True),     # SASS 8.0 runs on a later minor of its major
    ((7, 5), 12090, False),    # nothing older than the oldest target
    ((9, 0), 12080, True),     # SASS 9.0a on exactly 9.0, on any CUDA 12 driver
    ((10, 0), 12090, True),    # PTX 9.0, JIT-compiled by a driver as new as the build
    ((10, 0), 12080, False),   # ... which a CUDA 12.8 driver cannot do
], ids=str)
def test_sass_and_ptx_coverage_follow_the_selection_policy(host, cc, driver, runs):
    host(record=CU129_WITH_PTX, driver=driver, gpus=[gpu(0, cc)])
    assert (_fit_check.problems() == []) is runs


def test_the_warning_is_a_build_mismatch_warning(host):
    host(driver=12080)
    with pytest.warns(culina.BuildMismatchWarning, match="supports CUDA 12.8 only"):
        _fit_check.warn_if_mismatched()


def test_the_warning_of_a_local_build_says_why_it_was_built_locally(host):
    reason = ("the chosen wheel culina-0.1.0-cu130.whl from https://example.invalid/r could not be fetched "
              "(HTTP 404); building for 9.0")
    host(record={**CU130_RELEASE, "kind": "local", "resolver": {"action": "build_local", "reason": reason}},
         driver=12080, gpus=[gpu(0, (9, 0))])
    with pytest.warns(culina.BuildMismatchWarning) as caught:
        _fit_check.warn_if_mismatched()
    assert f"this copy was built locally: {reason}" in str(caught[0].message)


ALIKE = [gpu(0, (9, 0), "H200"), gpu(1, (9, 0), "H200"), gpu(2, (9, 0), "H200")]
MIXED = [gpu(0, (9, 0), "H200"), gpu(1, (6, 1), "P40")]


@pytest.mark.parametrize("gpus,visible,order,ordinals", [
    (ALIKE, None, None, [(0, 0), (1, 1), (2, 2)]),
    (ALIKE, "2,0", None, [(0, 2), (1, 0)]),
    (ALIKE, " 1 , 2", None, [(0, 1), (1, 2)]),
    (ALIKE, "GPU-00000002", None, [(0, 2)]),       # a UUID prefix
    (ALIKE, "1,7,0", None, [(0, 1)]),              # CUDA stops at the first index it lacks
    (ALIKE, "1,GPU-0000", None, [(0, 1)]),         # ... and at an ambiguous UUID prefix
    (ALIKE, "0,1,0", None, []),                    # a repeat hides every GPU
    (ALIKE, "", None, []),
    (ALIKE, "-1", None, []),
    (MIXED, "1", "PCI_BUS_ID", [(0, 1)]),
    (MIXED, "GPU-00000001", None, [(0, 1)]),       # UUIDs do not depend on CUDA's order
], ids=str)
def test_cuda_visible_devices_picks_the_gpus_and_their_cuda_ordinals(gpus, visible, order, ordinals):
    chosen, caveat = _fit_check.visible_gpus(gpus, visible, order)
    assert [(ordinal, g["index"]) for ordinal, g in chosen] == ordinals
    assert caveat == ""


@pytest.mark.parametrize("gpus,visible,order,why", [
    (ALIKE, "MIG-5c3a6c34-1b8a-5b0a-9b4e-6a5f3a0e7d11", None, "names MIG instances"),
    (MIXED, "1", None, "lists indices, which CUDA counts fastest GPU first"),
    (MIXED, None, None, "CUDA numbers the fastest GPU first unless CUDA_DEVICE_ORDER=PCI_BUS_ID"),
], ids=str)
def test_when_cuda_visible_devices_cannot_be_mapped_every_gpu_is_checked_and_the_warning_says_so(
        gpus, visible, order, why):
    chosen, caveat = _fit_check.visible_gpus(gpus, visible, order)
    assert [g["index"] for _, g in chosen] == [g["index"] for g in gpus]
    assert why in caveat and "numbered as nvidia-smi numbers them" in caveat


def test_the_warning_numbers_a_gpu_as_cuda_will(host, monkeypatch):
    host(driver=13000, gpus=[gpu(0, (9, 0), "H200"), gpu(1, (6, 1), "P40")])
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    (problem,) = _fit_check.problems()
    assert problem.startswith("GPU 0 'P40' (compute capability 6.1)")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert _fit_check.problems() == []
