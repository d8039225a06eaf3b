"""The seam between the adapter and the helper (resolver/culina_resolver/helper_client.py): the decision
document read once into a typed Decision (a document of another version, or missing a field, is
one clear error); the real helper's `resolve` read through it, its log leaving the decision's
summary and an error's reason to the adapter; the decision's toolkit taken by the build with no
search; and every adapter error ending a hook as one line with its hint."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "resolver"))
from culina_resolver import cuda_build_ext  # noqa: E402
from culina_resolver import helper_client  # noqa: E402
from culina_resolver import prebuilt_wheel  # noqa: E402
from culina_resolver.adapter_error import AdapterError, exits_with_message  # noqa: E402
from culina_resolver.helper_client import Decision, HelperAnswerError, InstalledToolkit, PypiToolkit  # noqa: E402

TAG = "cp312-cp312-manylinux_2_28_x86_64"


def document(**fields) -> dict:
    return {"schema_version": 1, "action": "build_local", "reason": "no wheel fits", "wheel": None, "wheel_path": None,
            "local_build_archs": ["9.0"], "build_toolkit": None, "pypi_toolkit": "13.0", "host": {"gpus": ["9.0"]},
            "warnings": [], "private_folders": [], **fields}


def fake_nvcc(folder: Path, script: str) -> Path:
    nvcc = folder / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n" + script)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return nvcc


WORKING = "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n"


def test_the_document_is_read_into_typed_fields():
    installed = Decision.from_document(document(pypi_toolkit=None, build_toolkit={
        "nvcc": "/opt/cuda/bin/nvcc", "root": "/opt/cuda", "cuda": "13.0", "found_in": "CUDA_HOME"}))
    assert installed.toolkit == InstalledToolkit(Path("/opt/cuda/bin/nvcc"), Path("/opt/cuda"), "13.0", "CUDA_HOME")
    assert installed.local_build_archs == ("9.0",) and installed.gpus == ("9.0",)
    assert Decision.from_document(document()).toolkit == PypiToolkit("13.0")
    wheel = Decision.from_document(document(action="install_wheel", pypi_toolkit=None, wheel_path="/c/wheels/w.whl",
                                            wheel={"file": "w.whl", "sha256": "a" * 64, "variant": "cu130"},
                                            private_folders=["/tmp/culina-wheel-x"]))
    assert wheel.wheel == helper_client.WheelChoice("w.whl", "a" * 64, "cu130")
    assert wheel.private_folders == (Path("/tmp/culina-wheel-x"),) and wheel.toolkit is None


@pytest.mark.parametrize("change, named", [
    ({"schema_version": 2}, "schema_version = 2, where the adapter reads 1"),
    ({"action": "build"}, 'action = "build", where the adapter reads install_wheel or build_local'),
    ({"host": {}}, "host.gpus = null, where the adapter reads a list"),
    ({"pypi_toolkit": None}, "build_toolkit and pypi_toolkit = null, where the adapter reads a toolkit"),
    ({"action": "install_wheel"}, "wheel and wheel_path = null"),
    ({"build_toolkit": {"nvcc": "/x/bin/nvcc", "cuda": "13.0", "found_in": "PATH"}}, "build_toolkit.root = null"),
])
def test_a_document_the_adapter_cannot_read_is_one_error_naming_the_field(change, named):
    with pytest.raises(HelperAnswerError) as refused:
        Decision.from_document(document(**change))
    assert named in refused.value.message
    assert refused.value.hint.startswith("Fix: the helper and the adapter come from different sources")


def run_resolve(resolver: Path, tmp_path: Path, capsys, **env: str) -> tuple[Decision, str]:
    """The real helper's `resolve`, as install_resolution runs it, with an empty manifest."""
    manifest, tags = tmp_path / "manifest.json", tmp_path / "tags.txt"
    manifest.write_text('{"schema_version": 1, "name": "culina", "version": "0.1.0", "wheels": []}')
    tags.write_text(TAG + "\n")
    toolkit = tmp_path / "toolkit"
    nvcc = fake_nvcc(toolkit, WORKING)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CULINA_") and k not in ("CUDA_HOME", "CUDA_PATH")}
    environment = {**clean, "CULINA_OVERRIDE_CUDA": "13.0", "CULINA_OVERRIDE_SM": "9.0",
                   "PATH": f"{nvcc.parent}{os.pathsep}{clean['PATH']}", **env}
    helper = helper_client.Helper(open(resolver, "rb"), resolver, prebuilt_wheel.file_sha256(resolver), "the build's")
    with helper:
        decision = helper_client.resolve(helper, ["resolve", "--manifest", str(manifest), "--tags", str(tags),
                                                  "--cache-dir", str(tmp_path / "cache"), "--json",
                                                  "--caller-states-decision"], environment, "Fix: none")
    return decision, capsys.readouterr().err


def test_the_helpers_decision_names_the_toolkit_it_ran_and_where(resolver, tmp_path, capsys):
    decision, log = run_resolve(resolver, tmp_path, capsys, CULINA_VARIANT="source")
    assert decision.action == "build_local" and decision.local_build_archs == ("9.0",)
    nvcc = (tmp_path / "toolkit" / "bin" / "nvcc").resolve()
    assert decision.toolkit == InstalledToolkit(nvcc, nvcc.parent.parent, "13.0", "PATH")
    assert decision.document["schema_version"] == 1 and decision.private_folders == ()
    assert f"{helper_client.LOG_INDENT}decision     build_local" in log  # the evidence is echoed ...
    assert "decided:" not in log  # ... the summary is the adapter's to state


