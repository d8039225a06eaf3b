"""Hands a verified release wheel to pip: its metadata first when pip asks for it, then the
wheel under the standard file name (the variant label is dropped, since pip knows no labels),
with the resolver's decision added to the build record (`culina/_build_info.json` for culina: beside
the extension, ProjectConfig.build_record_member) and RECORD
updated to match. Every other member, the extension module included, is copied byte for byte.

The wheel in the cache is checked again here, where it is used, by both hooks: opened once without
following a link, its owner and mode checked on that descriptor (open_own_file), its sha256 against
the decision's taken on the same descriptor before anything else is read (open_verified), and the
metadata and members read from those verified bytes, never from a path opened again. Then its
member names (no paths out of the wheel, no links, no duplicates) and the METADATA pip will read."""
from __future__ import annotations

import base64
import copy
import csv
import email.parser
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import BinaryIO

from .adapter_error import AdapterError

COPY_PIECE = 1 << 20          # members and the wheel are read in pieces of this size
RECORD_SIZE_LIMIT = 16 << 20  # RECORD and _build_info.json are text of some KiB
# O_NONBLOCK: a FIFO planted in the file's place cannot hang the open (it is refused after fstat).
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
FIRST_FREE_FD = 3  # past stdin, stdout and stderr
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# What reading a wheel may raise besides DeliveryError; each becomes a DeliveryError naming the wheel.
WHEEL_READ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, UnicodeDecodeError)


class DeliveryError(AdapterError):
    """The wheel cannot be handed to pip; the message names the problem (the exit adds the project's name)."""


def standard_name(asset_name: str) -> str:
    """name-0.1.0-cp312-cp312-manylinux_2_28_x86_64-cu130.whl -> ...-manylinux_2_28_x86_64.whl"""
    stem = asset_name.removesuffix(".whl")
    return stem.rsplit("-", 1)[0] + ".whl"


def record_hash(data: bytes) -> str:
    """A RECORD row's hash field for `data` (PEP 376: urlsafe base64 of the sha256, unpadded)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _checked_members(wheel: zipfile.ZipFile, source: str) -> list[zipfile.ZipInfo]:
    """The members, refused when a name could escape the install folder, is a link or repeats."""
    seen: set[str] = set()
    for member in wheel.infolist():
        name = member.filename
        parts = name.split("/")
        if name.startswith("/") or "\\" in name or ".." in parts or (len(name) > 1 and name[1] == ":"):
            raise DeliveryError(f"{source} holds the member {name!r}, a path outside the wheel; "
                                "refusing it (reinstall with --no-cache-dir, or build from source)")
        if stat.S_ISLNK(member.external_attr >> 16):
            raise DeliveryError(f"{source} holds the symbolic link {name!r}; a wheel holds none, refusing it")
        if name in seen:
            raise DeliveryError(f"{source} holds {name!r} twice; refusing it, since pip and this installer might "
                                "read different copies")
        seen.add(name)
    return wheel.infolist()


def _read_small(wheel: zipfile.ZipFile, member: zipfile.ZipInfo, source: str) -> bytes:
    if member.file_size > RECORD_SIZE_LIMIT:
        raise DeliveryError(f"{member.filename} in {source} is {member.file_size} bytes, more than such a "
                            f"file may be ({RECORD_SIZE_LIMIT}); refusing the wheel")
    with wheel.open(member) as stream:
        return stream.read(RECORD_SIZE_LIMIT + 1)[:RECORD_SIZE_LIMIT]


def _metadata_fields(text: str) -> tuple[str, str]:
    """Name and Version from a core-metadata header block."""
    message = email.parser.HeaderParser().parsestr(text)
    return message.get("Name", ""), message.get("Version", "")


def normalized_name(name: str) -> str:
    """The one project-name normaliser on the Python side, as wheel file names compare names and
    as the helper's normalize_distribution_name does: lowercase, runs of "-_." become one "_"."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _check_metadata(wheel: zipfile.ZipFile, asset_name: str, source: str) -> None:
    """The METADATA pip reads (the one .dist-info folder's, through zipfile as pip does) names the
    project and version of the asset."""
    project, version = asset_name.split("-")[:2]
    folders = {name.split("/")[0] for name in wheel.namelist() if name.split("/")[0].endswith(".dist-info")}
    if len(folders) != 1:
        raise DeliveryError(f"{source} holds {len(folders)} .dist-info folders ({', '.join(sorted(folders))});"
                            " a wheel holds exactly one, refusing it")
    folder = folders.pop()
    try:
        metadata = wheel.getinfo(f"{folder}/METADATA")
    except KeyError:
        raise DeliveryError(f"{source} has no {folder}/METADATA; refusing it") from None
    name, found_version = _metadata_fields(_read_small(wheel, metadata, source).decode("utf-8", "replace"))
    if normalized_name(name) != normalized_name(project) or found_version != version:
        raise DeliveryError(f"{folder}/METADATA in {source} says {name} {found_version}, the asset "
                            f"{asset_name} is {project} {version}; refusing it")


