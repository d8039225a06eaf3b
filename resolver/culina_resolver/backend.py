"""The PEP 517 build backend of a project that adopts the resolver (culina, which carries it in
its tree, or any project that requires culina-resolver and configures it in pyproject.toml,
docs/ADOPTING.md): setuptools' own, with the resolver in front. The project is the working
directory the frontend runs the hooks in.

A frontend installs the static build requirements before any hook runs. culina has none: most
installs only need the verified wheel the resolver fetches, and what the resolver imports is
bundled into its sdist (bundled_python); another project has culina-resolver, whose dependencies
are those packages. Without build isolation nothing is installed for the build, so each hook
checks first that what it needs imports (require): a missing package ends in one line naming the
pip command, before the helper or the extension is compiled. Every hook parses the adapter's
settings first (adapter_settings), so a bad value stops before anything is decided, and runs under
adapter_error.exits_with_message: a failure ends in one message, never a traceback.
get_requires_for_build_wheel asks the resolver and names the compile toolchain
(LOCAL_BUILD_REQUIRES) only when this host builds locally, with NVIDIA's PyPI toolkit when the
decision says so. When a prebuilt wheel serves, its own metadata and the wheel are the answers to
the next two hooks and setuptools never runs. Sdists, editable installs and release builds always
compile.

Frontends run each hook in a new process: the first hook's resolution is kept in
build/<name>-resolution.json and reused by the later hooks of the same build (same
interpreter, same <prefix>* settings, under an hour old, the chosen wheel still cached). It names
the wheel and the sha256 the later hooks verify it against, so it is written 0600 and atomically,
and read only when it and build/ can have been written by nobody but this user or root.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path

from . import bundled_python

RESOLVER_IMPORTS_OK = bundled_python.make_importable()  # before the modules that need them

from . import adapter_settings  # noqa: E402
from . import install_resolution  # noqa: E402
from . import prebuilt_wheel  # noqa: E402
from . import pypi_toolkit  # noqa: E402
from .adapter_error import AdapterError, exits_with_message  # noqa: E402
from .adapter_settings import AdapterSettings  # noqa: E402
from .helper_build import folder_problem, say  # noqa: E402
from .helper_client import Decision, HelperAnswerError, PypiToolkit  # noqa: E402
from .project_config import project_root  # noqa: E402

# What compiling the extension needs (local wheel builds, sdists, editable installs).
LOCAL_BUILD_REQUIRES = ["setuptools>=68", "wheel", "pybind11>=2.13"]
STATE_MAX_AGE_S = 3600


class BuildRequirementMissing(AdapterError):
    """A package the build needs is not importable in the build environment (--no-build-isolation)."""

    context = "cannot build"


def _requirement_name(requirement: str) -> str:
    """'pybind11>=2.13' -> 'pybind11'."""
    return re.match(r"[A-Za-z0-9_.-]+", requirement.strip()).group(0)


def missing_requirements(requirements: list[str]) -> list[str]:
    """The requirements this interpreter cannot import: a requirement's module is its name; one
    whose environment marker excludes this interpreter is not needed. Markers are evaluated with
    packaging; without it a requirement with a marker is left out (the only one, tomli on Python
    3.10, is named before this runs: reading pyproject.toml needs it)."""
    missing = []
    for requirement in requirements:
        name, _, marker = requirement.partition(";")
        if marker.strip():
            if importlib.util.find_spec("packaging") is None:
                continue
            from packaging.markers import Marker
            if not Marker(marker).evaluate():
                continue
        if importlib.util.find_spec(_requirement_name(name).replace("-", "_")) is None:
            missing.append(requirement.strip())
    return missing


def require(requirements: list[str], needed_for: str) -> None:
    """Raises BuildRequirementMissing naming every requirement missing here and the pip command
    that installs them, before anything is compiled."""
    missing = missing_requirements(requirements)
    if missing:
        names = ", ".join(map(_requirement_name, missing))
        one = len(missing) == 1
        raise BuildRequirementMissing(
            f"{names} {'is' if one else 'are'} not installed in this build environment ({sys.executable}), and "
            f"{needed_for} needs {'it' if one else 'them'}",
            f"Fix: install {'it' if one else 'them'} there first ({sys.executable} -m pip install "
            + " ".join(f'"{r}"' for r in missing) + "), as pip's --no-build-isolation builds with what is installed; "
            "in an isolated build, run the install again (its first step chose a prebuilt wheel that has since left "
            "the cache)")


def _state_file(settings: AdapterSettings) -> Path:
    return project_root() / "build" / f"{settings.project.cache_name}-resolution.json"


def _setuptools_backend(needed_for: str = "compiling the extension"):
    """setuptools' backend, once every local build requirement is importable."""
    require(LOCAL_BUILD_REQUIRES, needed_for)
    from setuptools import build_meta
    return build_meta


def _state_key(settings: AdapterSettings) -> str:
    """What a kept resolution was made for: this interpreter and every <prefix>* variable, as a
    sha256, since a value may carry credentials (<prefix>RELEASE_URL's user:password@, ?token=)."""
    prefix = settings.project.env_prefix
    key = [sys.executable, sorted([k, v] for k, v in os.environ.items() if k.startswith(prefix))]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()


