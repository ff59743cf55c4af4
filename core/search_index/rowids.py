"""Rowids that follow time, so FTS5's rowid order is (almost) newest-first order.

FTS5 streams matches in rowid order and stops at LIMIT, so rowids follow time: a rowid
is ``bucket << 32 | n`` where the bucket is the entry's timestamp in ~70-minute steps
and ``n`` counts the rows ever given to that bucket. Every row of a newer bucket is
newer than every row of an older one, so the newest ``limit`` matches are the first
``limit`` in rowid order plus the rest of the last bucket touched, sorted by their
exact timestamps. (A plain ``timestamp_ms << k`` rowid would order exactly too, but
FTS5 stores rowid *deltas* per posting: dense rowids within a bucket keep the index
about half the size.) Rowids are never reused: dead rows keep theirs until a rebuild.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

SEQ_BITS = 32
# 2**22 ms: about 70 minutes per bucket. Wider buckets make a query read more rows of
# its last bucket; narrower ones cost a large rowid delta per posting more often.
BUCKET_SHIFT = 22
MAX_MS = (1 << (63 - SEQ_BITS + BUCKET_SHIFT)) - 1
TOP_ROWID = (1 << 63) - 1


def assign_rowids(conn: sqlite3.Connection, stamps: Sequence[int]) -> list[int]:
    """``bucket << 32 | n`` for each timestamp (ms), ``n`` the bucket's next unused number."""
    used: dict[int, int] = {}
    rowids = []
    for ms in stamps:
        bucket = ms >> BUCKET_SHIFT
        n = used.get(bucket)
        if n is None:
            found = conn.execute("SELECT used FROM buckets WHERE bucket = ?", (bucket,)).fetchone()
            n = int(found[0]) if found else 0
        # 2**32 rows in one 70-minute bucket cannot come from real files.
        rowids.append(bucket << SEQ_BITS | n)
        used[bucket] = n + 1
    conn.executemany("INSERT OR REPLACE INTO buckets (bucket, used) VALUES (?, ?)", used.items())
    return rowids
