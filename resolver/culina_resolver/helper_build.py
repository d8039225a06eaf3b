"""Finds or builds the `culina-resolver` helper for this install.

In order (<prefix>HELPER, CULINA_HELPER for culina, picks which may serve):
1. the prebuilt helper for this platform that the culina-resolver wheel or a release sdist carries
   (resolver_files.PREBUILT_DIR), used only
   when its platform and C library fit, its sha256 is the one recorded beside it, the recorded
   source hash is that of the sources carried beside it, and it answers `version --json` with
   that same hash: then no compiler is needed at all;
2. a helper this user compiled earlier, from <prefix>CACHE_DIR/helper/<key> (the key hashes the
   sources, the compiler's identity and the flags), used only from a cache that passes the cache
   trust rule (cache_trust_problem) and only when its sha256 is the one recorded beside it when it
   was compiled and it answers `version --json` with the sources' hash;
3. compiling it now: a unity build in a few translation units (parsing nlohmann/json once per
   unit dominates the cost), at -Og (the cheap optimisations) but for SHA-256, which hashes whole
   wheels; the release's prebuilt helper is built once, so all of it at -O2.

<prefix>HELPER=auto (default) tries them in that order; `source` skips the prebuilt helper (for
packagers who ship no binaries they did not build); `prebuilt` never compiles.

Whichever serves is a helper_client.Helper: the binary opened once by descriptor, checked on that
descriptor (owner, mode, sha256, handshake) and started only from it (helper_client is the one
module that starts it), so no path an attacker could rename between the check and the use is
ever executed.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import BinaryIO, Callable

from . import prebuilt_wheel
from . import project_config
from . import resolver_files
from .adapter_error import AdapterError
from .adapter_settings import CACHE_DIR, HELPER, AdapterSettings
from .helper_client import Helper, handshake_problem

SOURCE_DIR = resolver_files.SOURCE_DIR
BUNDLED_INCLUDE = resolver_files.BUNDLED_DIR  # nlohmann/json.hpp, added to an sdist when it is built
PREBUILT_DIR = resolver_files.PREBUILT_DIR    # helpers built by the release jobs
PREBUILT_RECORD = "helpers.json"
PREBUILT_SCHEMA_VERSION = 1
HELPER_NAME = "culina-resolver"
COMPILED_RECORD = "culina-resolver.json"  # beside a compiled helper: the sha256 it had when it was built
COMPILED_RECORD_SIZE_LIMIT = 4096
# Never a cache root, even for root, who owns them (a cache writes wheels/ and helper/ into its
# root): /, these top-level folders, and the folders directly in /usr and /var, as the helper's
# rule has them (fetch/wheel_cache.cpp, is_system_folder).
SYSTEM_TOP_FOLDERS = frozenset({"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt",
                                "opt", "proc", "root", "run", "sbin", "srv", "sys", "tmp", "usr", "var"})
SYSTEM_PARENT_FOLDERS = frozenset({"usr", "var"})
LINK_LIMIT = 40  # symbolic links followed in one path, as the kernel follows at most
CREATED_FOLDERS_LIMIT = 64  # folders the cache trust rule creates for one cache, at most

# Translation units of the unity build, compiled in parallel. Each unit parses nlohmann/json,
# which dominates, so a machine of few cores gets two units of similar cost (folders not named
# land in the last); one of four cores or more gets a unit per folder, finishing sooner.
FEW_CORES_UNITS = (("cli", "manifest"), ("common", "fetch", "host", "policy", "probe"))
MANY_CORES = 4
# Compiled apart at -O2: hashing a several-hundred-MiB wheel is the one place where speed shows.
OPTIMISED_SOURCES = ("common/sha256.cpp",)
# The rest of a compile on the user's machine: -Og keeps the optimisations that cost little
# compile time (13.3 s at -O1 against 11.4 s, 2 cores); probing and choosing take milliseconds.
FALLBACK_LEVEL = "-Og"
RELEASE_LEVEL = "-O2"  # a prebuilt helper is compiled once per release
# Release helpers run on hosts with another libstdc++ or none; glibc stays dynamic, since dlopen
# of libcuda, libcurl and zlib needs the system's own. Stripped: the sdist carries one per platform.
PORTABLE_LINK_FLAGS = ["-static-libstdc++", "-static-libgcc", "-s"]


class HelperBuildError(AdapterError):
    """No helper can serve this install; the message names what is missing and the fix."""

    context = "cannot install"


def say(message: str) -> None:
    print(f"[{project_config.current().name} resolver] {message}", file=sys.stderr, flush=True)


def cache_root(settings: AdapterSettings) -> Path:
    """The rule the helper applies to its wheel cache (fetch_settings.cpp, resolve_cache_root), with
    the project's names: <prefix>CACHE_DIR (parsed by adapter_settings), else
    $XDG_CACHE_HOME/<name> when absolute, else $HOME/.cache/<name>. The helper is given this root."""
    if settings.cache_dir is not None:
        return settings.cache_dir
    home, xdg = os.environ.get("HOME", ""), os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(os.path.normpath(xdg)) / settings.project.cache_name
    if not home:
        raise HelperBuildError(f"no cache directory: {settings.var(CACHE_DIR)}, XDG_CACHE_HOME and HOME are all "
                               f"unset; set {settings.var(CACHE_DIR)} to a writable folder")
    return Path(os.path.normpath(home)) / ".cache" / settings.project.cache_name


def platform_name() -> str:
    """linux-x86_64, linux-aarch64: what a prebuilt helper is recorded for."""
    return sysconfig.get_platform()


def glibc_version() -> tuple[int, int] | None:
    """This process's glibc, or None for another C library (musl)."""
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
        return (int(version.split(".")[0]), int(version.split(".")[1])) if name == "glibc" else None
    except (ValueError, OSError, AttributeError, IndexError):
        return None


