"""The regular files below a directory, as the archive lists an agent's files: in name
order, following no symlink, with their (inode, size, mtime) and only names that are
UTF-8 (a store key is text)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["file_identity", "is_utf8", "regular_file", "regular_files"]


def file_identity(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a byte name os.fsdecode kept as surrogates
        return False
    return True


def regular_file(path: Path) -> tuple[int, int, int] | None:
    """The identity of ``path`` if it is a regular file (not a symlink), else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return file_identity(info) if stat.S_ISREG(info.st_mode) else None


def regular_files(root: Path, suffix: str) -> Iterator[tuple[str, Path, tuple[int, int, int]]]:
    """``(rel, path, identity)`` of the regular files below ``root`` whose names end
    in ``suffix`` (module docstring)."""
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(suffix):
                continue
            path = Path(directory) / name
            identity = regular_file(path)
            rel = path.relative_to(root).as_posix()
            if identity is not None and is_utf8(rel):
                yield rel, path, identity
