"""The environment variables the adapter reads, parsed in one place before anything is decided.

Every name is the project's prefix (pyproject.toml, project_config: CULINA_ for culina) and a
suffix. Each variable is declared once. The helper's are declared in its settings table,
resolver/src/settings/settings_table.json (name suffix, type, default, accepted form), which the
helper embeds at compile time and lists by `culina-resolver version --json`; two of them,
<prefix>CACHE_DIR and <prefix>RELEASE_URL, the adapter must parse before any helper exists (where
which helper runs depends on the helper cache; the release URL is filled with the project's when
unset), so it reads their rows from that file at import (HELPER_TABLE) and gives each its parser
here, which accepts and refuses what the helper's does (tests/data/shared_setting_cases.json, run
by both languages' tests). The adapter's own variables, which the helper never reads, are declared
here only. Each variable has one row in variables(): its name, type, default, the form it accepts,
and the parser that turns it into a typed field of AdapterSettings, which also carries the
project's configuration. HOST_VARIABLES declares the host's variables the adapter reads where they
are used; tests/adapter/test_settings_declared.py fails on a read of any other. The backend's hooks
and the setuptools commands call current() first, under adapter_error.exits_with_message, so a
value that cannot be understood stops the install with one line naming the variable, the value and
the accepted form, before the helper runs or a decision is printed. The readers (compile_pool,
helper_build, cuda_build_ext, install_resolution) take their values from here. The helper's other
variables (<prefix>VARIANT, <prefix>OFFLINE, ...) are the helper's alone to parse; it gets the
prefix as an argument.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from pathlib import Path
from typing import Callable, Mapping

from . import cuda_facts
from . import project_config
from .adapter_error import AdapterError
from .project_config import ProjectConfig, redacted
from .resolver_files import SETTINGS_TABLE_FILE

# The helper's settings table: the rows of the helper's variables the adapter parses too, and the
# spellings of a switch, which the adapter's switches take as well.
HELPER_TABLE = json.loads(SETTINGS_TABLE_FILE.read_text())


def _listed(words: list[str]) -> str:
    """["1", "true", "yes", "on"] -> "1, true, yes or on", as the helper lists a switch's words."""
    return " or ".join(filter(None, (", ".join(words[:-1]), words[-1])))

# Suffixes after the project's prefix.
ARCHS = "CUDA_ARCHS"
ACCEPTED_ARCHS = ("'native', 'all', or a list such as '8.0;9.0;10.0+PTX', '80,90', 'sm_90' or '9.0a 12.0f' "
                  "(separated by ';', ',' or spaces)")
# PyTorch's variable for the same list, read when <prefix>CUDA_ARCHS is unset, as torch's own
# extension builds read it (its named forms, 'Ampere', ..., are not taken: numbers say exactly what is built).
TORCH_ARCHS = "TORCH_CUDA_ARCH_LIST"
# The spellings of a switch (the table's switch_words), as pip, uv and systemd take them; empty
# means the default.
SWITCH_STATES = {word: state == "on" for state, words in HELPER_TABLE["switch_words"].items() for word in words}
ACCEPTED_SWITCH = (HELPER_TABLE["switch_forms"].replace("{on}", _listed(HELPER_TABLE["switch_words"]["on"]))
                   .replace("{off}", _listed(HELPER_TABLE["switch_words"]["off"])))
HELPER = "HELPER"
HELPER_CHOICES = ("auto", "source", "prebuilt")
RELEASE_BUILD = "RELEASE_BUILD"  # set by the release scripts: a fat wheel, no resolution
CCACHE = "CCACHE"
# Two of the helper's variables (HELPER_TABLE's rows), parsed here too.
CACHE_DIR = "CACHE_DIR"
RELEASE_URL = "RELEASE_URL"
MAX_JOBS = "MAX_JOBS"  # <prefix>MAX_JOBS, then the unprefixed MAX_JOBS: the first one set bounds the compile pool
JSON_INCLUDE_DIR = "JSON_INCLUDE_DIR"  # building an sdist: where nlohmann/json.hpp is, before the system folders


class SettingError(AdapterError, ValueError):
    """A variable whose value cannot be understood: the message names it and the value, the hint
    the accepted form."""

    def __init__(self, name: str, value: str, problem: str, accepted: str):
        super().__init__(f"{name}={redacted(value)!r} {problem}", f"Accepted: {accepted}")


