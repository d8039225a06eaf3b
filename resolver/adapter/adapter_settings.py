"""The environment variables the adapter owns, parsed in one place before anything is decided.

Each variable has one row in VARIABLES: its name, the form it accepts, and the parser that turns
it into a typed field of AdapterSettings. The backend's hooks and `setup.py bdist_wheel` call
settings_or_exit() first, so a value that cannot be understood stops the install with one line
naming the variable, the value and the accepted form, before the helper runs or a decision is
printed. The readers (compile_pool, helper_build, cuda_build_ext) take their values from here.
The helper's own variables (CULINA_VARIANT, CULINA_OFFLINE, ...) are the helper's to parse.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
from pathlib import Path
from typing import Callable, Mapping

ARCHS_VAR = "CULINA_CUDA_ARCHS"
ACCEPTED_ARCHS = "'native', 'all', or a list such as '8.0;9.0;10.0+PTX', '80;90' or '9.0a'"
HELPER_VAR = "CULINA_HELPER"
HELPER_CHOICES = ("auto", "source", "prebuilt")
RELEASE_BUILD_VAR = "CULINA_RELEASE_BUILD"  # set by the release scripts: a fat wheel, no resolution
CCACHE_VAR = "CULINA_CCACHE"
CACHE_DIR_VAR = "CULINA_CACHE_DIR"
MAX_JOBS_VARS = ("CULINA_MAX_JOBS", "MAX_JOBS")  # the first one set bounds the compile pool


class SettingError(ValueError):
    """A variable whose value cannot be understood; the message names it, the value and the fix."""

    def __init__(self, name: str, value: str, problem: str, accepted: str):
        super().__init__(f"{name}={value!r} {problem}. Accepted: {accepted}")


class ArchSyntaxError(ValueError):
    """An architecture list that no toolkit could accept; the message says which entry and why."""


@dataclasses.dataclass(frozen=True)
class Arch:
    """One target: compute capability digits ("90"), suffix ("", "a", "f")."""

    digits: str
    suffix: str = ""

    @property
    def label(self) -> str:
        return f"{self.digits[:-1]}.{self.digits[-1]}{self.suffix}"


@dataclasses.dataclass(frozen=True)
class ArchTarget:
    arch: Arch
    ptx: bool     # "+PTX": PTX for it as well as SASS
    entry: str    # as written, for messages


def arch_list(spec: str) -> list[ArchTarget]:
    """The entries of an architecture list (separated by ';', ',' or spaces), checked for what any
    toolkit would refuse; which architectures one nvcc targets is cuda_build_ext.parse_archs' job."""
    entries = [e for e in re.split(r"[;,\s]+", spec) if e]
    if not entries:
        raise ArchSyntaxError("the list is empty")
    targets = []
    for entry in entries:
        match = re.fullmatch(r"(\d+)(?:\.(\d))?([af]?)(\+PTX)?", entry, re.IGNORECASE)
        if not match:
            raise ArchSyntaxError(f"{entry!r} is not an architecture")
        major, minor, suffix, ptx = match.groups()
        digits = major + minor if minor is not None else major
        if len(digits) < 2:
            raise ArchSyntaxError(f"{entry!r} is not an architecture (write 8.0 or 80)")
        suffix = suffix.lower()
        if suffix == "a" and int(digits) < 90 or suffix == "f" and int(digits) < 100:
            raise ArchSyntaxError(f"{entry!r}: the '{suffix}' variants exist from {'9.0' if suffix == 'a' else '10.0'} on")
        targets.append(ArchTarget(Arch(digits, suffix), bool(ptx), entry))
    return targets


@dataclasses.dataclass(frozen=True)
class AdapterSettings:
    cuda_archs: str | None             # a CULINA_CUDA_ARCHS value ('all', 'native' or a list); None: unset
    max_jobs: tuple[int, str] | None   # (compile jobs, "VAR=value"); None: from the cores and memory
    ccache: bool                       # use ccache when it is installed
    helper: str                        # one of HELPER_CHOICES
    release_build: bool
    cache_dir: Path | None             # CULINA_CACHE_DIR made absolute; None: helper_build.cache_root's default


@dataclasses.dataclass(frozen=True)
class Variable:
    name: str
    accepted: str
    # (value, "" when unset; the environment) -> the field's value; ValueError("is ...": what is wrong)
    parse: Callable[[str, Mapping[str, str]], object]


