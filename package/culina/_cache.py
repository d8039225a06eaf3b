"""`culina cache list` and `culina cache purge`: the folders the install keeps under its cache root,
`wheels/` (verified release wheels) and `helper/` (compiled install helpers).

The root is the one the install decided (the build record's `cache_root`, written by the build
adapter, which owns the rule), never worked out again here; `--cache-dir` names another. Purging
removes only what is this user's: every entry is examined without following links, through
descriptors opened with O_NOFOLLOW, so a link or another user's file inside the cache is left
alone (and named), and a folder swapped for a link while the purge runs is not entered."""
from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

from .errors import CacheError

# What the install keeps under the cache root (fetch/wheel_cache and helper_build name them).
CACHE_FOLDERS = ("wheels", "helper")


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str          # relative to the cache root: "wheels/culina-0.1.0-...whl"
    size: int          # bytes, of every file below it (links not followed)
    foreign: str | None  # why purge leaves it alone (a link, another user's), or None


def cache_root(record: dict, cache_dir: str | None) -> Path:
    """`cache_dir` when given, else the root the install recorded."""
    if cache_dir:
        if not os.path.isabs(os.path.expanduser(cache_dir)):
            raise CacheError(f"--cache-dir {cache_dir!r} is not an absolute path",
                             "name the folder from / (or ~/...), as CULINA_CACHE_DIR takes it")
        return Path(os.path.normpath(os.path.expanduser(cache_dir)))
    root = record.get("cache_root")
    if not root:
        raise CacheError("this copy's build record (culina/_build_info.json) does not name the cache its install used",
                         "pass --cache-dir DIR: the install's CULINA_CACHE_DIR, else $XDG_CACHE_HOME/culina or "
                         "~/.cache/culina")
    return Path(root)


def _foreign(info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "a link"
    if info.st_uid != os.getuid():
        return f"owned by uid {info.st_uid}"
    return None


def _tree_size(parent_fd: int, name: str, info: os.stat_result) -> int:
    if not stat.S_ISDIR(info.st_mode):
        return info.st_size if stat.S_ISREG(info.st_mode) else 0
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    try:
        return sum(_tree_size(fd, child, os.stat(child, dir_fd=fd, follow_symlinks=False)) for child in os.listdir(fd))
    finally:
        os.close(fd)


def _open_folder(root: Path, folder: str) -> int | None:
    """The descriptor of root/folder, opened without following a link at either step; None when
    it does not exist."""
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CacheError(f"cannot open the cache root {root}: {error.strerror}",
                         "check that it is a folder of yours, not a link") from None
    try:
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CacheError(f"cannot open {root / folder}: {error.strerror}",
                         "check that it is a folder of yours, not a link") from None
    finally:
        os.close(root_fd)


def entries(root: Path) -> list[Entry]:
    """Every entry of the cache folders, with its size and whether purge would leave it alone."""
    found = []
    for folder in CACHE_FOLDERS:
        fd = _open_folder(root, folder)
        if fd is None:
            continue
        try:
            for name in sorted(os.listdir(fd)):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                found.append(Entry(f"{folder}/{name}", _tree_size(fd, name, info), _foreign(info)))
        finally:
            os.close(fd)
    return found


def _remove(parent_fd: int, name: str, path: str) -> list[str]:
    """Removes parent/name when it and everything below it is this user's and no link; returns
    what was left alone, and why."""
    info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    foreign = _foreign(info)
    if foreign:
        return [f"{path}: {foreign}"]
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return []
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return [f"{path}: replaced while the purge ran"]
        kept = [problem for child in os.listdir(fd) for problem in _remove(fd, child, f"{path}/{child}")]
    finally:
        os.close(fd)
    if not kept:
        os.rmdir(name, dir_fd=parent_fd)
    return kept


def purge(root: Path) -> tuple[int, list[str]]:
    """Removes this user's entries of the cache folders: (bytes of the entries removed whole, what
    was left alone and why)."""
    freed, kept = 0, []
    for entry in entries(root):
        folder, name = entry.name.split("/", 1)
        fd = _open_folder(root, folder)
        if fd is None:
            continue
        try:
            left = _remove(fd, name, entry.name)
        finally:
            os.close(fd)
        kept += left
        freed += 0 if left else entry.size
    return freed, kept


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    return f"{size / 1024:.1f} KiB" if size < 1024 ** 2 else f"{size / 1024 ** 2:.1f} MiB"
