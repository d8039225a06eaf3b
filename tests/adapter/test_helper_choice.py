"""Which install helper serves (resolver/culina_resolver/helper_build.py): the sdist's prebuilt one when
it fits and proves itself, else the user's own cache, else a compile; CULINA_HELPER narrows that.

Each test lays out an sdist-like tree (resolver/culina_resolver, resolver/src and, where wanted,
resolver/prebuilt) and asks for the helper in a fresh interpreter with a PATH that holds no
compiler unless the test gives it one (the cache is keyed by the compiler's identity, so finding
a cached helper needs one too). The prebuilt "helper" is a script that answers the
handshake as the real one does; the real prebuilt is checked in tests/install. Whichever serves
must run from the file that was checked: a swap after the checks, a cached helper that is not
what was compiled, or a cache another user could swap never runs."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HELPER = "culina-resolver"
NOBODY = pwd.getpwnam("nobody")  # "another user": the tests run as root


def make_tree(root: Path) -> Path:
    for part in ("culina_resolver", "src"):
        shutil.copytree(REPO / "resolver" / part, root / "resolver" / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", root)  # the adapter's configuration: names and prefix
    return root


def source_hash(tree: Path) -> str:
    return ask(tree, "from culina_resolver import helper_build; print(helper_build.source_hash())").stdout.strip()


def add_prebuilt(tree: Path, answer_hash: str | None = None, platform: str | None = None,
                 recorded_hash: str | None = None, corrupt: bool = False, exit_status: int = 0) -> Path:
    """A prebuilt helper and its record. By default everything fits this host and these sources."""
    sources = source_hash(tree)
    platform = platform or sysconfig.get_platform()
    folder = tree / "resolver" / "prebuilt"
    binary = folder / platform / HELPER
    binary.parent.mkdir(parents=True)
    answer = json.dumps({"source_hash": answer_hash or sources, "compiler": "test", "cpuinfo": False})
    binary.write_text(f"#!/bin/sh\necho '{answer}'\nexit {exit_status}\n")
    binary.chmod(0o755)
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()
    if corrupt:
        binary.write_text(binary.read_text() + "# changed after the release\n")
    entry = {"platform": platform, "file": f"{platform}/{HELPER}", "sha256": digest,
             "source_hash": recorded_hash or sources, "glibc": "2.17", "compiler": "test"}
    (folder / "helpers.json").write_text(json.dumps({"schema_version": 1, "helpers": [entry]}))
    return binary


def ask(tree: Path, code: str, cache: Path | None = None, compiler: bool = False, **env: str):
    """Runs `code` with the tree's adapter importable; PATH holds a compiler only when asked."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CULINA_") and k != "CXX"}
    clean["PATH"] = os.environ["PATH"] if compiler else str(tree / "empty-bin")
    (tree / "empty-bin").mkdir(exist_ok=True)
    clean["CULINA_CACHE_DIR"] = str(cache or tree / "cache")
    clean["PYTHONPATH"] = str(tree / "resolver")
    clean.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=tree, env=clean,
                          capture_output=True, text=True, timeout=300)


def helper_for(tree: Path, **kwargs):
    return ask(tree, "from culina_resolver import adapter_settings, helper_build; "
                     "print(helper_build.helper_binary(adapter_settings.current()).path)", **kwargs)


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory) -> Path:
    """A helper compiled from these sources once for the session: the compile path's cache."""
    tree = make_tree(tmp_path_factory.mktemp("warm"))
    cache = tmp_path_factory.mktemp("helper-cache")
    done = helper_for(tree, cache=cache, compiler=True, CULINA_HELPER="source")
    assert done.returncode == 0, done.stderr
    assert "helper built in" in done.stderr
    return cache


@pytest.fixture
def tree(tmp_path) -> Path:
    return make_tree(tmp_path / "sdist")


@pytest.fixture
def cache(tmp_path, warm_cache) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(warm_cache, copy, symlinks=True)
    return copy


def test_a_fitting_prebuilt_helper_serves_without_any_compiler(tree):
    binary = add_prebuilt(tree)
    done = helper_for(tree)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(binary)
    assert "prebuilt helper from the sdist" in done.stderr and "as helpers.json gives; handshake checked" in done.stderr
    assert not (tree / "cache" / "helper").exists()


