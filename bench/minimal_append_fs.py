"""The least a pyfuse3 daemon can do for a durable append: ``bench_writes``' ceiling.

A filesystem with one directory, ``append/``, that behaves like the mount's for a
client: a new name is absent (remembered for a second, as the mount's ``append/``
answers), ``create`` opens it, ``write`` buffers, and ``flush`` (the ``close()``)
appends the buffer to one file and ``fdatasync``s it before it answers. It checks
nothing, parses nothing and keeps no session: what is left is pyfuse3's and trio's
dispatch of the same requests, and the same durable write. No daemon built on pyfuse3
can append a file faster, so the mount's rate against it says how much of the
distance to the floor (`bench_writes`) is ours to win.

Run as ``python bench/minimal_append_fs.py MOUNTPOINT TARGET_FILE``; unmounted on
SIGTERM/SIGINT like the bench's other daemons.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

import pyfuse3
import trio

APPEND_DIR = b"append"
_APPEND_INODE = pyfuse3.ROOT_INODE + 1


class MinimalAppendFs(pyfuse3.Operations):
    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target
        self.buffers: dict[int, bytearray] = {}
        self.next_inode = _APPEND_INODE + 1

    @staticmethod
    def _attrs(inode: int) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = inode
        is_dir = inode <= _APPEND_INODE
        attrs.st_mode = (stat.S_IFDIR | 0o755) if is_dir else (stat.S_IFREG | 0o644)
        attrs.st_nlink = 2 if is_dir else 1
        attrs.st_uid, attrs.st_gid = os.getuid(), os.getgid()
        attrs.entry_timeout = attrs.attr_timeout = 3600 if is_dir else 0
        return attrs

    async def getattr(self, inode, ctx=None):  # type: ignore[no-untyped-def]
        return self._attrs(inode)

    async def lookup(self, parent, name, ctx=None):  # type: ignore[no-untyped-def]
        if parent == pyfuse3.ROOT_INODE and name == APPEND_DIR:
            return self._attrs(_APPEND_INODE)
        if parent != _APPEND_INODE:
            raise pyfuse3.FUSEError(errno.ENOENT)
        absent = pyfuse3.EntryAttributes()  # remembered, as the mount's append/ does
        absent.st_ino = 0
        absent.entry_timeout = 1.0
        return absent

    async def create(self, parent, name, mode, flags, ctx):  # type: ignore[no-untyped-def]
        inode, self.next_inode = self.next_inode, self.next_inode + 1
        self.buffers[inode] = bytearray()
        return pyfuse3.FileInfo(fh=inode, direct_io=True), self._attrs(inode)

    async def write(self, fh, off, buf):  # type: ignore[no-untyped-def]
        self.buffers[fh] += buf
        return len(buf)

    async def flush(self, fh):  # type: ignore[no-untyped-def]
        data = self.buffers.get(fh)
        if not data:
            return
        fd = os.open(self.target, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        try:
            os.write(fd, data)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        data.clear()

    async def release(self, fh):  # type: ignore[no-untyped-def]
        self.buffers.pop(fh, None)

    async def forget(self, inode_list):  # type: ignore[no-untyped-def]
        return None


def serve(mountpoint: str, target: str) -> None:
    options = set(pyfuse3.default_options) | {"fsname=minimal-append"}
    pyfuse3.init(MinimalAppendFs(target), mountpoint, options)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
