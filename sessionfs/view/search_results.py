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
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence

#: One hit as an index yields it: its time (ms) and its rendered line (with the newline).
TimedLine = tuple[int, bytes]


def newest_lines(streams: Sequence[Iterator[TimedLine]], limit: int) -> bytes:
    """The ``limit`` newest lines of ``streams`` (each newest first), newest first.

    Hits of one millisecond come in the order of ``streams`` (the agent dir's index
    first, then the other agents' as ``agents/`` lists them; a team store's machines
    by name, each one's so), and within one index by session file, then entry id (each index yields
    them so: `core.search_index.scan.match_order`). So the result is complete down to
    its last line (every hit newer than it is shown, and every hit of its millisecond
    that comes before it), and lines are made only as far as they are shown: many hits
    of one millisecond (sessions generated with the same times) cost no more than
    others."""
    if limit <= 0:
        return b""
    merged = heapq.merge(*streams, key=_newest_first)
    return b"".join(line for _, line in itertools.islice(merged, limit))


def _newest_first(hit: TimedLine) -> int:
    return -hit[0]


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