def test_an_error_decisions_reason_is_left_to_the_adapter(resolver, tmp_path, capsys):
    decision, log = run_resolve(resolver, tmp_path, capsys, CULINA_VARIANT="cu118")
    assert decision.action == "error" and "cu118" in decision.reason
    assert "decision     error" in log and decision.reason not in log


def test_the_build_takes_the_decided_toolkit_and_searches_nothing(tmp_path, monkeypatch):
    """CUDA_HOME and PATH name a broken nvcc, which a search would take first."""
    broken = fake_nvcc(tmp_path / "broken", "exit 127\n")
    monkeypatch.setenv("CUDA_HOME", str(broken.parent.parent))
    monkeypatch.setenv("PATH", f"{broken.parent}{os.pathsep}{os.environ['PATH']}")
    decided = fake_nvcc(tmp_path / "decided", WORKING)
    installed = Decision.from_document(document(pypi_toolkit=None, build_toolkit={
        "nvcc": str(decided), "root": str(decided.parent.parent), "cuda": "13.0", "found_in": "CUDA_PATH"}))
    toolkit = cuda_build_ext.decided_toolkit(installed)
    assert toolkit.nvcc == decided and toolkit.source == "the resolver's probe, in CUDA_PATH"

    site = tmp_path / "site"
    pypi = fake_nvcc(site / "nvidia" / "cu13", WORKING)
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    toolkit = cuda_build_ext.decided_toolkit(Decision.from_document(document(pypi_toolkit="13.2")))
    assert toolkit.nvcc == pypi and toolkit.source == "PyPI packages" and toolkit.version == "13.0"


def test_a_pypi_toolkit_missing_or_newer_than_decided_is_named_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p and not list(Path(p).glob("nvidia/cu*/bin/nvcc"))])
    with pytest.raises(cuda_build_ext.BuildError) as missing:
        cuda_build_ext.decided_toolkit(Decision.from_document(document(pypi_toolkit="13.0")))
    assert "NVIDIA's PyPI packages (up to 13.0), which this build environment does not have" in missing.value.message
    assert missing.value.hint.startswith("Fix: with --no-build-isolation install it first: pip install nvidia-cuda-nvcc>=13.0,<13.1")

    site = tmp_path / "site"
    fake_nvcc(site / "nvidia" / "cu13", "echo 'Cuda compilation tools, release 13.2, V13.2.1'\n")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    with pytest.raises(cuda_build_ext.BuildError, match=r"is CUDA 13\.2; the resolver decided CUDA 13 up to 13\.0"):
        cuda_build_ext.decided_toolkit(Decision.from_document(document(pypi_toolkit="13.0")))


def test_an_installed_toolkit_gone_since_the_decision_is_named(tmp_path):
    gone = tmp_path / "gone" / "bin" / "nvcc"
    decision = Decision.from_document(document(pypi_toolkit=None, build_toolkit={
        "nvcc": str(gone), "root": str(gone.parent.parent), "cuda": "13.0", "found_in": "PATH"}))
    with pytest.raises(cuda_build_ext.BuildError, match=f"decided a build with {gone} \\(found in PATH\\), which is no "
                                                        "longer there. Fix: run the install again"):
        cuda_build_ext.decided_toolkit(decision)


class Refused(AdapterError):
    context = "cannot install"


@pytest.mark.parametrize("error, line", [
    (Refused("the helper refused X='y'", "Fix: unset X"), "culina: cannot install: the helper refused X='y'. Fix: unset X"),
    (prebuilt_wheel.DeliveryError("w.whl has sha256 1"), "culina: w.whl has sha256 1"),
    (cuda_build_ext.BuildError("`nvcc --version` failed"), "culina: cannot build: `nvcc --version` failed"),
])
def test_every_hook_ends_an_adapter_error_in_one_line(error, line):
    @exits_with_message
    def hook():
        raise error

    with pytest.raises(SystemExit) as ended:
        hook()
    assert ended.value.code == line
    assert ended.value.__cause__ is None and ended.value.__suppress_context__


def test_the_wheels_private_folder_is_removed_once_delivered(tmp_path, monkeypatch):
    """The helper names the folder it made outside the cache; the adapter removes exactly that."""
    from culina_resolver import install_resolution

    private = tmp_path / "culina-wheel-abc123"
    (private / "wheels").mkdir(parents=True)
    wheel = private / "wheels" / "w.whl"
    wheel.write_bytes(b"wheel")
    decision = Decision.from_document(document(action="install_wheel", pypi_toolkit=None, wheel_path=str(wheel),
                                               wheel={"file": "w.whl", "sha256": "a" * 64, "variant": "cu130"},
                                               private_folders=[str(private)]))
    delivered = []
    monkeypatch.setattr(prebuilt_wheel, "deliver", lambda path, asset, sha256, *rest, cache_root: delivered.append(
        (path, asset, sha256)) or tmp_path / asset)
    from culina_resolver import adapter_settings
    install_resolution.deliver(decision, tmp_path / "dist", adapter_settings.parse({}, adapter_settings.project_config
                                                                                   .ProjectConfig.load(REPO)))
    assert delivered == [(wheel, "w.whl", "a" * 64)]
    assert not private.exists() and tmp_path.exists()
