"""``CacheCounts``: what a session cache did, for the root ``ctl`` and the tests.

A cache that lets a session go and loads it again a moment later has done the load for
nothing, twice over: the parse, the per-entry table and every entry file rendered again,
and the kernel's dentries of its ``entries/`` dropped and looked up again. Issue 26 was
that: a bound on the process's RSS, which evicting rarely lowers, made a cold read of
every ``entries/*.json`` evict exactly the sessions it was about to read next, four times
slower than a bare FUSE fs. So every load and every eviction is counted, and a load of a
session let go less than `RELOAD_WINDOW` seconds before is counted apart: that number
should stay 0 whenever what is read fits ``--cache-mb``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RELOAD_WINDOW", "CacheCounts"]

#: A load this soon (seconds) after the same session was let go is a reload right after
#: an eviction. A cold read of a whole corpus that fits the budget takes a few seconds
#: per thousand sessions; a corpus bigger than the budget, read again from the start,
#: comes back to a session only after reading the budget's worth of others.
RELOAD_WINDOW = 10.0

Key = tuple[str, str]


class CacheCounts:
    """Loads, evictions, and reloads right after an eviction, of one session cache."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        #: sessions read from their files (first loads and reloads alike)
        self.loads = 0
        #: loaded sessions let go (their parse dropped, or forgotten altogether)
        self.evictions = 0
        #: loads of a session let go less than `RELOAD_WINDOW` seconds before
        self.reloads_after_eviction = 0
        #: when each recently evicted session went, oldest first (pruned past the window)
        self._evicted_at: OrderedDict[Key, float] = OrderedDict()

    def evicted(self, key: Key) -> None:
        now = self.clock()
        self.evictions += 1
        self._evicted_at[key] = now
        self._evicted_at.move_to_end(key)
        while self._evicted_at:
            oldest_key, at = next(iter(self._evicted_at.items()))
            if now - at <= RELOAD_WINDOW:
                break
            del self._evicted_at[oldest_key]

    def loaded(self, key: Key) -> None:
        self.loads += 1
        at = self._evicted_at.pop(key, None)
        if at is not None and self.clock() - at <= RELOAD_WINDOW:
            self.reloads_after_eviction += 1

    def ctl_items(self, name: str = "cache") -> list[tuple[str, object]]:
        """``name_loads``, ``name_evictions``, ``name_reloads_after_eviction`` lines."""
        return [
            (f"{name}_loads", self.loads),
            (f"{name}_evictions", self.evictions),
            (f"{name}_reloads_after_eviction", self.reloads_after_eviction),
        ]
