"""The wheel cache: verified before use, repaired when damaged, shared safely by installs
running at once, resumed after an interrupted run, and the only source when offline."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from release_server import Fault, build_wheel


def test_concurrent_fetches_download_once(fetcher, release, wheel):
    # Slow enough (about 1.5 s) that all four processes are running while the first downloads.
    release.faults[wheel.file] = Fault("slow", chunk=len(wheel.data) // 12 + 1, interval=0.125)
    processes = [subprocess.Popen(fetcher.command(wheel.file, release.base_url), env=fetcher.env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in processes]
    for process in processes:
        process.stdout.close()
        process.stderr.close()
    assert [code for code, _, _ in results] == [0, 0, 0, 0], [err for _, _, err in results]
    paths = {out.strip() for _, out, _ in results}
    assert paths == {str(fetcher.cache / "wheels" / wheel.file)}
    assert len(release.object_gets(wheel.file)) == 1, "exactly one download for four installs"
    assert sum("waiting for it" in err for _, _, err in results) >= 1
    assert sum("using the cached" in err for _, _, err in results) == 3
    assert hashlib.sha256(Path(paths.pop()).read_bytes()).digest() == hashlib.sha256(wheel.data).digest()


def test_cached_wheel_is_verified_and_reused_without_network(fetcher, release, wheel):
    assert fetcher.run(wheel.file, release.base_url).returncode == 0
    again = fetcher.run(wheel.file, release.base_url)
    assert again.returncode == 0, again.stderr
    assert "using the cached" in again.stderr
    assert len(release.object_gets(wheel.file)) == 1


def test_damaged_cached_wheel_is_deleted_and_downloaded_again(fetcher, release, wheel):
    first = fetcher.run(wheel.file, release.base_url)
    cached = Path(first.stdout.strip())
    damaged = bytearray(cached.read_bytes())
    damaged[100] ^= 0xFF
    cached.write_bytes(bytes(damaged))
    again = fetcher.run(wheel.file, release.base_url)
    assert again.returncode == 0, again.stderr
    assert "fails verification" in again.stderr
    assert cached.read_bytes() == wheel.data
    assert len(release.object_gets(wheel.file)) == 2


def test_part_file_left_by_an_interrupted_run_is_resumed(fetcher, release, wheel):
    wheels = fetcher.cache / "wheels"
    wheels.mkdir(parents=True)
    half = len(wheel.data) // 2
    (wheels / (wheel.file + ".part")).write_bytes(wheel.data[:half])
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 0, outcome.stderr
    assert [r.range for r in release.object_gets(wheel.file)] == [f"bytes={half}-"]
    assert outcome.leftovers() == [wheel.file]


def test_offline_serves_only_the_cache(fetcher, release, wheel):
    offline = fetcher.run(wheel.file, release.base_url, CULINA_OFFLINE="1")
    assert offline.returncode == 1
    assert "CULINA_OFFLINE=1" in offline.stderr and "not in the cache" in offline.stderr
    assert release.requests == []
    assert fetcher.run(wheel.file, release.base_url).returncode == 0
    cached = fetcher.run(wheel.file, release.base_url, CULINA_OFFLINE="1")
    assert cached.returncode == 0, cached.stderr
    assert len(release.object_gets(wheel.file)) == 1


def test_wheel_of_another_project_is_rejected_even_with_a_matching_digest(fetcher, release, wheel):
    impostor = build_wheel(name="notculina")
    release.assets[wheel.file] = impostor
    fetcher.write_manifest({wheel.file: impostor})
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 1, outcome.stderr
    assert "Name: 'notculina'" in outcome.stderr
    assert outcome.leftovers() == []


def test_wheel_of_another_version_is_rejected(fetcher, release, wheel):
    other = build_wheel(version="0.0.9")
    release.assets[wheel.file] = other
    fetcher.write_manifest({wheel.file: other})
    outcome = fetcher.run(wheel.file, release.base_url)
    assert outcome.returncode == 1, outcome.stderr
    assert "Version: '0.0.9'" in outcome.stderr
    assert outcome.leftovers() == []
