"""A row session's search rows, read through its connector's `SessionSource`:
`source_rows` (used by the connectors whose sessions are rows of a database: opencode,
Cursor's chats; `core.search_index.row_sessions`).

A row per entry the connector's ``search_text`` gives text for, named as ``entries/``
names it (`SessionSource.entry_name`), at the entry's time -- or, for an entry without
one (a Cursor chat's messages carry none), the time of the entry before it, else the
session's start: so hits still come newest first, not dated 1970.
"""

from __future__ import annotations

from collections.abc import Callable

from core.formats.base import SessionSource
from core.paths import iso_to_ms
from core.search_index.formats import capped_text
from core.search_index.rowids import MAX_MS
from core.search_index.rows import Row

__all__ = ["SearchText", "source_rows"]

#: (role, the strings it is found by) of entry ``index``; None: not searched
SearchText = Callable[[SessionSource, int], tuple[str, list[str]] | None]


def source_rows(source: SessionSource, search_text: SearchText) -> list[Row]:
    """The index rows of ``source`` (module docstring); no offsets: the text is read
    back through the connector by entry name."""
    rows = []
    ms = iso_to_ms(source.header().get("timestamp")) or 0
    for index in range(len(source)):
        ms = source.entry_time_ms(index) or ms
        found = search_text(source, index)
        text = capped_text(found[1]) if found is not None else None
        if found is not None and text is not None:
            clamped = min(max(ms, 0), MAX_MS)
            rows.append(Row(clamped, source.entry_name(index), found[0], 0, 0, 0, text))
    return rows