@pytest.mark.parametrize("defect, why", [
    ({"platform": "linux-riscv64"}, f"carries helpers for linux-riscv64, not {sysconfig.get_platform()}"),
    ({"corrupt": True}, "helpers.json says"),
    ({"recorded_hash": "0" * 64}, "built from other sources than the sdist carries"),
    ({"answer_hash": "f" * 64}, "answers the handshake with sources ffffffffffff"),
    ({"answer_hash": 5}, "its handshake answer is not understood: '{\"source_hash\": 5"),
    ({"exit_status": 1}, "its handshake failed"),
])
def test_a_prebuilt_helper_that_cannot_serve_is_passed_over_for_the_cache(tree, cache, defect, why):
    add_prebuilt(tree, **defect)
    done = helper_for(tree, cache=cache, compiler=True)
    assert done.returncode == 0, done.stderr
    assert "prebuilt helper not used: " in done.stderr and why in done.stderr
    assert "helper from the cache" in done.stderr
    assert Path(done.stdout.strip()).parent.parent == cache / "helper"


def test_no_compiler_and_no_usable_prebuilt_names_both_and_the_fix(tree):
    add_prebuilt(tree, corrupt=True)
    done = helper_for(tree)
    assert done.returncode != 0
    assert "no C++ compiler found" in done.stderr
    assert "helpers.json says" in done.stderr and "changed after it was verified" in done.stderr
    assert "apt-get install g++" in done.stderr


def test_source_choice_compiles_even_beside_a_fitting_prebuilt(tree, cache):
    add_prebuilt(tree)
    done = helper_for(tree, cache=cache, compiler=True, CULINA_HELPER="source")
    assert done.returncode == 0, done.stderr
    assert "helper from the cache" in done.stderr
    assert "prebuilt helper from the sdist" not in done.stderr


def test_prebuilt_choice_never_compiles(tree, cache):
    done = helper_for(tree, cache=cache, compiler=True, CULINA_HELPER="prebuilt")
    assert done.returncode != 0
    assert "CULINA_HELPER=prebuilt" in done.stderr and "carries no prebuilt helper" in done.stderr
    assert "helper from the cache" not in done.stderr


def test_a_malformed_choice_is_refused_naming_the_variable(tree):
    done = helper_for(tree, CULINA_HELPER="sometimes")
    assert done.returncode != 0
    assert "CULINA_HELPER='sometimes' is not understood" in done.stderr and "auto" in done.stderr


def test_a_cache_others_can_write_is_not_used(tree, cache):
    """A planted helper in a cache folder someone else can write must never run: the helper is
    built privately for this install instead."""
    (key,) = (cache / "helper").iterdir()
    planted = key / HELPER
    planted.write_text("#!/bin/sh\necho planted >&2\nexit 7\n")
    (cache / "helper").chmod(0o777)
    done = helper_for(tree, cache=cache, compiler=True)
    assert done.returncode == 0, done.stderr
    assert "WARNING: not using the helper cache" in done.stderr and "may be written by group or others" in done.stderr
    built = Path(done.stdout.strip())
    assert cache not in built.parents
    assert "planted" not in done.stderr


