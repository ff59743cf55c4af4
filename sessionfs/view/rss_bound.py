"""``RssBound``: the loaded-session cache's check of what the process really holds.

The cache is bounded by its own accounting: ``--cache-mb`` against each loaded
session's memory (`LoadedSession.memory_cost`). Allocator fragmentation, transient
load peaks and what the accounting does not see (the inode table) still let the
resident set drift past it. So after each load, and each megabyte the cache grew, it
also reads the process's real RSS (``/proc/self/statm``: one small read) and, while it
exceeds budget + the daemon's own baseline (measured when the mount starts) + a slack,
lets go least recently used sessions -- only idle ones.

Acting must not thrash. Issue 11: a cold ``cat`` of 1,000 ``context.json`` got twice as
slow when every load evicted one session and trimmed the heap. Issue 26: a cold read of
every ``entries/*.json`` of 60 sessions, all listed first, evicted the sessions it was
about to read (the least recently used ones) and loaded each twice, 4x slower than a
bare FUSE fs, because freeing them gave the OS back almost nothing. So:

* only sessions unused for `IDLE_SECONDS` go for the RSS: those in use are in the
  accounting, which bounds them, and letting them go would only load them again;
* it frees the excess *plus a margin* (`margin`, an eighth of the budget), so the next
  few loads fit under the limit without acting again;
* it gives freed heap back to the OS (``malloc_trim``, which walks the whole heap) at
  most every `RELEASE_INTERVAL` seconds; in between, freed memory is simply reused by
  the next loads, which keeps RSS flat just as well;
* what is still resident right after acting (fragmentation can keep pages no session
  uses) becomes the floor for the next action: the cache acts again only when RSS grows
  past it, so a floor it cannot get under never makes every access empty the cache. A
  reading under the limit resets it.

No pyfuse3 or trio here: the daemon passes in its reader and release function
(`sessionfs.fs.memory`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["IDLE_SECONDS", "RELEASE_INTERVAL", "RSS_SLACK", "RssBound"]

#: Room above budget + baseline for what the daemon holds besides loaded sessions and
#: grows with use (inode table, listings, render records, thread stacks).
RSS_SLACK = 32 * 1024 * 1024
#: Least seconds between two heap releases by the bound (``malloc_trim`` costs a walk
#: of the heap: ~1 ms per 100 MB, paid on the event loop).
RELEASE_INTERVAL = 0.5
#: What an action frees beyond the excess, as a fraction of the budget.
MARGIN_FRACTION = 1 / 8
#: Sessions used within this many seconds are never let go for the RSS: they are the
#: ones about to be used again (a script reading the entry files it listed a moment
#: ago), and what they hold is in the cache's own accounting, which bounds it.
IDLE_SECONDS = 60.0


@dataclass
class RssBound:
    """The process's RSS limit for a session cache of ``budget`` bytes."""

    #: the process's resident bytes now (``None``: not known on this system)
    read_rss: Callable[[], int | None]
    #: hands freed heap pages back to the OS now (not rate-limited)
    release: Callable[[], None]
    slack: int = RSS_SLACK
    release_interval: float = RELEASE_INTERVAL
    margin_fraction: float = MARGIN_FRACTION
    #: only sessions unused for this long are let go for an RSS over the limit
    idle_seconds: float = IDLE_SECONDS
    clock: Callable[[], float] = time.monotonic
    #: resident bytes when the bound was made (the daemon before any session)
    baseline: int = field(init=False)
    #: RSS right after the last action, when that was still over the limit
    _floor: int = field(init=False, default=0)
    _released_at: float = field(init=False, default=float("-inf"))

    def __post_init__(self) -> None:
        self.baseline = self.read_rss() or 0

    def limit(self, budget: int) -> int:
        return budget + self.baseline + self.slack

    def margin(self, budget: int) -> int:
        """Bytes an action frees below the limit, so that it is not needed again at once."""
        return int(budget * self.margin_fraction)

    def excess(self, budget: int) -> int:
        """Bytes to free now: over the limit plus the margin (0: within the limit,
        unknown, or not grown past what the last action could not get rid of)."""
        rss = self.read_rss()
        if rss is None:
            return 0
        limit = self.limit(budget)
        if rss <= limit:
            self._floor = 0
            return 0
        return rss - limit + self.margin(budget) if rss > self._floor else 0

    def acted(self) -> None:
        """Sessions were let go for the excess: release their memory (unless that was
        done less than `release_interval` ago) and note what stays resident."""
        now = self.clock()
        if now - self._released_at >= self.release_interval:
            self._released_at = now
            self.release()
        self._floor = self.read_rss() or 0
