"""The adapter's own settings (resolver/culina_resolver/adapter_settings.py): each variable refuses a bad
value naming the variable, the value and the accepted form; pip's first hook refuses it before
the helper runs; the project's names and prefix come from pyproject.toml; the resolver's
architectures and nvcc reach the build as a value, not an environment variable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "resolver"))
from culina_resolver import adapter_settings  # noqa: E402
from culina_resolver import project_config  # noqa: E402

CULINA = project_config.ProjectConfig.load(REPO)


def decision_document(**fields) -> dict:
    """A build_local decision document as `culina-resolver resolve --json` writes it, with `fields`."""
    return {"schema_version": 1, "action": "build_local", "reason": "no wheel fits", "wheel": None, "wheel_path": None,
            "local_build_archs": ["9.0"], "build_toolkit": None, "pypi_toolkit": "13.0", "host": {"gpus": ["9.0"]},
            "warnings": [], "private_folders": [], **fields}

BAD_VALUES = [
    ("CULINA_CUDA_ARCHS", "8.0;foo"),
    ("CULINA_CUDA_ARCHS", "9"),
    ("CULINA_CUDA_ARCHS", "8.0a"),
    ("CULINA_MAX_JOBS", "two"),
    ("CULINA_MAX_JOBS", "0"),
    ("MAX_JOBS", "-1"),
    ("CULINA_CCACHE", "maybe"),
    ("CULINA_HELPER", "sometimes"),
    ("CULINA_RELEASE_BUILD", "2"),
    ("TORCH_CUDA_ARCH_LIST", "Ampere;Hopper"),
    ("CULINA_CACHE_DIR", "relative/cache"),
    ("CULINA_CACHE_DIR", "~other/cache"),
    ("CULINA_RELEASE_URL", "releases"),
    ("CULINA_JSON_INCLUDE_DIR", "relative/include"),
]


def test_every_adapter_variable_has_a_bad_value_here():
    owned = {variable.name for variables in adapter_settings.variables(CULINA).values() for variable in variables}
    assert owned == {name for name, _ in BAD_VALUES}


@pytest.mark.parametrize("name, value", BAD_VALUES)
def test_a_bad_value_is_refused_naming_variable_value_and_accepted_form(name, value):
    accepted = next(v.accepted for vs in adapter_settings.variables(CULINA).values() for v in vs if v.name == name)
    with pytest.raises(adapter_settings.SettingError) as refused:
        adapter_settings.parse({"HOME": "/home/u", name: value}, CULINA)
    assert str(refused.value).startswith(f"{name}={value!r} ")
    assert str(refused.value).endswith(f"Accepted: {accepted}")


def test_a_refused_url_is_shown_without_its_credentials():
    with pytest.raises(adapter_settings.SettingError) as refused:
        adapter_settings.parse({"HOME": "/home/u",
                                "CULINA_RELEASE_URL": "ftp://user:se@cret@example.org/r v?token=t0k"}, CULINA)
    assert str(refused.value).startswith("CULINA_RELEASE_URL='ftp://example.org/r v' ")
    for secret in ("se@cret", "cret", "user", "t0k"):
        assert secret not in str(refused.value)


# The cases of the helper's redacted_url (fetch/url_policy.cpp): userinfo is all before the last @
# of the authority (which ends at the first /, ? or #), and the query and fragment are dropped.
REDACTED_URLS = [
    ("https://user:secret@example.org/r/v1", "https://example.org/r/v1"),
    ("https://user:p@ss@word@example.org/r", "https://example.org/r"),
    ("https://example.org/r?token=t0k", "https://example.org/r"),
    ("https://example.org/r#t0k", "https://example.org/r"),
    ("https://user:secret@example.org/r?sig=a&token=t0k#frag", "https://example.org/r"),
    ("https://t0k@example.org", "https://example.org"),
    ("https://u:p@example.org?token=t0k", "https://example.org"),
    ("https://u:p@[::1]:8443/r?x=1", "https://[::1]:8443/r"),
    ("ftp://user:secret@host/x?sig=token", "ftp://host/x"),
    ("file:///srv/mirror?x=1", "file:///srv/mirror"),
    ("https://example.org/a@b/c", "https://example.org/a@b/c"),
    ("/srv/mirror", "/srv/mirror"),
    ("not a url @ all ?x", "not a url @ all ?x"),
    ("", ""),
]


@pytest.mark.parametrize("url, shown", REDACTED_URLS)
def test_a_url_is_redacted_as_the_helper_redacts_it(url, shown):
    assert project_config.redacted(url) == shown


@pytest.mark.parametrize("url", [url.replace("https://", "ftp://") for url, _ in REDACTED_URLS
                                 if url.startswith(("https://", "ftp://"))])
def test_the_helper_shows_a_refused_url_as_the_adapter_does(resolver, url):
    """The helper refuses an ftp release URL naming it through redacted_url: the same text."""
    done = subprocess.run([str(resolver), "probe", "--json"], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "CULINA_RELEASE_URL": url})
    assert f"CULINA_RELEASE_URL='{project_config.redacted(url)}' is not understood" in done.stderr, done.stderr


def test_good_values_become_typed_fields():
    settings = adapter_settings.parse({"HOME": "/home/u", "CULINA_CUDA_ARCHS": " 9.0a,10.0f+PTX ", "MAX_JOBS": "3",
                                       "CULINA_CCACHE": "0", "CULINA_HELPER": "Source", "CULINA_RELEASE_BUILD": "1",
                                       "CULINA_CACHE_DIR": "~/c/../cache", "CULINA_RELEASE_URL": "/srv/r/",
                                       "CULINA_JSON_INCLUDE_DIR": "/opt/json/include"}, CULINA)
    assert settings == adapter_settings.AdapterSettings(
        project=CULINA, cuda_archs="9.0a,10.0f+PTX", cuda_archs_variable="CULINA_CUDA_ARCHS", max_jobs=(3, "MAX_JOBS=3"), ccache=False, helper="source",
        release_build=True, cache_dir=Path("/home/u/cache"), release_url="/srv/r/",
        json_include_dir=Path("/opt/json/include"))
    defaults = adapter_settings.parse({}, CULINA)
    assert defaults == adapter_settings.AdapterSettings(
        project=CULINA, cuda_archs=None, cuda_archs_variable=None, max_jobs=None, ccache=True, helper="auto", release_build=False,
        cache_dir=None, release_url="https://github.com/culina-dev/culina/releases/download/v0.1.0",
        json_include_dir=None)
    assert adapter_settings.parse({"CULINA_MAX_JOBS": "2", "MAX_JOBS": "8"}, CULINA).max_jobs == (2, "CULINA_MAX_JOBS=2")


SHARED_CASES = json.loads((REPO / "tests" / "data" / "shared_setting_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", SHARED_CASES, ids=lambda case: f"{case['suffix']}={case['text']!r}")
def test_the_helpers_variables_are_parsed_as_the_helper_parses_them(case):
    """CACHE_DIR and RELEASE_URL, read before any helper runs, accept and refuse what the helper's
    table does (tests/helper_cpp/settings_table_test.cpp runs the same cases)."""
    environ = {"HOME": "/home/u", "CULINA_" + case["suffix"]: case["text"]}
    if case["accepted"]:
        adapter_settings.parse(environ, CULINA)
    else:
        with pytest.raises(adapter_settings.SettingError, match=f"^CULINA_{case['suffix']}="):
            adapter_settings.parse(environ, CULINA)


SWITCH_CASES = json.loads((REPO / "tests" / "data" / "switch_setting_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", SWITCH_CASES, ids=lambda case: repr(case["text"]))
def test_switch_spellings_shared_with_the_helper(case):
    """CCACHE (default on) and RELEASE_BUILD (default off) read the helper's switch spellings."""
    for name, field in (("CULINA_CCACHE", "ccache"), ("CULINA_RELEASE_BUILD", "release_build")):
        if case.get("error"):
            with pytest.raises(adapter_settings.SettingError, match=f"^{name}="):
                adapter_settings.parse({name: case["text"]}, CULINA)
        else:
            default = getattr(adapter_settings.parse({}, CULINA), field)
            expected = default if case["on"] is None else case["on"]
            assert getattr(adapter_settings.parse({name: case["text"]}, CULINA), field) is expected


