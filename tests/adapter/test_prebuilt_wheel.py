"""Both hooks that read the cached wheel check it where they use it: extract_metadata() and
deliver() read only bytes verified against the decision's sha256 through one open file of ours
(a wheel swapped in the cache, between the hooks or after the check, is never read), no member can
land outside the install folder, and a malformed wheel gives a DeliveryError naming it."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pwd
import re
import stat
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "resolver"))

from culina_resolver import prebuilt_wheel  # noqa: E402 - needs the path above
import release_server  # noqa: E402 - tests/conftest.py puts tests/fixtures on the path

ASSET = "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-null.whl"
NOBODY = pwd.getpwnam("nobody")  # "another user": the tests run as root
STATE = "culina-resolution.json"  # the first hook's resolution, kept for the later hooks


def decision_for(data: bytes, wheel_path: Path | None = None) -> dict:
    """An install_wheel decision document as `culina-resolver resolve --json` writes it."""
    return {"schema_version": 1, "action": "install_wheel", "reason": "a prebuilt wheel fits",
            "wheel": {"file": ASSET, "sha256": hashlib.sha256(data).hexdigest(), "variant": "null"},
            "wheel_path": str(wheel_path or ASSET), "local_build_archs": [], "build_toolkit": None,
            "pypi_toolkit": None, "host": {"gpus": []}, "warnings": [], "private_folders": []}


def rezip(data: bytes, change) -> bytes:
    """The wheel with `change(zip_out, name, content)` deciding what is written for each member."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            change(target, info, source.read(info))
    return out.getvalue()


def deliver(tmp_path: Path, data: bytes, decision: dict | None = None) -> Path:
    wheel = tmp_path / ASSET
    wheel.write_bytes(data)
    decision = decision or decision_for(data)
    return prebuilt_wheel.deliver(wheel, ASSET, decision["wheel"]["sha256"], decision, tmp_path / "dist",
                                  "culina/_build_info.json")


def test_a_verified_wheel_is_delivered_with_the_decision_recorded(tmp_path):
    data = release_server.build_wheel()
    delivered = deliver(tmp_path, data)
    assert delivered.name == "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(delivered) as wheel:
        assert json.loads(wheel.read("culina/_build_info.json"))["resolver"]["action"] == "install_wheel"
        assert wheel.read("culina/_payload.bin") == zipfile.ZipFile(io.BytesIO(data)).read("culina/_payload.bin")
        assert wheel.read("culina-0.1.0.dist-info/RECORD").decode().startswith("culina/_build_info.json,sha256=")


def test_a_wheel_swapped_after_verification_is_refused(tmp_path):
    verified = release_server.build_wheel()
    swapped = release_server.build_wheel(seed=1)
    with pytest.raises(prebuilt_wheel.DeliveryError, match="^.* changed after it was verified"):
        deliver(tmp_path, swapped, decision_for(verified))
    assert not (tmp_path / "dist").exists() or list((tmp_path / "dist").iterdir()) == []


@pytest.mark.parametrize("name", ["../evil.py", "/etc/evil", "culina/../../evil", "c:/evil"])
def test_member_names_outside_the_wheel_are_refused(tmp_path, name):
    def add_evil(target, info, content):
        target.writestr(info, content)
        if info.filename.endswith("WHEEL"):
            target.writestr(name, b"x")
    data = rezip(release_server.build_wheel(), add_evil)
    with pytest.raises(prebuilt_wheel.DeliveryError, match="^.*a path outside the wheel"):
        deliver(tmp_path, data)


def test_symbolic_links_and_duplicates_are_refused(tmp_path):
    def add_link(target, info, content):
        target.writestr(info, content)
        if info.filename.endswith("WHEEL"):
            link = zipfile.ZipInfo("culina/link")
            link.external_attr = (0o120777 << 16)
            target.writestr(link, b"/etc/passwd")
    with pytest.raises(prebuilt_wheel.DeliveryError, match="^.*symbolic link 'culina/link'"):
        deliver(tmp_path, rezip(release_server.build_wheel(), add_link))

    def duplicate_metadata(target, info, content):
        target.writestr(info, content)
        if info.filename.endswith("METADATA"):
            target.writestr(info.filename, content.replace(b"Version: 0.1.0", b"Version: 6.6.6"))
    with pytest.warns(UserWarning), pytest.raises(prebuilt_wheel.DeliveryError, match="twice"):
        deliver(tmp_path, rezip(release_server.build_wheel(), duplicate_metadata))


