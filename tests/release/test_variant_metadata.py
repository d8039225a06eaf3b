"""PEP 825 wheel-variant metadata: variant.json in every release wheel and the release's
culina-<version>-variants.json, valid against the spec's schema and saying what the manifest says;
and installing an asset by hand with plain pip (tools/release/install_asset.py)."""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from release_build import ROOT, build_record, fresh_venv

import variant_metadata

SCHEMA = json.loads((Path(__file__).with_name("pep825_variant_schema.json")).read_text())
INSTALL_ASSET = ROOT / "tools" / "release" / "install_asset.py"
CU130_PROPERTIES = ["nvidia :: cuda_version_lower_bound :: 13.0", "nvidia :: sm_arch :: 90_real",
                    "nvidia :: sm_arch :: 120_virtual"]


def grouped(properties: list[str]) -> dict:
    """The PEP's nesting, built here independently of variant_metadata."""
    out: dict = {}
    for text in properties:
        namespace, feature, value = text.split(" :: ")
        out.setdefault(namespace, {}).setdefault(feature, []).append(value)
    return out


def record_rows(archive: zipfile.ZipFile) -> dict[str, tuple[str, str]]:
    name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
    return {row[0]: (row[1], row[2]) for row in csv.reader(io.StringIO(archive.read(name).decode())) if row}


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def small_wheel(path: Path) -> Path:
    """A minimal valid wheel (RECORD lists every member and itself)."""
    members = {"culina/__init__.py": b"", "culina-0.1.0.dist-info/METADATA":
               b"Metadata-Version: 2.1\nName: culina\nVersion: 0.1.0\n",
               "culina-0.1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"}
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members.items()) + "culina-0.1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("culina-0.1.0.dist-info/RECORD", record)
    return path


# --- the release build's assets -------------------------------------------------------------------

def test_every_wheel_carries_a_valid_variant_json_that_agrees_with_the_manifest(release):
    for entry in release.manifest["wheels"]:
        with zipfile.ZipFile(release.out / entry["file"]) as archive:
            data = archive.read("culina-0.1.0.dist-info/variant.json")
            rows = record_rows(archive)
        document = json.loads(data)
        jsonschema.validate(document, SCHEMA)
        assert document["$schema"] == SCHEMA["$id"]
        assert document["variants"] == {entry["variant"]: grouped(entry["variant_properties"])}
        assert set(document["default-priorities"]["namespace"]) >= set(document["variants"][entry["variant"]])
        assert rows["culina-0.1.0.dist-info/variant.json"] == (record_hash(data), str(len(data)))


def test_record_still_matches_every_member_of_the_wheel(release):
    for wheel in release.wheels:
        with zipfile.ZipFile(wheel) as archive:
            rows = record_rows(archive)
            listed = {name for name, (digest, _) in rows.items() if digest}
            members = {n for n in archive.namelist() if not n.endswith("/") and not n.endswith(".dist-info/RECORD")}
            assert listed == members
            for name in members:
                data = archive.read(name)
                assert rows[name] == (record_hash(data), str(len(data))), name


def test_the_variants_index_lists_every_variant_of_the_manifest(release):
    index = release.out / "culina-0.1.0-variants.json"
    document = json.loads(index.read_text())
    jsonschema.validate(document, SCHEMA)
    assert document["variants"] == {w["variant"]: grouped(w["variant_properties"]) for w in release.manifest["wheels"]}
    for wheel in release.wheels:
        with zipfile.ZipFile(wheel) as archive:
            inside = json.loads(archive.read("culina-0.1.0.dist-info/variant.json"))
        assert inside["default-priorities"] == document["default-priorities"]
        assert inside["variants"].items() <= document["variants"].items()


def test_an_asset_installs_by_hand_with_plain_pip(release, tmp_path, clean_env):
    wheel = release.wheels[0]
    python = fresh_venv(tmp_path / "venv")
    done = subprocess.run([sys.executable, str(INSTALL_ASSET), str(wheel), "--python", str(python), "--",
                           "--no-deps", "--no-index"], capture_output=True, text=True, env=clean_env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert build_record(python, clean_env)["variant"] == wheel.name.removesuffix(".whl").rsplit("-", 1)[1]


# --- the pieces, on small inputs ------------------------------------------------------------------

def test_embed_adds_variant_json_and_its_record_row_before_records_own(tmp_path):
    wheel = small_wheel(tmp_path / "culina-0.1.0-cp312-cp312-linux_x86_64-cu130.whl")
    variant_metadata.embed(wheel, "cu130", CU130_PROPERTIES)
    document = variant_metadata.read(wheel)
    jsonschema.validate(document, SCHEMA)
    assert document["variants"] == {"cu130": grouped(CU130_PROPERTIES)}
    with zipfile.ZipFile(wheel) as archive:
        record = archive.read("culina-0.1.0.dist-info/RECORD").decode().splitlines()
        assert archive.namelist()[-1] == "culina-0.1.0.dist-info/RECORD"
    assert record[-2].startswith("culina-0.1.0.dist-info/variant.json,sha256=")
    assert record[-1] == "culina-0.1.0.dist-info/RECORD,,"
    with pytest.raises(variant_metadata.VariantMetadataError, match="already carries"):
        variant_metadata.embed(wheel, "cu130", CU130_PROPERTIES)


def test_the_null_variant_has_no_properties():
    document = variant_metadata.document({"null": []})
    jsonschema.validate(document, SCHEMA)
    assert document["variants"] == {"null": {}}


def test_a_label_with_two_property_sets_is_refused():
    wheels = [{"file": "a-cu130.whl", "variant": "cu130", "variant_properties": CU130_PROPERTIES},
              {"file": "b-cu130.whl", "variant": "cu130", "variant_properties": CU130_PROPERTIES[:2]}]
    with pytest.raises(variant_metadata.VariantMetadataError, match="'cu130' has different properties in a-cu130.whl"):
        variant_metadata.write_index({"name": "culina", "version": "0.1.0", "wheels": wheels}, Path("/nonexistent"))


def test_a_property_of_an_unlisted_namespace_is_refused():
    with pytest.raises(variant_metadata.VariantMetadataError, match="namespace 'x86_64' is not in"):
        variant_metadata.document({"v3": ["x86_64 :: level :: v3"]})


def test_install_asset_checks_the_hash_and_names_the_copy_as_pip_expects(tmp_path):
    wheel = small_wheel(tmp_path / "culina-0.1.0-cp312-cp312-linux_x86_64-cu130.whl")
    data = wheel.read_bytes()
    manifest = {"wheels": [{"file": wheel.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}]}
    (tmp_path / "release-manifest.json").write_text(json.dumps(manifest))

    def run(*args):
        return subprocess.run([sys.executable, str(INSTALL_ASSET), *args], capture_output=True, text=True, timeout=60)

    done = run(str(wheel), "--dest", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == tmp_path / "out" / "culina-0.1.0-cp312-cp312-linux_x86_64.whl"
    assert Path(done.stdout.strip()).read_bytes() == data

    wheel.write_bytes(data[:40] + bytes([data[40] ^ 1]) + data[41:])  # same size, other bytes
    done = run(str(wheel), "--dest", str(tmp_path / "out2"))
    assert done.returncode == 1 and "sha256" in done.stderr and "download it again" in done.stderr
    assert not (tmp_path / "out2").exists()

    other = tmp_path / "culina-0.1.0-cp312-cp312-linux_x86_64-cu129.whl"
    other.write_bytes(data)
    done = run(str(other), "--dest", str(tmp_path / "out3"))
    assert done.returncode == 1 and "is not listed in" in done.stderr and wheel.name in done.stderr
