"""``history/recent.txt`` and ``history/search/<query>``: the prompt history store."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import trio

from sessionfs.names import decode_name
from sessionfs.nodes.base import STATIC, VOLATILE, DirNode, FileNode, MountContext, Node

log = logging.getLogger(__name__)

RECENT_LIMIT = 100
SEARCH_LIMIT = 1000


class HistoryView:
    """Read-only access to ``<agent>/history.db`` through ``core.history``.

    The store is opened on first use and only if the file exists: browsing must never
    create files in the agent dir. It is shared by worker threads (its reads are
    locked inside core).
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._store: Any = None
        self._lock = threading.Lock()

    def _open(self) -> Any:
        with self._lock:
            if self._store is None and self.db_path.is_file():
                try:
                    from core.history import HistoryStorage
                except ImportError:
                    log.warning("core.history is not available; history/ stays empty")
                    return None
                self._store = HistoryStorage(self.db_path)
            return self._store

    def lines(self, query: str | None) -> bytes:
        """The matching prompts, newest first, one ``format_history_line`` each."""
        store = self._open()
        if store is None:
            return b""
        from core.history import format_history_line

        found = store.recent(RECENT_LIMIT) if query is None else store.search(query, SEARCH_LIMIT)
        return "".join(format_history_line(e) + "\n" for e in found).encode(
            "utf-8", "surrogatepass"
        )

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


class HistoryFile(FileNode):
    __slots__ = ("query",)

    tier = VOLATILE

    def __init__(self, ctx: MountContext, key: tuple[str, ...], query: str | None) -> None:
        super().__init__(ctx, key)
        self.query = query

    async def content(self) -> bytes:
        return await trio.to_thread.run_sync(self.ctx.history.lines, self.query)


class HistorySearchDir(DirNode):
    """Lookup-only: ``history/search/<query>`` exists for any query; lists empty."""

    __slots__ = ()

    tier = STATIC

    async def lookup(self, name: str) -> Node | None:
        return HistoryFile(self.ctx, self.child_key(name), decode_name(name))


class HistoryDir(DirNode):
    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        return [
            ("recent.txt", HistoryFile(self.ctx, self.child_key("recent.txt"), None)),
            ("search", HistorySearchDir(self.ctx, self.child_key("search"))),
        ]