def test_the_metadata_pip_reads_must_name_the_asset(tmp_path):
    def other_version(target, info, content):
        target.writestr(info, content.replace(b"Version: 0.1.0", b"Version: 6.6.6") if info.filename.endswith(
            "METADATA") else content)
    with pytest.raises(prebuilt_wheel.DeliveryError, match="says culina 6.6.6"):
        deliver(tmp_path, rezip(release_server.build_wheel(), other_version))


@pytest.mark.parametrize("member, content, message", [
    ("culina-0.1.0.dist-info/RECORD", b"a,b\n", "not path,hash,size"),
    ("culina-0.1.0.dist-info/RECORD", b"\xff\xfe,,\n", "cannot read"),
    ("culina/_build_info.json", b"{not json", "is not JSON"),
    ("culina/_build_info.json", b"[1, 2]", "not a JSON object"),
])
def test_malformed_records_give_a_culina_error(tmp_path, member, content, message):
    def replace(target, info, original):
        target.writestr(info, content if info.filename == member else original)
    data = rezip(release_server.build_wheel(), replace)
    if member not in zipfile.ZipFile(io.BytesIO(data)).namelist():
        data = rezip(data, lambda target, info, original: (target.writestr(info, original),
                                                           info.filename.endswith("WHEEL") and
                                                           target.writestr(member, content)))
    with pytest.raises(prebuilt_wheel.DeliveryError, match=f"^.*{message}"):
        deliver(tmp_path, data)


