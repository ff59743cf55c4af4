"""Opening session files that might not be files at all.

A `*.jsonl` name in an agent dir can be a FIFO, a socket, a directory or a symlink loop
(a mistake, a tool's leftover, or on purpose). A plain ``open()`` of a FIFO blocks until
a writer appears, which would hang a worker thread for ever. Every read of a session
file goes through `open_regular`: ``O_NONBLOCK`` so the open itself cannot block, then
``fstat`` on the descriptor so what we read is exactly the inode we checked.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

PathArg = str | os.PathLike[str]


class NotRegularFileError(OSError):
    """The path exists but is not a regular file (FIFO, socket, directory, device)."""


def open_regular_fd(path: PathArg) -> int:
    """A read-only descriptor of the regular file at `path`, opened without blocking.

    Raises `NotRegularFileError` (errno ``EINVAL``, or ``EISDIR`` for a directory) for
    anything else, and the ordinary `OSError` (``ENOENT``, ``ELOOP``, ``EACCES``…) when
    the open fails. The returned descriptor is blocking again, for ordinary reads.
    """
    return open_regular_with_stat(path)[0]


def open_regular_with_stat(
    path: PathArg, *, follow: bool = True, blocking: bool = True
) -> tuple[int, os.stat_result]:
    """`open_regular_fd`, with the descriptor's stat (taken for the check anyway).
    ``follow=False`` refuses a symlink (``ELOOP``); ``blocking=False`` leaves the
    descriptor non-blocking (two ``fcntl`` fewer, for a caller that reads a regular
    file and handles ``EAGAIN``, which local filesystems never give)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode):
            code = errno.EISDIR if stat_module.S_ISDIR(st.st_mode) else errno.EINVAL
            raise NotRegularFileError(code, "not a regular file", os.fspath(path))
        if blocking:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


@contextmanager
def open_regular(path: PathArg) -> Iterator[BinaryIO]:
    """`open_regular_fd` as a binary file object (closed on exit)."""
    with os.fdopen(open_regular_fd(path), "rb") as fh:
        yield fh
