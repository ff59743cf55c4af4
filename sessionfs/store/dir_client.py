"""A store in a directory (``file:///ABS/DIR``): the local archive, same keys as S3.

The key ``machines/m/sessions/p/s.jsonl/g00000001/0000000000000000`` is the file of that
path under the root. Every object is written the way the rest of sessionfs writes what it
must not lose: into a new private file (``0600``; unnamed, ``O_TMPFILE``, where the file
system allows, else a ``mkstemp`` temp file in ``<root>/.tmp/``), ``fsync``-ed, then
hard-linked to its key (``link(2)`` fails when the name exists, so it is ``PutObject``
with ``If-None-Match: *``: one of two racing creates wins, and an object is never
overwritten) and its directory ``fsync``-ed. A reader therefore sees an object whole or
not at all, after a crash too; a killed writer leaves nothing, or a temp file swept
after a day. Directories are created ``0700`` whatever the umask.

A directory store is input like a bucket (docs/store.md, "Trust"): listings follow no
symlink, take only regular files whose names are UTF-8, and the engine and the mirror
check every key and object as they do S3's. A full disk (``ENOSPC``, ``EDQUOT``) is
`StoreFull`: the temp file is removed, nothing is half there, and the next pass goes on.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from core.formats.file_walk import is_utf8
from core.private_files import PRIVATE_FILE_MODE

from .client import (
    CHUNK,
    AlreadyExists,
    Download,
    ListedObject,
    NotFound,
    StoreClient,
    StoreError,
    StoreFull,
)
from .private import make_private_dirs
from .url import DirStoreURL

__all__ = ["TEMP_DIR", "DirStoreClient"]

#: Where objects are written before they are linked to their key (no key starts so).
TEMP_DIR = ".tmp"
#: A temp file this old was left by a killed writer.
STALE_TEMP_SECONDS = 24 * 3600
_FULL = {errno.ENOSPC, errno.EDQUOT}
_ABSENT = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP}


def _error(error: OSError, what: str) -> StoreError:
    if error.errno in _FULL:
        return StoreFull(f"{what}: no space left in the store ({error.strerror})")
    return StoreError(f"{what}: {error.strerror or error}")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _proc() -> int:
    """``/proc``, open once: with it as ``src_dir_fd``, ``os.link`` calls ``linkat``
    with ``AT_SYMLINK_FOLLOW`` (a bare path would make it ``link``, which links the
    ``/proc`` symlink itself)."""
    return os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _etag(info: os.stat_result) -> str:
    """Objects are never rewritten: the inode and mtime name one object's bytes."""
    return f"{info.st_ino:x}-{info.st_mtime_ns:x}"


class DirStoreClient(StoreClient):
    """The store calls over one directory (module docstring)."""

    url: DirStoreURL

    def __init__(self, url: DirStoreURL) -> None:
        self.url = url
        self.root = url.root
        #: objects are written as unnamed files (``O_TMPFILE``) while the fs allows it
        self._unnamed = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if any(part in ("", ".", "..") for part in parts) or "\x00" in key:
            raise StoreError(f"{key!r} is not a key a directory store can hold")
        return self.root.joinpath(*parts)

    # -- writing -----------------------------------------------------------------------

    def put_if_absent(self, key: str, body: bytes | BinaryIO) -> None:
        target = self._path(key)
        try:
            make_private_dirs(target.parent)
            fd, temp_name = self._new_object(target.parent)
        except OSError as error:
            raise _error(error, f"put {key}") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                if isinstance(body, bytes):
                    handle.write(body)
                else:
                    shutil.copyfileobj(body, handle, CHUNK)
                handle.flush()
                os.fsync(handle.fileno())
                if temp_name is not None:
                    os.link(temp_name, target)
                else:  # an unnamed file is named through /proc (linkat follows it)
                    os.link(f"self/fd/{handle.fileno()}", target, src_dir_fd=_proc())
        except FileExistsError:
            raise AlreadyExists(f"put {key}: the key already exists") from None
        except OSError as error:
            raise _error(error, f"put {key}") from None
        finally:
            if temp_name is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp_name)
        try:
            _fsync_dir(target.parent)
        except OSError as error:
            raise _error(error, f"put {key}") from None

    def _new_object(self, directory: Path) -> tuple[int, str | None]:
        """A new private file to write an object into: unnamed in ``directory``
        (``O_TMPFILE``: a killed writer leaves nothing behind), else, where the file
        system cannot, a temp file in ``<root>/.tmp/`` (its name is returned)."""
        if self._unnamed:
            try:
                flags = os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC
                return os.open(directory, flags, PRIVATE_FILE_MODE), None
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                    raise
                self._unnamed = False
        temp_dir = self.root / TEMP_DIR
        make_private_dirs(temp_dir)
        return tempfile.mkstemp(prefix="object.", dir=temp_dir)

    def create_bucket(self) -> None:
        try:
            make_private_dirs(self.root)
        except OSError as error:
            raise _error(error, f"create {self.root}") from None
        self._sweep_temps()

    def _sweep_temps(self) -> None:
        """Remove temp files a killed writer left (old enough that none is in use)."""
        cutoff = time.time() - STALE_TEMP_SECONDS
        with contextlib.suppress(OSError), os.scandir(self.root / TEMP_DIR) as found:
            for entry in found:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)

    # -- reading -----------------------------------------------------------------------

    @contextmanager
    def download(self, key: str) -> Iterator[Download]:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as error:
            if error.errno in _ABSENT:  # ELOOP: a link, never followed: not an object
                raise NotFound(f"get {key}: not found") from None
            raise _error(error, f"get {key}") from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotFound(f"get {key}: not an object")
            yield Download(etag=_etag(info), size=info.st_size, chunks=self._chunks(handle, key))

    @staticmethod
    def _chunks(handle: BinaryIO, key: str) -> Iterator[bytes]:
        try:
            while chunk := handle.read(CHUNK):
                yield chunk
        except OSError as error:
            raise _error(error, f"get {key}") from None

    def head(self, key: str) -> ListedObject:
        try:
            info = os.lstat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"head {key}: not found") from None
        except OSError as error:
            raise _error(error, f"head {key}") from None
        if not stat.S_ISREG(info.st_mode):
            raise NotFound(f"head {key}: not an object")
        return ListedObject(key, info.st_size, _etag(info), info.st_mtime)

    def list(self, prefix: str) -> Iterator[ListedObject]:
        """Every object under ``prefix`` in key order (the directory the prefix names is
        walked, following no link; a prefix need not end at a ``/``)."""
        head, _, _ = prefix.rpartition("/")
        try:
            start = self._path(head) if head else self.root
        except StoreError:
            return
        found: list[ListedObject] = []
        try:
            _walk(start, head, prefix, found)
        except OSError as error:
            raise _error(error, f"list {prefix}") from None
        found.sort(key=lambda item: item.key)
        yield from found


def _walk(directory: Path, key: str, prefix: str, found: list[ListedObject]) -> None:
    """Add the regular files under ``directory`` (key ``key``) whose keys start with
    ``prefix`` to ``found``; dirs are entered only where the prefix can be."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if not is_utf8(entry.name) or (not key and entry.name == TEMP_DIR):
            continue
        child = f"{key}/{entry.name}" if key else entry.name
        if not (child.startswith(prefix) or prefix.startswith(child + "/")):
            continue
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            _walk(Path(entry.path), child, prefix, found)
        elif stat.S_ISREG(info.st_mode) and child.startswith(prefix):
            found.append(ListedObject(child, info.st_size, _etag(info), info.st_mtime))