def test_a_damaged_zip_gives_a_culina_error(tmp_path):
    data = release_server.build_wheel()
    with pytest.raises(prebuilt_wheel.DeliveryError, match="^cannot read"):
        deliver(tmp_path, data[: len(data) // 2])


INJECTED = b"Requires-Dist: pwn @ file:///tmp/pwn\n"


def injected_wheel(verified: bytes) -> bytes:
    """The verified wheel with one more requirement in its METADATA: what pip would install."""
    return rezip(verified, lambda target, info, content: target.writestr(
        info, content + INJECTED if info.filename.endswith(".dist-info/METADATA") else content))


def extract(wheel: Path, decision: dict, folder: Path) -> str:
    folder.mkdir(exist_ok=True)
    return prebuilt_wheel.extract_metadata(wheel, decision["wheel"]["sha256"], folder)


def extracted_metadata(folder: Path) -> list[bytes]:
    return [path.read_bytes() for path in folder.rglob("METADATA")]


@pytest.fixture
def backend(tmp_path, monkeypatch):
    """backend in a clean environment, keeping the first hook's resolution in a state
    file under tmp_path/build (as it does under the project's build/)."""
    from culina_resolver import install_resolution
    from culina_resolver import backend
    for name in [name for name in os.environ if name.startswith("CULINA_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(backend, "_state_file", lambda settings: tmp_path / "build" / STATE)
    monkeypatch.setattr(install_resolution, "_current", None)
    return backend


def next_hook(monkeypatch) -> None:
    """Forgets the resolution this process holds: pip runs each hook in a new process, which finds
    the first hook's resolution in the state file."""
    from culina_resolver import install_resolution
    monkeypatch.setattr(install_resolution, "_current", None)


def cached_wheel_resolution(monkeypatch, cache: Path, data: bytes):
    from culina_resolver import install_resolution
    from culina_resolver.helper_client import Decision
    wheel = cache / "wheels" / ASSET
    wheel.parent.mkdir(parents=True, mode=0o700)
    wheel.write_bytes(data)
    decision = Decision.from_document(decision_for(data, wheel))
    monkeypatch.setattr(install_resolution, "resolve_install", lambda settings: decision)
    return wheel


def test_a_cache_swapped_between_the_hooks_never_gives_its_metadata(backend, tmp_path, monkeypatch):
    """The attack of issue 22: whoever can write the cache's parent renames the cache away between
    get_requires_for_build_wheel (which resolved and verified the wheel) and
    prepare_metadata_for_build_wheel, and plants a wheel with an injected requirement."""
    verified = release_server.build_wheel()
    cache = tmp_path / "cache"
    cached_wheel_resolution(monkeypatch, cache, verified)
    assert backend.get_requires_for_build_wheel() == []
    planted = tmp_path / "planted"
    (planted / "wheels").mkdir(parents=True, mode=0o700)
    (planted / "wheels" / ASSET).write_bytes(injected_wheel(verified))
    cache.rename(tmp_path / "away")
    planted.rename(cache)
    next_hook(monkeypatch)
    metadata = tmp_path / "metadata"
    metadata.mkdir()
    with pytest.raises(SystemExit, match=r"^culina: .*/wheels/.*\.whl has sha256 [0-9a-f]{64} but the manifest says "
                                         r"[0-9a-f]{64}: it changed after it was verified"):
        backend.prepare_metadata_for_build_wheel(str(metadata))
    assert not any(INJECTED in text for text in extracted_metadata(metadata))


def counted_resolutions(monkeypatch) -> list:
    """One entry per resolution the helper is asked for."""
    from culina_resolver import install_resolution
    calls, resolve = [], install_resolution.resolve_install
    monkeypatch.setattr(install_resolution, "resolve_install", lambda settings: calls.append(1) or resolve(settings))
    return calls


def test_the_kept_resolution_holds_no_credentials_and_only_its_owner_reads_it(backend, tmp_path, monkeypatch,
                                                                                capsys):
    """pip install . keeps it in the user's checkout: the release URL's password and token stay
    out of it, and it is 0600."""
    monkeypatch.setenv("CULINA_RELEASE_URL", "https://me:s3cret@example.org/r?token=t0k3n")
    cached_wheel_resolution(monkeypatch, tmp_path / "cache", release_server.build_wheel())
    resolutions = counted_resolutions(monkeypatch)
    assert backend.get_requires_for_build_wheel() == []
    state = tmp_path / "build" / STATE
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    for secret in ("s3cret", "t0k3n", "me:", "example.org"):
        assert secret not in state.read_text()
    next_hook(monkeypatch)
    assert backend.prepare_metadata_for_build_wheel(str(tmp_path)) == "culina-0.1.0.dist-info"
    assert "decision (from this build's first step)" in capsys.readouterr().err
    assert len(resolutions) == 1
    assert [p.name for p in state.parent.iterdir()] == [STATE]


def test_a_link_planted_as_the_kept_resolution_is_replaced_never_followed(backend, tmp_path, monkeypatch):
    (tmp_path / "build").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not the resolver's")
    (tmp_path / "build" / STATE).symlink_to(elsewhere)
    cached_wheel_resolution(monkeypatch, tmp_path / "cache", release_server.build_wheel())
    assert backend.get_requires_for_build_wheel() == []
    assert elsewhere.read_text() == "not the resolver's"
    assert not (tmp_path / "build" / STATE).is_symlink()
    assert stat.S_IMODE((tmp_path / "build" / STATE).lstat().st_mode) == 0o600


def give_state_to_nobody(state: Path) -> None:
    os.chown(state, NOBODY.pw_uid, NOBODY.pw_gid)


def let_others_write_state(state: Path) -> None:
    state.chmod(0o666)


def let_others_write_build(state: Path) -> None:
    state.parent.chmod(0o777)


def plant_state_link(state: Path) -> None:
    state.rename(state.parent.parent / "kept")
    state.symlink_to(state.parent.parent / "kept")


@pytest.mark.parametrize("tamper, found", [
    (give_state_to_nobody, f"it belongs to user id {NOBODY.pw_uid}, neither this user"),
    (let_others_write_state, "group or others may write it (mode 666)"),
    (let_others_write_build, "build may be written by group or others (mode 777)"),
    (plant_state_link, "is a symbolic link, which is never followed"),
])
def test_a_kept_resolution_someone_else_could_have_written_is_not_reused(backend, tmp_path, monkeypatch, capsys,
                                                                          tamper, found):
    """It names the wheel and the sha256 the later hooks verify it against: whoever could write it
    could name their own."""
    cached_wheel_resolution(monkeypatch, tmp_path / "cache", release_server.build_wheel())
    resolutions = counted_resolutions(monkeypatch)
    assert backend.get_requires_for_build_wheel() == []
    tamper(tmp_path / "build" / STATE)
    next_hook(monkeypatch)
    capsys.readouterr()
    assert backend.prepare_metadata_for_build_wheel(str(tmp_path)) == "culina-0.1.0.dist-info"
    said = capsys.readouterr().err
    assert "not reusing the resolution kept by this build's first step: " in said and found in said, said
    assert said.count("resolving again") == 1
    assert len(resolutions) == 2


def test_an_untouched_cached_wheel_gives_its_metadata_in_the_next_hook(backend, tmp_path, monkeypatch):
    verified = release_server.build_wheel()
    cached_wheel_resolution(monkeypatch, tmp_path / "cache", verified)
    assert backend.get_requires_for_build_wheel() == []
    next_hook(monkeypatch)
    metadata = tmp_path / "metadata"
    metadata.mkdir()
    assert backend.prepare_metadata_for_build_wheel(str(metadata)) == "culina-0.1.0.dist-info"
    expected = zipfile.ZipFile(io.BytesIO(verified)).read("culina-0.1.0.dist-info/METADATA")
    assert extracted_metadata(metadata) == [expected]
    assert not (metadata / "culina-0.1.0.dist-info" / "RECORD").exists()


def test_a_wheel_swapped_after_its_hash_was_taken_gives_the_verified_metadata(tmp_path, monkeypatch):
    """The hash and the metadata come from one open file: a rename right after the check (here,
    the moment the hash is taken) changes nothing that is read."""
    verified = release_server.build_wheel()
    wheel = tmp_path / ASSET
    wheel.write_bytes(verified)
    planted = tmp_path / "planted.whl"
    planted.write_bytes(injected_wheel(verified))
    hashed = prebuilt_wheel.sha256_of

    def hash_then_swap(stream):
        digest = hashed(stream)
        planted.rename(wheel)
        return digest
    monkeypatch.setattr(prebuilt_wheel, "sha256_of", hash_then_swap)
    assert extract(wheel, decision_for(verified), tmp_path / "metadata") == "culina-0.1.0.dist-info"
    assert extracted_metadata(tmp_path / "metadata") == [
        zipfile.ZipFile(io.BytesIO(verified)).read("culina-0.1.0.dist-info/METADATA")]
    assert INJECTED in zipfile.ZipFile(wheel).read("culina-0.1.0.dist-info/METADATA")  # the swap did happen


def plant_link(wheel: Path, data: bytes) -> None:
    target = wheel.parent / "elsewhere.whl"
    target.write_bytes(data)
    wheel.symlink_to(target)


def plant_nobodys(wheel: Path, data: bytes) -> None:
    wheel.write_bytes(data)
    os.chown(wheel, NOBODY.pw_uid, NOBODY.pw_gid)


def plant_group_writable(wheel: Path, data: bytes) -> None:
    wheel.write_bytes(data)
    wheel.chmod(0o664)


def plant_hard_link(wheel: Path, data: bytes) -> None:
    (wheel.parent / "other.whl").write_bytes(data)
    os.link(wheel.parent / "other.whl", wheel)


def plant_fifo(wheel: Path, data: bytes) -> None:
    os.mkfifo(wheel)


@pytest.mark.parametrize("plant, found", [
    (plant_link, "is a symbolic link, which is never followed"),
    (plant_nobodys, f"it belongs to user id {NOBODY.pw_uid}, neither this user"),
    (plant_group_writable, "group or others may write it (mode 664)"),
    (plant_hard_link, "it has 2 hard links"),
    (plant_fifo, "it is a special file, not a regular file"),
])
@pytest.mark.parametrize("use", ["extract_metadata", "deliver"])
def test_a_cached_wheel_not_ours_alone_is_refused_by_both_hooks(tmp_path, plant, found, use):
    """Even with the right bytes: whoever owns or can write it could change them after the check."""
    data = release_server.build_wheel()
    wheel = tmp_path / "wheels" / ASSET
    wheel.parent.mkdir()
    plant(wheel, data)
    with pytest.raises(prebuilt_wheel.DeliveryError, match=re.escape(found)) as refused:
        if use == "deliver":
            decision = decision_for(data)
            prebuilt_wheel.deliver(wheel, ASSET, decision["wheel"]["sha256"], decision, tmp_path / "dist",
                                   "culina/_build_info.json")
        else:
            extract(wheel, decision_for(data), tmp_path / "metadata")
    assert str(wheel) in str(refused.value)
    assert not list(tmp_path.rglob("METADATA")) and not list(tmp_path.rglob("*.whl.*"))
