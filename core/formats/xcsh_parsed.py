"""`ManagerSource`: an xcsh session held parsed (a `SessionManager`) on the same
read-side interface as every other session.

The mount holds a parsed manager only where it must: for writes through the mount,
for a file at an older format version (migrated in memory: its entries' ids exist
nowhere on disk) and while a leaf chosen through the mount is pinned. Reading such a
session through `ManagerSource` gives what the manager holds -- its entries, its leaf
(a pinned one included), its labels -- with the same rules, names and renderings as
the compact `core.formats.xcsh.XcshSession`, so a view needs no second code path.
"""

from __future__ import annotations

import os
from typing import Any, Final

from core.context import path_to_root
from core.formats.xcsh import XcshReads, by_id_of
from core.jsonl import dumps_line, loads
from core.manager import SessionManager
from core.paths import iso_to_ms

__all__ = ["PARSED_SIZE_FACTOR", "ManagerSource"]

Entry = dict[str, Any]

#: What a parsed session costs in the daemon's RSS relative to its file size, for the
#: cache's budget. tracemalloc on corpus-shaped sessions: the manager keeps ~1.8x, its
#: load peaks at ~4.6x; the issue-11 bench (1,000 sessions, --cache-mb 256) measured
#: RSS 395 MB with a factor of 4, i.e. ~5.5x counting the view's indexes and allocator
#: slack. 6 keeps RSS under --cache-mb + 100 MB.
PARSED_SIZE_FACTOR: Final = 6


class ManagerSource(XcshReads):
    """A parsed xcsh session read through `SessionSource` (module docstring). The
    manager stays the caller's: writes go to it, and this reads what it holds."""

    def __init__(self, manager: SessionManager) -> None:
        super().__init__()
        self.manager = manager
        self._entries: list[Entry] | None = None
        self._by_id: dict[str, Entry] | None = None
        self._index_of_id: dict[str, int] | None = None
        self._file_size = self._size_on_disk()

    def _changed(self, size: int | None = None) -> None:
        super()._changed()
        self._entries = self._by_id = self._index_of_id = None
        self._file_size = self._size_on_disk() if size is None else size

    def _size_on_disk(self) -> int:
        path = self.manager.get_session_file()
        try:
            return os.stat(path).st_size if path is not None else 0
        except OSError:
            return 0

    def changed(self, size: int | None = None) -> None:
        """The manager changed (a write through it, a leaf moved): forget what was
        derived from what it held. ``size``: the file's size, when the caller has just
        taken it (else a ``stat`` here)."""
        self._changed(size)

    def _held(self) -> list[Entry]:
        if self._entries is None:
            self._entries = list(self.manager.get_entries())
        return self._entries

    def _parsed(self) -> tuple[list[Entry], dict[str, Entry]]:
        if self._by_id is None:
            self._by_id = by_id_of(self._held())
        return self._held(), self._by_id

    def _header(self) -> dict[str, Any]:
        return self.manager.get_header() or {}

    def _leaf_id(self) -> str | None:
        leaf = self.manager.get_leaf_id()
        return leaf if isinstance(leaf, str) else None

    def _id(self, index: int) -> object:
        return self._held()[index].get("id")

    def _parent_id(self, index: int) -> object:
        return self._held()[index].get("parentId")

    def usage(self) -> dict[str, Any]:
        # (the manager keeps its totals and hands out a copy of them: the one copy)
        return self.manager.get_usage_statistics()

    def _usage_known(self) -> dict[str, Any]:
        return self.usage()

    def catch_up(self) -> bool:
        found = self.manager.catch_up()  # > 0: entries appended; < 0: read again whole
        if found:
            self.reread = found < 0
            self._changed()
        return found != 0

    def memory_cost(self) -> int:
        """The file's size when last read or written (no stat: the cache asks often)
        times `PARSED_SIZE_FACTOR`."""
        return self._file_size * PARSED_SIZE_FACTOR

    def __len__(self) -> int:
        return len(self._held())

    def raw_line(self, index: int) -> bytes:
        """The entry as held, as one compact JSON line (no newline): a migrated entry
        has no line of its own in the file."""
        return dumps_line(self._held()[index])[:-1]

    def entry(self, index: int) -> Entry:
        copy: Entry = loads(dumps_line(self._held()[index]))  # the caller may keep it
        return copy

    def entry_view(self, index: int) -> Entry:
        return self._held()[index]

    def leaf_known(self) -> bool:
        return self._index_of_id is not None

    def entry_time_ms(self, index: int) -> int | None:
        return iso_to_ms(self._held()[index].get("timestamp"))

    def index_of(self, name: str) -> int | None:
        if self._index_of_id is None:
            self._index_of_id = {
                e["id"]: i for i, e in enumerate(self._held()) if isinstance(e.get("id"), str)
            }
        return self._index_of_id.get(name)

    def labels(self) -> dict[str, str]:
        return {k: v for k, v in self.manager.get_labels().items() if isinstance(v, str)}

    def path_indexes(self) -> list[int]:
        _, by_id = self._parsed()
        path = path_to_root(self._leaf_id(), by_id)
        return [index for e in path if (index := self.index_of(e["id"])) is not None]
