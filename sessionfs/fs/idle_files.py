"""Descriptors of validated cache files kept open between two opens of the same
transcript (`IdleFiles`): a warm ``grep -r transcripts/`` opens every transcript
again each time, and opening its cache file by path (a walk of the cache dir's path)
and closing it was a third of the daemon's time for such an ``open`` (issue 26,
point 5).

A descriptor is handed out again only for the very file it was opened and checked for
(the key is the validated file's identity, `CachedRender.stored`: its device and inode
name that file, whatever its path; a tuple of ints, cheap to hash), and only
while that file is still there at its validated identity (one ``fstat``: a cache file
scribbled on in place since is not used, nor one removed or replaced since, whose
link count is 0: the next open finds the cache dir as it is, and renders again into
it where the file is gone).
Bounded: at most `KEPT` descriptors of files of `KEPT_BYTES` in all, none kept idle
longer than `IDLE_SECONDS` (a removed cache file's disk space is held no longer: the
daemon sweeps them, `close_idle_files`). Event loop only (the open and release handlers,
the sweep): no locks.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict

import trio

from core.file_identity import FileIdentity

__all__ = ["CACHE_FILES", "IDLE_SECONDS", "KEPT", "KEPT_BYTES", "IdleFiles", "close_idle_files"]

#: The most descriptors kept: the transcripts a warm grep of a few dozen projects
#: opens. A grep of more files than this finds none kept (each is opened as before).
KEPT = 128
#: The most bytes of cache files kept open (a removed file's space is held while kept).
KEPT_BYTES = 256 * 1024 * 1024
#: A descriptor unused this long is closed at the next open or release of a cache file.
IDLE_SECONDS = 30.0


class IdleFiles:
    """Open read-only descriptors no handle uses now, by their file's validated
    identity, the least recent first."""

    def __init__(
        self, kept: int = KEPT, kept_bytes: int = KEPT_BYTES, idle_seconds: float = IDLE_SECONDS
    ) -> None:
        self.kept = kept
        self.kept_bytes = kept_bytes
        self.idle_seconds = idle_seconds
        # validated identity -> (fd, when given back)
        self._idle: OrderedDict[FileIdentity, tuple[int, float]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._idle)

    def take(self, validated: FileIdentity) -> int | None:
        """The descriptor kept for the file validated at ``validated``, now the
        caller's to use and `give_back`, if that file is still linked and unchanged;
        None: open the file."""
        found = self._idle.pop(validated, None)
        if found is None:
            return None
        fd = found[0]
        self._bytes -= validated.size
        try:
            st = os.fstat(fd)
            if st.st_nlink and FileIdentity.of(st) == validated:
                return fd
        except OSError:
            pass
        os.close(fd)
        return None

    def give_back(self, validated: FileIdentity, fd: int) -> None:
        """Keep ``fd`` (of the file validated at ``validated``) for the next `take` of
        it; the least recent are closed past the bounds, and those idle too long."""
        now = time.monotonic()
        idle = self._idle
        other = idle.pop(validated, None)
        if other is not None:  # two handles of the same file were open: one is kept
            self._bytes -= validated.size
            os.close(other[0])
        if validated.size > self.kept_bytes:
            os.close(fd)
            return
        idle[validated] = (fd, now)
        self._bytes += validated.size
        while len(idle) > self.kept or self._bytes > self.kept_bytes:
            self._close_oldest()
        self.close_idle(now)

    def close_idle(self, now: float | None = None) -> None:
        """Close the descriptors unused for `idle_seconds` (the least recent first)."""
        if now is None:
            now = time.monotonic()
        idle = self._idle
        while idle and now - next(iter(idle.values()))[1] >= self.idle_seconds:
            self._close_oldest()

    def _close_oldest(self) -> None:
        identity, (fd, _since) = self._idle.popitem(last=False)
        self._bytes -= identity.size
        os.close(fd)

    def close_all(self) -> None:
        """Close every descriptor kept."""
        while self._idle:
            os.close(self._idle.popitem(last=False)[1][0])
        self._bytes = 0


#: The transcripts' cache files (`sessionfs.fs.nodes.transcripts`): one table for the
#: daemon (the key is a file's device and inode, whichever mount opened it).
CACHE_FILES = IdleFiles()


async def close_idle_files(files: IdleFiles = CACHE_FILES) -> None:
    """Until cancelled, close what ``files`` kept idle too long, and all of it when
    cancelled (the mount is gone): a mount nobody uses holds no descriptor, nor the
    space of a cache file removed meanwhile, for longer than ``IDLE_SECONDS`` or so."""
    try:
        while True:
            await trio.sleep(files.idle_seconds / 2)
            files.close_idle()
    finally:
        files.close_all()
