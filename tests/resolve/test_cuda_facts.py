"""The Python readers of the CUDA facts file against the cases GoogleTest runs on the helper
(tests/helper_cpp/cuda_facts_test.cpp): driver minimums (culina._build), variant labels
(resolver/culina_resolver/cuda_facts.py), the majors whose nvcc is on PyPI (pypi_toolkit) and the
architecture-list syntax (adapter_settings.arch_list)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
sys.path.insert(0, str(REPO / "resolver"))

from culina_resolver import adapter_settings  # noqa: E402 - needs the path above
from culina_resolver import cuda_facts  # noqa: E402
from culina_resolver import pypi_toolkit  # noqa: E402


def load_build_module():
    """culina/_build.py on its own: importing the package would load its compiled module."""
    spec = importlib.util.spec_from_file_location("culina_build_under_test", REPO / "package" / "culina" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def section(name: str) -> list[dict]:
    found = json.loads((DATA / "cuda_facts_cases.json").read_text())[name]
    assert "python" in found["languages"] and found["cases"]
    return found["cases"]


def test_the_package_carries_the_same_facts_file():
    assert (REPO / "package" / "culina" / "cuda_facts.json").read_bytes() == cuda_facts.FACTS_FILE.read_bytes()


@pytest.mark.parametrize("case", section("driver_minimum_linux"), ids=lambda case: str(case["cuda_major"]))
def test_driver_minimums(case):
    assert load_build_module().minimum_linux_driver(case["cuda_major"]) == case["minimum"]


@pytest.mark.parametrize("case", section("pypi_nvcc"), ids=lambda case: str(case["cuda_major"]))
def test_which_majors_have_nvcc_on_pypi(case):
    cuda = f"{case['cuda_major']}.0"
    if case["nvcc_on_pypi"]:
        assert pypi_toolkit.requirements(cuda)[0] == f"nvidia-cuda-nvcc=={cuda}.*"
    else:
        with pytest.raises(pypi_toolkit.ToolkitError, match="carry no nvcc"):
            pypi_toolkit.requirements(cuda)


@pytest.mark.parametrize("case", section("arch_runs_on"), ids=lambda c: f"{c['arch']}{'+PTX' if c['ptx'] else ''} on {c['gpu']}")
def test_arch_coverage_rule_shared_with_the_helper(case):
    gpu = tuple(int(part) for part in case["gpu"].split("."))
    assert load_build_module()._arch_runs_on(case["arch"], gpu, ptx=case["ptx"]) is case["runs"]


@pytest.mark.parametrize("case", section("variant_label_valid"), ids=lambda case: repr(case["label"]))
def test_variant_label_validity(case):
    assert cuda_facts.is_variant_label(case["label"]) == case["valid"]


@pytest.mark.parametrize("case", section("variant_label_of_build"), ids=lambda case: str(case["cuda"]))
def test_variant_label_of_a_build(case):
    assert cuda_facts.variant_label(case["cuda"]) == case["label"]


ARCH_CASES = json.loads((DATA / "arch_list_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", ARCH_CASES, ids=lambda case: repr(case["text"]))
def test_arch_list_syntax_shared_with_the_helper(case):
    if case.get("error"):
        with pytest.raises(adapter_settings.ArchSyntaxError):
            adapter_settings.arch_list(case["text"])
    else:
        parsed = adapter_settings.arch_list(case["text"])
        assert [t.arch.label + ("+PTX" if t.ptx else "") for t in parsed] == case["archs"]
