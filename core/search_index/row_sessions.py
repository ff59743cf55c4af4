"""Sessions that are rows of a database, indexed through their connector: `RowSessions`.

opencode keeps every session in ``opencode.db`` and Cursor's agent CLI each chat in a
``store.db``: rows of SQLite databases the agent writes live, not lines of a file. A
`FileFormat` with ``row_sessions`` set is indexed from its connector instead of from
bytes, with the rest of the index (keys, rowids, queries, the ``files`` state) as for
every other agent:

* keys: each session's path below the root, ``<database>/<session id>``
  (`core.session_stat`), as the listing names it;
* change: the session's stat (the database's and its WAL's, `core.session_stat`);
  when it changed, the connector's `RowSessions.version` of the session (one cheap
  query): a write to another session of the same database leaves it as it was, so
  it is not read again (kept in the state's ``head_hash``);
* rows: `RowSessions.rows`, one per entry that has text, named as ``entries/`` names
  it; no offsets (they are 0): a hit's text is read back through the connector by
  entry id (`RowReader`), once per session and search;
* other files of the same format (Cursor's transcripts beside its chats: any key
  that is no ``<database>/<id>``) are read as lines, as every other agent's;
* trouble: a locked, corrupt or vanished database raises `NotASessionError` (the
  connectors' ``StoreUnreadable``) or `OSError`; the index skips the session with
  the reason (``search_<agent>_last_error`` in the root ``ctl``) and tries again at
  the next pass.

Every call blocks up to the store's busy timeout: the index runs them in worker
threads, never on the event loop.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.errors import NotASessionError
from core.search_index.rows import Row
from core.session_stat import split_row_session_path

__all__ = ["EntryReader", "RowReader", "RowSessions", "version_of"]


@dataclass(frozen=True)
class RowSessions:
    """How a connector's row sessions are read for the index (module docstring)."""

    #: the rows of the session at this path (``<database>/<session id>``); none for a
    #: session gone from its database, which still reads (raising is for a database
    #: that cannot be read: its other sessions are then not tried again)
    rows: Callable[[str], list[Row]]
    #: a number that changes whenever the session's rows may have (`version_of`)
    version: Callable[[str], int]


def version_of(signature: Any) -> int:
    """A 63-bit hash of a connector's change signature (it fits an SQLite integer)."""
    digest = hashlib.blake2b(repr(signature).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class RowReader:
    """Reads hits' texts back: a row session's through the connector (its rows once per
    search, looked up by entry id), any other file's through ``files`` (the format's
    line files: Cursor's transcripts beside its chats)."""

    def __init__(self, root: str, sessions: RowSessions, files: EntryReader) -> None:
        self.root = root
        self.sessions = sessions
        self.files = files
        #: key -> entry id -> indexed text (None: the session cannot be read now), and
        #: for a key that is no row session, nothing: ``files`` reads it
        self._texts: dict[bytes, dict[str, str] | None] = {}
        self._not_rows: set[bytes] = set()
        #: databases a read failed in during this search
        self._failed: set[str] = set()

    def text(self, key: bytes, entry_id: str, place: Sequence[int]) -> str | None:
        """The entry's text now; None when the session or the entry is gone."""
        if key not in self._texts and key not in self._not_rows:
            path = os.path.join(self.root, os.fsdecode(key))
            found = split_row_session_path(path)
            if found is None:
                self._not_rows.add(key)
            elif found[0] in self._failed:
                self._texts[key] = None  # its database just failed: no second wait
            else:
                self._texts[key] = self._read(path, found[0])
        if key in self._not_rows:
            return self.files.text(key, entry_id, place)
        texts = self._texts[key]
        return texts.get(entry_id) if texts is not None else None

    def _read(self, path: str, database: str) -> dict[str, str] | None:
        try:
            rows = self.sessions.rows(path)
        except (NotASessionError, OSError):
            # Locked (after the busy timeout), corrupt or gone: the other sessions of
            # the same database are left out of this search without waiting again.
            self._failed.add(database)
            return None
        return {row.entry_id: row.text for row in rows}

    def close(self) -> None:
        self._texts.clear()
        self.files.close()


class EntryReader(Protocol):
    """Reads a hit's indexed text back (`core.search_index.scan.LineReader`,
    `RowReader`). ``place``: the row's line offset, length and checksum, then its
    file's (dev, ino, size, mtime_ns) when indexed (a row session's: unused)."""

    def text(self, key: bytes, entry_id: str, place: Sequence[int]) -> str | None: ...

    def close(self) -> None: ...