def source_hash(source_dir: Path = SOURCE_DIR) -> str:
    """SHA-256 of the helper's sources: what a prebuilt helper must have been built from."""
    digest = hashlib.sha256()
    for path in sorted(source_dir.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(source_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def folder_problem(path: str, info: os.stat_result) -> str | None:
    """A folder on the way to a cache, or one that holds a file we trust (build/ of the kept
    resolution): this user's or root's, and writable by neither group nor others, unless it is
    root's and sticky (/tmp: nobody may rename or delete what is not theirs)."""
    if not stat.S_ISDIR(info.st_mode):
        kinds = {stat.S_IFREG: "a file", stat.S_IFLNK: "a symbolic link"}
        what = kinds.get(stat.S_IFMT(info.st_mode), "a special file")
        return f"{path} is {what}, not a folder"
    if info.st_uid not in (os.geteuid(), 0):
        return f"{path} belongs to user id {info.st_uid}, neither this user ({os.geteuid()}) nor root"
    sticky_root = info.st_uid == 0 and info.st_mode & stat.S_ISVTX
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_root:
        return f"{path} may be written by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _own_folder_problem(path: str, info: os.stat_result) -> str | None:
    """The cache root and the folders in it: this user's (euid) alone."""
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link, which a cache never follows inside its root"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is {'a file' if stat.S_ISREG(info.st_mode) else 'a special file'}, not a folder"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to user id {info.st_uid}, not to this user ({os.geteuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} may be written by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _is_system_folder(path: str) -> bool:
    parts = [part for part in path.split("/") if part]
    return (not parts or (len(parts) == 1 and parts[0] in SYSTEM_TOP_FOLDERS)
            or (len(parts) == 2 and parts[0] in SYSTEM_PARENT_FOLDERS))


def _walk_to_root(root: str) -> tuple[str, list[str], str | None]:
    """Walks `root` from / with lstat: (the folder its existing part resolves to, the names still
    missing below that folder, why the existing part cannot be trusted or None)."""
    resolved, pending, links = "/", root.split("/"), 0
    problem = folder_problem("/", os.lstat("/"))
    while pending and not problem:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        path = os.path.join(resolved, name)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return resolved, [name, *pending], None
        except OSError as error:
            return resolved, [], f"{path} cannot be examined ({error.strerror})"
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if info.st_uid not in (os.geteuid(), 0):
                return resolved, [], (f"{path} is a symbolic link that belongs to user id {info.st_uid}, neither this "
                                      f"user ({os.geteuid()}) nor root")
            if links > LINK_LIMIT:
                return resolved, [], f"{root} passes through more than {LINK_LIMIT} symbolic links"
            target = os.readlink(path)
            resolved = "/" if target.startswith("/") else resolved
            pending = [*target.split("/"), *pending]
            continue
        resolved = path
        problem = folder_problem(path, info)
    return resolved, [], problem


def cache_trust_problem(root: Path, inside: tuple[str, ...]) -> str | None:
    """The cache trust rule, the helper's too (the shared cases: tests/data/cache_trust_cases.json).
    `root` is walked from / with lstat: a symbolic link on the way must be this user's or root's,
    and the walk goes on through its target; every folder on the way must be this user's or root's
    and writable by neither group nor others, unless root's and sticky (/tmp). The folder reached
    must be this user's alone, and no system folder (SYSTEM_TOP_FOLDERS; as given, and as resolved
    with its missing part before anything is created); the folders `inside` it (helper/<key>) must
    be this user's alone and no links. What is missing is created (0700), one folder at a time, only
    once everything above it has passed; nothing is created for a cache that is refused. None when
    the cache may be used, else why not."""
    given = os.path.normpath(os.path.join(os.getcwd(), root))
    system = "a system folder (/, its top-level folders and those directly in /usr and /var), which never holds a cache"
    if _is_system_folder(given):
        return f"{given} is {system}"
    for _ in range(CREATED_FOLDERS_LIMIT + 1):  # each round creates a folder or ends
        resolved, missing, problem = _walk_to_root(given)
        if problem:
            return problem
        # With the missing part: a link to /usr and a missing name under it is /usr/<name>.
        intended = os.path.normpath(os.path.join(resolved, *missing))
        if _is_system_folder(intended):
            return f"{given} leads to {intended}, {system}"
        if missing:
            created = os.path.join(resolved, missing[0])
        else:
            try:
                problem = _own_folder_problem(resolved, os.lstat(resolved))
            except OSError as error:
                return f"{resolved} cannot be examined ({error.strerror})"
            for name in inside:
                if problem:
                    return problem
                resolved = os.path.join(resolved, name)
                try:
                    problem = _own_folder_problem(resolved, os.lstat(resolved))
                except FileNotFoundError:
                    created = resolved
                    break
                except OSError as error:
                    return f"{resolved} cannot be examined ({error.strerror})"
            else:
                return problem
        try:
            os.mkdir(created, 0o700)
        except FileExistsError:
            pass  # made meanwhile: the next round examines it
        except OSError as error:
            return f"{created} cannot be created ({error.strerror})"
    return f"{root} keeps changing while it is examined"


def opened_helper(binary: Path, sources: str, expected_sha256: str | None = None, record: Path | None = None) -> Helper:
    """`binary` opened by descriptor (prebuilt_wheel.open_own_file's checks: a regular file of this
    user or root, one link, nobody else may write it), its sha256 taken on that descriptor and,
    when `record` gives one, compared with `expected_sha256`; then made executable and its
    handshake (`version --json` answering `sources`) run from that same open file.
    Raises HelperBuildError naming the file and what failed."""
    if expected_sha256 is None:
        opened, digest = _opened_and_hashed(binary)
    else:
        try:
            opened = prebuilt_wheel.open_verified(binary, expected_sha256, f"its record {record}")
        except prebuilt_wheel.DeliveryError as error:
            raise HelperBuildError(str(error)) from None
        digest = expected_sha256.lower()
    source = f"as {record.name} gives" if record else "taken as it was built"
    return _handshaken(opened, binary, digest, source, sources)


def _opened_and_hashed(binary: Path) -> tuple[BinaryIO, str]:
    """`binary` through prebuilt_wheel.open_own_file and its sha256 taken on that descriptor."""
    try:
        opened = prebuilt_wheel.open_own_file(binary)
    except prebuilt_wheel.DeliveryError as error:
        raise HelperBuildError(str(error)) from None
    try:
        return opened, prebuilt_wheel.sha256_of(opened)
    except OSError as error:
        opened.close()
        raise HelperBuildError(f"{binary} cannot be read ({error.strerror})") from None


def _handshaken(opened: BinaryIO, binary: Path, digest: str, source: str, sources: str) -> Helper:
    """The Helper of the open, hashed `binary` once it is executable and answers its handshake
    with `sources`; otherwise closed, and HelperBuildError says why."""
    helper = Helper(opened, binary, digest, f"{binary} (sha256 {digest[:12]} {source}; handshake checked)")
    try:
        mode = os.fstat(opened.fileno()).st_mode
        if not mode & stat.S_IXUSR:
            os.fchmod(opened.fileno(), stat.S_IMODE(mode) | stat.S_IXUSR)
        problem = handshake_problem(helper, sources)
    except OSError as error:
        problem = f"it cannot be made executable ({error.strerror})"
    if problem:
        helper.close()
        raise HelperBuildError(f"{binary}: {problem}")
    return helper


def prebuilt_helper(sources: str, folder: Path = PREBUILT_DIR) -> tuple[Helper | None, str]:
    """(the prebuilt helper for this host in `folder`, what was checked) or (None, why it cannot serve)."""
    record_path = folder / PREBUILT_RECORD
    if not record_path.is_file():
        return None, f"{resolver_files.origin()} carries no prebuilt helper (a source checkout or a development sdist)"
    try:
        record = json.loads(record_path.read_text())
        entries = {entry["platform"]: entry for entry in record["helpers"]}
        if record["schema_version"] != PREBUILT_SCHEMA_VERSION:
            raise ValueError(f"schema_version {record['schema_version']}")
    except (OSError, ValueError, KeyError, TypeError) as error:
        return None, f"its record {record_path} is not readable ({error})"
    entry = entries.get(platform_name())
    if entry is None:
        return None, f"it carries helpers for {', '.join(sorted(entries)) or 'no platform'}, not {platform_name()}"
    binary = folder / entry["file"]
    if entry["source_hash"] != sources:
        return None, f"{binary.name} was built from other sources than {resolver_files.origin()} carries (modified sources)"
    needed = tuple(int(part) for part in entry["glibc"].split("."))
    have = glibc_version()
    if have is None or have < needed:
        found = f"glibc {have[0]}.{have[1]}" if have else "a C library other than glibc"
        return None, f"{binary.name} needs glibc {entry['glibc']} or newer, this host has {found}"
    try:
        helper = opened_helper(binary, sources, entry["sha256"], record_path)
    except HelperBuildError as error:
        return None, str(error)
    return helper, f"{helper.checked} for {entry['platform']}, glibc {entry['glibc']}+"


def find_compiler() -> str | None:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def run_compiler(compiler: str, arguments: list[str], source: str | None = None) -> subprocess.CompletedProcess:
    """`compiler arguments...` (with `source` on its stdin); a compiler that cannot be started is a
    HelperBuildError naming it, not a traceback."""
    try:
        return subprocess.run([compiler, *arguments], input=source, capture_output=True, text=True)
    except OSError as error:
        raise HelperBuildError(f"the C++ compiler {compiler} cannot be run ({error.strerror})",
                               "Fix: set CXX to a working C++17 compiler (Debian/Ubuntu: apt-get install g++)") from None


def _has_header(compiler: str, header: str, include_dirs: list[str]) -> bool:
    probe = run_compiler(compiler, ["-std=c++17", "-x", "c++", "-fsyntax-only", *[f"-I{d}" for d in include_dirs], "-"],
                         f"#include <{header}>\n")
    return probe.returncode == 0


def _cpuinfo_flags(compiler: str, portable: bool) -> tuple[list[str], list[str]]:
    """cpuinfo is optional: used when both its header and library are here. A portable helper
    takes it only as a static archive, since the hosts it runs on need not have the library."""
    if not _has_header(compiler, "cpuinfo.h", []):
        return [], []
    library = ["-Wl,-Bstatic", "-lcpuinfo", "-Wl,-Bdynamic"] if portable else ["-lcpuinfo"]
    link = run_compiler(compiler, ["-x", "c++", "-", *library, "-o", os.devnull],
                        "#include <cpuinfo.h>\nint main(){return cpuinfo_initialize()?0:1;}\n")
    return (["-DCULINA_HAVE_CPUINFO=1"], library) if link.returncode == 0 else ([], [])


def build_settings(compiler: str, sources: str, portable: bool = False) -> tuple[list[str], list[str]]:
    """(compile flags, link flags) for this machine."""
    include_dirs = [str(SOURCE_DIR)]
    if BUNDLED_INCLUDE.is_dir():
        include_dirs.append(str(BUNDLED_INCLUDE))
    if not _has_header(compiler, "nlohmann/json.hpp", include_dirs[1:]):
        raise HelperBuildError(f"nlohmann/json.hpp not found for {compiler}: install it (Debian/Ubuntu: "
                               "apt-get install nlohmann-json3-dev), or build from the released sdist, which bundles it")
    cpuinfo_compile, cpuinfo_link = _cpuinfo_flags(compiler, portable)
    compile_flags = ["-std=c++17", *[f"-I{d}" for d in include_dirs], f'-DCULINA_HELPER_SOURCE_HASH="{sources}"',
                     *cpuinfo_compile]
    return compile_flags, [*cpuinfo_link, *(PORTABLE_LINK_FLAGS if portable else []), "-ldl", "-lpthread"]


# The data files the helper embeds at compile time: (template under SOURCE_DIR, its placeholder, data file).
EMBEDDED_FILES = (("facts/cuda_facts_text.h.in", "@CULINA_CUDA_FACTS_JSON@", "facts/cuda_facts.json"),
                  ("settings/settings_table_text.h.in", "@CULINA_SETTINGS_TABLE_JSON@", "settings/settings_table.json"))


def write_generated_headers(folder: Path) -> None:
    """Each template of EMBEDDED_FILES filled with its data file, as resolver/CMakeLists.txt's
    configure_file writes it. All of them are under SOURCE_DIR, so source_hash covers them."""
    for template, placeholder, data in EMBEDDED_FILES:
        text = (SOURCE_DIR / template).read_text().replace(placeholder, (SOURCE_DIR / data).read_text())
        (folder / Path(template).name.removesuffix(".in")).write_text(text)


def unity_units(work: Path, cores: int, level: str) -> list[tuple[Path, str]]:
    """(translation unit, optimisation level): one unit including each group's sources at `level`,
    and the speed-critical sources on their own at -O2."""
    sources = [p.relative_to(SOURCE_DIR).as_posix() for p in sorted(SOURCE_DIR.rglob("*.cpp"))]
    sources = [source for source in sources if source not in OPTIMISED_SOURCES]
    if cores >= MANY_CORES:
        folders = sorted({source.split("/")[0] for source in sources})
        groups = [[s for s in sources if s.split("/")[0] == folder] for folder in folders]
    else:
        groups = [[] for _ in FEW_CORES_UNITS]
        for source in sources:
            index = next((i for i, unit in enumerate(FEW_CORES_UNITS) if source.split("/")[0] in unit), -1)
            groups[index].append(source)
    units = []
    for number, members in enumerate(groups):
        unit = work / f"unity-{number}.cpp"
        unit.write_text("".join(f'#include "{member}"\n' for member in members))
        units.append((unit, level))
    return [*units, *((SOURCE_DIR / source, RELEASE_LEVEL) for source in OPTIMISED_SOURCES)]


def compile_helper(compiler: str, target: Path, sources: str, portable: bool = False) -> None:
    """Builds the helper into `target` (atomically: a concurrent reader sees none or all of it)."""
    import concurrent.futures  # only for a build: the prebuilt and cached paths skip its import time

    compile_flags, link_flags = build_settings(compiler, sources, portable)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        work = Path(tmp)
        write_generated_headers(work)
        compile_flags = [*compile_flags, f"-I{work}"]
        cores = os.cpu_count() or 1
        units = unity_units(work, cores, RELEASE_LEVEL if portable else FALLBACK_LEVEL)

        def compile_unit(numbered):
            number, (unit, level) = numbered
            obj = work / f"{number}.o"
            done = run_compiler(compiler, [*compile_flags, level, "-c", str(unit), "-o", str(obj)])
            return unit, obj, done

        objects = []
        with concurrent.futures.ThreadPoolExecutor(min(len(units), cores)) as pool:
            for unit, obj, done in pool.map(compile_unit, enumerate(units)):
                if done.returncode != 0:
                    raise HelperBuildError(f"compiling {unit.name} of {HELPER_NAME} with {compiler} failed:\n"
                                           f"{done.stderr[-4000:]}")
                objects.append(obj)
        staged = work / HELPER_NAME
        link = run_compiler(compiler, [*map(str, objects), *link_flags, "-o", str(staged)])
        if link.returncode != 0:
            raise HelperBuildError(f"linking {HELPER_NAME} with {compiler} failed:\n{link.stderr[-4000:]}")
        os.replace(staged, target)


def cache_key(compiler: str, sources: str) -> str:
    """Sources and compiler identity. Optional extras found at build time (cpuinfo) are not part
    of it: a helper built without them stays valid, so a warm install probes nothing."""
    digest = hashlib.sha256()
    identity = run_compiler(compiler, ["--version"]).stdout
    for part in (compiler, identity, str(BUNDLED_INCLUDE.is_dir()), sources):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


def _uncached_folder(settings: AdapterSettings) -> Path:
    """A private folder for this install's helper in the temporary folder (TMPDIR, as tempfile
    chooses it), used only when it passes the cache trust rule: whoever may write a folder above it
    could rename it away during the compile and plant a binary that would then run as this user."""
    temporary = tempfile.gettempdir()
    folder = tempfile.mkdtemp(prefix=f"{settings.project.cache_name}-helper-", dir=temporary)
    problem = cache_trust_problem(Path(folder), ())
    if problem:
        try:
            os.rmdir(folder)
        except OSError:
            pass  # no longer the empty folder made above: what is there now is not ours to delete
        raise HelperBuildError(f"cannot build the helper in the private folder {folder} (in TMPDIR, {temporary}): "
                               f"{problem}. Fix: set TMPDIR to a folder that only you (or root) may write")
    atexit.register(shutil.rmtree, folder, True)
    return Path(folder)


def _cached_helper(folder: Path, sources: str) -> tuple[Helper | None, str | None]:
    """(the helper compiled earlier into `folder`, None) when it has the sha256 its record gives and
    answers its handshake; (None, why it is not used); (None, None) when there is none."""
    binary, record_path = folder / HELPER_NAME, folder / COMPILED_RECORD
    if not os.path.lexists(binary):
        return None, None
    if not os.path.lexists(record_path):
        return None, f"{record_path} is missing, so its sha256 cannot be checked (compiled by an earlier version)"
    try:
        with prebuilt_wheel.open_own_file(record_path) as opened:
            expected = json.loads(opened.read(COMPILED_RECORD_SIZE_LIMIT))["sha256"]
    except prebuilt_wheel.DeliveryError as error:
        return None, f"its record: {error}"
    except OSError as error:
        return None, f"{record_path} cannot be read ({error.strerror})"
    except (ValueError, KeyError, TypeError) as error:
        return None, f"{record_path} is not a record of its sha256 ({error})"
    try:
        opened, digest = _opened_and_hashed(binary)
    except HelperBuildError as error:
        return None, str(error)
    if digest != str(expected).lower():
        opened.close()
        return None, (f"{binary} has sha256 {digest} but {record_path.name} says {expected}: it is not what was "
                      "compiled there")
    try:
        return _handshaken(opened, binary, digest, f"as {record_path.name} gives", sources), None
    except HelperBuildError as error:
        return None, str(error)


def compiled_helper(sources: str, why_not_prebuilt: str, settings: AdapterSettings) -> Helper:
    """The helper this user compiled for these sources, from the cache or built now (into the
    cache, or into a private folder for this install when the cache cannot be trusted)."""
    compiler = find_compiler()
    if compiler is None:
        raise HelperBuildError(
            f"no C++ compiler found (CXX, c++, g++, clang++) to build {settings.project.name}'s install helper, and "
            f"the prebuilt helper cannot serve: {why_not_prebuilt}. Fix: install a compiler (Debian/Ubuntu: apt-get "
            f"install g++), or install from a release sdist (pip install {settings.project.name}), which carries a "
            "prebuilt helper for linux-x86_64 and linux-aarch64")
    root, key = cache_root(settings), cache_key(compiler, sources)
    problem = cache_trust_problem(root, ("helper", key))
    if problem:
        say(f"WARNING: not using the helper cache: {problem}. Building a private copy for this install "
            f"(set {settings.var(CACHE_DIR)} to a folder only you can write, in folders only you or root can write)")
        folder = _uncached_folder(settings)
    else:
        folder = root / "helper" / key
        helper, why_not = _cached_helper(folder, sources)
        if helper is not None:
            say(f"helper from the cache: {helper.checked}")
            return helper
        if why_not:
            say(f"the cached helper is not used: {why_not}; building it again")
    target = folder / HELPER_NAME
    say(f"building the helper with {compiler} (a unity build) -> {target}")
    started = time.monotonic()
    compile_helper(compiler, target, sources)
    helper = opened_helper(target, sources)
    prebuilt_wheel.write_own_file(folder / COMPILED_RECORD, json.dumps({"sha256": helper.sha256}))
    say(f"helper built in {time.monotonic() - started:.1f} s")
    return helper


def helper_binary(settings: AdapterSettings) -> Helper:
    """The helper for these sources, as <prefix>HELPER allows; logs which one and why."""
    choice, variable = settings.helper, settings.var(HELPER)
    sources = source_hash()
    if choice == "source":
        return compiled_helper(sources, f"{variable}=source asks to compile it", settings)
    helper, checked = prebuilt_helper(sources)
    if helper is not None:
        say(f"prebuilt helper from {resolver_files.origin()}: {checked}")
        return helper
    if choice == "prebuilt":
        raise HelperBuildError(f"{variable}=prebuilt, but the prebuilt helper from {resolver_files.origin()} cannot serve: {checked}. "
                               f"Fix: unset {variable} (or set it to source) to compile the helper here")
    say(f"prebuilt helper not used: {checked}")
    return compiled_helper(sources, checked, settings)


def build_prebuilt(folder: Path, log: Callable[[str], None] = say) -> Helper:
    """The release's helper for this platform: compiled portable (static libstdc++) into
    folder/<platform>/, recorded in folder/helpers.json with its sha256, the source hash and the
    glibc it was linked against. Returns it once it answered its handshake."""
    compiler = find_compiler()
    if compiler is None:
        raise HelperBuildError("no C++ compiler found (CXX, c++, g++, clang++) to build the release's prebuilt helper")
    libc = glibc_version()
    if libc is None:
        raise HelperBuildError("the release's prebuilt helper must be built against glibc (a manylinux container)")
    sources = source_hash()
    platform = platform_name()
    binary = folder / platform / HELPER_NAME
    started = time.monotonic()
    compile_helper(compiler, binary, sources, portable=True)
    try:
        helper = opened_helper(binary, sources)
    except HelperBuildError as error:
        raise HelperBuildError(f"the prebuilt helper just built cannot serve: {error}") from None
    entry = {"platform": platform, "file": f"{platform}/{HELPER_NAME}", "sha256": helper.sha256,
             "source_hash": sources, "glibc": f"{libc[0]}.{libc[1]}",
             "compiler": run_compiler(compiler, ["--version"]).stdout.splitlines()[0]}
    write_prebuilt_record(folder, [entry])
    log(f"prebuilt helper for {platform} (glibc {entry['glibc']}+) built in {time.monotonic() - started:.1f} s: {binary}")
    return helper


def write_prebuilt_record(folder: Path, entries: list[dict]) -> None:
    record = {"schema_version": PREBUILT_SCHEMA_VERSION, "helpers": sorted(entries, key=lambda e: e["platform"])}
    (folder / PREBUILT_RECORD).write_text(json.dumps(record, indent=2) + "\n")


def merge_prebuilt(folders: list[Path], target: Path) -> list[str]:
    """Gathers the helpers of several release jobs into `target` (one per platform, each checked
    against its job's record and the sources here). Returns the platforms."""
    sources = source_hash()
    entries: dict[str, dict] = {}
    for folder in folders:
        record_path = folder / PREBUILT_RECORD
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError) as error:
            raise HelperBuildError(f"{record_path} cannot be read ({error}): download each job's whole artifact")
        for entry in record["helpers"]:
            binary = folder / entry["file"]
            if entry["source_hash"] != sources:
                raise HelperBuildError(f"{binary} was built from other helper sources than this checkout's: "
                                       "rebuild the release from one commit")
            if not binary.is_file() or prebuilt_wheel.file_sha256(binary) != entry["sha256"]:
                raise HelperBuildError(f"{binary} is missing or differs from {record_path}: the artifact was "
                                       "altered or mixed up between jobs; rebuild it")
            if entry["platform"] in entries:
                continue  # every job of one platform builds it; one serves
            (target / entry["platform"]).mkdir(parents=True, exist_ok=True)
            shutil.copy2(binary, target / entry["file"])
            entries[entry["platform"]] = entry
    write_prebuilt_record(target, list(entries.values()))
    return sorted(entries)
