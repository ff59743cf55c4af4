"""Files and dirs that sessionfs creates are private: ``0600`` and ``0700``, whatever
the umask.

Session files hold what people paste into their agents (keys in tool output, customer
data), and everything derived from them (rendered transcripts, the search index, logs)
holds the same words. So each one is *created* with its private mode: a file made
``0644`` and chmodded afterwards is readable by anyone who opens it in between, and
keeps that descriptor for good. The umask can only take bits away from a mode, so
``0600``/``0700`` come out as they are under any usual umask.

Names in a dir other users may write to (a shared ``--cache-dir``) could be planted
symlinks or hard links: files are created with ``O_EXCL | O_NOFOLLOW``, so a planted
name makes the create fail instead of writing through it.
"""

from __future__ import annotations

import contextlib
import os

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "create_new_private",
    "ensure_private_file",
    "make_private_dirs",
    "private_opener",
]

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700

_NEW_FILE_FLAGS = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """``mkdir -p``, every dir it creates ``0700`` (``os.makedirs`` gives only the
    last one its mode). Existing dirs are left as they are."""
    path = os.path.abspath(os.fspath(path))
    missing: list[str] = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by someone else meanwhile
            os.mkdir(directory, PRIVATE_DIR_MODE)


def create_new_private(path: str | os.PathLike[str], flags: int = os.O_WRONLY) -> int:
    """A descriptor of a file made here and now, ``0600``: ``FileExistsError`` when
    anything (a planted symlink too) already has the name."""
    return os.open(path, flags | _NEW_FILE_FLAGS, PRIVATE_FILE_MODE)


def ensure_private_file(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty and ``0600`` unless it exists; a symlink at ``path`` is
    refused (``ELOOP``), not followed. For SQLite: it makes its ``-wal``, ``-shm`` and
    ``-journal`` files with the mode of the db file, so a db created this way stays
    private in all its files."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    os.close(os.open(path, flags, PRIVATE_FILE_MODE))


def private_opener(path: str, flags: int) -> int:
    """``open(..., opener=private_opener)``: a file the call creates is ``0600``; a
    symlink at the name is not followed."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