def test_torch_cuda_arch_list_serves_when_culinas_variable_is_unset():
    """TORCH_CUDA_ARCH_LIST is read only when CULINA_CUDA_ARCHS is unset or empty, and the
    settings say which variable the list came from; a bad one is refused only when it is used."""
    torch_only = adapter_settings.parse({"TORCH_CUDA_ARCH_LIST": "8.0 8.6 9.0+PTX"}, CULINA)
    assert (torch_only.cuda_archs, torch_only.cuda_archs_variable) == ("8.0 8.6 9.0+PTX", "TORCH_CUDA_ARCH_LIST")
    ours = adapter_settings.parse({"CULINA_CUDA_ARCHS": "sm_90", "TORCH_CUDA_ARCH_LIST": "Ampere"}, CULINA)
    assert (ours.cuda_archs, ours.cuda_archs_variable) == ("sm_90", "CULINA_CUDA_ARCHS")
    empty_ours = adapter_settings.parse({"CULINA_CUDA_ARCHS": "", "TORCH_CUDA_ARCH_LIST": "9.0"}, CULINA)
    assert empty_ours.cuda_archs_variable == "TORCH_CUDA_ARCH_LIST"
    with pytest.raises(adapter_settings.SettingError) as refused:
        adapter_settings.parse({"TORCH_CUDA_ARCH_LIST": "Ampere"}, CULINA)
    assert str(refused.value).startswith("TORCH_CUDA_ARCH_LIST='Ampere' is not understood")
    assert "or set CULINA_CUDA_ARCHS, which is read first" in str(refused.value)


