"""CULINA_CUDA_ARCHS parsing in the build adapter (needs the nvcc it validates against)."""
import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "resolver"))
from culina_resolver import cuda_build_ext as adapter  # noqa: E402

TOOLKIT = adapter.find_toolkit()
pytestmark = pytest.mark.skipif(TOOLKIT is None, reason="no CUDA toolkit (nvcc) on this machine")


def labels(value):
    sass, ptx = adapter.parse_archs(value, TOOLKIT)
    return [a.label for a in sass], [a.label for a in ptx]


@pytest.mark.parametrize("value,expected", [
    ("8.0;9.0;10.0+PTX", (["8.0", "9.0", "10.0"], ["10.0"])),
    ("80;90", (["8.0", "9.0"], [])),
    ("9.0a", (["9.0a"], [])),
    ("8.6, 8.6", (["8.6"], [])),
])
def test_accepted_forms(value, expected):
    assert labels(value) == expected


@pytest.mark.parametrize("version,expected", [
    ("12.9", (["7.5", "8.0", "9.0", "10.0", "12.0"], ["12.0"])),
    ("13.0", (["7.5", "8.0", "9.0", "10.0", "11.0", "12.0"], ["12.0"])),
])
def test_all_is_the_release_list_of_the_toolkits_cuda_major(version, expected):
    toolkit = dataclasses.replace(TOOLKIT, version=version)  # this nvcc, taken for that CUDA version
    if version == "13.0" and "110" not in adapter.supported_digits(TOOLKIT):
        pytest.skip(f"nvcc {TOOLKIT.version} cannot target 11.0")
    sass, ptx = adapter.parse_archs("all", toolkit)
    assert ([a.label for a in sass], [a.label for a in ptx]) == expected


def test_all_names_the_missing_cuda_major():
    with pytest.raises(adapter.BuildError, match=r"^CULINA_CUDA_ARCHS=all: pyproject.toml \[tool.culina.release_archs\] "
                                                 r"has no list for CUDA 11 .*add a \"11\" entry"):
        adapter.parse_archs("all", dataclasses.replace(TOOLKIT, version="11.8"))


def test_gencode_flags():
    sass, ptx = adapter.parse_archs("9.0a;12.0+PTX", TOOLKIT)
    assert adapter.gencode_flags(sass, ptx) == [
        "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_120,code=sm_120",
        "-gencode=arch=compute_120,code=compute_120"]


@pytest.mark.parametrize("value,why", [
    ("", "the list is empty"), ("hopper", "is not an architecture"), ("9.5", "is not an architecture nvcc"),
    ("8.0a", "variants exist from 9.0"), ("9", "write 8.0 or 80"),
])
def test_rejected_with_variable_value_and_accepted_forms(value, why):
    with pytest.raises(adapter.BuildError) as err:
        adapter.parse_archs(value, TOOLKIT)
    text = str(err.value)
    assert text.startswith(f"CULINA_CUDA_ARCHS={value!r}") and why in text and "Accepted: 'native'" in text


@pytest.mark.skipif(TOOLKIT is None or TOOLKIT.major < 13, reason="needs CUDA 13, which dropped sm_70")
def test_cuda13_refuses_pre_turing():
    with pytest.raises(adapter.BuildError, match=r"'7.0': CUDA 13 targets 7.5 and newer only"):
        adapter.parse_archs("7.0", TOOLKIT)


@pytest.mark.parametrize("value,expected", [
    ("8.0;9.0;10.0+PTX", {"csrc/cuda/hopper/": "9.0a"}),
    ("9.0a", {"csrc/cuda/hopper/": "9.0a"}),
    ("9.0", {"csrc/cuda/hopper/": "9.0a"}),
    ("8.0;8.6;12.0+PTX", {}),
    ("10.0", {}),
])
def test_arch_specific_folders_build_for_their_target_where_its_base_is_listed(value, expected):
    sass, _ = adapter.parse_archs(value, TOOLKIT)
    targets = adapter.arch_specific_targets({"csrc/cuda/hopper/": "9.0a"}, sass, TOOLKIT)
    assert {folder: arch.label for folder, arch in targets.items()} == expected


def test_arch_specific_folders_are_left_out_where_the_toolkit_predates_their_suffix(capsys):
    sass, _ = adapter.parse_archs("9.0", TOOLKIT)
    old = dataclasses.replace(TOOLKIT, version="11.8")  # this nvcc, taken for CUDA 11.8 (sm_90a came in 12.0)
    assert adapter.arch_specific_targets({"csrc/cuda/hopper/": "9.0a"}, sass, old) == {}
    assert "nvcc 11.8 cannot target 9.0a (CUDA 12.0 and newer)" in capsys.readouterr().err