def sha256_of(stream: BinaryIO) -> str:
    """Hex sha256 of a seekable stream, read in pieces; the stream is left at its start."""
    digest = hashlib.sha256()
    stream.seek(0)
    for piece in iter(lambda: stream.read(COPY_PIECE), b""):
        digest.update(piece)
    stream.seek(0)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in pieces."""
    with open(path, "rb") as fh:
        return sha256_of(fh)


def _record_rows(text: str, record_name: str, source: str) -> list[list[str]]:
    try:
        rows = [row for row in csv.reader(io.StringIO(text)) if row]
    except csv.Error as error:
        raise DeliveryError(f"{record_name} in {source} is not CSV ({error}); refusing the wheel") from None
    if any(len(row) != 3 for row in rows):
        raise DeliveryError(f"{record_name} in {source} has rows that are not path,hash,size; refusing the wheel")
    return rows


def _build_record(wheel: zipfile.ZipFile, member: str, source: str) -> dict:
    if member not in wheel.namelist():
        return {}
    text = _read_small(wheel, wheel.getinfo(member), source)
    try:
        record = json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise DeliveryError(f"{member} in {source} is not JSON ({error}); refusing the wheel") from None
    if not isinstance(record, dict):
        raise DeliveryError(f"{member} in {source} is not a JSON object; refusing the wheel")
    return record


def _foreign_file_problem(info: os.stat_result) -> str | None:
    """What makes the file described by `info` untrustworthy, or None: it must be a regular file of
    this user or root, with one link (no hard link to a file someone else controls), that no one
    else may write."""
    kind = stat.S_IFMT(info.st_mode)
    if kind != stat.S_IFREG:
        what = {stat.S_IFDIR: "a folder", stat.S_IFLNK: "a symbolic link"}.get(kind, "a special file")
        return f"it is {what}, not a regular file"
    if info.st_uid not in (os.geteuid(), 0):
        return f"it belongs to user id {info.st_uid}, neither this user ({os.geteuid()}) nor root"
    if info.st_nlink != 1:
        return f"it has {info.st_nlink} hard links"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"group or others may write it (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def open_own_file(path: Path) -> BinaryIO:
    """`path` opened for reading without following a link, and checked on that descriptor
    (_foreign_file_problem): whatever happens to the path afterwards, what is read from the
    returned file is what was checked. The descriptor is never 0, 1 or 2 (a parent that started us
    with one closed makes os.open return it): a helper run from it (helper_build.Helper) would have
    it replaced by Popen's redirections before the exec. Raises DeliveryError naming the file and
    what was found."""
    fix = "delete it and install again: a file is used only when nobody but you or root can have changed it"
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise DeliveryError(f"{path} is a symbolic link, which is never followed; refusing it ({fix})") from None
        raise DeliveryError(f"cannot open {path} ({error.strerror}); refusing it (install again to fetch or "
                            "build it anew)") from None
    try:
        if fd < FIRST_FREE_FD:
            low, fd = fd, fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, FIRST_FREE_FD)
            os.close(low)
        problem = _foreign_file_problem(os.fstat(fd))
        if problem:
            raise DeliveryError(f"will not use {path}: {problem} ({fix})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def write_own_file(path: Path, text: str) -> None:
    """`text` as `path`, 0600 and atomically, the counterpart of open_own_file: written to a new
    name in the same folder (mkstemp: O_CREAT|O_EXCL|O_NOFOLLOW, 0600) and renamed over `path`, so
    a reader sees the old content or the new, never part of it, and a link planted at either name
    is replaced, never followed."""
    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(staged, path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


def open_verified(path: Path, expected_sha256: str, vouched_by: str) -> BinaryIO:
    """open_own_file(path), then its sha256 taken on that same descriptor and compared with
    `expected_sha256` (what `vouched_by` says) before anything else is read from it; the file is
    returned at its start. Raises DeliveryError."""
    expected = str(expected_sha256 or "").lower()
    if not SHA256_HEX.fullmatch(expected):
        raise DeliveryError(f"{vouched_by} names no sha256 for {path} (found {expected_sha256!r}); cannot verify "
                            "it, refusing it")
    opened = open_own_file(path)
    try:
        digest = sha256_of(opened)
    except OSError as error:
        opened.close()
        raise DeliveryError(f"cannot read {path} ({error.strerror}); refusing it") from None
    if digest != expected:
        opened.close()
        raise DeliveryError(f"{path} has sha256 {digest} but {vouched_by} says {expected}: it changed after it was "
                            "verified; refusing it (delete it and install again to fetch or build it anew)")
    return opened


def extract_metadata(wheel_path: Path, expected_sha256: str, metadata_directory: Path) -> str:
    """The wheel's .dist-info (less RECORD, which deliver rewrites) into metadata_directory, for
    PEP 517's prepare_metadata_for_build_wheel; returns the folder's name. The metadata comes from
    the bytes verified against `expected_sha256` (the decision's), through the one open file: a
    wheel swapped in the cache between the hooks is refused, never read. Raises DeliveryError."""
    source = str(wheel_path)
    try:
        with open_verified(wheel_path, expected_sha256, "the manifest") as opened, zipfile.ZipFile(opened) as wheel:
            infos = _checked_members(wheel, source)
            members = [m.filename for m in infos if m.filename.split("/")[0].endswith(".dist-info")
                       and m.filename.count("/") == 1 and not m.filename.endswith("/RECORD")]
            if not members:
                raise DeliveryError(f"{source} holds no .dist-info folder; a wheel holds one, refusing it")
            for member in members:
                wheel.extract(member, metadata_directory)
    except WHEEL_READ_ERRORS as error:
        raise DeliveryError(f"cannot read {source} as a wheel ({error}); refusing it") from None
    return members[0].split("/")[0]


def deliver(wheel_path: Path, asset_name: str, expected: str, decision: dict, dist_dir: Path,
            build_record_member: str, *, cache_root: Path | None = None) -> Path:
    """The wheel at wheel_path, as pip gets it. `expected` is its sha256 as the decision gives it
    (from the manifest), checked through open_verified on the same descriptor every member is then
    copied from, so a file swapped after the helper verified it is caught here.
    build_record_member: the wheel's build record, which gets `decision` (the helper's document)
    and `cache_root` (the cache this install used, for `culina cache`).
    Raises DeliveryError, never a raw zipfile or csv error."""
    dist_dir.mkdir(parents=True, exist_ok=True)
    target = dist_dir / standard_name(asset_name)
    source = str(wheel_path)
    try:
        with open_verified(wheel_path, expected, "the manifest") as opened:
            _deliver_verified(opened, source, asset_name, decision, target, build_record_member, cache_root)
    except WHEEL_READ_ERRORS as error:
        target.unlink(missing_ok=True)
        raise DeliveryError(f"cannot read {source} as a wheel ({error}); refusing it") from None
    except DeliveryError:
        target.unlink(missing_ok=True)
        raise
    return target


def _deliver_verified(opened: BinaryIO, source: str, asset_name: str, decision: dict, target: Path,
                      record_member: str, cache_root: Path | None) -> None:
    with zipfile.ZipFile(opened) as wheel:
        members = _checked_members(wheel, source)
        _check_metadata(wheel, asset_name, source)
        records = [m for m in members if m.filename.endswith(".dist-info/RECORD") and m.filename.count("/") == 1]
        if len(records) != 1:
            raise DeliveryError(f"{source} holds {len(records)} .dist-info/RECORD files; a wheel holds one")
        record_name = records[0].filename
        record = _build_record(wheel, record_member, source)
        record["resolver"] = decision
        record["cache_root"] = str(cache_root) if cache_root else None
        new_record = (json.dumps(record, indent=2) + "\n").encode()
        rows = _record_rows(_read_small(wheel, records[0], source).decode("utf-8"), record_name, source)
        rows = [row for row in rows if row[0] != record_member]
        rows.insert(0, [record_member, record_hash(new_record), str(len(new_record))])
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as delivered:
            for member in members:
                if member.filename in (record_member, record_name):
                    continue
                # A copy: writing updates the entry's offsets, which the source still reads by.
                with wheel.open(member) as piece_in, delivered.open(copy.copy(member), "w", force_zip64=True) as piece_out:
                    shutil.copyfileobj(piece_in, piece_out, COPY_PIECE)
            delivered.writestr(record_member, new_record)
            delivered.writestr(record_name, out.getvalue())
