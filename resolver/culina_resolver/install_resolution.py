"""Asks the helper what this install should be: a verified prebuilt wheel, a local build (and
for which architectures), a CPU-only build, or an error that says what is missing.

Inputs: the release manifest (inside the sdist when it came from a release; otherwise the
helper fetches it from the release URL, and with none at all decides from an empty one how to
build), this interpreter's wheel tags (packaging.tags, best first), and the adapter's settings
(pyproject.toml's table and the project's variables). The helper is given the project's variable
prefix, so it reads <prefix>VARIANT and the rest, never another project's. Its log streams to
stderr, which `pip install -v` shows.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import helper_client
from . import prebuilt_wheel
from . import pypi_toolkit
from .adapter_error import AdapterError
from .adapter_settings import RELEASE_URL, AdapterSettings
from .helper_build import HelperBuildError, cache_root, helper_binary, say
from .helper_client import Decision, Helper
from .project_config import project_root

MANIFEST_NAME = "release-manifest.json"


class ResolutionError(AdapterError):
    """The install cannot go on; the message says why and what to do."""

    context = "cannot install"


_current: Decision | None = None  # one decision per build process


def current_resolution(settings: AdapterSettings) -> Decision:
    """This process's decision: made on first use, or the one adopted from an earlier step."""
    global _current
    if _current is None:
        _current = resolve_install(settings)
    return _current


def adopt(decision: Decision) -> None:
    global _current
    _current = decision


def interpreter_tags() -> list[str]:
    try:
        from packaging import tags  # bundled into the sdist; a source checkout asks the frontend for it
    except ImportError:
        raise ResolutionError(f"the packaging module is not importable by {sys.executable}",
                              "Fix: with --no-build-isolation install it first (pip install packaging)") from None

    return [str(tag) for tag in tags.sys_tags()]


def _manifest_arguments(settings: AdapterSettings) -> list[str]:
    """The sdist's own manifest (trusted for its hashes, so plain http may carry the wheels), or
    the release URL's, which the helper fetches itself (its libcurl path: CA bundle, proxies,
    timeouts, size cap), skips offline and for source builds, and treats as empty on failure. The
    URL itself goes through the helper's environment (helper_environment), never its argv."""
    embedded = project_root() / MANIFEST_NAME
    if embedded.is_file():
        say(f"release manifest: {embedded} (inside the sdist)")
        return ["--manifest", str(embedded), "--allow-http"]
    return ["--manifest-from-release", "--project", settings.project.name, "--project-version", settings.project.version]


def helper_environment(settings: AdapterSettings) -> dict[str, str]:
    """This process's environment with the release URL (the variable's, else pyproject.toml's) as
    <prefix>RELEASE_URL. The URL may carry user:password@ or a ?token=: every local user can read a
    process's argv in /proc/<pid>/cmdline, only its owner and root its environment."""
    return {**os.environ, settings.var(RELEASE_URL): settings.release_url}


def _helper(settings: AdapterSettings) -> Helper:
    try:
        return helper_binary(settings)
    except HelperBuildError as error:
        raise ResolutionError(f"{settings.project.name}'s install helper cannot run here: {error}") from None


def resolve_install(settings: AdapterSettings) -> Decision:
    config = settings.project
    helper = _helper(settings)
    try:
        cache = cache_root(settings)
    except HelperBuildError as error:
        helper.close()
        raise ResolutionError(f"{config.name}'s install helper cannot run here: {error}") from None
    with helper, tempfile.TemporaryDirectory(prefix=f"{config.cache_name}-resolve-") as work:
        tags_file = Path(work) / "tags.txt"
        tags_file.write_text("\n".join(interpreter_tags()) + "\n")
        # --default-archs: what a build host (a toolkit, no GPU visible) builds. The helper finds the
        # toolkit, so it gets the newest CUDA major's list and drops what that toolkit cannot target
        # (11.0 for CUDA 12, which leaves the CUDA 12 list).
        # The project's names: its variables (--env-prefix) and its cache folder (--cache-dir).
        # --caller-states-decision: the decision line below and the error pip prints last say it once.
        command = ["--env-prefix", config.env_prefix, "resolve", *_manifest_arguments(settings),
                   "--tags", str(tags_file), "--cache-dir", str(cache),
                   "--default-archs", config.newest_release_archs, "--json", "--caller-states-decision"]
        pypi = pypi_toolkit.installed_root()
        if pypi is not None:
            command += ["--pypi-toolkit", str(pypi)]  # in the probe's search, after PATH
        decision = helper_client.resolve(helper, command, helper_environment(settings),
                                         f"Fix: set {settings.var('VARIANT')}=source to skip the download and build locally")
    if decision.action == "error":
        raise ResolutionError(decision.reason)
    say(f"decision: {decision.action} — {decision.reason}")
    for warning in decision.warnings:
        say(f"WARNING: {warning}")
    return decision


def probed_gpus(settings: AdapterSettings) -> list[str]:
    """The compute capability of each GPU the helper's probe finds here (<prefix>CUDA_ARCHS=native in
    a build that made no resolution: `setup.py build_ext`, editable installs)."""
    with _helper(settings) as helper:
        return helper_client.probed_gpus(helper, settings.project.env_prefix)


def deliver(decision: Decision, directory: Path, settings: AdapterSettings) -> Path:
    """Hands the decision's verified wheel to pip in `directory`, checked again as it is copied.
    The folders the helper made outside the cache (the cache could not be trusted) are removed
    afterwards."""
    try:
        wheel = prebuilt_wheel.deliver(decision.wheel_path, decision.wheel.file, decision.wheel.sha256,
                                       dict(decision.document), directory, settings.project.build_record_member,
                                       cache_root=cache_root(settings))
    finally:
        for folder in decision.private_folders:
            shutil.rmtree(folder, ignore_errors=True)
    say(f"installing the prebuilt {decision.wheel.variant} wheel: {wheel.name}")
    return wheel
