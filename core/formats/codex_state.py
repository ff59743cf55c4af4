"""The title Codex shows for a thread, from its state database, read-only.

Codex 0.17x keeps a SQLite database ``<CODEX_HOME>/state_<N>.sqlite`` (``N`` the schema
generation: 5 in 0.171) whose ``threads`` table has, per thread id, ``name`` (set when
the user renames the thread) and ``title`` (the first prompt). ``codex exec`` writes no
``session_index.jsonl``, so for its sessions this is the only title there is.

The database belongs to a running agent: it is opened read-only, never created or
changed (`core.history.read_snapshot`: a fresh ``mode=ro`` connection per read, a busy
timeout), and anything wrong with it -- missing, locked past the timeout, corrupt, a
schema without those columns -- means "no title", never an error for the caller.
Call it from a worker thread, never on the event loop: a read may wait for a writer.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Final

from core.history import HistoryStorageError, read_snapshot

__all__ = ["state_database", "thread_title"]

_STATE_NAME: Final = re.compile(r"state_(\d+)\.sqlite")
_TITLE_SQL: Final = "SELECT name, title FROM threads WHERE id = ?"


def state_database(codex_home: Path) -> Path | None:
    """The newest ``state_<N>.sqlite`` in ``codex_home`` (``None``: none)."""
    found: list[tuple[int, Path]] = []
    try:
        for child in codex_home.iterdir():
            match = _STATE_NAME.fullmatch(child.name)
            if match is not None:
                found.append((int(match.group(1)), child))
    except OSError:
        return None
    return max(found)[1] if found else None


def thread_title(codex_home: Path, thread_id: str) -> str | None:
    """The thread's ``name``, else its ``title`` (``None``: no database, no such
    thread, or neither set)."""
    database = state_database(codex_home)
    if database is None:
        return None

    def read(conn: sqlite3.Connection) -> tuple[object, object] | None:
        row = conn.execute(_TITLE_SQL, (thread_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    try:
        row = read_snapshot(database, read)
    except (OSError, sqlite3.Error, HistoryStorageError):
        return None
    if row is None:
        return None
    for value in row:
        if isinstance(value, str) and value.strip():
            return value
    return None
