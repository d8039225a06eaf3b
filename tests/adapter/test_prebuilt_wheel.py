"""deliver() checks the wheel again where it is used: the bytes it copies are the verified ones,
no member can land outside the install folder, and a malformed wheel gives a DeliveryError naming it."""

from __future__ import annotations

import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "resolver" / "adapter"))

import prebuilt_wheel  # noqa: E402 - needs the path above
import release_server  # noqa: E402 - tests/conftest.py puts tests/fixtures on the path

ASSET = "culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-null.whl"


def decision_for(data: bytes) -> dict:
    return {"action": "install_wheel", "wheel": {"file": ASSET, "sha256": hashlib.sha256(data).hexdigest()}}


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
    return prebuilt_wheel.deliver(wheel, ASSET, decision or decision_for(data), tmp_path / "dist",
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
