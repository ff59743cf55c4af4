"""The title Codex shows for a thread, from its state database, read-only.

Codex 0.17x keeps a SQLite database ``<CODEX_HOME>/state_<N>.sqlite`` (``N`` the schema
generation: 5 in 0.171) whose ``threads`` table has, per thread id, ``name`` (set when
the user renames the thread) and ``title`` (the first prompt). ``codex exec`` writes no
``session_index.jsonl``, so for its sessions this is the only title there is.

The archive keeps these titles (`archived_titles`: a JSON line ``{"id", "title"}`` per
thread, in the order Codex made them, so a new thread is an append), as
`ARCHIVED_TITLES` in its copy of the Codex dir, where `thread_title` finds them when
there is no database (a session only the archive still holds).

The database belongs to a running agent: it is opened read-only, never created or
changed (`core.history.read_snapshot`: a fresh ``mode=ro`` connection per read, a busy
timeout), and anything wrong with it -- missing, locked past the timeout, corrupt, a
schema without those columns -- means "no title", never an error for the caller.
Call it from a worker thread, never on the event loop: a read may wait for a writer.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Final

from core.history import HistoryStorageError, read_snapshot
from core.jsonl import dumps_line, loads
from core.safe_open import open_regular_with_stat

__all__ = [
    "ARCHIVED_TITLES",
    "archived_titles",
    "state_database",
    "state_identity",
    "thread_title",
]

#: in the archive's copy of a Codex dir: the titles it kept from the state database
ARCHIVED_TITLES: Final = "sessionfs-state-titles.jsonl"
#: the most of `ARCHIVED_TITLES` read (a line is ~100 bytes: 10,000 threads ~1 MB)
_ARCHIVED_TITLES_LIMIT: Final = 16 << 20
#: versions of `ARCHIVED_TITLES` files kept parsed (one per archive's Codex dir)
_KEPT_VERSIONS: Final = 4
_KEPT: dict[tuple[str, int, int, int], dict[str, str]] = {}
_KEPT_LOCK = threading.Lock()

_STATE_NAME: Final = re.compile(r"state_(\d+)\.sqlite")
_TITLE_SQL: Final = "SELECT name, title FROM threads WHERE id = ?"
_ALL_TITLES_SQL: Final = "SELECT id, name, title FROM threads ORDER BY rowid"


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


def state_identity(database: Path) -> tuple[int, int, int]:
    """(inode, size, mtime) of the database with its ``-wal`` (a write lands in the WAL
    until a checkpoint): the same again means its titles are as they were."""
    st = os.stat(database)
    try:
        wal = os.stat(f"{database}-wal")
    except OSError:
        return st.st_ino, st.st_size, st.st_mtime_ns
    return st.st_ino, st.st_size + wal.st_size, max(st.st_mtime_ns, wal.st_mtime_ns)


def _title_of(name: object, title: object) -> str | None:
    for value in (name, title):
        if isinstance(value, str) and value.strip():
            return value
    return None


def archived_titles(database: Path) -> bytes:
    """Every thread's title (``name``, else ``title``) as the archive keeps it: a JSON
    line ``{"id", "title"}`` per thread that has one, oldest thread first; `OSError`
    when the database cannot be read now."""

    def read(conn: sqlite3.Connection) -> list[tuple[object, object, object]]:
        return conn.execute(_ALL_TITLES_SQL).fetchall()

    try:
        rows = read_snapshot(database, read) or []
    except (sqlite3.Error, HistoryStorageError) as exc:
        raise OSError(f"{database}: {exc}") from None
    lines = []
    for ident, name, title in rows:
        shown = _title_of(name, title)
        if isinstance(ident, str) and shown is not None:
            lines.append(dumps_line({"id": ident, "title": shown}))
    return b"".join(lines)


def _kept_title(codex_home: Path, thread_id: str) -> str | None:
    """The thread's title in the archive's `ARCHIVED_TITLES` (last line wins): each
    version of the file parsed once, not once per session asking."""
    try:
        fd, st = open_regular_with_stat(codex_home / ARCHIVED_TITLES)
    except OSError:
        return None
    identity = (os.fspath(codex_home), st.st_ino, st.st_size, st.st_mtime_ns)
    with os.fdopen(fd, "rb") as f, _KEPT_LOCK:
        titles = _KEPT.get(identity)
        if titles is None:
            titles = _KEPT[identity] = _parse_kept_titles(f.read(_ARCHIVED_TITLES_LIMIT))
            while len(_KEPT) > _KEPT_VERSIONS:
                _KEPT.pop(next(iter(_KEPT)))
    return titles.get(thread_id)


def _parse_kept_titles(data: bytes) -> dict[str, str]:
    """Thread id -> title, from `ARCHIVED_TITLES` lines (junk lines skipped)."""
    titles: dict[str, str] = {}
    for line in data.splitlines():
        try:
            row = loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            title = row.get("title")
            if isinstance(title, str) and title.strip():
                titles[row["id"]] = title
    return titles


def thread_title(codex_home: Path, thread_id: str) -> str | None:
    """The thread's ``name``, else its ``title`` (``None``: no database, no such
    thread, or neither set); with no database, the title the archive kept of it."""
    database = state_database(codex_home)
    if database is None:
        return _kept_title(codex_home, thread_id)

    def read(conn: sqlite3.Connection) -> tuple[object, object] | None:
        row = conn.execute(_TITLE_SQL, (thread_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    try:
        row = read_snapshot(database, read)
    except (OSError, sqlite3.Error, HistoryStorageError):
        return None
    return None if row is None else _title_of(*row)
