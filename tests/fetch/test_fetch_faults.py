"""`culina-resolver fetch` against the local release server, one test per fault mode: what
comes back, what the server saw, how long it took, and that nothing unverified stays cached."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from release_server import Fault, build_wheel


def assert_verified(outcome, wheel) -> None:
    assert outcome.returncode == 0, outcome.stderr
    path = Path(outcome.stdout.strip())
    assert path == outcome.cache / "wheels" / wheel.file
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(wheel.data).hexdigest()
    assert outcome.leftovers() == [wheel.file]


def assert_refused(outcome, returncode: int = 1) -> None:
    assert outcome.returncode == returncode, outcome.stderr
    assert outcome.stdout == ""
    assert outcome.leftovers() == [], "an unverified file was left in the cache"


def test_ok_follows_the_release_redirect_over_tls(fetcher, release, wheel):
    outcome = fetcher.run(wheel.file, release.base_url)
    assert_verified(outcome, wheel)
    statuses = [(r.path.split("/")[1], r.status) for r in release.requests]
    assert statuses == [("culina-dev", 302), ("objects", 200)]
    assert "verified" in outcome.stderr


def test_404_fails_at_once_without_retrying(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("404")
    outcome = fetcher.run(wheel.file, release.base_url)
    assert_refused(outcome)
    assert "HTTP 404" in outcome.stderr and "--base-url" in outcome.stderr
    assert len(release.object_gets(wheel.file)) == 1
    assert outcome.seconds < 5


def test_500_then_success_is_retried(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("500", times=1)
    outcome = fetcher.run(wheel.file, release.base_url)
    assert_verified(outcome, wheel)
    assert [r.status for r in release.object_gets(wheel.file)] == [500, 200]
    assert "HTTP 500" in outcome.stderr and "retrying in" in outcome.stderr


def test_persistent_500_gives_up_after_the_configured_retries(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("500", times=100)
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_RETRIES="1")
    assert_refused(outcome)
    assert len(release.object_gets(wheel.file)) == 2
    assert "gave up after 2 attempts" in outcome.stderr and "CULINA_RETRIES" in outcome.stderr


def test_reset_mid_body_resumes_with_range(fetcher, release, tmp_path):
    file = "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-null.whl"
    data = build_wheel(payload_size=4 << 20, seed=1)
    release.assets[file] = data
    fetcher.write_manifest({file: data})
    release.faults[file] = Fault("reset", at=0.5)
    outcome = fetcher.run(file, release.base_url)
    assert outcome.returncode == 0, outcome.stderr
    assert hashlib.sha256(Path(outcome.stdout.strip()).read_bytes()).digest() == hashlib.sha256(data).digest()
    first, second = release.object_gets(file)
    assert first.range is None and first.body_bytes < len(data)
    # The retry asks only for what is missing, and gets exactly that: nothing is sent twice
    # except what the reset destroyed in flight.
    assert second.range is not None and second.range.startswith("bytes=")
    resume_at = int(second.range[len("bytes="):].rstrip("-"))
    assert 0 < resume_at <= first.body_bytes
    assert second.status == 206 and second.body_bytes == len(data) - resume_at
    assert "resuming at byte" in outcome.stderr


def test_server_that_ignores_range_gets_a_clean_restart(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("reset", at=0.5, ranges=False)
    outcome = fetcher.run(wheel.file, release.base_url)
    assert_verified(outcome, wheel)
    first, second = release.object_gets(wheel.file)
    # The server counts a piece once its write returns, which can be just after the client has it.
    deadline = time.monotonic() + 5
    while second.body_bytes < len(wheel.data) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert second.range is not None and second.status == 200 and second.body_bytes == len(wheel.data)
    assert "ignored the Range request" in outcome.stderr


def test_stall_is_dropped_after_the_timeout_and_resumed(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("stall", at=0.5)
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="2")
    assert_verified(outcome, wheel)
    assert "no progress for 2 s" in outcome.stderr
    # 2 s of stall (+ up to 1 s until libcurl's next progress call) and at most 1 s of backoff.
    assert 2 <= outcome.seconds < 8
    assert release.object_gets(wheel.file)[1].range == f"bytes={len(wheel.data) // 2}-"


def test_a_server_that_always_stalls_fails_in_bounded_time(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("stall", times=100, at=0.25)
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="1", CULINA_RETRIES="1")
    assert_refused(outcome)
    assert "no progress for 1 s" in outcome.stderr and "gave up after 2 attempts" in outcome.stderr
    # Two attempts of ~1-2 s each and one backoff of at most 1 s.
    assert outcome.seconds < 8


def test_slow_but_steady_transfer_is_not_dropped_and_shows_progress(fetcher, release, wheel):
    # 16 chunks, one every 0.25 s: about 4 s in all, never 1 s without progress.
    release.faults[wheel.file] = Fault("slow", chunk=len(wheel.data) // 16 + 1, interval=0.25)
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="1")
    assert_verified(outcome, wheel)
    assert len(release.object_gets(wheel.file)) == 1
    progress = [line for line in outcome.stderr.splitlines() if "%)" in line]
    assert progress, outcome.stderr
    assert "/s" in progress[0] and "ETA" in progress[0]
    assert "\r" not in outcome.stderr, "stderr is not a terminal: lines, not redraws"


def test_wrong_bytes_are_rejected_and_deleted(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("wrong-bytes")
    outcome = fetcher.run(wheel.file, release.base_url)
    assert_refused(outcome)
    assert "sha256" in outcome.stderr and "does not match the manifest" in outcome.stderr
    assert len(release.object_gets(wheel.file)) == 1, "a digest mismatch is not retried"


def test_truncated_asset_is_rejected_and_deleted(fetcher, release, wheel):
    release.faults[wheel.file] = Fault("truncated")
    outcome = fetcher.run(wheel.file, release.base_url)
    assert_refused(outcome)
    assert f"ended after {len(wheel.data) // 2} bytes" in outcome.stderr


def test_asset_larger_than_the_manifest_says_is_cut_off_and_deleted(fetcher, release, wheel):
    bigger = build_wheel(payload_size=512 * 1024, seed=2)
    release.assets[wheel.file] = bigger
    outcome = fetcher.run(wheel.file, release.base_url)
    assert_refused(outcome)
    assert "more than the manifest's size" in outcome.stderr
    assert release.object_gets(wheel.file)[0].body_bytes <= len(bigger)


def test_connection_refused_is_retried_then_reported(fetcher, wheel):
    with socket.socket() as placeholder:  # a port that is certainly closed once released
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    outcome = fetcher.run(wheel.file, f"https://127.0.0.1:{port}/releases", CULINA_RETRIES="1")
    assert_refused(outcome)
    assert "attempt 1 of 2 failed" in outcome.stderr and "gave up after 2 attempts" in outcome.stderr
    assert outcome.seconds < 5


def test_a_trickling_server_is_dropped_at_the_deadline(fetcher, release, wheel):
    # 2000 B/s: above the 1 KiB/s that counts as no progress, so only the deadline ends it:
    # TIMEOUT 2 s plus the wheel (~256 KiB) at 64 KiB/s, about 6 s; the whole wheel would take 130 s.
    release.faults[wheel.file] = Fault("slow", chunk=200, interval=0.1)
    deadline = 2 + len(wheel.data) / (64 * 1024)
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="2", CULINA_MIN_RATE="64", timeout=40)
    assert_refused(outcome)
    assert deadline <= outcome.seconds < deadline + 3, outcome.stderr
    assert f"{wheel.file}: stopped the download from {release.base_url}/{wheel.file}: it passed its " \
           f"deadline of {round(deadline)}s (CULINA_TIMEOUT=2 s plus 256." in outcome.stderr, outcome.stderr
    assert "at CULINA_MIN_RATE=64 KiB/s)" in outcome.stderr
    rate = re.search(r"arrived in \d+s, ([\d.]+) KiB/s on average", outcome.stderr)
    assert rate and 1.0 <= float(rate.group(1)) <= 2.5, outcome.stderr
    assert "lower CULINA_MIN_RATE" in outcome.stderr
    assert "t0k3n" not in outcome.stderr
    assert len(release.object_gets(wheel.file)) == 1, "passing the deadline is not retried"


def test_the_deadline_covers_retries_and_their_backoff(fetcher, release, wheel):
    # Twenty retries of an HTTP 500 back off for minutes; the deadline (1 s plus the wheel at
    # 1 GiB/s) ends them at the first backoff that would pass it (or in the attempt it passes in).
    release.faults[wheel.file] = Fault("500", times=100)
    outcome = fetcher.run(wheel.file, release.base_url, CULINA_TIMEOUT="1", CULINA_RETRIES="20",
                          CULINA_MIN_RATE="1048576", timeout=40)
    assert_refused(outcome)
    assert outcome.seconds < 4, outcome.stderr
    assert "attempt 1 of 21 failed: HTTP 500 from" in outcome.stderr
    assert "its deadline of 1s (CULINA_TIMEOUT=1 s plus" in outcome.stderr and "CULINA_MIN_RATE" in outcome.stderr
    assert len(release.object_gets(wheel.file)) <= 2


@dataclasses.dataclass
class Measured:
    returncode: int
    stderr: str
    seconds: float
    peak_bytes: int


def run_measured(command: list[str], env: dict[str, str], timeout: float = 60) -> Measured:
    """Runs `command`; its peak resident memory is that of this one child (os.wait4's rusage)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        killer = threading.Timer(timeout, process.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            killer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        err.seek(0)
        return Measured(process.returncode, err.read().decode(errors="replace"), seconds, usage.ru_maxrss * 1024)


HOSTILE_MANIFESTS = {
    # 16 MiB of "[": it peaked at 1.27 GB while parsed; now over the 1 MiB cap, refused unparsed.
    "huge": (b"[" * (16 << 20), "larger than 1048576 bytes, the most a release manifest may be",
             "the server sent more than 1048576 bytes for"),
    # 100 KiB of "[": within the cap, refused at the 17th level.
    "deep": (b"[" * (100 << 10), "nested more than 16 levels deep", "nested more than 16 levels deep"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_MANIFESTS))
def test_a_hostile_manifest_file_is_refused_in_little_memory(fetcher, wheel, kind):
    text, message, _ = HOSTILE_MANIFESTS[kind]
    fetcher.manifest.write_bytes(text)
    done = run_measured(fetcher.command(wheel.file, "https://127.0.0.1:9/releases"), fetcher.env())
    assert done.seconds < 10 and done.peak_bytes < 200 << 20, (done.seconds, done.peak_bytes)
    assert done.returncode == 2, done.stderr
    assert f"release manifest {fetcher.manifest}: " in done.stderr and message in done.stderr, done.stderr
    assert "this is not a release manifest" in done.stderr


@pytest.mark.parametrize("kind", sorted(HOSTILE_MANIFESTS))
def test_a_hostile_fetched_manifest_is_refused_in_little_memory(fetcher, release, tmp_path, kind):
    text, _, message = HOSTILE_MANIFESTS[kind]
    release.assets["release-manifest.json"] = text
    tags = tmp_path / "tags.txt"
    tags.write_text("cp312-cp312-manylinux_2_28_x86_64\n")
    command = [str(fetcher.resolver), "resolve", "--manifest-url", f"{release.base_url}/release-manifest.json",
               "--project", "culina", "--project-version", "0.1.0", "--tags", str(tags),
               "--base-url", release.base_url, "--cache-dir", str(fetcher.cache), "--json"]
    done = run_measured(command, fetcher.env(CULINA_OVERRIDE_CUDA="13.0", CULINA_OVERRIDE_SM="9.0"))
    assert done.seconds < 10 and done.peak_bytes < 200 << 20, (done.seconds, done.peak_bytes)
    assert done.returncode in (0, 3), done.stderr
    assert f"{release.origin}/" in done.stderr and message in done.stderr, done.stderr
