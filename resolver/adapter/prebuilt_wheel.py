"""Hands a verified release wheel to pip: its metadata first when pip asks for it, then the
wheel under the standard file name (the variant label is dropped, since pip knows no labels),
with the resolver's decision added to the build record `culina/_build_info.json` and RECORD
updated to match. Every other member, the extension module included, is copied byte for byte."""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

BUILD_RECORD_MEMBER = "culina/_build_info.json"


def standard_name(asset_name: str) -> str:
    """culina-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl -> ...-manylinux_2_28_x86_64.whl"""
    stem = asset_name.removesuffix(".whl")
    return stem.rsplit("-", 1)[0] + ".whl"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def extract_metadata(wheel_path: Path, metadata_directory: Path) -> str:
    """The wheel's .dist-info (less RECORD, which deliver rewrites) into metadata_directory, for
    PEP 517's prepare_metadata_for_build_wheel; returns the folder's name."""
    with zipfile.ZipFile(wheel_path) as wheel:
        members = [m for m in wheel.namelist() if m.split("/")[0].endswith(".dist-info") and m.count("/") == 1
                   and not m.endswith("/RECORD")]
        for member in members:
            wheel.extract(member, metadata_directory)
    return members[0].split("/")[0]


def deliver(wheel_path: Path, asset_name: str, decision: dict, dist_dir: Path) -> Path:
    dist_dir.mkdir(parents=True, exist_ok=True)
    target = dist_dir / standard_name(asset_name)
    with zipfile.ZipFile(wheel_path) as source:
        members = source.infolist()
        record_name = next(m.filename for m in members if m.filename.endswith(".dist-info/RECORD"))
        record = json.loads(source.read(BUILD_RECORD_MEMBER)) if BUILD_RECORD_MEMBER in source.namelist() else {}
        record["resolver"] = decision
        new_record = (json.dumps(record, indent=2) + "\n").encode()
        rows = list(csv.reader(io.StringIO(source.read(record_name).decode())))
        rows = [row for row in rows if row and row[0] != BUILD_RECORD_MEMBER]
        rows.insert(0, [BUILD_RECORD_MEMBER, _record_hash(new_record), str(len(new_record))])
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
            for member in members:
                if member.filename in (BUILD_RECORD_MEMBER, record_name):
                    continue
                wheel.writestr(member, source.read(member))
            wheel.writestr(BUILD_RECORD_MEMBER, new_record)
            wheel.writestr(record_name, out.getvalue())
    return target
