"""The cache, the server and the release folder as an attacker would set them up (issue 12):
nothing planted is written through, no wait is unbounded, no secret is printed, and a local
release folder is read and verified, never written."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from release_server import Fault, ReleaseServer

NOBODY = pwd.getpwnam("nobody")


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under `folder` with its size, mtime and owner: what a write would change."""
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns, p.lstat().st_uid)
            for p in [folder, *folder.rglob("*")]}



def assert_fetched_privately(outcome, wheel, away_from: Path | None = None) -> None:
    """The wheel was fetched into a private temporary folder (not under `away_from`), which is removed."""
    fetched = Path(outcome.stdout.strip())
    assert fetched.read_bytes() == wheel.data
    assert away_from is None or not fetched.is_relative_to(away_from)
    shutil.rmtree(fetched.parent.parent)

def test_planted_links_in_the_cache_are_never_written_through(fetcher, release, wheel, tmp_path):
    wheels = fetcher.cache / "wheels"
    wheels.mkdir(parents=True, mode=0o700)
    victims = {}
    for suffix in (".part", ".lock", ""):
        victim = tmp_path / f"victim{suffix or '.whl'}"
        victim.write_bytes(b"precious " + suffix.encode())
        (wheels / (wheel.file + suffix)).symlink_to(victim)
        victims[victim] = victim.read_bytes()
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 0, outcome.stderr
    for victim, content in victims.items():
        assert victim.read_bytes() == content, f"{victim} was written through a planted link"
    cached = Path(outcome.stdout.strip())
    assert cached == wheels / wheel.file and not cached.is_symlink()
    assert cached.read_bytes() == wheel.data
    assert outcome.stderr.count("is not a file this cache wrote (it is a symbolic link") == 3, outcome.stderr