@pytest.mark.parametrize("env, expected", [
    ({"CULINA_CACHE_DIR": "/srv/cache/../culina/"}, "/srv/culina"),
    ({"CULINA_CACHE_DIR": "~/c", "HOME": "/home/u"}, "/home/u/c"),
    ({"CULINA_CACHE_DIR": "~", "HOME": "/home/u"}, "/home/u"),
    ({"XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/culina"),
    ({"XDG_CACHE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.cache/culina"),
    ({"HOME": "/home/u"}, "/home/u/.cache/culina"),
    ({"CULINA_CACHE_DIR": "cache", "HOME": "/home/u"}, "CULINA_CACHE_DIR='cache' is not an absolute path"),
    ({"CULINA_CACHE_DIR": "~other/c", "HOME": "/home/u"}, "CULINA_CACHE_DIR='~other/c' is not an absolute path"),
    ({"CULINA_CACHE_DIR": "~/c", "HOME": ""}, "starts with ~ but HOME is not an absolute path"),
    ({}, "no cache directory"),
])
def test_the_cache_root_follows_the_helpers_rule(tree, env, expected):
    """The same cases as fetch_settings_test.cpp's resolve_cache_root tests: both languages must
    put the cache in one place."""
    clean = {k: v for k, v in os.environ.items() if k not in ("CULINA_CACHE_DIR", "XDG_CACHE_HOME", "HOME")}
    done = subprocess.run([sys.executable, "-c", "from culina_resolver import adapter_settings, helper_build; "
                           "print(helper_build.cache_root(adapter_settings.current()))"],
                          cwd=tree, env={**clean, "PYTHONPATH": str(tree / "resolver"), **env}, capture_output=True,
                          text=True)
    assert expected in (done.stdout.strip() if done.returncode == 0 else done.stderr)
    assert (done.returncode == 0) == expected.startswith("/")


def swap_after_check_then_probe(tree: Path, checked_line: str, target: Path, attacker: Path, **kwargs):
    """Asks for the helper and probes with it, as a build's CUDA_ARCHS=native does
    (install_resolution.probed_gpus); the moment the adapter logs `checked_line` (its checks are
    done) `attacker` is renamed over `target`, as an attacker who can write the folder would."""
    code = (f"import os\nfrom culina_resolver import adapter_settings, helper_build, install_resolution\n"
            f"log = helper_build.say\n"
            f"def say(message):\n"
            f"    log(message)\n"
            f"    if message.startswith({checked_line!r}):\n"
            f"        os.replace({str(attacker)!r}, {str(target)!r})\n"
            f"helper_build.say = say\n"
            f"print(install_resolution.probed_gpus(adapter_settings.current()))\n")
    return ask(tree, code, CULINA_OVERRIDE_SM="9.0", CULINA_OVERRIDE_CUDA="13.0", **kwargs)


def attacker_binary(folder: Path, marker: Path) -> Path:
    """What an attacker renames into place: it leaves `marker` when it runs and claims an sm_66 GPU."""
    binary = folder / "attacker"
    binary.write_text(f"#!/bin/sh\necho ran > {marker}\necho '{{\"gpus\": [{{\"sm\": \"6.6\"}}]}}'\n")
    binary.chmod(0o755)
    return binary


def test_a_cached_helper_swapped_after_its_check_never_runs(tree, cache, tmp_path):
    (key,) = (cache / "helper").iterdir()
    marker = tmp_path / "attacker-ran"
    done = swap_after_check_then_probe(tree, "helper from the cache", key / HELPER,
                                       attacker_binary(key, marker), cache=cache, compiler=True)
    assert not marker.exists(), "the attacker's binary ran"
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['9.0']"
    assert "helper from the cache" in done.stderr and "as culina-resolver.json gives" in done.stderr


def test_a_prebuilt_helper_swapped_after_its_check_never_runs(tree, tmp_path):
    """The fake prebuilt helper answers both the handshake and the probe with one line."""
    binary = add_prebuilt(tree)
    sources = source_hash(tree)
    answer = json.dumps({"source_hash": sources, "gpus": [{"sm": "9.0"}]})
    binary.write_text(f"#!/bin/sh\necho '{answer}'\n")
    record = json.loads((binary.parent.parent / "helpers.json").read_text())
    record["helpers"][0]["sha256"] = hashlib.sha256(binary.read_bytes()).hexdigest()
    (binary.parent.parent / "helpers.json").write_text(json.dumps(record))
    marker = tmp_path / "attacker-ran"
    done = swap_after_check_then_probe(tree, "prebuilt helper from the sdist", binary,
                                       attacker_binary(binary.parent, marker))
    assert not marker.exists(), "the attacker's binary ran"
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['9.0']"


def test_a_cached_helper_that_differs_from_its_record_is_built_again(tree, cache):
    (key,) = (cache / "helper").iterdir()
    with open(key / HELPER, "ab") as binary:
        binary.write(b"\0changed after it was compiled")
    done = helper_for(tree, cache=cache, compiler=True)
    assert done.returncode == 0, done.stderr
    assert "the cached helper is not used: " in done.stderr and "culina-resolver.json says" in done.stderr
    line = next(line for line in done.stderr.splitlines() if "the cached helper is not used: " in line)
    assert line.endswith("; building it again") and "delete it" not in line, line
    assert "helper built in" in done.stderr and "helper from the cache" not in done.stderr
    assert Path(done.stdout.strip()) == key / HELPER
    again = helper_for(tree, cache=cache, compiler=True)
    assert "helper from the cache" in again.stderr, again.stderr


def test_a_helper_cache_whose_parent_another_user_owns_is_not_used(tree, warm_cache, tmp_path):
    """pip's rule too: whoever owns the parent can rename the cache away and plant another."""
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    cache = parent / "cache"
    shutil.copytree(warm_cache, cache, symlinks=True)
    os.chown(parent, NOBODY.pw_uid, NOBODY.pw_gid)
    done = helper_for(tree, cache=cache, compiler=True)
    assert done.returncode == 0, done.stderr
    assert "WARNING: not using the helper cache" in done.stderr
    assert f"{parent} belongs to user id {NOBODY.pw_uid}" in done.stderr
    assert "helper from the cache" not in done.stderr and "helper built in" in done.stderr
    assert cache not in Path(done.stdout.strip()).parents


def test_a_cached_helper_whose_record_cannot_be_read_is_passed_over_naming_why(tmp_path, monkeypatch):
    """A read error (EIO) on the record is a reason to build the helper again, not a traceback."""
    monkeypatch.syspath_prepend(str(REPO / "resolver"))
    from culina_resolver import helper_build
    from culina_resolver import prebuilt_wheel

    class Unreadable(io.BytesIO):
        def read(self, *_):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
    (tmp_path / HELPER).write_bytes(b"")
    (tmp_path / helper_build.COMPILED_RECORD).write_text("{}")
    monkeypatch.setattr(prebuilt_wheel, "open_own_file", lambda path: Unreadable())
    assert helper_build._cached_helper(tmp_path, "0" * 64) == (
        None, f"{tmp_path / helper_build.COMPILED_RECORD} cannot be read (Input/output error)")


def test_a_helper_opened_while_stdout_is_closed_still_runs(tree):
    """A parent that starts the build with stdout closed: the helper's descriptor would be 1, which
    Popen replaces by its pipe before the exec, so the checked helper could never start."""
    add_prebuilt(tree)
    done = ask(tree, "import os\nos.close(1)\nfrom culina_resolver import adapter_settings, helper_build\n"
                     "helper = helper_build.helper_binary(adapter_settings.current())\n"
                     "os.write(2, f'descriptor {helper.binary.fileno()}\\n'.encode())\nos._exit(0)\n")
    assert done.returncode == 0, done.stderr
    assert "prebuilt helper from the sdist" in done.stderr
    assert int(done.stderr.split("descriptor ")[1].split()[0]) >= 3


@pytest.mark.parametrize("make_shared, why", [
    (lambda shared: shared.chmod(0o777), "may be written by group or others (mode 777)"),
    (lambda shared: os.chown(shared, NOBODY.pw_uid, NOBODY.pw_gid), f"belongs to user id {NOBODY.pw_uid}"),
], ids=["others may write it", "another user owns it"])
def test_no_private_build_in_a_tmpdir_someone_else_could_write(tree, tmp_path, make_shared, why):
    """The cache refused, the helper is compiled in a private folder in TMPDIR: whoever may write
    TMPDIR could rename that folder away during the compile and plant the binary that then runs."""
    cache, shared = tmp_path / "cache", tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    shared.mkdir(mode=0o755)
    make_shared(shared)
    done = helper_for(tree, cache=cache, compiler=True, TMPDIR=str(shared))
    assert done.returncode != 0
    assert "WARNING: not using the helper cache" in done.stderr
    assert f"cannot build the helper in the private folder {shared}/culina-helper-" in done.stderr
    assert f"(in TMPDIR, {shared}): {shared} {why}" in done.stderr
    assert "Fix: set TMPDIR to a folder that only you (or root) may write" in done.stderr
    assert "building the helper" not in done.stderr
    assert not list(shared.iterdir())
