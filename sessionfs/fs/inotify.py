"""Linux inotify through ctypes on libc: a non-blocking descriptor, watches, events.

Only what `sessionfs.fs.session_watch` needs: add and remove directory watches and
decode whatever is readable. No event loop here: the caller waits for the descriptor
to become readable (``trio.lowlevel.wait_readable``) and then calls `read_events`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IN_ATTRIB",
    "IN_CLOSE_WRITE",
    "IN_CREATE",
    "IN_DELETE",
    "IN_DONT_FOLLOW",
    "IN_IGNORED",
    "IN_ISDIR",
    "IN_MODIFY",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_ONLYDIR",
    "IN_Q_OVERFLOW",
    "Event",
    "Inotify",
]

# From <sys/inotify.h>; stable kernel ABI.
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC

#: struct inotify_event without its name: wd, mask, cookie, len
_HEADER = struct.Struct("iIII")
#: enough for many events at once (each is 16 bytes plus a padded name)
_READ_SIZE = 64 * 1024


@dataclass(frozen=True, slots=True)
class Event:
    wd: int  # -1 for IN_Q_OVERFLOW
    mask: int
    name: str  # "" for an event on the watched directory itself


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_init1.restype = ctypes.c_int
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_add_watch.restype = ctypes.c_int
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.inotify_rm_watch.restype = ctypes.c_int
    return libc


def _failed(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


class Inotify:
    """One inotify instance. Raises ``OSError`` where the system has none (not Linux,
    no libc symbol, ``EMFILE`` for too many instances): callers then do without."""

    def __init__(self) -> None:
        try:
            self._libc = _libc()
        except (OSError, AttributeError) as exc:  # no libc, or one without inotify
            raise OSError(f"inotify is not available: {exc}") from None
        fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise _failed("inotify_init1")
        self.fd = fd

    def add_watch(self, path: Path, mask: int) -> int:
        """A watch on ``path``; ``OSError`` (``ENOSPC``: the user's watch limit) if not."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise _failed(f"inotify_add_watch {path}")
        return int(wd)

    def remove_watch(self, wd: int) -> None:
        """Stop watching; the kernel still queues an ``IN_IGNORED`` for ``wd``."""
        self._libc.inotify_rm_watch(self.fd, wd)  # EINVAL: it is gone already

    def read_events(self) -> list[Event]:
        """The events queued now (none if nothing is readable)."""
        try:
            data = os.read(self.fd, _READ_SIZE)
        except BlockingIOError:
            return []
        events = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            raw = data[offset : offset + length].split(b"\0", 1)[0]
            offset += length
            events.append(Event(wd, mask, os.fsdecode(raw)))
        return events

    def close(self) -> None:
        os.close(self.fd)
