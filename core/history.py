"""Prompt history: ``<agent>/history.db`` (SQLite + FTS5), spec section 11.

The agents keep every prompt a user typed in one SQLite database shared by all
projects, so "what did I ask before?" is one full-text query away. This module reads
and writes that database with exactly the agents' schema, so either side can open a
file the other wrote.

Concurrency model
-----------------
* ``add()`` never touches the disk on the caller's thread: it trims, drops empty
  prompts and consecutive duplicates, and appends to an in-memory queue. One background
  writer thread (started on the first ``add``) drains the queue and commits everything
  pending as ONE transaction, so a burst of prompts costs one fsync, not one each.
  Failures are logged and never reach the caller; ``flush()``/``close()`` wait for the
  queue to drain.
* Reads (``recent``/``search``) use a separate connection guarded by a lock, so a
  storage object may be shared by worker threads (the FUSE daemon does that). They see
  what is committed, i.e. call ``flush()`` first to read your own pending prompts.
* Several processes (agents, the mount, the CLI) may use the file at once: WAL mode
  lets readers run beside a writer, every write transaction is ``BEGIN IMMEDIATE`` so
  it takes the write lock up front, and ``busy_timeout=5000`` makes a process wait for
  the lock instead of failing.

Read-only mode
--------------
``HistoryStorage(path, read_only=True)`` is for readers that must leave the agent dir
exactly as they found it (``sessionfs mount --read-only``, the mount's ``/history``,
``sessionfs history``): no schema, trigger or FTS set-up, no journal-mode change, no
writer thread, and no file created. A missing database, table or FTS index simply
means "no history" / "no search": empty results.

Each read opens its own short-lived ``mode=ro`` connection and closes it at once.
Keeping one open would, in WAL mode, stop the last agent to close the database from
removing its ``-wal``/``-shm`` files. And a ``mode=ro`` connection to a WAL database
whose ``-wal``/``-shm`` files do not exist creates them (SQLite needs the shared
wal-index), so then the read is ``immutable=1``: all the data is in the main file.
immutable means "no locking", which is only safe while nobody checkpoints into the
main file, so such a read is checked afterwards (same inode, size and mtime, still no
``-wal``) and repeated when a writer came along meanwhile. When an agent has the
database open, its ``-wal``/``-shm`` exist and the read shares them like any reader
(recording its read mark in the shared-memory file is how WAL readers stay safe
beside a writer; it creates nothing). One race is left open: if the last agent closes
the database (removing both files) in the microseconds between that check and the
open, SQLite creates them again, empty; nothing in the database changes.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from core import paths
from core.private_files import ensure_private_file, make_private_dirs
from core.safe_open import open_regular
from core.search_index.query import QueryTerm, build_match_query

__all__ = [
    "MAX_LIMIT",
    "FTS5UnavailableError",
    "HistoryEntry",
    "HistoryStorage",
    "HistoryStorageError",
    "ensure_fts5_available",
    "format_history_line",
    "history_match_query",
    "read_snapshot",
    "record_session_title",
    "unescape_history_field",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

MAX_LIMIT = 1000
"""Upper bound for ``recent``/``search`` limits (spec: clamped to 0..1000)."""

BUSY_TIMEOUT_MS = 5000

# The most rows one write transaction carries. Large enough that a burst is one
# commit; small enough that one transaction never holds the write lock for long.
_MAX_BATCH = 2000

# How often a batch is retried when another process holds the write lock past
# busy_timeout (each attempt already waited BUSY_TIMEOUT_MS inside SQLite).
_LOCK_RETRIES = 3

# Exactly the agents' DDL (names, column order, default expression), so a database
# created here is indistinguishable from one the agents created, and on a database
# they created every statement is a no-op.
_NOW_EPOCH = "CAST(strftime('%s','now') AS INTEGER)"
_FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS history_fts"
    " USING fts5(prompt, content='history', content_rowid='id');"
)
SCHEMA_SQL = f"""
CREATE TABLE IF NOT EXISTS history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL,
\tcreated_at INTEGER NOT NULL DEFAULT ({_NOW_EPOCH}),
\tcwd TEXT
);
CREATE INDEX IF NOT EXISTS idx_history_created_at ON history(created_at DESC);

