"""A ``search/<words>`` result made from several indexes' hits (`newest_lines`), and
the rendered results kept for a moment (`ResultCache`).

Every index (the agent dir's, each other agent's) yields its hits newest first, each
hit's line read back from its session file and its snippet made only when asked for
(`core.search_index.SearchIndex.stream`). The merge pulls from all of them by time,
so it reads back about the lines it shows: with two agents, the 100 newest of both,
not 100 of each of which half are thrown away.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator

#: One hit as an index yields it: its time (ms) and its rendered line (with the newline).
TimedLine = tuple[int, bytes]


def newest_lines(streams: Iterable[Iterator[TimedLine]], limit: int) -> bytes:
    """The ``limit`` newest lines of ``streams`` (each newest first), newest first;
    hits of the same millisecond ordered by their text (path, role, snippet), so
    every way of asking gives one order: what sorting the lines of every stream in
    full and keeping the first ``limit`` gives, with the lines read only as far as
    the ``limit``-th newest time (and its ties)."""
    taken: list[TimedLine] = []
    if limit > 0:
        for stamp, line in heapq.merge(*streams, key=lambda hit: hit[0], reverse=True):
            if len(taken) >= limit and stamp < taken[-1][0]:
                break
            taken.append((stamp, line))
    taken.sort(reverse=True)
    return b"".join(line for _, line in taken[:limit])


#: How long a rendered result is reused: ``stat`` then ``read`` of one ``cat`` must see
#: the same bytes (the size is exact), yet a new hit must show within seconds.
RESULT_TTL = 2.0
_RESULT_CACHE_SIZE = 64


class ResultCache:
    """Rendered results by what was asked, each valid for `RESULT_TTL` seconds and
    only while the indexes it came from are at the same ``generation`` (an update
    that indexed something makes every result of that index stale at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: OrderedDict[Hashable, tuple[float, Hashable, bytes]] = OrderedDict()

    def get(self, key: Hashable, generation: Hashable) -> bytes | None:
        now = time.monotonic()
        with self._lock:
            cached = self._results.get(key)
        if cached is None:
            return None
        at, made_at_generation, text = cached
        if now - at >= RESULT_TTL or made_at_generation != generation:
            return None
        return text

    def put(self, key: Hashable, generation: Hashable, text: bytes, at: float) -> None:
        """Keep ``text``, rendered from a search started at ``at`` (`time.monotonic`)."""
        with self._lock:
            self._results[key] = (at, generation, text)
            self._results.move_to_end(key)
            while len(self._results) > _RESULT_CACHE_SIZE:
                self._results.popitem(last=False)
