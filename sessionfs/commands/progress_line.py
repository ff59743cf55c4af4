"""One status line on a terminal, rewritten in place while long work runs
(``sessionfs search`` waiting for the index's first build, ``sessionfs sync``).

Written to stderr only when stderr is a terminal: piped or redirected, a command
prints exactly what it printed before, and no progress ever reaches a log file.
Standard library only: a carriage return and "erase to end of line" (``ESC [ K``),
which every terminal ``sessionfs`` runs in understands.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

__all__ = ["ProgressLine"]

#: The shortest time between two redraws (seconds): often enough to look alive,
#: rarely enough to cost nothing.
REDRAW_INTERVAL = 0.2


class ProgressLine:
    """``show(text)`` replaces the line (at most every `REDRAW_INTERVAL` unless
    ``now``); ``clear()`` erases it, so what is printed next starts on a clean line.
    Safe to call from several threads (uploads run in a pool)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.enabled = stream.isatty()
        self._lock = threading.Lock()
        self._shown = False
        self._last = 0.0

    def show(self, text: str, now: bool = False) -> None:
        if not self.enabled:
            return
        with self._lock:
            moment = time.monotonic()
            if not now and self._shown and moment - self._last < REDRAW_INTERVAL:
                return
            self._stream.write(f"\r\x1b[K{text}")
            self._stream.flush()
            self._shown, self._last = True, moment

    def clear(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self._shown:
                self._stream.write("\r\x1b[K")
                self._stream.flush()
                self._shown = False
