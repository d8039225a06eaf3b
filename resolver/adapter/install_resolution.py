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

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import prebuilt_wheel
import pypi_toolkit
from adapter_settings import RELEASE_URL, AdapterSettings
from helper_build import Helper, HelperBuildError, cache_root, helper_binary, say
from project_config import PROJECT_ROOT

MANIFEST_NAME = "release-manifest.json"
HELPER_TIME_LIMIT_S = 3600  # a safety net: the helper bounds its own probe and each download attempt
EXIT_BAD_INPUT = 2
EXIT_NO_WAY_TO_SERVE = 3
# The helper's log restates its decision: its summary line, and an error table's reason line
# (policy/decision_table.cpp). The adapter states the decision once itself (its "decision:" line,
# or the install's error message, which pip prints last), so pip's output shows each sentence once.
HELPER_SUMMARY = "culina-resolver resolve: decided: "
HELPER_ERROR_TABLE = "decision     error"
HELPER_TABLE_REASON = "reason       "


class ResolutionError(RuntimeError):
    """The install cannot go on; the message says why and what to do."""


@dataclasses.dataclass
class Resolution:
    action: str                  # install_wheel | build_local | build_cpu | error
    reason: str
    wheel_path: Path | None      # the verified wheel in the cache, for install_wheel
    local_build_archs: list[str]
    decision: dict               # the helper's whole decision, for the build record

    @property
    def asset_name(self) -> str | None:
        return (self.decision.get("wheel") or {}).get("file")

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "wheel_path": str(self.wheel_path) if self.wheel_path else None}

    @classmethod
    def from_json(cls, data: dict) -> "Resolution":
        return cls(**{**data, "wheel_path": Path(data["wheel_path"]) if data["wheel_path"] else None})


_current: Resolution | None = None  # one resolution per build process


def current_resolution(settings: AdapterSettings) -> Resolution:
    """This process's resolution: made on first use, or the one adopted from an earlier step."""
    global _current
    if _current is None:
        _current = resolve_install(settings)
    return _current


def adopt(resolution: Resolution) -> None:
    global _current
    _current = resolution


def interpreter_tags() -> list[str]:
    try:
        from packaging import tags  # bundled into the sdist; a source checkout asks the frontend for it
    except ImportError:
        raise ResolutionError(f"the packaging module is not importable by {sys.executable}: with "
                              "--no-build-isolation install it first (pip install packaging)") from None

    return [str(tag) for tag in tags.sys_tags()]


def _manifest_arguments(settings: AdapterSettings) -> list[str]:
    """The sdist's own manifest (trusted for its hashes, so plain http may carry the wheels), or
    the release URL's, which the helper fetches itself (its libcurl path: CA bundle, proxies,
    timeouts, size cap), skips offline and for source builds, and treats as empty on failure. The
    URL itself goes through the helper's environment (helper_environment), never its argv."""
    embedded = PROJECT_ROOT / MANIFEST_NAME
    if embedded.is_file():
        say(f"release manifest: {embedded} (inside the sdist)")
        return ["--manifest", str(embedded), "--allow-http"]
    return ["--manifest-from-release", "--project", settings.project.name, "--project-version", settings.project.version]


def helper_environment(settings: AdapterSettings) -> dict[str, str]:
    """This process's environment with the release URL (the variable's, else pyproject.toml's) as
    <prefix>RELEASE_URL. The URL may carry user:password@ or a ?token=: every local user can read a
    process's argv in /proc/<pid>/cmdline, only its owner and root its environment."""
    return {**os.environ, settings.var(RELEASE_URL): settings.release_url}


