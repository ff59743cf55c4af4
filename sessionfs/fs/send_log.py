"""Where a session's ``send.log`` lives on disk, and how it is kept bounded.

The agent's stdout and stderr go straight into this file (its own descriptor, not a
pipe through the daemon), so an agent keeps running and logging when the daemon dies.
The files live under the daemon's cache dir (``<cache>/send-logs/``, 0700, files
0600: an agent's output may hold anything of the session), never in the agent dir.
The mount shows at most the last `LOG_LIMIT` bytes. While a run goes on, the part
before those is given back to the file system every second once the file is twice that
size (`SendLogs.bound`: a hole punched in place, which an agent appending meanwhile
cannot notice), so a runaway agent cannot fill the disk; once the run has ended the
file is cut to the tail.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from core.private_files import PRIVATE_FILE_MODE, make_private_dirs

__all__ = ["LOG_LIMIT", "SendLogs"]

#: What ``send.log`` keeps of a run's output: its tail.
LOG_LIMIT = 1024 * 1024
#: fallocate(2) modes (linux/falloc.h): free a range, keep the file's size.
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_BLOCK = 4096


def _punch_hole(fd: int, length: int) -> None:
    """Free the first ``length`` bytes of the file's storage (reads there give zeros);
    a file system that cannot punch holes keeps them (the run's end trims the file)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    libc.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, length)


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
        make_private_dirs(self.directory)  # the cache dir too, when this comes first
        fd = os.open(
            self.path(key),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW,
            PRIVATE_FILE_MODE,
        )
        os.fchmod(fd, PRIVATE_FILE_MODE)  # a log an older version made with the umask's mode
        return fd

    def size(self, key: tuple[str, str]) -> tuple[int, int]:
        """What ``send.log`` shows: its size (at most `LOG_LIMIT`) and mtime."""
        try:
            st = os.lstat(self.path(key))
        except FileNotFoundError:
            return 0, 0
        if not stat.S_ISREG(st.st_mode):  # a planted link or FIFO: never read through
            return 0, 0
        return min(st.st_size, LOG_LIMIT), st.st_mtime_ns

    def tail(self, key: tuple[str, str]) -> bytes:
        """The last `LOG_LIMIT` bytes of the session's log (empty: no run yet)."""
        try:
            fd = os.open(self.path(key), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # none yet, or a planted link (ELOOP)
            return b""
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return b""
            return os.pread(fd, LOG_LIMIT, max(0, st.st_size - LOG_LIMIT))
        finally:
            os.close(fd)

    def bound(self, key: tuple[str, str]) -> None:
        """During a run: once the log holds twice `LOG_LIMIT`, free everything before
        its last `LOG_LIMIT` bytes (block-aligned), so its disk use stays bounded."""
        try:
            fd = os.open(self.path(key), os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_blocks * 512 > 2 * LOG_LIMIT:
                _punch_hole(fd, (st.st_size - LOG_LIMIT) // _BLOCK * _BLOCK)
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
        # A new 0600 file under a name no one can have planted a link at (mkstemp).
        fd, temporary = tempfile.mkstemp(
            dir=self.directory, prefix=f".{path.name}.", suffix=".trim"
        )
        try:
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
