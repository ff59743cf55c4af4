"""``RssBound``: the loaded-session cache's check of what the process really holds.

The LRU budget (``--cache-mb``) counts an *estimate* of each parsed session
(`loaded_session.PARSED_SIZE_FACTOR` x its file size). Transient load peaks, allocator
fragmentation and per-session indexes still let the resident set overshoot it (the
issue-11 bench measured 387 MB at ``--cache-mb 256``). So after each load and each job
the cache also reads the process's real RSS (``/proc/self/statm``: one small read) and,
while it exceeds budget + the daemon's own baseline (measured when the mount starts) +
a slack, evicts least recently used sessions for at least the excess and gives the freed
heap back at once (``malloc_trim``). What is still resident right after that (allocator
fragmentation can keep pages that no session uses) becomes the floor for the next
action: the cache acts again only when RSS grows past it (new use), so a floor it cannot
get under never makes every access empty the cache. A reading under the limit resets it.

No pyfuse3 or trio here: the daemon passes in its reader and release function
(`sessionfs.fs.memory`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["RSS_SLACK", "RssBound"]

#: Room above budget + baseline for what the daemon holds besides parsed sessions and
#: grows with use (inode table, listings, render records, thread stacks).
RSS_SLACK = 32 * 1024 * 1024


@dataclass
class RssBound:
    """The process's RSS limit for a session cache of ``budget`` bytes."""

    #: the process's resident bytes now (``None``: not known on this system)
    read_rss: Callable[[], int | None]
    #: hands freed heap pages back to the OS now (not rate-limited)
    release: Callable[[], None]
    slack: int = RSS_SLACK
    #: resident bytes when the bound was made (the daemon before any session)
    baseline: int = field(init=False)
    #: RSS right after the last action, when that was still over the limit
    _floor: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.baseline = self.read_rss() or 0

    def limit(self, budget: int) -> int:
        return budget + self.baseline + self.slack

    def excess(self, budget: int) -> int:
        """Bytes over the limit to free now (0: within it, unknown, or not grown past
        what the last action could not get rid of)."""
        rss = self.read_rss()
        if rss is None:
            return 0
        limit = self.limit(budget)
        if rss <= limit:
            self._floor = 0
            return 0
        return rss - limit if rss > self._floor else 0

    def acted(self) -> None:
        """Sessions were let go for the excess: release their memory now and note
        what stays resident."""
        self.release()
        self._floor = self.read_rss() or 0
