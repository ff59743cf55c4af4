"""The database: its schema and version, error classes, per-file state and rows.

The FTS table is *contentless* (``content=''``): it stores only the inverted index,
not a second copy of the text. Hits are turned into snippets by re-reading the one
line of the session file they came from (offset, length and a checksum are kept per
row; a line that no longer matches is a stale hit and is not shown). That keeps the
index near 30 % of the session files' size with ``detail=full``, which phrase queries
need.

SQLite 3.40 cannot delete rows from a contentless table, so dropping a file's rows
marks them dead in ``entries`` (``file_id`` NULL, `kill_rows`) and queries skip them;
when dead rows outnumber half the live ones the whole index is rebuilt from the files.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from core.search_index.rowids import assign_rowids
from core.search_index.rows import FileState, Row
from core.search_index.text import clean_text

# 2: the ``terms`` table (core.search_index.terms). Another version is rebuilt.
SCHEMA_VERSION: Final = 2
#: ``PRAGMA application_id`` of our databases ("SFSI"): anything else is foreign.
APPLICATION_ID: Final = 0x53465349

_INSERT_CHARS = 4 * 1024 * 1024


TOKENIZER = "tokenize='unicode61 remove_diacritics 2'"
# The candidate check (`Verifier`) builds a table with the same options, so a query
# means the same thing there as in the index.
FTS_OPTIONS = f"content='', columnsize=0, detail=full, {TOKENIZER}"

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    """CREATE TABLE files (
        id INTEGER PRIMARY KEY,
        key BLOB NOT NULL UNIQUE,
        dev INTEGER NOT NULL, ino INTEGER NOT NULL,
        size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
        indexed_to INTEGER NOT NULL,
        head_hash INTEGER NOT NULL, tail_hash INTEGER NOT NULL,
        mode INTEGER NOT NULL)""",
    # rowid = FTS rowid = bucket << 32 | n (module docstring). file_id NULL: a dead row.
    """CREATE TABLE entries (
        rowid INTEGER PRIMARY KEY,
        file_id INTEGER,
        ts INTEGER NOT NULL,
        entry_id TEXT NOT NULL, role TEXT NOT NULL,
        line_offset INTEGER NOT NULL, line_length INTEGER NOT NULL,
        line_crc INTEGER NOT NULL)""",
    # Rows handed out per time bucket so far (never decreases until a rebuild).
    "CREATE TABLE buckets (bucket INTEGER PRIMARY KEY, used INTEGER NOT NULL)",
    "CREATE INDEX entries_by_file ON entries(file_id) WHERE file_id IS NOT NULL",
    "CREATE VIRTUAL TABLE fts USING fts5(text, " + FTS_OPTIONS + ")",
    # Every term of the FTS table, for prefix lookups (core.search_index.terms).
    "CREATE TABLE terms (term TEXT PRIMARY KEY) WITHOUT ROWID",
)
_SCHEMA_TABLES = frozenset({"meta", "files", "entries", "buckets", "fts", "terms"})

# SQLite primary result codes (``exc.sqlite_errorcode & 0xff``).
_SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 3, 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN = 10, 11, 13, 14
_SQLITE_NOTADB = 26
_CORRUPT_CODES = frozenset({_SQLITE_CORRUPT, _SQLITE_NOTADB})
_UNWRITABLE_CODES = frozenset(
    {_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN}
)


def _error_code(exc: sqlite3.Error) -> int:
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def is_corrupt(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if _error_code(exc) in _CORRUPT_CODES:
        return True
    text = str(exc)
    return "malformed" in text or "not a database" in text


def is_unwritable(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and _error_code(exc) in _UNWRITABLE_CODES


class CorruptIndex(Exception):
    """The database file is not (or no longer) ours: rebuild it."""


def is_empty_database(conn: sqlite3.Connection) -> bool:
    """A brand-new (zero-page) database: ours to set up."""
    return bool(
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        and conn.execute("PRAGMA application_id").fetchone()[0] == 0
    )


def validate_schema(conn: sqlite3.Connection) -> None:
    """Raise `CorruptIndex` unless this is our schema at our version."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            raise CorruptIndex(str(exc)) from exc
        raise
    if app_id != APPLICATION_ID:
        raise CorruptIndex(f"application_id {app_id:#x} is not a sessionfs search index")
    if version != SCHEMA_VERSION:
        raise CorruptIndex(f"schema version {version}, expected {SCHEMA_VERSION}")
    if not tables >= _SCHEMA_TABLES:
        raise CorruptIndex(f"missing tables {sorted(_SCHEMA_TABLES - tables)}")