def _resolve(settings: AdapterSettings, fresh: bool) -> Decision:
    """fresh: resolve now; otherwise reuse what an earlier hook of this build kept. A decision
    made here is kept for the later hooks."""
    require(bundled_python.REQUIRES, "choosing the install (the resolver reads the interpreter's wheel tags)")
    state = _state_file(settings)
    earlier = None if fresh else _earlier_decision(settings)
    if earlier is not None:
        install_resolution.adopt(earlier)
        say(f"decision (from this build's first step): {earlier.action} — {earlier.reason}")
        return earlier
    decision = install_resolution.current_resolution(settings)
    try:
        state.parent.mkdir(exist_ok=True)
        prebuilt_wheel.write_own_file(state, json.dumps({"key": _state_key(settings), "time": time.time(),
                                                         "decision": decision.document}))
    except OSError as error:
        say(f"cannot keep the resolution for the later build steps ({error}); they will resolve again")
    return decision


def _kept_state(path: Path) -> dict:
    """The state file's content, read through prebuilt_wheel.open_own_file (this user's or root's,
    one link, writable by no one else) from a folder no one else may write (folder_problem).
    Raises DeliveryError saying why it is not read."""
    problem = folder_problem(str(path.parent), os.lstat(path.parent))
    if problem:
        raise prebuilt_wheel.DeliveryError(problem)
    with prebuilt_wheel.open_own_file(path) as opened:
        return json.loads(opened.read())


def _earlier_decision(settings: AdapterSettings) -> Decision | None:
    path = _state_file(settings)
    if not os.path.lexists(path):
        return None
    try:
        state = _kept_state(path)
    except prebuilt_wheel.DeliveryError as error:
        say(f"not reusing the resolution kept by this build's first step: {error}; resolving again")
        return None
    except (OSError, ValueError):
        return None
    if state.get("key") != _state_key(settings) or time.time() - state.get("time", 0) > STATE_MAX_AGE_S:
        return None
    try:
        decision = Decision.from_document(state.get("decision"))
    except HelperAnswerError:  # kept by another version of the adapter
        return None
    if decision.action == "install_wheel" and not decision.wheel_path.is_file():
        return None
    return decision


def _prebuilt(settings: AdapterSettings) -> Decision | None:
    """The decision when a prebuilt wheel serves this build, else None."""
    if settings.release_build:
        return None
    decision = _resolve(settings, fresh=False)
    return decision if decision.action == "install_wheel" else None


@exits_with_message
def get_requires_for_build_wheel(config_settings=None):
    settings = adapter_settings.current()  # a bad setting stops before the resolver runs
    if not RESOLVER_IMPORTS_OK:
        # A source checkout: no bundle, so the resolver runs in the later hooks, after the
        # frontend installed what it imports; the toolchain comes too, whatever it decides.
        _state_file(settings).unlink(missing_ok=True)
        say("a source checkout (no bundled packaging): asking for it and the compile toolchain")
        return [*bundled_python.REQUIRES, *LOCAL_BUILD_REQUIRES]
    decision = None if settings.release_build else _resolve(settings, fresh=True)
    if decision and decision.action == "install_wheel":
        say("a prebuilt wheel serves this host: no compile toolchain is installed")
        return []
    if decision and isinstance(decision.toolkit, PypiToolkit):
        cuda = decision.toolkit.cuda_at_most
        toolkit = pypi_toolkit.requirements_up_to(cuda)
        say(f"no CUDA toolkit is installed: asking pip for the newest CUDA toolkit from PyPI up to {cuda} "
            f"({', '.join(toolkit)}) with the compile toolchain")
        return [*LOCAL_BUILD_REQUIRES, *toolkit]
    return LOCAL_BUILD_REQUIRES


@exits_with_message
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    settings = adapter_settings.current()
    decision = _prebuilt(settings)
    if decision:
        return prebuilt_wheel.extract_metadata(decision.wheel_path, decision.wheel.sha256, Path(metadata_directory))
    return _setuptools_backend().prepare_metadata_for_build_wheel(metadata_directory, config_settings)


@exits_with_message
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    settings = adapter_settings.current()
    decision = _prebuilt(settings)
    if decision:
        return install_resolution.deliver(decision, Path(wheel_directory), settings).name
    return _setuptools_backend().build_wheel(wheel_directory, config_settings, metadata_directory)


@exits_with_message
def get_requires_for_build_sdist(config_settings=None):
    adapter_settings.current()
    return [*bundled_python.REQUIRES, *LOCAL_BUILD_REQUIRES]


@exits_with_message
def build_sdist(sdist_directory, config_settings=None):
    adapter_settings.current()
    require(bundled_python.REQUIRES, "the sdist (which bundles them)")
    return _setuptools_backend("building the sdist").build_sdist(sdist_directory, config_settings)


@exits_with_message
def get_requires_for_build_editable(config_settings=None):
    adapter_settings.current()
    return [*bundled_python.REQUIRES, *LOCAL_BUILD_REQUIRES]


@exits_with_message
def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    adapter_settings.current()
    return _setuptools_backend().prepare_metadata_for_build_editable(metadata_directory, config_settings)


@exits_with_message
def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    adapter_settings.current()
    return _setuptools_backend().build_editable(wheel_directory, config_settings, metadata_directory)
