"""What a sync pass has done so far, as the engine goes (`SyncEngine.progress`).

The engine says how many files (blobs and session files) a pass looks at as it lists
them (`listed`) and each one's shipped bytes once it is done (`file_done`), from its
upload threads. Whoever shows progress (``sessionfs sync`` on a terminal:
`sessionfs.commands.sync_progress_line`) listens (`listener`); the engine itself never
prints or logs any of it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PassProgress", "SyncProgress"]


@dataclass(frozen=True)
class PassProgress:
    """One moment of a pass: files done of those listed, bytes shipped, seconds since
    it started; ``finished`` once the pass has ended."""

    files_done: int
    files_total: int
    bytes_done: int
    elapsed: float
    finished: bool = False


class SyncProgress:
    def __init__(self, listener: Callable[[PassProgress], None] | None = None) -> None:
        self.listener = listener
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._files_done = self._files_total = self._bytes_done = 0

    def begin(self) -> None:
        with self._lock:
            self._started = time.monotonic()
            self._files_done = self._files_total = self._bytes_done = 0
        self._tell()

    def listed(self, files: int) -> None:
        with self._lock:
            self._files_total += files
        self._tell()

    def file_done(self, shipped_bytes: int) -> None:
        with self._lock:
            self._files_done += 1
            self._bytes_done += shipped_bytes
        self._tell()

    def end(self) -> None:
        self._tell(finished=True)

    def now(self, finished: bool = False) -> PassProgress:
        with self._lock:
            return PassProgress(
                self._files_done,
                self._files_total,
                self._bytes_done,
                time.monotonic() - self._started,
                finished,
            )

    def _tell(self, finished: bool = False) -> None:
        if self.listener is not None:
            self.listener(self.now(finished))