def create_schema(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    validate_schema(conn)  # another process may have created something else meanwhile


def get_meta(conn: sqlite3.Connection, key: str) -> Any:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: sqlite3.Connection, key: str, value: Any) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


_STATE_COLUMNS = "id, dev, ino, size, mtime_ns, indexed_to, head_hash, tail_hash, mode"


def load_states(conn: sqlite3.Connection) -> dict[bytes, FileState]:
    rows = conn.execute(f"SELECT key, {_STATE_COLUMNS} FROM files").fetchall()
    return {bytes(row[0]): FileState(*row[1:]) for row in rows}


def load_state(conn: sqlite3.Connection, key: bytes) -> FileState | None:
    row = conn.execute(f"SELECT {_STATE_COLUMNS} FROM files WHERE key = ?", (key,)).fetchone()
    return FileState(*row) if row else None


def save_state(conn: sqlite3.Connection, file_id: int, values: tuple[int, ...]) -> None:
    conn.execute(
        "UPDATE files SET dev = ?, ino = ?, size = ?, mtime_ns = ?, indexed_to = ?,"
        " head_hash = ?, tail_hash = ?, mode = ? WHERE id = ?",
        (*values, file_id),
    )


def kill_rows(conn: sqlite3.Connection, file_id: int) -> None:
    """Mark a file's rows dead (their FTS postings stay until a rebuild)."""
    cursor = conn.execute("UPDATE entries SET file_id = NULL WHERE file_id = ?", (file_id,))
    if cursor.rowcount > 0:
        dead = int(get_meta(conn, "dead") or 0) + cursor.rowcount
        set_meta(conn, "dead", dead)


def new_file(conn: sqlite3.Connection, key: bytes) -> int:
    """A files row for ``key`` (its state is saved once its lines are indexed)."""
    cursor = conn.execute(
        "INSERT INTO files (key, dev, ino, size, mtime_ns, indexed_to, head_hash, tail_hash,"
        " mode) VALUES (?, 0, 0, -1, 0, 0, 0, 0, 0)",
        (key,),
    )
    return int(cursor.lastrowid or 0)


#: Called with the texts of each slice of rows inserted (to add their terms).
TextSink = Callable[[Sequence[str]], None]


def insert_all(
    conn: sqlite3.Connection, file_id: int, rows: Iterable[Row], sink: TextSink | None = None
) -> int:
    """Insert rows in slices of about `_INSERT_CHARS` of text; returns how many.
    ``sink`` (when given) gets the texts of each slice."""
    count = chars = 0
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        chars += len(row.text)
        if chars >= _INSERT_CHARS:
            _insert_rows(conn, file_id, batch, sink)
            count += len(batch)
            batch, chars = [], 0
    _insert_rows(conn, file_id, batch, sink)
    return count + len(batch)


def _insert_rows(
    conn: sqlite3.Connection, file_id: int, rows: Sequence[Row], sink: TextSink | None
) -> None:
    if not rows:
        return
    rowids = assign_rowids(conn, [row.ms for row in rows])
    _insert_entries(conn, file_id, rows, rowids)
    texts = [row.text for row in rows]
    try:
        conn.executemany(
            "INSERT INTO fts (rowid, text) VALUES (?, ?)", zip(rowids, texts, strict=True)
        )
    except UnicodeEncodeError:
        texts = [clean_text(text) for text in texts]
        conn.executemany(
            "INSERT INTO fts (rowid, text) VALUES (?, ?)", zip(rowids, texts, strict=True)
        )
    if sink is not None:
        sink(texts)


def _insert_entries(
    conn: sqlite3.Connection, file_id: int, rows: Sequence[Row], rowids: Sequence[int]
) -> None:
    values = [
        (
            rowid,
            file_id,
            row.ms,
            clean_text(row.entry_id),
            clean_text(row.role),
            row.offset,
            row.length,
            row.crc,
        )
        for rowid, row in zip(rowids, rows, strict=True)
    ]
    conn.executemany(
        "INSERT INTO entries (rowid, file_id, ts, entry_id, role, line_offset, line_length,"
        " line_crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        values,
    )
