"""A refused write: the one exception every write path through the mount raises.

A write through the mount either happens completely or is refused with an errno the
caller's tool shows (`ln: failed to create symbolic link 'leaf': No such file or
directory`) and a sentence the user can read later from `ctl` (`last_error`). Deciding
both at the place where the meaning is known, and carrying them together, keeps the
FUSE layer a plain translator: it turns a `WriteRejected` into `FUSEError(errno)` and
has the refusal recorded where ``ctl`` shows it.

It lives in the view layer because the view keeps what a write left behind (a
session's ``last_result``/``last_error``) and its cache applies writes under the
session's lock; `sessionfs.writes` decides refusals, `sessionfs.fs` translates them.
"""

from __future__ import annotations

import errno as errno_codes

__all__ = ["READ_ONLY_REASON", "WriteRejected"]

#: Why every write under ``agents/`` is refused (``EROFS``; the root ``ctl`` shows it).
READ_ONLY_REASON = "other agents' sessions are read-only: sessionfs never writes them"


class WriteRejected(Exception):
    """A write through the mount was refused; nothing it asked for was applied.

    ``errno``: what the system call returns (``EINVAL``, ``ENOENT``, ``EFBIG``,
    ``ENOSPC``, ``EIO``, ...). ``reason``: one line for `ctl`'s ``last_error``.
    ``reload_session``: the cached `SessionManager` may no longer match the file (a
    persistence error was latched inside it); the caller must drop it so the next
    access loads the session from disk again. That is what lets writes work again
    after disk space is freed, without remounting. ``recorded``: the reason is in a
    ``ctl`` already (set by whoever recorded it, so it is recorded once: a later
    write's outcome is never overwritten by an older refusal).
    """

    def __init__(self, errno: int, reason: str, *, reload_session: bool = False) -> None:
        super().__init__(errno, reason)
        self.errno = errno
        self.reason = reason
        self.reload_session = reload_session
        self.recorded = False

    def __str__(self) -> str:
        name = errno_codes.errorcode.get(self.errno, str(self.errno))
        return f"{name}: {self.reason}"
