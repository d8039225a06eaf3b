"""`culina cache list` and `culina cache purge`: sizes of the wheel and helper caches, and a purge
that removes only this user's own entries and follows no link."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from culina_errors import assert_culina_error

import culina
from culina import _cache, errors

PACKAGE_DIR = Path(culina.__file__).resolve().parent.parent


def run_cache(*args):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    return subprocess.run([sys.executable, "-m", "culina", "cache", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.fixture
def cache(tmp_path):
    root = tmp_path / "cache"
    (root / "wheels").mkdir(parents=True)
    (root / "wheels" / "culina-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"w" * 3000)
    (root / "helper" / "k1").mkdir(parents=True)
    (root / "helper" / "k1" / "culina-resolver").write_bytes(b"h" * 2048)
    return root


def test_list_gives_each_folder_its_entries_and_sizes(cache):
    done = run_cache("list", "--cache-dir", str(cache))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"culina cache: {cache}"
    assert "  wheels/: 1 entry, 2.9 KiB" in lines
    assert "    culina-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl  2.9 KiB" in lines
    assert "  helper/: 1 entry, 2.0 KiB" in lines
    assert lines[-1] == "  total: 4.9 KiB"


def test_purge_removes_own_entries_and_leaves_links_and_their_targets(cache, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the cache's")
    (cache / "wheels" / "elsewhere").symlink_to(outside)
    (cache / "helper" / "k1" / "link").symlink_to(outside / "keep.txt")
    done = run_cache("purge", "--cache-dir", str(cache))
    assert done.returncode == 0, done.stderr
    assert "left alone: wheels/elsewhere: a link" in done.stdout
    assert "left alone: helper/k1/link: a link" in done.stdout
    assert sorted(p.name for p in (cache / "wheels").iterdir()) == ["elsewhere"]
    assert sorted(p.name for p in (cache / "helper" / "k1").iterdir()) == ["link"]  # the rest of k1 went
    assert (outside / "keep.txt").read_text() == "not the cache's"
    assert "freed 2.9 KiB" in done.stdout  # the wheel, removed whole


def test_another_users_entry_is_left_alone(cache, monkeypatch):
    uid = os.getuid()
    monkeypatch.setattr(_cache.os, "getuid", lambda: uid + 1)  # every entry is now someone else's
    freed, kept = _cache.purge(cache)
    assert freed == 0
    assert sorted(kept) == [f"helper/k1: owned by uid {uid}",
                            f"wheels/culina-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl: owned by uid {uid}"]
    assert (cache / "wheels").exists() and (cache / "helper" / "k1" / "culina-resolver").exists()


def test_a_cache_root_that_is_a_link_is_not_entered(cache, tmp_path):
    link = tmp_path / "link-to-cache"
    link.symlink_to(cache)
    done = run_cache("purge", "--cache-dir", str(link))
    assert done.returncode == 1
    assert done.stderr.startswith(f"culina cache purge: cannot open the cache root {link}")
    assert done.stderr.splitlines()[1:] == ["  hint: check that it is a folder of yours, not a link"]
    assert (cache / "helper" / "k1" / "culina-resolver").exists()


def test_the_root_comes_from_the_build_record_or_the_error_says_how_to_name_it(tmp_path):
    assert _cache.cache_root({"cache_root": str(tmp_path)}, None) == tmp_path
    assert _cache.cache_root({"cache_root": "/elsewhere"}, str(tmp_path)) == tmp_path
    with pytest.raises(errors.CacheError) as error:
        _cache.cache_root({"kind": "local"}, None)
    assert_culina_error(error.value)
    assert "does not name the cache its install used" in error.value.message and "--cache-dir" in error.value.hint
    with pytest.raises(errors.CacheError) as error:
        _cache.cache_root({}, "relative/path")
    assert_culina_error(error.value)


def test_a_culina_error_ends_the_command_with_its_message_and_hint_and_no_traceback():
    done = run_cache("list", "--cache-dir", "relative/path")
    assert done.returncode == 1 and not done.stdout
    assert done.stderr.splitlines() == ["culina cache list: --cache-dir 'relative/path' is not an absolute path",
                                        "  hint: name the folder from / (or ~/...), as CULINA_CACHE_DIR takes it"]