def test_another_project_reads_its_own_prefix_and_ignores_culinas(tmp_path):
    """The prefix comes from pyproject.toml: a project configured with TINYCU_ reads TINYCU_* and
    nothing of CULINA_*, and its messages name its own variables."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "tiny-cu"\nversion = "1.0"\n[tool.culina-resolver]\nextension = "tinycu._C"\n'
        'env_prefix = "TINYCU_"\nrelease_url = "https://example.org/v{version}"\n'
        '[tool.culina-resolver.release_archs]\n"13" = "9.0+PTX"\n')
    tiny = project_config.ProjectConfig.load(tmp_path)
    assert (tiny.name, tiny.package, tiny.build_record_member, tiny.cache_name, tiny.table) == (
        "tiny-cu", "tinycu", "tinycu/_build_info.json", "tiny-cu", "[tool.culina-resolver]")
    settings = adapter_settings.parse({"HOME": "/home/u", "TINYCU_CUDA_ARCHS": "8.0", "CULINA_CUDA_ARCHS": "foo",
                                       "CULINA_HELPER": "sometimes", "CULINA_RELEASE_URL": "/elsewhere"}, tiny)
    assert (settings.cuda_archs, settings.helper, settings.release_url) == ("8.0", "auto", "https://example.org/v1.0")
    assert settings.var(adapter_settings.ARCHS) == "TINYCU_CUDA_ARCHS"
    with pytest.raises(adapter_settings.SettingError, match=r"^TINYCU_HELPER='sometimes' is not understood"):
        adapter_settings.parse({"TINYCU_HELPER": "sometimes"}, tiny)


@pytest.mark.parametrize("table, problem", [
    ('[tool.other]\nx = 1\n', "has no [tool.culina-resolver] table"),
    ('[tool.culina-resolver]\nenv_prefix = "tiny"\n', "env_prefix = 'tiny': accepted: upper-case letters"),
    ('[tool.culina-resolver]\nextension = "_C"\n', "extension = '_C' must be a module inside a package"),
    ('[tool.culina-resolver]\nrelease_url = "x"\n', "needs release_url"),
    ('[tool.culina-resolver]\nrelease_url = 3\n[tool.culina-resolver.release_archs]\n"13" = "9.0"\n',
     "release_url = 3 must be a string"),
    ('[tool.culina-resolver]\nrelease_url = "https://h/{tag}"\n[tool.culina-resolver.release_archs]\n"13" = "9.0"\n',
     "release_url = 'https://h/{tag}' is not a template the build adapter can fill (KeyError: 'tag')"),
    ('[tool.culina-resolver]\nrelease_url = "https://h/{version"\n[tool.culina-resolver.release_archs]\n"13" = "9.0"\n',
     "is not a template the build adapter can fill (ValueError"),
    ('[tool.culina-resolver]\nrelease_url = "https://me:tok3n@h/{tag}"\n[tool.culina-resolver.release_archs]\n'
     '"13" = "9.0"\n', "release_url = 'https://h/{tag}' is not a template"),
])
def test_a_configuration_the_adapter_cannot_use_is_named_with_the_fix(tmp_path, table, problem):
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "tiny"\nversion = "1"\n{table}')
    with pytest.raises(project_config.ConfigError) as refused:
        project_config.ProjectConfig.load(tmp_path)
    assert problem in str(refused.value) and str(tmp_path / "pyproject.toml") in str(refused.value)


def test_a_build_outside_the_project_root_says_where_it_looked(tmp_path, monkeypatch):
    """The project is the folder the build runs in (PEP 517's working directory)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(project_config.ConfigError) as refused:
        project_config.ProjectConfig.load(project_config.project_root())
    assert f"{tmp_path} has no pyproject.toml" in refused.value.message and "project's root" in refused.value.hint


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """An sdist-like tree with no prebuilt helper, so CULINA_HELPER=prebuilt stops at the helper's
    choice: the first thing resolving does."""
    root = tmp_path_factory.mktemp("sdist")
    for part in ("culina_resolver", "src"):
        shutil.copytree(REPO / "resolver" / part, root / "resolver" / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", root)
    return root


def first_hook(tree: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CULINA_") and k != "MAX_JOBS"}
    return subprocess.run(
        [sys.executable, "-c", "from culina_resolver import backend; print(backend.get_requires_for_build_wheel())"],
        cwd=tree, env={**clean, "PYTHONPATH": str(tree / "resolver"), "CULINA_HELPER": "prebuilt", **env},
        capture_output=True, text=True, timeout=120)


def test_the_first_hook_reaches_the_helper_with_good_settings(tree):
    """The control for the next test: with nothing wrong, this tree's hook goes on to choose the
    helper (and stops there, having none)."""
    done = first_hook(tree, CULINA_MAX_JOBS="2", CULINA_CUDA_ARCHS="8.0;9.0")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("culina: cannot install: ")
    assert "CULINA_HELPER=prebuilt, but the prebuilt helper from the sdist cannot serve" in done.stderr


@pytest.mark.parametrize("name, value", [("CULINA_CUDA_ARCHS", "8.0;foo"), ("CULINA_MAX_JOBS", "two"),
                                         ("CULINA_HELPER", "sometimes"), ("CULINA_CACHE_DIR", "cache")])
def test_the_first_hook_refuses_a_bad_setting_before_the_helper_runs(tree, name, value):
    done = first_hook(tree, **{name: value})
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"culina: {name}={value!r} "), done.stderr
    assert "decision" not in done.stderr and done.stdout == ""


def test_the_decided_architectures_reach_the_build_as_a_plan(monkeypatch):
    """resolving_bdist_wheel hands the decision to build_ext as a BuildPlan; the environment is
    left as it was."""
    from culina_resolver import resolving_bdist_wheel
    from culina_resolver.cuda_build_ext import BuildPlan, CudaBuildExt
    from culina_resolver.helper_client import Decision
    from setuptools import Distribution

    monkeypatch.delenv("CULINA_CUDA_ARCHS", raising=False)
    monkeypatch.delenv("CULINA_RELEASE_BUILD", raising=False)
    decision = Decision.from_document(decision_document(
        local_build_archs=["8.6", "9.0"], build_toolkit={"nvcc": "/opt/cuda-13.5/bin/nvcc", "root": "/opt/cuda-13.5",
                                                         "cuda": "13.5", "found_in": "CUDA_HOME"}))
    monkeypatch.setattr(resolving_bdist_wheel, "current_resolution", lambda settings: decision)
    seen = {}

    def build(command):
        seen["plan"] = command.distribution.get_command_obj("build_ext").build_plan
        seen["environment"] = dict(os.environ)
    monkeypatch.setattr(resolving_bdist_wheel.bdist_wheel, "run", build)
    environment = dict(os.environ)
    distribution = Distribution({"name": "tiny", "cmdclass": {"build_ext": CudaBuildExt}})
    resolving_bdist_wheel.ResolvingBdistWheel(distribution).run()
    assert seen["plan"] == BuildPlan(cpu_only=False, archs="8.6;9.0", decision=decision)
    assert seen["plan"].decision.toolkit.nvcc == Path("/opt/cuda-13.5/bin/nvcc")
    assert seen["environment"] == environment


def test_native_means_the_gpus_the_probe_found_not_nvidia_smi(tmp_path, monkeypatch, resolver):
    """CULINA_CUDA_ARCHS=native takes the decision's GPUs (what the probe saw when it decided), or,
    in a build with no resolution, the helper's probe now; an nvidia-smi on PATH is never asked."""
    from culina_resolver import cuda_build_ext
    from culina_resolver import install_resolution
    from culina_resolver.cuda_build_ext import BuildPlan
    from culina_resolver.helper_client import Decision

    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\necho 7.5\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    settings = adapter_settings.parse({}, CULINA)
    decided = BuildPlan(cpu_only=False, archs="native",
                        decision=Decision.from_document(decision_document(host={"gpus": ["9.0", "8.6", "9.0"]})))
    assert cuda_build_ext.plan_gpus(decided, settings) == ["9.0", "8.6", "9.0"]
    assert cuda_build_ext.native_archs("CULINA_CUDA_ARCHS", ["9.0", "8.6", "9.0"]) == "8.6;9.0"
    assert cuda_build_ext.plan_gpus(BuildPlan(cpu_only=False, archs="8.0", decision=None), settings) is None

    from culina_resolver import helper_build
    from culina_resolver import prebuilt_wheel

    def built_helper(settings):  # the build's helper, opened afresh for each use as helper_binary does
        return helper_build.Helper(open(resolver, "rb"), resolver, prebuilt_wheel.file_sha256(resolver), "the build's")
    monkeypatch.setattr(install_resolution, "helper_binary", built_helper)
    monkeypatch.setenv("CULINA_OVERRIDE_SM", "8.0,12.0")
    monkeypatch.setenv("CULINA_OVERRIDE_CUDA", "13.0")
    probed = BuildPlan(cpu_only=False, archs="native", decision=None)
    assert cuda_build_ext.plan_gpus(probed, settings) == ["8.0", "12.0"]
    monkeypatch.setenv("CULINA_OVERRIDE_SM", "")
    with pytest.raises(cuda_build_ext.BuildError, match="CULINA_CUDA_ARCHS=native but the probe found no GPU"):
        cuda_build_ext.native_archs("CULINA_CUDA_ARCHS", cuda_build_ext.plan_gpus(probed, settings))
