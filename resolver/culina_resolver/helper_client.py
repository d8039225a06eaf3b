"""The one module that starts the `culina-resolver` helper, and the one reader of what it answers.

A Helper is the binary opened once and checked on that open file (helper_build chooses and
checks it); it is only ever started from that file. Three questions are asked of it: its
handshake (`version --json`), the GPUs its probe sees (`probe --json`), and the decision for this
install (`resolve --json`); the release tools also have it write the release manifest
(`manifest init|add`, write_manifest). The decision is a versioned JSON document (policy/decision_json.cpp,
docs/ARCHITECTURE.md "The decision"), parsed here once into a frozen Decision; everything after
reads its typed fields. The helper's log streams to stderr as it comes.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO, Mapping

from .adapter_error import AdapterError

HELPER_TIME_LIMIT_S = 3600  # a safety net: the helper bounds its own probe and each download attempt
HANDSHAKE_TIME_LIMIT_S = 10
DECISION_SCHEMA_VERSION = 1  # policy/decision.h, kDecisionSchemaVersion
ACTIONS = ("install_wheel", "build_local", "build_cpu", "error")
# The helper's exit statuses the adapter tells apart (common/error.h; `version --json` lists them all).
EXIT_BAD_INPUT = 2
EXIT_NO_WAY_TO_SERVE = 3
LOG_INDENT = "  | "  # before each line of the helper's log, so pip's output shows whose it is


class HelperAnswerError(AdapterError):
    """The helper refused its input, failed, or answered what the adapter cannot read."""

    context = "cannot install"


@dataclasses.dataclass(frozen=True)
class Helper:
    """A helper binary opened once and checked on that open file, then only ever started from it:
    /proc/self/fd/<fd> as the executable is what glibc's fexecve does, the kernel runs the open
    file itself, so renaming `path` after the checks cannot change what runs."""
    binary: BinaryIO  # the checked binary, open read-only
    path: Path        # where it was opened: for messages and argv[0] only
    sha256: str       # taken on `binary`
    checked: str      # what was verified, for the log

    def popen_arguments(self, arguments: list[str]) -> dict:
        """subprocess.Popen/run keyword arguments that start `helper arguments...` from the open
        file (never 0, 1 or 2: open_own_file's descriptors are 3 or more, so Popen's redirections
        cannot replace it before the exec)."""
        fd = self.binary.fileno()
        return {"args": [str(self.path), *arguments], "executable": f"/proc/self/fd/{fd}", "pass_fds": (fd,)}

    def close(self) -> None:
        self.binary.close()

    def __enter__(self) -> "Helper":
        return self

    def __exit__(self, *_) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class WheelChoice:
    """The manifest entry an install_wheel decision chose."""
    file: str     # the release asset's name
    sha256: str   # what the wheel is verified against wherever it is read
    variant: str  # "cu130", "null"


@dataclasses.dataclass(frozen=True)
class InstalledToolkit:
    """A toolkit on this host that the probe found and ran: the build compiles with this nvcc."""
    nvcc: Path      # canonical
    root: Path      # the folder holding bin/nvcc
    cuda: str       # "13.0"
    found_in: str   # where the probe found it: CUDA_HOME, CUDA_PATH, PATH, PyPI packages, /usr/local/cuda


@dataclasses.dataclass(frozen=True)
class PypiToolkit:
    """No toolkit is installed: the build asks pip for NVIDIA's PyPI packages (pypi_toolkit.py),
    the newest of this CUDA major up to `cuda_at_most`, and compiles with what pip installed."""
    cuda_at_most: str  # "13.0": what the driver runs

    @property
    def major(self) -> int:
        return int(self.cuda_at_most.split(".")[0])


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the helper decided for this install, read once from its document."""
    action: str                           # one of ACTIONS
    reason: str                           # one sentence: why this action
    wheel: WheelChoice | None             # install_wheel: the chosen wheel
    wheel_path: Path | None               # install_wheel: the verified wheel the helper fetched
    local_build_archs: tuple[str, ...]    # the targets of a local build ("9.0")
    toolkit: InstalledToolkit | PypiToolkit | None  # build_local: what compiles; otherwise None
    gpus: tuple[str, ...]                 # what the probe saw, as compute capabilities ("9.0")
    warnings: tuple[str, ...]
    private_folders: tuple[Path, ...]     # made outside the cache: removed once the wheel is delivered
    # The whole document as the helper wrote it, for the build record and the state kept between hooks.
    document: Mapping[str, Any] = dataclasses.field(hash=False, repr=False)

    @classmethod
    def from_document(cls, document: object) -> "Decision":
        """Raises HelperAnswerError naming the field that is missing or not of its form."""
        if not isinstance(document, dict):
            raise _unreadable("the decision", document, "a JSON object")
        version = document.get("schema_version")
        if version != DECISION_SCHEMA_VERSION:
            raise _unreadable("schema_version", version, str(DECISION_SCHEMA_VERSION))
        action = _field(document, "action", str)
        if action not in ACTIONS:
            raise _unreadable("action", action, " or ".join(ACTIONS))
        wheel = _field(document, "wheel", dict, nullable=True)
        wheel_path = _field(document, "wheel_path", str, nullable=True)
        installed = _field(document, "build_toolkit", dict, nullable=True)
        pypi = _field(document, "pypi_toolkit", str, nullable=True)
        toolkit = (InstalledToolkit(Path(_field(installed, "nvcc", str, "build_toolkit.")),
                                    Path(_field(installed, "root", str, "build_toolkit.")),
                                    _field(installed, "cuda", str, "build_toolkit."),
                                    _field(installed, "found_in", str, "build_toolkit."))
                   if installed is not None else PypiToolkit(pypi) if pypi is not None else None)
        if action == "build_local" and toolkit is None:
            raise _unreadable("build_toolkit and pypi_toolkit", None, "a toolkit for a build_local decision")
        if action == "install_wheel" and (wheel is None or wheel_path is None):
            raise _unreadable("wheel and wheel_path", None, "the chosen wheel and its path for an install_wheel decision")
        return cls(
            action=action,
            reason=_field(document, "reason", str),
            wheel=WheelChoice(*(_field(wheel, key, str, "wheel.") for key in ("file", "sha256", "variant")))
            if wheel is not None else None,
            wheel_path=Path(wheel_path) if wheel_path is not None else None,
            local_build_archs=_strings(document, "local_build_archs"),
            toolkit=toolkit,
            gpus=_strings(_field(document, "host", dict), "gpus", "host."),
            warnings=_strings(document, "warnings"),
            private_folders=tuple(Path(folder) for folder in _strings(document, "private_folders")),
            document=document)