class ArchSyntaxError(AdapterError, ValueError):
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
    toolkit would refuse; which architectures one nvcc targets is cuda_build_ext.parse_archs' job.
    An entry is written as CMake and torch write it (9.0, 90, 9.0a, 12.0+PTX) or as nvcc names
    the target (sm_90, sm_90a)."""
    entries = [e for e in re.split(r"[;,\s]+", spec) if e]
    if not entries:
        raise ArchSyntaxError("the list is empty")
    targets = []
    for entry in entries:
        match = re.fullmatch(r"(?:sm_(\d+)|(\d+)(?:\.(\d))?)([af]?)(\+PTX)?", entry, re.IGNORECASE)
        if not match:
            raise ArchSyntaxError(f"{entry!r} is not an architecture")
        sm_digits, major, minor, suffix, ptx = match.groups()
        digits = sm_digits or (major + minor if minor is not None else major)
        if len(digits) < 2:
            raise ArchSyntaxError(f"{entry!r} is not an architecture (write 8.0 or 80)")
        suffix = suffix.lower()
        if suffix:
            oldest = cuda_facts.facts()["arch_suffixes"][suffix]["oldest_arch"]
            if int(digits) < int(oldest.replace(".", "")):
                raise ArchSyntaxError(f"{entry!r}: the '{suffix}' variants exist from {oldest} on")
        targets.append(ArchTarget(Arch(digits, suffix), bool(ptx), entry))
    return targets


@dataclasses.dataclass(frozen=True)
class AdapterSettings:
    project: ProjectConfig             # pyproject.toml's configuration (names, prefix, release lists)
    cuda_archs: str | None             # a <prefix>CUDA_ARCHS value ('all', 'native' or a list); None: unset
    cuda_archs_variable: str | None    # the variable cuda_archs came from: <prefix>CUDA_ARCHS or TORCH_CUDA_ARCH_LIST
    max_jobs: tuple[int, str] | None   # (compile jobs, "VAR=value"); None: from the cores and memory
    ccache: bool                       # use ccache when it is installed
    helper: str                        # one of HELPER_CHOICES
    release_build: bool
    cache_dir: Path | None             # <prefix>CACHE_DIR made absolute; None: helper_build.cache_root's default
    release_url: str                   # <prefix>RELEASE_URL, else the project's release URL
    json_include_dir: Path | None      # <prefix>JSON_INCLUDE_DIR (sdist builds); None: the system's folders

    def var(self, suffix: str) -> str:
        """The full name of one of this project's variables: var(ARCHS) -> 'CULINA_CUDA_ARCHS'."""
        return self.project.env_prefix + suffix


@dataclasses.dataclass(frozen=True)
class Variable:
    name: str
    type: str      # what kind of value, in the words of the helper's table ("switch", "path", ...)
    default: str   # what unset means, as `culina-resolver version --json` shows a default
    accepted: str
    # (value, "" when unset; the environment) -> the field's value; ValueError("is ...": what is wrong)
    parse: Callable[[str, Mapping[str, str]], object]
    helper: bool = False  # declared by the helper's table (HELPER_TABLE), not here


def helper_variable(project: ProjectConfig, suffix: str,
                    parse: Callable[[str, Mapping[str, str]], object]) -> Variable:
    """One of the helper's variables as its table declares it, with the adapter's parser; {caller}
    is the project's cache name, as the helper's is the caller's."""
    row = next((row for row in HELPER_TABLE["settings"] if row["suffix"] == suffix), None)
    if row is None:
        raise AdapterError(f"{SETTINGS_TABLE_FILE} declares no {suffix}, which the adapter parses",
                           "restore its row, or reinstall culina-resolver")

    def shown(text: str) -> str:
        return text.replace("{caller}", project.cache_name)

    return Variable(project.env_prefix + suffix, row["type"], shown(row.get("default") or row["unset"]),
                    shown(row["accepted"]), parse, helper=True)


@dataclasses.dataclass(frozen=True)
class HostVariable:
    """A variable of the host, not the project's: read where it is used, as the helper reads its
    host facts (settings/helper_settings.h)."""
    name: str
    type: str
    meaning: str


HOST_VARIABLES = (
    HostVariable("CUDA_HOME", "path", "a CUDA toolkit root, searched first for nvcc"),
    HostVariable("CUDA_PATH", "path", "a CUDA toolkit root, searched after CUDA_HOME"),
    HostVariable("HOME", "path", "the cache root's ~, and its default ~/.cache/<name>"),
    HostVariable("XDG_CACHE_HOME", "path", "the cache root's default when absolute: $XDG_CACHE_HOME/<name>"),
    HostVariable("CXX", "program", "the C++ compiler for the helper, tried before c++, g++ and clang++"),
)


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


def switch(value: str) -> bool | None:
    """A switch's value (SWITCH_STATES, any case, surrounding blanks kept as an error); None: empty."""
    if value == "":
        return None
    if value.lower() not in SWITCH_STATES:
        raise ValueError("is not understood")
    return SWITCH_STATES[value.lower()]


def _ccache(value: str, environ: Mapping[str, str]) -> bool:
    return switch(value) is not False


def _release_build(value: str, environ: Mapping[str, str]) -> bool:
    return switch(value) is True


def _helper(value: str, environ: Mapping[str, str]) -> str:
    choice = value.strip().lower() or "auto"
    if choice not in HELPER_CHOICES:
        raise ValueError("is not understood")
    return choice


