"""The one exception every write path through the mount raises.

A write through the mount either happens completely or is refused with an errno the
caller's tool shows (`ln: failed to create symbolic link 'leaf': No such file or
directory`) and a sentence the user can read later from the session's `ctl`
(`last_error`). Deciding both at the place where the meaning is known, and carrying
them together, keeps the FUSE layer a plain translator: it turns a `WriteRejected`
into `FUSEError(errno)` and stores `reason`.
"""

from __future__ import annotations

import errno as errno_codes
import os

from core.rewrite import SessionBusyError

__all__ = ["WriteRejected", "describe_oserror", "persistence_errno"]


class WriteRejected(Exception):
    """A write through the mount was refused; nothing it asked for was applied.

    ``errno``: what the system call returns (``EINVAL``, ``ENOENT``, ``EFBIG``,
    ``ENOSPC``, ``EIO``, ...). ``reason``: one line for `ctl`'s ``last_error``.
    ``reload_session``: the cached `SessionManager` may no longer match the file (a
    persistence error was latched inside it); the caller must drop it so the next
    access loads the session from disk again. That is what lets writes work again
    after disk space is freed, without remounting.
    """

    def __init__(self, errno: int, reason: str, *, reload_session: bool = False) -> None:
        super().__init__(errno, reason)
        self.errno = errno
        self.reason = reason
        self.reload_session = reload_session

    def __str__(self) -> str:
        name = errno_codes.errorcode.get(self.errno, str(self.errno))
        return f"{name}: {self.reason}"


def persistence_errno(exc: BaseException) -> int:
    """``EBUSY`` for a rewrite refused because another process holds the file open for
    writing (nothing changed; it can work later); ``ENOSPC`` when a disk-full (or quota)
    error is anywhere in the cause chain; else ``EIO``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, SessionBusyError):
            return errno_codes.EBUSY
        if isinstance(current, OSError) and current.errno in (
            errno_codes.ENOSPC,
            errno_codes.EDQUOT,
        ):
            return errno_codes.ENOSPC
        current = current.__cause__ or current.__context__
    return errno_codes.EIO


def describe_oserror(exc: OSError) -> str:
    """``"No space left on device"`` style text for an OSError without the path noise
    (a busy session says who holds it and why that refuses the write)."""
    if isinstance(exc, SessionBusyError):
        return exc.reason
    if exc.errno is not None:
        return os.strerror(exc.errno)
    return str(exc)
