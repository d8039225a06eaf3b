"""Wheel-variant metadata (PEP 825): `*.dist-info/variant.json` inside each release wheel and the
index file `{name}-{version}-variants.json` beside the manifest, so a variant-aware installer can
use the release assets. The properties are the manifest writer's (`variant_properties`, one
`namespace :: feature :: value` string each); this module only regroups them into PEP 825's
`variants -> label -> namespace -> feature -> [values]` form. The resolver keeps reading the
manifest.
"""
from __future__ import annotations

import csv
import io
import json
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "resolver"))
from culina_resolver.prebuilt_wheel import record_hash  # noqa: E402 - one RECORD hash for the release and delivery

# PEP 825's draft schema: "$schema" must name it, and tools refuse versions they do not know.
SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
# Every namespace the release's properties use, most important first (PEP 825 requires the list).
NAMESPACES = ["nvidia"]
MEMBER = "variant.json"


class VariantMetadataError(ValueError):
    """Variant metadata cannot be written as asked; the message names the wheel or property."""


def grouped_properties(properties: list[str]) -> dict[str, dict[str, list[str]]]:
    """["nvidia :: sm_arch :: 90_real", ...] -> {"nvidia": {"sm_arch": ["90_real", ...]}}, in order."""
    grouped: dict[str, dict[str, list[str]]] = {}
    for text in properties:
        parts = text.split(" :: ")
        if len(parts) != 3:
            raise VariantMetadataError(f"variant property {text!r}: expected 'namespace :: feature :: value'")
        namespace, feature, value = parts
        if namespace not in NAMESPACES:
            raise VariantMetadataError(f"variant property {text!r}: namespace {namespace!r} is not in "
                                       f"{NAMESPACES}; add it to variant_metadata.NAMESPACES in priority order")
        values = grouped.setdefault(namespace, {}).setdefault(feature, [])
        if value not in values:
            values.append(value)
    return grouped


def document(variants: dict[str, list[str]]) -> dict:
    """The PEP 825 document for these labels and their properties: one label for a wheel's
    variant.json, every label of the release for the index file."""
    return {"$schema": SCHEMA_URL, "default-priorities": {"namespace": NAMESPACES},
            "variants": {label: grouped_properties(properties) for label, properties in variants.items()}}


def release_variants(manifest: dict) -> dict[str, list[str]]:
    """label -> properties over the manifest's wheels; PEP 825 lets a label stand for one set only."""
    variants: dict[str, list[str]] = {}
    first_file: dict[str, str] = {}
    for wheel in manifest["wheels"]:
        label, properties = wheel["variant"], wheel["variant_properties"]
        if label in variants and sorted(variants[label]) != sorted(properties):
            raise VariantMetadataError(f"variant {label!r} has different properties in {first_file[label]} and "
                                       f"{wheel['file']}: build every {label} wheel with the same toolkit and "
                                       "architecture list")
        variants.setdefault(label, properties)
        first_file.setdefault(label, wheel["file"])
    return variants


def index_name(manifest: dict) -> str:
    """culina-0.1.0-variants.json: name and version normalised as in wheel file names."""
    return f"{manifest['name'].replace('-', '_').lower()}-{manifest['version'].replace('-', '_')}-variants.json"


def write_index(manifest: dict, folder: Path) -> Path:
    target = folder / index_name(manifest)
    target.write_text(json.dumps(document(release_variants(manifest)), indent=2) + "\n")
    return target


def embed(wheel: Path, label: str, properties: list[str]) -> None:
    """Adds `<dist-info>/variant.json` to `wheel` in place, listed in RECORD with its hash and
    size. Every other member is copied byte for byte, RECORD last as the wheel spec asks."""
    data = (json.dumps(document({label: properties}), indent=2) + "\n").encode()
    with zipfile.ZipFile(wheel) as source:
        members = source.infolist()
        records = [m.filename for m in members if m.filename.endswith(".dist-info/RECORD") and m.filename.count("/") == 1]
        if len(records) != 1:
            raise VariantMetadataError(f"{wheel.name}: expected one <name>.dist-info/RECORD, found {records}")
        record_name = records[0]
        member_name = record_name.rsplit("/", 1)[0] + "/" + MEMBER
        if member_name in source.namelist():
            raise VariantMetadataError(f"{wheel.name} already carries {member_name}: embed it once, after auditwheel")
        rows = [row for row in csv.reader(io.StringIO(source.read(record_name).decode())) if row]
        own_row = next((i for i, row in enumerate(rows) if row[0] == record_name), len(rows))
        rows.insert(own_row, [member_name, record_hash(data), str(len(data))])
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows(rows)
        partial = wheel.with_name(wheel.name + ".part")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as target:
            for member in members:
                if member.filename != record_name:
                    target.writestr(member, source.read(member))
            target.writestr(member_name, data)
            target.writestr(record_name, record.getvalue())
    partial.replace(wheel)


def read(wheel: Path) -> dict:
    """The variant.json inside `wheel`."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/" + MEMBER) and n.count("/") == 1]
        if len(names) != 1:
            raise VariantMetadataError(f"{wheel.name}: expected one <name>.dist-info/{MEMBER}, found {names}; "
                                       "tools/release/build_release.py puts it into every wheel it builds")
        return json.loads(archive.read(names[0]))
