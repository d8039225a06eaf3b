"""The cache trust rule on the adapter's side (helper_build.cache_trust_problem), against the cases
the helper's rule is tested with (tests/data/cache_trust_cases.json): both languages must trust,
refuse and create exactly the same caches. Run as root, with `nobody` as the other user."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "resolver"))

from culina_resolver import helper_build  # noqa: E402 - needs the path above

SHARED = json.loads((REPO / "tests" / "data" / "cache_trust_cases.json").read_text())
CASES = SHARED["cases"]
NOBODY = pwd.getpwnam("nobody")
OWNERS = {"self": os.geteuid(), "root": 0, "nobody": NOBODY.pw_uid}


def lay_out(base: Path, chain: list[dict]) -> None:
    for entry in chain:
        path, owner = base / entry["name"], OWNERS[entry["owner"]]
        if entry["link_to"] is not None:
            path.symlink_to(entry["link_to"])
            os.lchown(path, owner, -1)
            continue
        if entry.get("file"):
            path.write_bytes(b"")
        else:
            path.mkdir()
        os.chown(path, owner, -1)
        path.chmod(int(entry["mode"], 8))


def snapshot(base: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(base)), p.lstat().st_mode, p.lstat().st_uid) for p in base.rglob("*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="laying out folders of other users needs root")
@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_shared_cache_trust_cases(tmp_path, case):
    base = tmp_path / "base"
    base.mkdir(mode=0o755)
    lay_out(base, case["chain"])
    before = snapshot(base)
    problem = helper_build.cache_trust_problem(base / case["cache"], ("wheels",))
    if case["trusted"]:
        assert problem is None
        wheels = (base / case["cache"] / "wheels").resolve()
        assert wheels.is_dir() and wheels.stat().st_uid == os.geteuid() and not wheels.stat().st_mode & 0o077
        return
    assert problem is not None
    named = re.escape(str(base / case["problem_mentions"]))
    assert re.search(rf"{named}(?![^\s:;,)])", problem), problem
    assert snapshot(base) == before, "a refused cache must create nothing"


@pytest.mark.parametrize("root", SHARED["system_folders"])
def test_the_system_folders_are_never_a_cache_root(root):
    """Even root, who owns them: CACHE_DIR=/ once made /wheels."""
    before = sorted(os.listdir(os.path.normpath(root)))
    problem = helper_build.cache_trust_problem(Path(root), ("helper",))
    assert problem is not None and "a system folder" in problem and "which never holds a cache" in problem
    assert sorted(os.listdir(os.path.normpath(root))) == before


def test_a_link_to_a_system_folder_is_never_a_cache_root(tmp_path):
    (tmp_path / "cache").symlink_to("/usr/lib")
    problem = helper_build.cache_trust_problem(tmp_path / "cache", ("helper",))
    assert problem == f"{tmp_path / 'cache'} leads to /usr/lib, a system folder (/, its top-level folders and those " \
                      "directly in /usr and /var), which never holds a cache"
    assert not os.path.lexists("/usr/lib/helper")


def test_a_missing_cache_is_created_for_this_user_alone(tmp_path):
    root = tmp_path / "one" / "two" / "cache"
    assert helper_build.cache_trust_problem(root, ("helper", "key")) is None
    for folder in (tmp_path / "one", tmp_path / "one" / "two", root, root / "helper", root / "helper" / "key"):
        info = folder.lstat()
        assert folder.is_dir() and info.st_uid == os.geteuid() and not info.st_mode & 0o077, folder


def test_a_link_to_a_system_folder_with_a_missing_name_under_it_creates_nothing(tmp_path):
    """CACHE_DIR=<link to /usr>/<new>: the folder it names is /usr/<new>, refused before anything
    is made (root once created /usr/<new> and only then refused it)."""
    name = f"culina-cache-trust-{os.getpid()}-{tmp_path.name}"
    (tmp_path / "link").symlink_to("/usr")
    try:
        problem = helper_build.cache_trust_problem(tmp_path / "link" / name, ("helper",))
        assert not os.path.lexists(f"/usr/{name}"), f"/usr/{name} was created"
    finally:
        if os.path.isdir(f"/usr/{name}"):
            shutil.rmtree(f"/usr/{name}")
    assert problem == f"{tmp_path / 'link' / name} leads to /usr/{name}, a system folder (/, its top-level " \
                      "folders and those directly in /usr and /var), which never holds a cache"
