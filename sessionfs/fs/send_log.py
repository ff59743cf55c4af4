"""Where a session's ``send.log`` lives on disk, and how it is kept bounded.

The agent's stdout and stderr go straight into this file (its own descriptor, not a
pipe through the daemon), so an agent keeps running and logging when the daemon dies.
The files live under the daemon's cache dir (``<cache>/send-logs/``, 0700, files
0600: an agent's output may hold anything of the session), never in the agent dir.
The mount shows at most the last `LOG_LIMIT` bytes; once a run has ended its file is
cut to those bytes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["LOG_LIMIT", "SendLogs"]

#: What ``send.log`` keeps of a run's output: its tail.
LOG_LIMIT = 1024 * 1024


class SendLogs:
    """The log files of one mount's sessions, one per session (the last run only)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, key: tuple[str, str]) -> Path:
        """One file per session; the name is a digest, so any project/stem fits."""
        digest = hashlib.sha256("\0".join(key).encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / f"{digest[:32]}.log"

    def open_for_run(self, key: tuple[str, str]) -> int:
        """A new, empty log for a run starting now: a write-only descriptor (O_APPEND,
        so the agent's stdout and stderr interleave without overwriting each other)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.directory, 0o700)  # whatever the umask made of it
        fd = os.open(
            self.path(key),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC,
            0o600,
        )
        os.fchmod(fd, 0o600)
        return fd

    def size(self, key: tuple[str, str]) -> tuple[int, int]:
        """What ``send.log`` shows: its size (at most `LOG_LIMIT`) and mtime."""
        try:
            st = os.stat(self.path(key))
        except FileNotFoundError:
            return 0, 0
        return min(st.st_size, LOG_LIMIT), st.st_mtime_ns

    def tail(self, key: tuple[str, str]) -> bytes:
        """The last `LOG_LIMIT` bytes of the session's log (empty: no run yet)."""
        try:
            fd = os.open(self.path(key), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return b""
        try:
            size = os.fstat(fd).st_size
            return os.pread(fd, LOG_LIMIT, max(0, size - LOG_LIMIT))
        finally:
            os.close(fd)

    def trim(self, key: tuple[str, str]) -> None:
        """After a run: keep only the tail on disk (replaced atomically; the agent that
        wrote it is gone)."""
        path = self.path(key)
        try:
            if os.stat(path).st_size <= LOG_LIMIT:
                return
        except FileNotFoundError:
            return
        data = self.tail(key)
        temporary = path.with_suffix(".trim")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(temporary, path)
