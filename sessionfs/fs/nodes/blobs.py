"""``blobs/<sha256>`` at the root (the agent's blob store) and in each session dir
(the blobs that session references). Blobs are immutable, read straight from disk."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import trio

from core.safe_open import open_regular_fd
from sessionfs.fs.nodes.base import (
    BLOB,
    STATIC,
    DirNode,
    FileNode,
    MountContext,
    Node,
    OpenFile,
    Permissions,
    Stat,
    exact_permissions,
    refuse,
)
from sessionfs.fs.nodes.fd_handle import FdReadHandle
from sessionfs.view.access import FileAccess


class BlobFile(FileNode):
    __slots__ = ("access", "path")

    tier = BLOB

    def __init__(self, ctx: MountContext, key: tuple[str, ...], path: Path) -> None:
        super().__init__(ctx, key)
        self.path = path
        #: the mode and owner its last ``stat`` saw (``ops`` asks for the permissions
        #: right after the stat: one stat and thread hop serve both)
        self.access: FileAccess | None = None

    async def stat(self) -> Stat:
        try:
            st = await trio.to_thread.run_sync(os.stat, self.path)
        except FileNotFoundError:
            raise refuse(errno.ENOENT) from None
        self.access = FileAccess.of(st)
        return Stat(st.st_size, st.st_mtime_ns)

    async def permissions(self) -> Permissions:
        """The blob file's own: whoever may read it on disk may read it here."""
        if self.access is None:
            await self.stat()
        assert self.access is not None
        return exact_permissions(self.access)

    async def open(self, flags: int) -> OpenFile:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise refuse(errno.EACCES)
        # Never a plain open(): a FIFO put where a blob was would block the thread.
        fd = await trio.to_thread.run_sync(open_regular_fd, self.path)
        return FdReadHandle(fd)


class RootBlobsDir(DirNode):
    """``/blobs``: every blob in ``<agent>/blobs``."""

    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        names = await trio.to_thread.run_sync(self.ctx.index.blob_names)
        blobs_dir = self.ctx.index.blobs_dir
        return [(n, BlobFile(self.ctx, self.child_key(n), blobs_dir / n)) for n in names]

    async def lookup(self, name: str) -> Node | None:
        path = await trio.to_thread.run_sync(self.ctx.index.blob_path, name)
        return BlobFile(self.ctx, self.child_key(name), path) if path is not None else None
