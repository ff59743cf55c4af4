"""What identifies one state of a file, to tell whether it changed between two looks."""

from __future__ import annotations

import os
from typing import NamedTuple

__all__ = ["FileIdentity"]


class FileIdentity(NamedTuple):
    """What identifies one state of a file: any append, truncation or replacement
    changes at least one field.

    A tuple: made and compared at every ``open`` of a transcript, several times (the
    session file's, its record's, the cache file's), which a frozen dataclass made
    about twice and compared about four times slower (issue 26, point 5)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def describe_change(self, now: FileIdentity) -> str:
        """How the file went from this state to ``now`` (a different one), in words."""
        if (now.ino, now.dev) != (self.ino, self.dev):
            return "it was replaced by another file"
        if now.size != self.size:
            return f"its size changed from {self.size} to {now.size} bytes"
        return "its modification time changed"