{_FTS_DDL}

CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
END;
"""

# created_at comes from the column default, i.e. the time of the commit, as the agents
# do: rows committed under the write lock one after another then get non-decreasing
# times in id order across processes, which _read_newest relies on for speed.
_INSERT_SQL = "INSERT INTO history (prompt, cwd) VALUES (?, ?)"

# "Newest first" means ORDER BY created_at DESC, id DESC (as the agents order it).
# Sorting every match that way costs a table lookup per match: ~100 ms for a word in
# half of 100,000 prompts. But ids grow with time, so the newest `limit` rows by id
# are almost always the answer, and both FTS5 and the table stream rows by id
# descending and stop at LIMIT. _read_newest takes that fast path and then proves it
# (no row older by id is newer by time); only if the proof fails does it run the
# exact query.
_COLUMNS = "h.id, h.prompt, h.created_at, h.cwd"
_RECENT_FAST_SQL = f"SELECT {_COLUMNS} FROM history h ORDER BY h.id DESC LIMIT ?"
_RECENT_EXACT_SQL = (
    f"SELECT {_COLUMNS} FROM history h ORDER BY h.created_at DESC, h.id DESC LIMIT ?"
)
_SEARCH_FROM = "FROM history_fts f JOIN history h ON h.id = f.rowid WHERE history_fts MATCH ?"
_SEARCH_FAST_SQL = f"SELECT {_COLUMNS} {_SEARCH_FROM} ORDER BY f.rowid DESC LIMIT ?"
_SEARCH_EXACT_SQL = (
    f"SELECT {_COLUMNS} {_SEARCH_FROM} ORDER BY h.created_at DESC, h.id DESC LIMIT ?"
)
# The proof: is any row with a smaller id than the page's lowest stamped later than
# the page's oldest time? It walks the index entries newer than that time, at most
# _PROOF_BUDGET of them; when there are more (a rare word whose newest matches span
# most of the history), the exact query is cheaper anyway because it has few matches
# to sort.
_PROOF_BUDGET = 8000
# The tables each read needs: a read-only store finds them missing in a database no
# agent has set up yet (or one from before the FTS index) and answers "nothing".
_RECENT_TABLES = frozenset({("table", "history")})
_SEARCH_TABLES = _RECENT_TABLES | {("table", "history_fts")}
_NEWER_ROWS_SQL = (
    "SELECT count(*), min(id) FROM (SELECT id FROM history"
    " INDEXED BY idx_history_created_at WHERE created_at > ? LIMIT ?)"
)
_LAST_PROMPT_SQL = "SELECT prompt FROM history ORDER BY id DESC LIMIT 1"

# A read-only read of a database nobody has open is retried this often when a writer
# changes the main file under it (see "Read-only mode" above).
_SNAPSHOT_TRIES = 3
_SQLITE_HEADER_SIZE = 100
# Bytes 18 and 19 of the header (file format write/read version) are 2 in WAL mode.
_WAL_HEADER_BYTES = b"\x02\x02"


class HistoryStorageError(RuntimeError):
    """The history database cannot be opened or set up."""


class FTS5UnavailableError(HistoryStorageError):
    """Python's SQLite library was built without the FTS5 extension."""


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One stored prompt. ``created_at`` is unix time in seconds."""

    id: int
    prompt: str
    created_at: int
    cwd: str | None


@dataclass(frozen=True, slots=True)
class _PendingPrompt:
    prompt: str
    cwd: str | None


_fts5_checked = False


def ensure_fts5_available() -> None:
    """Raise :class:`FTS5UnavailableError` unless this SQLite can create FTS5 tables."""
    global _fts5_checked
    if _fts5_checked:
        return
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
    except sqlite3.Error as exc:
        raise FTS5UnavailableError(
            f"prompt history needs SQLite's FTS5 extension, but the SQLite library "
            f"Python uses ({sqlite3.sqlite_version}) does not provide it ({exc}); "
            f"use a Python whose sqlite3 module is built with FTS5 "
            f"(python.org and most distribution builds are)"
        ) from exc
    finally:
        probe.close()
    _fts5_checked = True


def history_match_query(text: str) -> str | None:
    """Turn user text into a safe FTS5 query, or None when it has no tokens.

    Each whitespace-separated token (``"`` included: a prompt search has no phrases) is
    a prefix term of the search index's `build_match_query`, which quotes each one, so
    every FTS operator (``AND``, ``NEAR(``, ``-``, ``^``, ``col:``) is plain text. NUL
    cannot appear in a quoted string (SQLite stops reading there), so it separates
    tokens like whitespace.
    """
    tokens = text.replace("\x00", " ").split()
    return build_match_query([QueryTerm(token, phrase=False, prefix=True) for token in tokens])


def _clamp_limit(limit: int) -> int:
    try:
        value = int(limit)
    except (TypeError, ValueError, OverflowError):
        return 0
    return max(0, min(MAX_LIMIT, value))


# One entry is one line in the mount's /history files: these are the characters that
# would break a line or a field. The backslash is escaped too so the mapping reverses.
_LINE_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LINE_ESCAPE_TABLE = str.maketrans(_LINE_ESCAPES)
_LINE_UNESCAPES = {escaped[1]: raw for raw, escaped in _LINE_ESCAPES.items()}


def _escape_field(text: str) -> str:
    return text.translate(_LINE_ESCAPE_TABLE)


def unescape_history_field(text: str) -> str:
    """Reverse the escaping :func:`format_history_line` applies to a field."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in _LINE_UNESCAPES:
            out.append(_LINE_UNESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def format_history_line(entry: HistoryEntry) -> str:
    """``"<iso time>\\t<cwd>\\t<prompt>"`` without a trailing newline.

    The time is UTC (``2026-02-16T10:20:30Z``); a missing cwd is ``-``. Backslash,
    newline, carriage return and tab inside cwd or prompt are written as ``\\\\``,
    ``\\n``, ``\\r``, ``\\t`` so one entry is always exactly one line of three fields.
    """
    try:
        when = datetime.fromtimestamp(entry.created_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        when = str(entry.created_at)  # a corrupt timestamp still gets shown, not dropped
    cwd = "-" if entry.cwd is None else _escape_field(entry.cwd)
    return f"{when}\t{cwd}\t{_escape_field(entry.prompt)}"


def _connect(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    # isolation_level=None: autocommit; transactions are explicit BEGIN IMMEDIATE.
    conn = sqlite3.connect(
        path,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
        check_same_thread=check_same_thread,
    )
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # As the agents do: in WAL mode NORMAL never corrupts the file; a power cut can
    # only lose the last few prompts, which is the right price for not fsyncing each.
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


class HistoryStorage:
    """The prompt history store (spec section 11). See the module docstring."""

    def __init__(
        self, db_path: str | os.PathLike[str] | None = None, *, read_only: bool = False
    ) -> None:
        ensure_fts5_available()
        self.path = Path(db_path) if db_path is not None else paths.history_db_path()
        self.read_only = read_only
        self._read_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        # Consecutive-duplicate filter. Seeded from the file so re-running the last
        # prompt after a restart is not recorded twice.
        self._last_prompt: str | None = None
        if read_only:
            self._check_readable()
        else:
            self._reader, self._last_prompt = self._open_for_writing()

        # Writer state, all guarded by _cond.
        self._cond = threading.Condition()
        self._pending: list[_PendingPrompt] = []
        self._in_flight = 0
        self._stopping = False
        self._closed = False
        self._writer: threading.Thread | None = None
        self._atexit_hook: Callable[[], None] | None = None

    # -- set-up ---------------------------------------------------------------------

    def _open_for_writing(self) -> tuple[sqlite3.Connection, str | None]:
        """The shared reader connection (schema set up) and the newest stored prompt."""
        try:
            make_private_dirs(self.path.parent)
            ensure_private_file(self.path)  # its -wal and -shm take its mode
            reader = _connect(self.path, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryStorageError(f"cannot open prompt history {self.path}: {exc}") from exc
        try:
            self._set_up_schema(reader)
            row = reader.execute(_LAST_PROMPT_SQL).fetchone()
        except sqlite3.Error as exc:
            reader.close()
            raise HistoryStorageError(f"cannot use prompt history {self.path}: {exc}") from exc
        return reader, (row[0] if row else None)

    def _check_readable(self) -> None:
        """Fail now, as the read-write open does, when the file is not a database; a
        missing file is fine (no history yet)."""
        try:
            self._read_snapshot(_schema_objects)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryStorageError(f"cannot read prompt history {self.path}: {exc}") from exc

    def _set_up_schema(self, conn: sqlite3.Connection) -> None:
        # An agent-written file already has everything: then touch nothing (no write
        # lock, no pragma that writes), so opening works even on a read-only file.
        mode = conn.execute("PRAGMA journal_mode").fetchone()
        if str(mode[0]).lower() != "wal":
            # Cannot change inside a transaction; persistent once set.
            conn.execute("PRAGMA journal_mode=WAL")
        if _schema_objects(conn) >= _SCHEMA_OBJECTS:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Checked again under the write lock: another process may have just
            # created (and already filled) the index.
            has_fts = ("table", "history_fts") in _schema_objects(conn)
            for statement in _split_script(SCHEMA_SQL):
                conn.execute(statement)
            if not has_fts:
                # The index was dropped (or never existed next to old rows): the
                # trigger only covers future inserts, so index the existing rows.
                conn.execute("INSERT INTO history_fts(history_fts) VALUES('rebuild')")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- writing --------------------------------------------------------------------

    def add(self, prompt: str, cwd: str | None = None) -> None:
        """Record a prompt without waiting for the disk. Never raises for I/O errors."""
        trimmed = prompt.strip()
        if not trimmed:
            return
        if self.read_only:
            log.warning("prompt history %s is open read-only; prompt not recorded", self.path)
            return
        with self._cond:
            if self._closed:
                log.warning("prompt history %s is closed; prompt not recorded", self.path)
                return
            if trimmed == self._last_prompt:
                return
            self._last_prompt = trimmed
            self._pending.append(_PendingPrompt(trimmed, cwd))
            self._ensure_writer()
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every prompt added so far is committed (or failed and logged).

        Returns False if ``timeout`` seconds passed first.
        """
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and self._in_flight == 0, timeout)

    def close(self) -> None:
        """Write pending prompts, stop the writer thread and close the database."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._stopping = True
            writer = self._writer
            self._cond.notify_all()
        if writer is not None:
            writer.join()
        if self._atexit_hook is not None:
            atexit.unregister(self._atexit_hook)
            self._atexit_hook = None
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()

    def __enter__(self) -> HistoryStorage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _ensure_writer(self) -> None:
        # Called with _cond held. The thread is a daemon so a forgotten close() cannot
        # hang interpreter exit; the atexit hook still drains what is pending.
        if self._writer is not None:
            return
        self._writer = threading.Thread(
            target=self._writer_loop, name=f"history-writer:{self.path.name}", daemon=True
        )
        self._writer.start()
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            storage = ref()
            if storage is not None:
                storage.close()

        self._atexit_hook = close_at_exit
        atexit.register(close_at_exit)

    def _writer_loop(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: bool(self._pending) or self._stopping)
                    if not self._pending:
                        return  # stopping and drained
                    batch = self._pending[:_MAX_BATCH]
                    del self._pending[:_MAX_BATCH]
                    self._in_flight = len(batch)
                try:
                    if conn is None:
                        conn = _connect(self.path)
                    self._write_batch(conn, batch)
                except Exception:
                    log.exception(
                        "prompt history %s: could not record %d prompt(s)", self.path, len(batch)
                    )
                finally:
                    with self._cond:
                        self._in_flight = 0
                        self._cond.notify_all()
        finally:
            if conn is not None:
                conn.close()

    def _write_batch(self, conn: sqlite3.Connection, batch: Sequence[_PendingPrompt]) -> None:
        rows = [(item.prompt, item.cwd) for item in batch]
        try:
            self._insert_rows(conn, rows)
        except Exception as exc:
            if len(rows) == 1:
                raise
            # One bad row must not cost the others their place in history: retry one
            # row per transaction and log only the rows that fail on their own.
            log.warning(
                "prompt history %s: batch of %d failed (%s); retrying row by row",
                self.path,
                len(rows),
                exc,
            )
            for row in rows:
                try:
                    self._insert_rows(conn, [row])
                except Exception:
                    log.exception("prompt history %s: could not record a prompt", self.path)

    def _insert_rows(
        self, conn: sqlite3.Connection, rows: Sequence[tuple[str, str | None]]
    ) -> None:
        for attempt in range(1, _LOCK_RETRIES + 1):
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(_INSERT_SQL, rows)
                conn.execute("COMMIT")
                return
            except Exception as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if attempt == _LOCK_RETRIES or not _is_lock_error(exc):
                    raise
                log.warning("prompt history %s busy, retrying (%s)", self.path, exc)

    # -- reading --------------------------------------------------------------------

    def recent(self, limit: int = 100) -> list[HistoryEntry]:
        """The newest ``limit`` prompts (clamped to 0..1000), newest first."""
        safe_limit = _clamp_limit(limit)
        if safe_limit == 0:
            return []
        return self._read_newest(
            _RECENT_FAST_SQL, _RECENT_EXACT_SQL, (), safe_limit, "recent", _RECENT_TABLES
        )

    def search(self, query: str, limit: int = 100) -> list[HistoryEntry]:
        """Prompts containing every word of ``query`` as a word prefix, newest first."""
        safe_limit = _clamp_limit(limit)
        match = history_match_query(query)
        if safe_limit == 0 or match is None:
            return []
        return self._read_newest(
            _SEARCH_FAST_SQL, _SEARCH_EXACT_SQL, (match,), safe_limit, "search", _SEARCH_TABLES
        )

    def _read_newest(
        self,
        fast_sql: str,
        exact_sql: str,
        params: tuple[object, ...],
        limit: int,
        what: str,
        tables: frozenset[tuple[str, str]],
    ) -> list[HistoryEntry]:
        def read(conn: sqlite3.Connection) -> list[Any]:
            if self.read_only and not tables <= _schema_objects(conn):
                return []  # nobody set this database up (or its FTS index) yet
            return _newest_rows(conn, fast_sql, exact_sql, (*params, limit))

        if self._closed:
            return []
        try:
            if self.read_only:
                rows = self._read_snapshot(read) or []
            else:
                with self._read_lock:
                    assert self._reader is not None
                    rows = read(self._reader)
            entries = [_entry_from_row(row) for row in rows]
        except Exception:
            # A corrupt file, a dropped table or a closed store must not break the
            # caller (a prompt box, a FUSE read): log and show nothing.
            log.exception("prompt history %s: %s failed", self.path, what)
            return []
        entries.sort(key=lambda e: (e.created_at, e.id), reverse=True)
        return entries

    def _read_snapshot(self, read: Callable[[sqlite3.Connection], _T]) -> _T | None:
        return read_snapshot(self.path, read)


def read_snapshot(path: Path, read: Callable[[sqlite3.Connection], _T]) -> _T | None:
    """``read`` on a fresh read-only connection to the database at ``path`` (another
    program's too: nothing is created or changed); None when there is no database.

    See "Read-only mode" in the module docstring for why each read has its own
    connection and when it is ``immutable`` (and then checked and repeated).
    """
    for _ in range(_SNAPSHOT_TRIES):
        before = _DatabaseFiles.of(path)
        if before is None:
            return None
        with contextlib.closing(_connect_read_only(path, immutable=before.needs_immutable)) as conn:
            result = read(conn)
        if not before.needs_immutable or _DatabaseFiles.of(path) == before:
            return result
    raise HistoryStorageError(f"{path} was rewritten during each of {_SNAPSHOT_TRIES} reads")


def _newest_rows(
    conn: sqlite3.Connection, fast_sql: str, exact_sql: str, params: tuple[object, ...]
) -> list[Any]:
    """The fast path's page when it is provably the newest, else the exact query's."""
    rows = conn.execute(fast_sql, params).fetchall()
    limit = params[-1]
    if len(rows) == limit and not _page_is_newest(conn, rows):
        rows = conn.execute(exact_sql, params).fetchall()
    return rows


def _page_is_newest(conn: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> bool:
    """True if a full fast-path page is provably the newest ``len(rows)`` rows.

    Rows beyond the page all have smaller ids; the page is right unless one of them
    is stamped later than the page's oldest time (a clock stepped back, rows
    imported from elsewhere).
    """
    oldest = min(row[2] for row in rows)
    lowest_id = min(row[0] for row in rows)
    newer, min_id = conn.execute(_NEWER_ROWS_SQL, (oldest, _PROOF_BUDGET + 1)).fetchone()
    if newer > _PROOF_BUDGET:
        return False  # proof too costly: let the exact query decide
    return bool(newer == 0 or min_id >= lowest_id)


@dataclass(frozen=True, slots=True)
class _DatabaseFiles:
    """What a read-only reader compares before and after an ``immutable`` read."""

    inode: int
    size: int
    mtime_ns: int
    has_wal: bool
    has_shm: bool
    wal_mode: bool

    @classmethod
    def of(cls, path: Path) -> _DatabaseFiles | None:
        try:
            # Never blocks on a FIFO planted under the name (NotRegularFileError).
            with open_regular(path) as file:
                header = file.read(_SQLITE_HEADER_SIZE)
                st = os.fstat(file.fileno())
        except FileNotFoundError:
            return None
        return cls(
            inode=st.st_ino,
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            has_wal=os.path.exists(f"{path}-wal"),
            has_shm=os.path.exists(f"{path}-shm"),
            wal_mode=header[18:20] == _WAL_HEADER_BYTES,
        )

    @property
    def needs_immutable(self) -> bool:
        """A WAL database without its wal-index files: a ``mode=ro`` open would create
        them. (A ``-wal`` left without ``-shm`` by a crash is not read: the agents
        recover it the next time they open the database.)"""
        return self.wal_mode and not (self.has_wal and self.has_shm)


def _connect_read_only(path: Path, *, immutable: bool) -> sqlite3.Connection:
    uri = path.absolute().as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _entry_from_row(row: Sequence[Any]) -> HistoryEntry:
    row_id, prompt, created_at, cwd = row
    return HistoryEntry(
        id=int(row_id),
        prompt=str(prompt),
        created_at=int(created_at),
        cwd=None if cwd is None else str(cwd),
    )


_SCHEMA_OBJECTS = frozenset(
    {
        ("table", "history"),
        ("index", "idx_history_created_at"),
        ("table", "history_fts"),
        ("trigger", "history_ai"),
    }
)


def _schema_objects(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    return {(str(t), str(n)) for t, n in conn.execute("SELECT type, name FROM sqlite_master")}


def _split_script(script: str) -> list[str]:
    """Split SCHEMA_SQL into statements, keeping a trigger body in one piece.

    ``executescript`` would COMMIT the surrounding BEGIN IMMEDIATE first, so the
    statements are run one by one inside our own transaction instead.
    """
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements


def record_session_title(db_path: str | os.PathLike[str], session_id: str, title: str) -> bool:
    """omp 18's session title index: upsert ``session_titles(session_id, title,
    updated_at)`` (seconds) in ``history.db``, which omp's session list prefers to the
    files. Only an existing database that has the table is written (one without it
    belongs to an agent that does not read it); best effort: False when nothing was
    written, never an exception (a rename must not fail on its index)."""
    path = Path(db_path)
    if not path.is_file():
        return False
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_titles'"
        ).fetchone()
        if found is None:
            return False
        conn.execute(
            "INSERT INTO session_titles (session_id, title, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(session_id) DO UPDATE SET title = excluded.title, "
            "updated_at = excluded.updated_at",
            (session_id, title, int(time.time())),
        )
        return True
    except sqlite3.Error as exc:
        log.warning("could not record the title of %s in %s: %s", session_id, path, exc)
        return False
    finally:
        conn.close()
