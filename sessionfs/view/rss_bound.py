"""``RssBound``: the loaded-session cache's check of what the process really holds.

The LRU budget (``--cache-mb``) counts an *estimate* of each parsed session
(`loaded_session.PARSED_SIZE_FACTOR` x its file size). Transient load peaks, allocator
fragmentation and per-session indexes still let the resident set overshoot it (the
issue-11 bench measured 387 MB at ``--cache-mb 256``). So after each load and each job
the cache also reads the process's real RSS (``/proc/self/statm``: one small read) and,
while it exceeds budget + the daemon's own baseline (measured when the mount starts) +
a slack, evicts least recently used sessions for at least the excess and gives the freed
heap back at once (``malloc_trim``). After acting it lets the trim settle before
judging again, so one overshoot never empties the whole cache.

No pyfuse3 or trio here: the daemon passes in its reader and release function
(`sessionfs.fs.memory`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["RSS_SLACK", "RssBound"]

#: Room above budget + baseline for what the daemon holds besides parsed sessions and
#: grows with use (inode table, listings, render records, thread stacks).
RSS_SLACK = 32 * 1024 * 1024
#: Seconds after an RSS-driven eviction before RSS is judged again.
SETTLE = 1.0


@dataclass
class RssBound:
    """The process's RSS limit for a session cache of ``budget`` bytes."""

    #: the process's resident bytes now (``None``: not known on this system)
    read_rss: Callable[[], int | None]
    #: hands freed heap pages back to the OS now (not rate-limited)
    release: Callable[[], None]
    slack: int = RSS_SLACK
    clock: Callable[[], float] = time.monotonic
    #: resident bytes when the bound was made (the daemon before any session)
    baseline: int = field(init=False)
    _acted_at: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.baseline = self.read_rss() or 0

    def limit(self, budget: int) -> int:
        return budget + self.baseline + self.slack

    def excess(self, budget: int) -> int:
        """Bytes to free now (0: within the limit, unknown, or still settling)."""
        if self._acted_at is not None and self.clock() - self._acted_at < SETTLE:
            return 0
        rss = self.read_rss()
        if rss is None:
            return 0
        return max(0, rss - self.limit(budget))

    def acted(self) -> None:
        """Sessions were let go for the excess: release their memory and settle."""
        self.release()
        self._acted_at = self.clock()