def _unreadable(field: str, value: object, expected: str) -> HelperAnswerError:
    return HelperAnswerError(f"the helper's decision has {field} = {json.dumps(value)[:200]}, where the adapter reads "
                             f"{expected}",
                             "Fix: the helper and the adapter come from different sources; install from one unmodified "
                             "sdist (or checkout)")


def _field(document: Mapping[str, Any], key: str, kind: type, where: str = "", nullable: bool = False):
    value = document.get(key)
    if (value is None and nullable) or isinstance(value, kind):
        return value
    raise _unreadable(where + key, value, {str: "a string", dict: "an object", list: "a list"}[kind]
                      + (" or null" if nullable else ""))


def _strings(document: Mapping[str, Any], key: str, where: str = "") -> tuple[str, ...]:
    values = _field(document, key, list, where)
    if not all(isinstance(value, str) for value in values):
        raise _unreadable(where + key, values, "a list of strings")
    return tuple(values)


def _last_line(text: str, code: int) -> str:
    return (text.strip().splitlines() or [f"exit status {code}"])[-1]


def handshake_problem(helper: Helper, expected_hash: str) -> str | None:
    """Runs `helper version --json` from its open file; None when it answers with `expected_hash`."""
    try:
        done = subprocess.run(**helper.popen_arguments(["version", "--json"]), capture_output=True, text=True,
                              timeout=HANDSHAKE_TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        return f"it did not answer its handshake within {HANDSHAKE_TIME_LIMIT_S} s"
    except OSError as error:
        mounted = os.path.isdir("/proc/self/fd")
        return f"it cannot be started here ({error.strerror}{'' if mounted else '; /proc, which runs it, is not mounted'})"
    if done.returncode != 0:
        return f"its handshake failed ({_last_line(done.stderr, done.returncode)})"
    try:
        answered = json.loads(done.stdout)["source_hash"]
    except (ValueError, KeyError, TypeError):
        answered = None
    if not isinstance(answered, str):
        return f"its handshake answer is not understood: {done.stdout.strip()[:200]!r}"
    if answered != expected_hash:
        return f"it answers the handshake with sources {answered[:12] or 'unknown'}, not {expected_hash[:12]}"
    return None


def probed_gpus(helper: Helper, env_prefix: str) -> list[str]:
    """The compute capability of each GPU `probe --json` finds. Raises HelperAnswerError."""
    try:
        done = subprocess.run(**helper.popen_arguments(["--env-prefix", env_prefix, "probe", "--json"]),
                              capture_output=True, text=True, timeout=HELPER_TIME_LIMIT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HelperAnswerError(f"culina-resolver probe ({helper.path}) could not run: {error}") from None
    if done.returncode != 0:
        raise HelperAnswerError(f"culina-resolver probe failed: {_last_line(done.stderr, done.returncode)}")
    try:
        return [str(gpu["sm"]) for gpu in json.loads(done.stdout)["gpus"]]
    except (ValueError, KeyError, TypeError) as error:
        raise HelperAnswerError(f"culina-resolver probe answered what the adapter cannot read ({error!r}): "
                                f"{done.stdout.strip()[:200]!r}") from None


def write_manifest(helper: Helper, arguments: list[str]) -> None:
    """Runs `helper manifest <arguments>` (`init ...` or `add ...`: the release manifest writer).
    Raises HelperAnswerError with the helper's last line when it refuses."""
    try:
        done = subprocess.run(**helper.popen_arguments(["manifest", *arguments]), capture_output=True, text=True,
                              timeout=HELPER_TIME_LIMIT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HelperAnswerError(f"culina-resolver manifest ({helper.path}) could not run: {error}") from None
    if done.returncode != 0:
        raise HelperAnswerError(f"culina-resolver manifest {' '.join(arguments[:1])} refused: "
                                f"{_last_line(done.stderr, done.returncode)}")


def resolve(helper: Helper, arguments: list[str], environment: Mapping[str, str], stop_hint: str) -> Decision:
    """Runs `helper <arguments>` (a `resolve --json --caller-states-decision` command line) with
    `environment`, echoing its log as it comes, and returns its decision, whichever action it is.
    `stop_hint`: what to do when it overruns HELPER_TIME_LIMIT_S. Raises HelperAnswerError when it
    refuses its input or answers nothing readable."""
    try:
        process = subprocess.Popen(**helper.popen_arguments(arguments), env=dict(environment),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as error:
        raise HelperAnswerError(f"culina-resolver ({helper.path}) could not be started: {error.strerror}") from None
    timed_out = threading.Event()

    def stop():
        timed_out.set()
        process.kill()

    log: list[str] = []

    def echo():
        for line in process.stderr:
            log.append(line)
            print(LOG_INDENT + line, end="", file=sys.stderr, flush=True)

    reader = threading.Thread(target=echo, daemon=True)
    timer = threading.Timer(HELPER_TIME_LIMIT_S, stop)
    reader.start()
    timer.start()
    stdout = process.stdout.read()  # stderr belongs to the echo thread alone
    process.wait()
    timer.cancel()
    reader.join()
    if timed_out.is_set():
        raise HelperAnswerError(f"culina-resolver did not finish within {HELPER_TIME_LIMIT_S} s and was stopped",
                                stop_hint)
    if process.returncode == EXIT_BAD_INPUT or not stdout.strip():
        raise HelperAnswerError(f"culina-resolver refused its input: {_last_line(''.join(log), process.returncode)}")
    try:
        document = json.loads(stdout)
    except ValueError as error:
        raise HelperAnswerError(f"culina-resolver answered what is not JSON ({error}): {stdout.strip()[:200]!r}",
                                "Fix: run the install again with -v and report the helper's log") from None
    return Decision.from_document(document)  # exit status EXIT_NO_WAY_TO_SERVE comes with an `error` decision
