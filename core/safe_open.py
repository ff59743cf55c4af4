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
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode):
            code = errno.EISDIR if stat_module.S_ISDIR(st.st_mode) else errno.EINVAL
            raise NotRegularFileError(code, "not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def open_regular(path: PathArg) -> Iterator[BinaryIO]:
    """`open_regular_fd` as a binary file object (closed on exit)."""
    with os.fdopen(open_regular_fd(path), "rb") as fh:
        yield fh
