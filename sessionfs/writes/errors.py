"""What a failed write means to the caller: errno and a readable reason for an
``OSError`` or a latched persistence error (the refusal that
carries them is `sessionfs.view.refusal.WriteRejected`)."""

from __future__ import annotations

import errno as errno_codes
import os

from core.rewrite import SessionBusyError

__all__ = ["describe_oserror", "persistence_errno"]


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