def _cache_dir(value: str, environ: Mapping[str, str]) -> Path | None:
    """The helper's rule (fetch_settings.cpp, is_cache_dir_form and resolve_cache_root): absolute
    or under ~ (HOME); ~user and relative paths are refused, not guessed at. The helper refuses a ~
    with no absolute HOME when it resolves the root; here that is at once."""
    if value == "~" or value.startswith("~/"):
        home = environ.get("HOME", "")
        if not os.path.isabs(home):
            raise ValueError("starts with ~ but HOME is not an absolute path")
        return Path(os.path.normpath(os.path.join(home, value[2:])))
    if value and not os.path.isabs(value):
        raise ValueError("is not an absolute path")
    return Path(os.path.normpath(value)) if value else None


def _release_url(value: str, environ: Mapping[str, str]) -> str | None:
    """The helper's rule (release_location.cpp, is_release_location), the value kept as written:
    an http(s) URL with something after the //, an absolute path, or a file:// URL of this machine."""
    if not value:
        return None
    scheme = value[:8].lower()
    if scheme.startswith(("http://", "https://")):
        if len(value) > scheme.index("//") + 2:
            return value
        raise ValueError("names no host")
    if value.startswith("/"):
        return value
    if value[:7].lower() == "file://":
        host, slash, _ = value[7:].partition("/")
        if slash and host.lower() in ("", "localhost"):
            return value
        raise ValueError("is not a folder of this machine (write file:///srv/wheels)")
    raise ValueError("is neither an http(s) URL nor an absolute path")


def _json_include_dir(value: str, environ: Mapping[str, str]) -> Path | None:
    if value and not os.path.isabs(value):
        raise ValueError("is not an absolute path")
    return Path(value) if value else None


def variables(project: ProjectConfig) -> dict[str, tuple[Variable, ...]]:
    """Field of AdapterSettings -> its variables, named with the project's prefix; a field with
    several takes the first one set."""
    prefix = project.env_prefix
    return {
        "cuda_archs": (Variable(prefix + ARCHS, "architectures",
                                "unset: the resolver's decided list (the project's release list for the host)",
                                ACCEPTED_ARCHS, _cuda_archs),
                       Variable(TORCH_ARCHS, "architectures", f"unset: {prefix + ARCHS}'s default",
                                f"{ACCEPTED_ARCHS}; or set {prefix + ARCHS}, which is read first", _cuda_archs)),
        "max_jobs": tuple(Variable(name, "whole number", "unset: from the cores and the memory",
                                   f"a positive whole number of parallel compile jobs, e.g. {name}=4",
                                   _job_limit(name)) for name in (prefix + MAX_JOBS, MAX_JOBS)),
        "ccache": (Variable(prefix + CCACHE, "switch", "on", "a switch: off never uses ccache, on (the default) uses "
                            f"it when installed; {ACCEPTED_SWITCH}", _ccache),),
        "helper": (Variable(prefix + HELPER, "choice", "auto", "auto (default: the sdist's prebuilt helper when it "
                            "runs here, else compile), source (always compile) or prebuilt (never compile)", _helper),),
        "release_build": (Variable(prefix + RELEASE_BUILD, "switch", "off", "a switch: on is the release scripts' "
                                   f"fat-wheel build, no resolution; {ACCEPTED_SWITCH}", _release_build),),
        "cache_dir": (helper_variable(project, CACHE_DIR, _cache_dir),),
        "release_url": (helper_variable(project, RELEASE_URL, _release_url),),
        "json_include_dir": (Variable(prefix + JSON_INCLUDE_DIR, "path", "unset: the system's include folders",
                                      "the absolute path of the folder holding nlohmann/json.hpp, e.g. "
                                      "/opt/json/include", _json_include_dir),),
    }


def parse(environ: Mapping[str, str], project: ProjectConfig) -> AdapterSettings:
    """Every field from the first of its variables that is set and not empty (the later ones are
    not read: TORCH_CUDA_ARCH_LIST is torch's, checked only when it is the one used); a field none
    sets gets its parser's default. The first bad value raises SettingError."""
    fields, sources = {}, {}
    for field, field_variables in variables(project).items():
        chosen = next((v for v in field_variables if environ.get(v.name, "")), field_variables[0])
        value = environ.get(chosen.name, "")
        try:
            fields[field] = chosen.parse(value, environ)
        except ValueError as error:
            raise SettingError(chosen.name, value, str(error), chosen.accepted) from None
        sources[field] = chosen.name if value else None
    fields["release_url"] = fields["release_url"] or project.release_url
    return AdapterSettings(project=project, cuda_archs_variable=sources["cuda_archs"], **fields)


@functools.lru_cache(maxsize=None)
def _parsed(project: ProjectConfig, values: tuple[tuple[str, str | None], ...]) -> AdapterSettings:
    return parse({name: value for name, value in values if value is not None}, project)


def current() -> AdapterSettings:
    """This process's settings; parsed once per set of values (a test may change them)."""
    project = project_config.current()
    names = [v.name for vs in variables(project).values() for v in vs] + ["HOME"]
    return _parsed(project, tuple((name, os.environ.get(name)) for name in names))

