"""The prompt history as the mount shows it: ``HistoryView`` over ``core.history``."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from core.history import HistoryStorage, HistoryStorageError, format_history_line

log = logging.getLogger(__name__)

RECENT_LIMIT = 100
SEARCH_LIMIT = 1000


class HistoryView:
    """Read-only access to ``<agent>/history.db`` through ``core.history``.

    The mount only ever reads the history (agents record prompts), in every mount
    mode: so the store is read-only, and browsing never creates, converts or
    re-indexes the database (a missing file or FTS index shows as empty). The store
    is shared by worker threads; each read is its own short connection inside core.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._store: HistoryStorage | None = None
        self._lock = threading.Lock()

    def _open(self) -> HistoryStorage | None:
        with self._lock:
            if self._store is None:
                try:
                    self._store = HistoryStorage(self.db_path, read_only=True)
                except HistoryStorageError as exc:
                    # Not a database (yet), or no FTS5: empty for now, tried again at
                    # the next read, since the file may be replaced meanwhile.
                    log.warning("history/ is empty: %s", exc)
            return self._store

    def lines(self, query: str | None) -> bytes:
        """The matching prompts, newest first, one ``format_history_line`` each."""
        store = self._open()
        if store is None:
            return b""
        found = store.recent(RECENT_LIMIT) if query is None else store.search(query, SEARCH_LIMIT)
        return "".join(format_history_line(e) + "\n" for e in found).encode(
            "utf-8", "surrogatepass"
        )

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