def test_a_held_lock_does_not_hang_the_fetch(fetcher, release, wheel):
    wheels = fetcher.cache / "wheels"
    wheels.mkdir(parents=True, mode=0o700)
    with open(wheels / (wheel.file + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="2", timeout=30)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.seconds < 8
    assert "is still held after 2 s: going on without the cache" in outcome.stderr
    assert_fetched_privately(outcome, wheel, away_from=fetcher.cache)


def test_offline_with_a_cached_wheel_ignores_a_held_lock(fetcher, release, wheel):
    assert fetcher.run(wheel.file, release.base_url).returncode == 0
    with open(fetcher.cache / "wheels" / (wheel.file + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        outcome = fetcher.run(wheel.file, release.base_url, CULINA_OFFLINE="1", CULINA_TIMEOUT="30", timeout=20)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.seconds < 5 and "using the cached" in outcome.stderr


def test_a_cache_owned_by_another_user_is_not_used(fetcher, release, wheel):
    (fetcher.cache / "wheels").mkdir(parents=True)
    os.chown(fetcher.cache, NOBODY.pw_uid, NOBODY.pw_gid)
    before = snapshot(fetcher.cache)
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 0, outcome.stderr
    assert f"WARNING: not using the wheel cache: {fetcher.cache} belongs to user id {NOBODY.pw_uid}" in outcome.stderr
    assert snapshot(fetcher.cache) == before
    assert_fetched_privately(outcome, wheel)


def test_a_cache_under_a_folder_another_user_owns_is_not_used(fetcher, release, wheel, tmp_path):
    # Whoever owns a folder above the cache can rename the cache away and put their own in its place.
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY.pw_uid, NOBODY.pw_gid)
    fetcher.cache = theirs / "cache"
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 0, outcome.stderr
    assert f"WARNING: not using the wheel cache: {theirs} belongs to user id {NOBODY.pw_uid}" in outcome.stderr
    assert list(theirs.iterdir()) == [], "nothing is created under a folder another user owns"
    assert_fetched_privately(outcome, wheel, away_from=theirs)


def test_a_link_another_user_planted_as_the_cache_is_not_followed(fetcher, release, wheel, tmp_path):
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    fetcher.cache.symlink_to(target)
    os.lchown(fetcher.cache, NOBODY.pw_uid, NOBODY.pw_gid)
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 0, outcome.stderr
    assert f"{fetcher.cache} is a symbolic link owned by user id {NOBODY.pw_uid}" in outcome.stderr
    assert list(target.iterdir()) == [], "nothing is written into the link's target"
    assert_fetched_privately(outcome, wheel, away_from=target)


def test_the_root_folder_as_the_cache_is_refused(fetcher, release, wheel):
    wheels = Path("/wheels")
    if wheels.exists():
        pytest.skip("/wheels exists on this machine: this test cannot tell who made it")
    command = [str(fetcher.resolver), "fetch", "--manifest", str(fetcher.manifest), "--file", wheel.file,
               "--base-url", release.base_url]
    try:
        outcome = subprocess.run(command, env=fetcher.env(CULINA_CACHE_DIR="/"), capture_output=True, text=True,
                                 timeout=60)
        assert not wheels.exists(), "CULINA_CACHE_DIR=/ created /wheels"
    finally:
        if wheels.exists():
            shutil.rmtree(wheels)
    assert outcome.returncode == 0, outcome.stderr
    assert "WARNING: not using the wheel cache: / is the root folder" in outcome.stderr
    assert "set CULINA_CACHE_DIR to a folder that only you own and may write" in outcome.stderr
    assert_fetched_privately(outcome, wheel)


def test_new_cache_folders_are_private(fetcher, release, wheel):
    assert fetcher.run(wheel.file, release.base_url).returncode == 0
    assert (fetcher.cache.stat().st_mode & 0o777, (fetcher.cache / "wheels").stat().st_mode & 0o777) == (0o700, 0o700)


def test_a_stale_part_that_fails_verification_is_restarted_once(fetcher, release, wheel):
    wheels = fetcher.cache / "wheels"
    wheels.mkdir(parents=True, mode=0o700)
    (wheels / (wheel.file + ".part")).write_bytes(b"\0" * (len(wheel.data) // 2))
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 0, outcome.stderr
    assert "did not verify" in outcome.stderr and "downloading the whole asset once more" in outcome.stderr
    assert [r.range is not None for r in release.object_gets(wheel.file)] == [True, False]
    assert Path(outcome.stdout.strip()).read_bytes() == wheel.data


def test_credentials_and_query_in_the_release_url_are_never_printed(fetcher, release, wheel, tmp_path):
    secret_url = release.base_url.replace("https://", "https://alice:s3cr3t-pw@") + "?token=q-s3cr3t"
    ok = fetcher.run(wheel.file, secret_url)
    assert ok.returncode == 0, ok.stderr
    release.faults[wheel.file] = Fault("404")
    failed = fetcher.run(wheel.file, secret_url, "--cache-dir", str(tmp_path / "c1"), CULINA_RETRIES="0")
    assert failed.returncode == 1 and "HTTP 404" in failed.stderr
    tags = tmp_path / "tags.txt"
    tags.write_text("cp312-cp312-manylinux_2_28_x86_64\n")
    resolved = subprocess.run([str(fetcher.resolver), "resolve", "--manifest", str(fetcher.manifest), "--tags",
                               str(tags), "--base-url", secret_url, "--json", "--cache-dir", str(tmp_path / "c2")],
                              env=fetcher.env(CULINA_VARIANT="null", CULINA_RETRIES="0"),
                              capture_output=True, text=True, timeout=60)
    decision = json.loads(resolved.stdout)
    assert decision["fetch_error"], resolved.stderr
    assert decision["fetch_error"] and "HTTP 404" in decision["fetch_error"]
    for text in (ok.stdout, ok.stderr, failed.stdout, failed.stderr, resolved.stdout, resolved.stderr):
        assert "s3cr3t" not in text and "alice" not in text, text


def test_a_query_in_the_base_url_stays_after_the_asset_name(fetcher, release, wheel):
    outcome = fetcher.run(wheel.file, release.base_url + "/?sig=abc")
    assert outcome.returncode == 0, outcome.stderr
    assert release.requests[0].path.endswith("/" + wheel.file)


def test_a_one_byte_per_second_server_ends_like_a_stall(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("slow", chunk=1, interval=1.0)
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="2", CULINA_RETRIES="1", timeout=30)
    assert outcome.returncode == 1, outcome.stderr
    # 2 attempts x 2 s, plus at most 1 s of backoff and start-up.
    assert 3.5 < outcome.seconds < 7, outcome.seconds
    assert "no progress for 2 s" in outcome.stderr
    assert outcome.leftovers() == []


def test_an_endless_error_body_is_cut_short(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("endless-500")
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="20", CULINA_RETRIES="1", timeout=30)
    assert outcome.returncode == 1, outcome.stderr
    assert "HTTP 500" in outcome.stderr and "(server said: xxxx" in outcome.stderr
    assert outcome.seconds < 5, "the body was read far past its cap"


def test_an_endless_redirect_body_is_cut_short_and_the_redirect_followed(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("endless-302")
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="20", timeout=30)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.seconds < 5
    assert Path(outcome.stdout.strip()).read_bytes() == wheel.data


def mirror(fetcher, base_url: str, dest: Path, *extra: str, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([str(fetcher.resolver), "mirror", "--manifest", str(fetcher.manifest), "--dest", str(dest),
                           "--base-url", base_url, *extra], env=fetcher.env(**env), capture_output=True, text=True,
                          timeout=60)


def test_mirror_fills_a_folder_verified_and_resumes(fetcher, release, wheel, tmp_path):
    dest = tmp_path / "mirror"
    dest.mkdir()
    (dest / (wheel.file + ".part")).write_bytes(wheel.data[:1000])
    done = mirror(fetcher, release.base_url, dest)
    assert done.returncode == 0, done.stderr
    assert (dest / wheel.file).read_bytes() == wheel.data
    assert sorted(p.name for p in dest.iterdir()) == [wheel.file]
    assert (dest / wheel.file).stat().st_mode & 0o777 == 0o644 and dest.stat().st_mode & 0o777 == 0o755
    assert [r.range for r in release.object_gets(wheel.file)] == ["bytes=1000-"]
    again = mirror(fetcher, release.base_url, dest)
    assert again.returncode == 0 and len(release.object_gets(wheel.file)) == 1, "a verified file is kept"
    assert mirror(fetcher, release.base_url, tmp_path / "none", "--variant", "cu130").returncode == 1


def test_mirror_leaves_the_mode_of_an_existing_folder_alone(fetcher, release, wheel, tmp_path):
    dest = tmp_path / "mirror"
    dest.mkdir()
    dest.chmod(0o750)
    done = mirror(fetcher, release.base_url, dest)
    assert done.returncode == 0, done.stderr
    assert dest.stat().st_mode & 0o7777 == 0o750
    assert (dest / wheel.file).read_bytes() == wheel.data and (dest / wheel.file).stat().st_mode & 0o777 == 0o644


def test_mirror_refuses_a_destination_that_is_a_link_another_user_planted(fetcher, release, wheel, tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    private.chmod(0o700)
    dest = tmp_path / "mirror"
    dest.symlink_to(private)
    os.lchown(dest, NOBODY.pw_uid, NOBODY.pw_gid)
    done = mirror(fetcher, release.base_url, dest)
    assert done.returncode == 2, done.stderr
    assert f"will not fill {dest}: {dest} is a symbolic link" in done.stderr
    assert private.stat().st_mode & 0o7777 == 0o700, "the link's target keeps its mode"
    assert list(private.iterdir()) == [] and release.object_gets(wheel.file) == []


def test_mirror_refuses_a_destination_under_a_folder_others_may_write(fetcher, release, wheel, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    done = mirror(fetcher, release.base_url, shared / "mirror")
    assert done.returncode == 2, done.stderr
    assert f"{shared} may be written by group or others" in done.stderr
    assert list(shared.iterdir()) == []


def test_a_mirror_owned_by_another_user_serves_offline_without_a_write(fetcher, release, wheel, tmp_path):
    dest = tmp_path / "mirror"
    assert mirror(fetcher, release.base_url, dest).returncode == 0
    for path in (dest, dest / wheel.file):
        os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    before = snapshot(dest)
    for base in (str(dest), f"file://{dest}"):
        shutil.rmtree(fetcher.cache, ignore_errors=True)
        outcome = fetcher.run(wheel.file, base, CULINA_OFFLINE="1")
        assert outcome.returncode == 0, outcome.stderr
        assert Path(outcome.stdout.strip()).read_bytes() == wheel.data
        assert f"copying {wheel.file}" in outcome.stderr
    assert snapshot(dest) == before


def test_a_corrupted_file_in_a_mirror_is_refused(fetcher, release, wheel, tmp_path):
    dest = tmp_path / "mirror"
    assert mirror(fetcher, release.base_url, dest).returncode == 0
    damaged = bytearray(wheel.data)
    damaged[len(damaged) // 2] ^= 0xFF
    (dest / wheel.file).write_bytes(bytes(damaged))
    outcome = fetcher.run(wheel.file, str(dest), CULINA_OFFLINE="1")
    assert outcome.returncode == 1
    assert "has sha256" in outcome.stderr and "does not match the manifest" in outcome.stderr
    assert outcome.leftovers() == []