def _run_helper(helper: Helper, arguments: list[str], settings: AdapterSettings) -> tuple[int, str, str]:
    """Runs the helper with `arguments`, echoing its stderr as it comes; returns (exit code, stdout, stderr)."""
    process = subprocess.Popen(**helper.popen_arguments(arguments), env=helper_environment(settings),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timed_out = threading.Event()

    def stop():
        timed_out.set()
        process.kill()

    log: list[str] = []

    def echo():
        in_error_table = False
        for line in process.stderr:
            log.append(line)
            in_error_table = in_error_table or line.startswith(HELPER_ERROR_TABLE)
            if line.startswith(HELPER_SUMMARY) or (in_error_table and line.startswith(HELPER_TABLE_REASON)):
                continue
            print(f"  | {line}", end="", file=sys.stderr, flush=True)

    reader = threading.Thread(target=echo, daemon=True)
    timer = threading.Timer(HELPER_TIME_LIMIT_S, stop)
    reader.start()
    timer.start()
    stdout = process.stdout.read()  # stderr belongs to the echo thread alone
    process.wait()
    timer.cancel()
    reader.join()
    if timed_out.is_set():
        raise ResolutionError(f"culina-resolver did not finish within {HELPER_TIME_LIMIT_S} s and was stopped; "
                              f"set {settings.var('VARIANT')}=source to skip the download and build locally")
    return process.returncode, stdout, "".join(log)


def resolve_install(settings: AdapterSettings) -> Resolution:
    config = settings.project
    try:
        helper = helper_binary(settings)
        cache = cache_root(settings)
    except HelperBuildError as error:
        raise ResolutionError(f"{config.name}'s install helper cannot run here: {error}") from error
    with helper, tempfile.TemporaryDirectory(prefix=f"{config.cache_name}-resolve-") as work:
        tags_file = Path(work) / "tags.txt"
        tags_file.write_text("\n".join(interpreter_tags()) + "\n")
        # --default-archs: what a build host (a toolkit, no GPU visible) builds. The helper finds the
        # toolkit, so it gets the newest CUDA major's list and drops what that toolkit cannot target
        # (11.0 for CUDA 12, which leaves the CUDA 12 list).
        # The project's names: its variables (--env-prefix) and its cache folder (--cache-dir).
        command = ["--env-prefix", config.env_prefix, "resolve", *_manifest_arguments(settings),
                   "--tags", str(tags_file), "--cache-dir", str(cache),
                   "--default-archs", config.newest_release_archs, "--json"]
        pypi = pypi_toolkit.installed_root()
        if pypi is not None:
            command += ["--pypi-toolkit", str(pypi)]  # the build would find it too (cuda_build_ext.find_toolkit)
        code, stdout, log = _run_helper(helper, command, settings)
    if code == EXIT_BAD_INPUT or not stdout.strip():
        last = log.strip().splitlines()[-1] if log.strip() else f"exit status {code}"
        raise ResolutionError(f"culina-resolver refused its input: {last}")
    decision = json.loads(stdout)
    resolution = Resolution(
        action=decision["action"], reason=decision["reason"],
        wheel_path=Path(decision["wheel_path"]) if decision.get("wheel_path") else None,
        local_build_archs=decision.get("local_build_archs", []), decision=decision)
    if code == EXIT_NO_WAY_TO_SERVE or resolution.action == "error":
        raise ResolutionError(resolution.reason)
    say(f"decision: {resolution.action} — {resolution.reason}")
    for warning in decision.get("warnings", []):
        say(f"WARNING: {warning}")
    return resolution


def probed_gpus(settings: AdapterSettings) -> list[str]:
    """The compute capability of each GPU the helper's probe finds here (<prefix>CUDA_ARCHS=native in
    a build that made no resolution: `setup.py build_ext`, editable installs)."""
    try:
        helper = helper_binary(settings)
    except HelperBuildError as error:
        raise ResolutionError(f"{settings.project.name}'s install helper cannot run here: {error}") from error
    with helper:
        done = subprocess.run(**helper.popen_arguments(["--env-prefix", settings.project.env_prefix, "probe", "--json"]),
                              capture_output=True, text=True, timeout=HELPER_TIME_LIMIT_S)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ResolutionError(f"culina-resolver probe failed: {last}")
    return [gpu["sm"] for gpu in json.loads(done.stdout)["gpus"]]


def deliver(resolution: Resolution, directory: Path, settings: AdapterSettings) -> Path:
    """Hands the resolution's verified wheel to pip in `directory`, checked again as it is copied.
    A wheel the helper had to fetch into a private folder (the cache could not be trusted) is
    removed with that folder afterwards."""
    try:
        wheel = prebuilt_wheel.deliver(resolution.wheel_path, resolution.asset_name, resolution.decision, directory,
                                       settings.project.build_record_member)
    except prebuilt_wheel.DeliveryError as error:
        raise SystemExit(f"{settings.project.name}: {error}") from None
    finally:
        private = resolution.wheel_path.parent.parent  # <TMPDIR>/culina-wheel-XXXXXX/wheels/<file>
        if resolution.decision.get("wheel_in_private_folder") and private.name.startswith("culina-wheel-"):
            shutil.rmtree(private, ignore_errors=True)
    say(f"installing the prebuilt {resolution.decision['wheel']['variant']} wheel: {wheel.name}")
    return wheel
