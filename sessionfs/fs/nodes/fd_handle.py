"""An open file of the mount that reads straight from a file on disk (blobs, artifacts)."""

from __future__ import annotations

import errno
import os

import trio

from sessionfs.fs.nodes.base import OpenFile, refuse

__all__ = ["FdReadHandle"]


class FdReadHandle(OpenFile):
    """Reads an open regular file with ``pread`` in a worker thread (blobs and tool
    outputs can be big and the disk slow: never on the event loop); closed at release."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    async def read(self, offset: int, size: int) -> bytes:
        if self.fd is None:
            raise refuse(errno.EBADF)
        return await trio.to_thread.run_sync(os.pread, self.fd, size, offset)

    async def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