def _cuda_archs(value: str, environ: Mapping[str, str]) -> str | None:
    spec = value.strip()
    if spec not in ("", "all", "native"):
        try:
            arch_list(spec)
        except ArchSyntaxError as error:
            raise ValueError(f"is not understood: {error}") from None
    return spec or None


def _job_limit(name: str) -> Callable[[str, Mapping[str, str]], tuple[int, str] | None]:
    def parse(value: str, environ: Mapping[str, str]) -> tuple[int, str] | None:
        if value and (not value.isdigit() or int(value) < 1):
            raise ValueError("is not a positive whole number")
        return (int(value), f"{name}={value}") if value else None
    return parse


def _zero_or_one(value: str) -> str:
    if value not in ("", "0", "1"):
        raise ValueError("is not understood")
    return value


def _ccache(value: str, environ: Mapping[str, str]) -> bool:
    return _zero_or_one(value) != "0"


def _release_build(value: str, environ: Mapping[str, str]) -> bool:
    return _zero_or_one(value) == "1"


def _helper(value: str, environ: Mapping[str, str]) -> str:
    choice = value.strip().lower() or "auto"
    if choice not in HELPER_CHOICES:
        raise ValueError("is not understood")
    return choice


def _cache_dir(value: str, environ: Mapping[str, str]) -> Path | None:
    """The helper's rule (fetch_settings.cpp, resolve_cache_root): absolute or under ~ (HOME);
    ~user and relative paths are refused, not guessed at."""
    if value == "~" or value.startswith("~/"):
        home = environ.get("HOME", "")
        if not os.path.isabs(home):
            raise ValueError("starts with ~ but HOME is not an absolute path")
        return Path(os.path.normpath(os.path.join(home, value[2:])))
    if value and not os.path.isabs(value):
        raise ValueError("is not an absolute path")
    return Path(os.path.normpath(value)) if value else None


# field of AdapterSettings -> its variables; a field with several takes the first one set.
VARIABLES = {
    "cuda_archs": (Variable(ARCHS_VAR, ACCEPTED_ARCHS, _cuda_archs),),
    "max_jobs": tuple(Variable(name, f"a positive whole number of parallel compile jobs, e.g. {name}=4",
                               _job_limit(name)) for name in MAX_JOBS_VARS),
    "ccache": (Variable(CCACHE_VAR, "0 (never use ccache) or 1 (use it when installed, the default)",
                        _ccache),),
    "helper": (Variable(HELPER_VAR, "auto (default: the sdist's prebuilt helper when it runs here, else compile), "
                        "source (always compile) or prebuilt (never compile)", _helper),),
    "release_build": (Variable(RELEASE_BUILD_VAR, "1 (the release scripts' fat-wheel build, no resolution) or 0",
                               _release_build),),
    "cache_dir": (Variable(CACHE_DIR_VAR, "an absolute path such as /var/cache/culina, or ~/.cache/culina (~ is "
                           "your HOME; ~user and relative paths are refused)", _cache_dir),),
}


def parse(environ: Mapping[str, str]) -> AdapterSettings:
    """Every variable of VARIABLES checked; the first bad one raises SettingError."""
    fields = {}
    for field, variables in VARIABLES.items():
        values = []
        for variable in variables:
            value = environ.get(variable.name, "")
            try:
                values.append(variable.parse(value, environ))
            except ValueError as error:
                raise SettingError(variable.name, value, str(error), variable.accepted) from None
        fields[field] = next((v for v in values if v is not None), None)
    return AdapterSettings(**fields)


@functools.lru_cache(maxsize=None)
def _parsed(values: tuple[tuple[str, str | None], ...]) -> AdapterSettings:
    return parse({name: value for name, value in values if value is not None})


def current() -> AdapterSettings:
    """This process's settings; parsed once per set of values (a test may change them)."""
    names = [v.name for variables in VARIABLES.values() for v in variables] + ["HOME"]
    return _parsed(tuple((name, os.environ.get(name)) for name in names))


def settings_or_exit() -> AdapterSettings:
    """current(), or the install stops with the bad setting in one line and no traceback."""
    try:
        return current()
    except SettingError as error:
        raise SystemExit(f"culina: {error}") from None
