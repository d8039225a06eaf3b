"""The import-time check against the install settings in force: a build other than the one
CULINA_VARIANT asks for (pip's wheel cache served an earlier decision) is named in one line with
the reinstall command; uv's cache keys list the variable, so uv rebuilds when it changes."""
import json
import tomllib
import warnings
from pathlib import Path

import pytest

from culina import _build, _fit_check

REPO = Path(__file__).resolve().parents[2]
DECIDED = {"action": "install_wheel", "reason": "cu130 covers every GPU"}
CU130_RELEASE = {"kind": "release", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0", "resolver": DECIDED}
LOCAL_CU130 = {"kind": "local", "variant": "cu130", "cpu_only": False, "cuda_version": "13.0",
               "resolver": {"action": "build_local", "reason": "CULINA_VARIANT=source"}}
IN_PLACE = {"kind": "local", "variant": "null", "cpu_only": True, "resolver": None}


def test_source_asked_but_a_prebuilt_wheel_installed():
    (problem,) = _fit_check.settings_problems(CU130_RELEASE, {"CULINA_VARIANT": "source"})
    assert problem.startswith("CULINA_VARIANT=source asks for a local build, but this copy is the cu130 release wheel")
    assert problem.endswith("`CULINA_VARIANT=source pip install --force-reinstall --no-cache-dir culina`")


def test_another_label_asked_than_the_one_installed():
    (problem,) = _fit_check.settings_problems(CU130_RELEASE, {"CULINA_VARIANT": "cu129"})
    assert problem.startswith("CULINA_VARIANT=cu129 asks for the cu129 variant, but this copy is the cu130 release wheel")
    assert "`CULINA_VARIANT=cu129 pip install --force-reinstall --no-cache-dir culina`" in problem


@pytest.mark.parametrize("record, environ", [
    (CU130_RELEASE, {}), (CU130_RELEASE, {"CULINA_VARIANT": "auto"}), (CU130_RELEASE, {"CULINA_VARIANT": " CU130 "}),
    (LOCAL_CU130, {"CULINA_VARIANT": "source"}),
    ({**LOCAL_CU130, "variant": "null"}, {"CULINA_VARIANT": "cpu"}),  # the CPU alias is the CPU label
    (IN_PLACE, {"CULINA_VARIANT": "cu129"}),  # `setup.py build_ext` answers to no install setting
])
def test_settings_the_build_meets_raise_nothing(record, environ):
    assert _fit_check.settings_problems(record, environ) == []


def test_a_value_the_install_would_refuse_is_named():
    (problem,) = _fit_check.settings_problems(CU130_RELEASE, {"CULINA_VARIANT": "cu 13"})
    assert problem == ("CULINA_VARIANT='cu 13' is not understood, so the next install will stop on it; accepted: "
                       "auto, source, null (alias cpu) or a release label such as cu129 or cu130")


def test_the_import_warns_once_per_problem(monkeypatch):
    monkeypatch.setattr(_build, "build_record", lambda: CU130_RELEASE)
    monkeypatch.setattr(_fit_check, "problems", lambda: [])
    monkeypatch.setenv("CULINA_VARIANT", "source")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit_check.warn_if_mismatched()
    assert [str(w.message).split(", but")[0] for w in caught] == ["culina: CULINA_VARIANT=source asks for a local build"]
    assert all(w.category is _fit_check.BuildMismatchWarning for w in caught)


def test_uv_rebuilds_when_a_setting_the_check_reads_changes():
    keys = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]["cache-keys"]
    names = {key["env"] for key in keys if "env" in key}
    assert {setting.name for setting in _fit_check.INSTALL_SETTINGS.values()} <= names


VARIANT_CASES = json.loads((REPO / "tests" / "data" / "variant_request_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", VARIANT_CASES, ids=[repr(case["text"]) for case in VARIANT_CASES])
def test_the_variable_is_read_as_the_helper_reads_it(case):
    """The cases tests/helper_cpp/policy_inputs_test.cpp runs on parse_variant_request."""
    if case.get("error"):
        with pytest.raises(ValueError):
            _fit_check._variant_request(case["text"])
    else:
        assert (_fit_check._variant_request(case["text"]) or "auto") == case["request"]
