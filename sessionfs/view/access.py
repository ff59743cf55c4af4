"""Who may read what: the mount shows other users (``--allow-other``) exactly what the
files' modes let them read on disk.

Most of it the kernel enforces: every node shows the owner, group and (masked) mode
of the file it comes from, and the mount runs with ``default_permissions``. What the
kernel cannot check is content put together from many files (``search/<words>``):
that is filtered here, per caller, with the same rule the kernel applies
(`Caller.may_read`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

__all__ = ["NO_ACCESS", "Caller", "FileAccess"]


@dataclass(frozen=True, slots=True)
class FileAccess:
    """A file's permission bits and owner, as a stat gave them."""

    mode: int
    uid: int
    gid: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileAccess:
        return cls(stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


#: a file that is not there (any more): no one but root may read what it was
NO_ACCESS = FileAccess(0, 0, 0)


@dataclass(frozen=True, slots=True)
class Caller:
    """The process a request comes from: its file-system uid and every group it is in
    (primary and supplementary)."""

    uid: int
    gids: frozenset[int]

    def may_read(self, access: FileAccess) -> bool:
        """Whether this caller could open the file for reading, as the kernel decides:
        root always; the owner by the owner bits only, a member of the file's group by
        the group bits only, everyone else by the other bits."""
        if self.uid == 0:
            return True
        if self.uid == access.uid:
            return bool(access.mode & stat.S_IRUSR)
        if access.gid in self.gids:
            return bool(access.mode & stat.S_IRGRP)
        return bool(access.mode & stat.S_IROTH)
