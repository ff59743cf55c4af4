"""`SearchIndex`: opening, updating and searching the index file.

It is a *cache*: every answer can be rebuilt from the session files, so a corrupt,
foreign or outdated database file is replaced, never trusted, and a database that
cannot be written (full disk, read-only dir) makes the index report itself
unavailable instead of failing its callers.

Concurrency
-----------
WAL mode and ``busy_timeout``: readers (threads or processes) search while an indexer
writes. Every write transaction is ``BEGIN IMMEDIATE`` and re-reads a file's state
under the lock, so two indexers never index the same lines twice.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Final

from core.errors import NotASessionError
from core.private_files import ensure_private_file, make_private_dirs
from core.safe_open import open_regular_fd
from core.search_index.formats import XCSH, FileFormat
from core.search_index.hits import Hit, SnippetFinder, snippet, split_key
from core.search_index.query import QueryTerm, parse_query, plan_query
from core.search_index.row_sessions import RowSessions
from core.search_index.rows import (
    MODE_LEGACY,
    MODE_NOT_SESSION,
    ChunkedLines,
    FileState,
    LineTooLong,
    Row,
    fingerprints,
    is_compressed,
    update_action,
)
from core.search_index.scan import Verifier, entry_reader, matching_rows
from core.search_index.schema import (
    CorruptIndex,
    TextSink,
    create_schema,
    get_meta,
    insert_all,
    is_corrupt,
    is_empty_database,
    is_unwritable,
    kill_rows,
    load_state,
    load_states,
    new_file,
    save_state,
    set_meta,
    validate_schema,
)
from core.search_index.sources import key_bytes, unlisted_stores
from core.search_index.terms import (
    TermReader,
    expand_prefix,
    mark_terms_incomplete,
    open_vocabulary,
    rebuild_terms,
    terms_complete,
)
from core.session_stat import session_stat, split_row_session_path
from core.zstd_files import NotZstdData, TextPastItsBound, zstd_chunks

log = logging.getLogger(__name__)


MAX_LIMIT: Final = 1000
BUSY_TIMEOUT_MS: Final = 5000


# One write transaction holds at most this much file data: large enough that commits
# are rare, small enough that the write lock is held for well under a second.
_BATCH_BYTES = 16 * 1024 * 1024
_BATCH_FILES = 400

# An update with more new bytes than this rebuilds the term list at its end instead of
# adding each row's terms (core.search_index.terms): about where the two cost the same
# for the 1,000-session bench (3 s of reading the vocabulary, 13 s of tokenizing 891 MB).
_BIG_UPDATE_BYTES = 128 * 1024 * 1024

# Dead rows are rebuilt away once they exceed max(this, half the live rows).
_MIN_DEAD_FOR_REBUILD = 20_000

#: Rows indexed between two calls of `SearchIndex.between_rows` (about 0.1-0.3 ms of
#: work: a request waits no longer than that for the indexer to notice it).
_ROWS_BETWEEN_CALLS = 64

#: The write-ahead log is cut back to this size after each checkpoint.
_WAL_SIZE_LIMIT = 4 << 20
#: An update that read this much session data folds the log into the index at its end.
_FOLD_LOG_AFTER_BYTES = 16 << 20


@dataclass
class UpdateStats:
    """What one `SearchIndex.update` did."""

    files_seen: int = 0
    files_unchanged: int = 0
    files_appended: int = 0  # only new lines read
    files_indexed: int = 0  # read whole: new, replaced, truncated, rewritten, v1
    files_removed: int = 0
    bytes_read: int = 0
    entries_indexed: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    #: why the update stopped early (the index is then unavailable or busy), or None.
    error: str | None = None
    #: files that could not be read (path: reason); they are retried next time.
    skipped: list[str] = field(default_factory=list)
    #: stores whose sessions could not be listed (path: reason): what the index holds
    #: of them is kept, and they are tried again at the next full pass (`FileKeys`).
    unlisted: list[str] = field(default_factory=list)


class SearchIndex:
    """The search index in ``db_path`` (see the package docstring).

    ``read_only=True`` never writes (no schema work, no rebuild): for ``--read-only``
    mounts and CLI searches; a missing or unusable file then makes it unavailable.
    Thread-safe: searches share one connection under a lock, updates use their own.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        file_format: FileFormat = XCSH,
    ) -> None:
        self.path = Path(db_path)
        self.read_only = read_only
        #: which files under the root are sessions and what their lines are (an xcsh
        #: agent dir's, Claude Code's or Codex's: `core.search_index.formats`)
        self.file_format = file_format
        self._read_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._unavailable: str | None = None
        self._closed = False
        # Each used only under its lock: the terms of inserted rows / of a query's prefix.
        self._write_terms = TermReader()
        self._read_terms = TermReader()
        #: called in the indexing thread every `_ROWS_BETWEEN_CALLS` rows: a daemon
        #: pauses there while it serves requests (a first build parses every session
        #: file in the daemon's process, holding the GIL a request needs)
        self.between_rows: Callable[[], None] | None = None
        self._open()

    # -- state --------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return self._unavailable is None

    @property
    def unavailable_reason(self) -> str | None:
        """Why searches return nothing (unwritable or corrupt cache), else None."""
        return self._unavailable

    def _mark_unavailable(self, reason: str) -> None:
        if self._unavailable is None:
            log.warning("search index %s unavailable: %s", self.path, reason)
        self._unavailable = reason

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            self._closed = True
            for conn in (self._reader, self._writer):
                if conn is not None:
                    conn.close()
            self._reader = self._writer = None
            self._write_terms.close()
            self._read_terms.close()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- opening --------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            ensure_private_file(self.path)  # its -wal and -shm take its mode
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        return conn

    def _open(self) -> None:
        """Open (creating, or replacing what is not ours) and validate; on failure the
        index is unavailable with the reason."""
        try:
            if self.read_only:
                if not self.path.is_file():
                    raise FileNotFoundError(f"no search index at {self.path}")
                reader = self._connect()
                try:
                    validate_schema(reader)
                except BaseException:
                    reader.close()
                    raise
            else:
                make_private_dirs(self.path.parent)
                reader = self._open_writable()
        except CorruptIndex as exc:
            self._mark_unavailable(f"not a usable search index: {exc}")
            return
        except (OSError, sqlite3.Error) as exc:
            self._mark_unavailable(f"cannot open {self.path}: {exc}")
            return
        self._reader = reader
        self._unavailable = None

    def _open_writable(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            if is_empty_database(conn):
                create_schema(conn)
            else:
                validate_schema(conn)
            return conn
        except (CorruptIndex, sqlite3.DatabaseError) as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not is_corrupt(exc):
                raise
            log.warning("search index %s is not usable (%s); rebuilding it", self.path, exc)
        self._delete_files()
        conn = self._connect()
        create_schema(conn)
        return conn

    def _delete_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _close_connections(self) -> None:
        """Drop both connections (the caller holds the write lock) so the next use reopens."""
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _reopen_if_needed(self) -> bool:
        """Before an update: retry an unavailable index (space may have been freed)."""
        if self._unavailable is None and self._reader is not None:
            return True
        if self.read_only:
            return False
        self._close_connections()
        self._unavailable = None
        self._open()
        return self._unavailable is None

    # -- updating -----------------------------------------------------------------------

    def update(
        self,
        sessions_root: str | os.PathLike[str],
        paths: Iterable[str | os.PathLike[str]] | None = None,
        *,
        defer_terms: bool = False,
    ) -> UpdateStats:
        """Bring the index up to date with the session files under ``sessions_root``
        (``<agent>/sessions``). With ``paths``, only those files are looked at (each
        must be under the root; a missing one is dropped); without, every session file
        is, and files gone from disk are dropped. ``defer_terms``: one slice of a build
        made of many updates; the term list is rebuilt once, by the first update
        without it, and prefixes are left to FTS5 until then (see
        core.search_index.terms). Never raises for I/O or database
        trouble: ``stats.error`` says what stopped it."""
        started = time.perf_counter()
        stats = UpdateStats()
        with self._write_lock:
            if self._closed:
                stats.error = "search index is closed"
                return stats
            if self.read_only:
                stats.error = "search index is read-only"
                return stats
            if not self._reopen_if_needed():
                stats.error = self._unavailable
                return stats
            try:
                self._update(os.path.abspath(sessions_root), paths, stats, defer_terms)
                if stats.bytes_read >= _FOLD_LOG_AFTER_BYTES:
                    self._fold_log_locked()
            except Exception as exc:
                self._update_failed(exc, stats)
        stats.seconds = time.perf_counter() - started
        return stats

    def _update_failed(self, exc: Exception, stats: UpdateStats) -> None:
        conn = self._writer
        if conn is not None and conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        stats.error = f"{type(exc).__name__}: {exc}"
        if is_corrupt(exc):
            # Rebuilt on the next update; no answers from a broken index meanwhile.
            self._mark_unavailable(f"corrupt search index: {exc}")
            self._delete_on_reopen()
        elif is_unwritable(exc):
            self._mark_unavailable(f"cannot write the search index: {exc}")
        elif not isinstance(exc, sqlite3.OperationalError | NotASessionError):
            # (not an agent's database that could not be listed now: stats.error says it)
            log.exception("search index %s: update failed", self.path)

    def _delete_on_reopen(self) -> None:
        self._close_connections()
        self._delete_files()

    def _writer_conn(self) -> sqlite3.Connection:
        if self._writer is None:
            self._writer = self._connect()
            self._writer.execute("PRAGMA synchronous=NORMAL")
            # A big first build grows the write-ahead log far past the auto-checkpoint
            # size while readers pin it; without a limit SQLite keeps that file at its
            # largest size for ever (20 MB beside a 28 MB index in the bench).
            self._writer.execute(f"PRAGMA journal_size_limit={_WAL_SIZE_LIMIT}")
        return self._writer

    def _fold_log_locked(self) -> None:
        conn = self._writer
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def file_totals(self) -> tuple[int, int] | None:
        """How many session files the index holds and their bytes as last indexed (one
        query, not a stat per file); None when the index cannot be read now."""
        with self._write_lock:
            if self._closed or not self.available:
                return None
            try:
                conn = self._writer_conn()
                count, size = conn.execute("SELECT count(*), total(size) FROM files").fetchone()
            except sqlite3.Error:
                return None
        return int(count), int(size)

    def fold_log(self) -> None:
        """Copy the write-ahead log into the index and shrink it (after a big update,
        or a build made of many small ones). Best effort: a reader mid-query only
        makes it partial."""
        with self._write_lock:
            self._fold_log_locked()

    def _update(
        self,
        root: str,
        paths: Iterable[str | os.PathLike[str]] | None,
        stats: UpdateStats,
        defer_terms: bool,
    ) -> None:
        conn = self._writer_conn()
        self._reset_if_needed(conn, root, stats)
        if paths is None:
            states = load_states(conn)
            keys = self.file_format.file_keys(root)
            wanted = {key_bytes(parts): parts for parts in keys}
            unlisted = unlisted_stores(keys)
            kept = tuple(key_bytes((store,)) + b"/" for store in unlisted)
            gone = [key for key in states if key not in wanted and not key.startswith(kept)]
            stats.unlisted += [f"{store}: {why}" for store, why in unlisted.items()]
        else:
            wanted = {}
            for path in paths:
                relative = os.path.relpath(os.path.abspath(path), root)
                if relative.startswith(os.pardir) or os.path.isabs(relative):
                    stats.skipped.append(f"{path}: not under {root}")
                    continue
                parts = tuple(Path(relative).parts)
                wanted[key_bytes(parts)] = parts
            # Only the states of these files: an update of the one file an agent just
            # appended to must not cost a row per session on disk.
            states = {key: state for key in wanted if (state := load_state(conn, key))}
            gone = []
        changed, new_bytes = self._changed_files(root, wanted, states, stats, gone)
        if gone:
            self._in_transaction(conn, lambda: self._drop_files(conn, gone, stats))
        big = defer_terms or new_bytes >= _BIG_UPDATE_BYTES
        if big and changed and terms_complete(conn):
            self._in_transaction(conn, lambda: mark_terms_incomplete(conn))
        self._index_changed(conn, changed, stats)
        if not defer_terms:
            self._complete_terms(conn)

    def _complete_terms(self, conn: sqlite3.Connection) -> None:
        """Rebuild the term list when a big update (this one, or one that stopped
        half-way) left it incomplete."""
        if terms_complete(conn):
            return
        open_vocabulary(conn)

        def rebuild() -> None:
            if not terms_complete(conn):  # another indexer may have just done it
                rebuild_terms(conn)

        self._in_transaction(conn, rebuild)

    def _changed_files(
        self,
        root: str,
        wanted: dict[bytes, tuple[str, ...]],
        states: dict[bytes, FileState],
        stats: UpdateStats,
        gone: list[bytes],
    ) -> tuple[list[tuple[bytes, str]], int]:
        """The files whose stat differs from what was indexed (one stat per file), and
        about how many bytes they have that were not indexed."""
        changed = []
        new_bytes = 0
        for key, parts in wanted.items():
            path = os.path.join(root, *parts)
            try:
                st = session_stat(path)  # a row session's: its database's (and WAL's)
            except OSError:
                if key in states:
                    gone.append(key)
                continue
            stats.files_seen += 1
            state = states.get(key)
            if state is not None and (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (
                state.dev,
                state.ino,
                state.size,
                state.mtime_ns,
            ):
                stats.files_unchanged += 1
            else:
                changed.append((key, path))
                same = state is not None and state.ino == st.st_ino
                done = state.indexed_to if state is not None and same else 0
                new_bytes += max(0, st.st_size - done)
        return changed, new_bytes

    def _index_changed(
        self,
        conn: sqlite3.Connection,
        changed: Sequence[tuple[bytes, str]],
        stats: UpdateStats,
    ) -> None:
        """Index the changed files, a transaction per `_BATCH_FILES` / `_BATCH_BYTES`."""
        pending = deque(changed)
        while pending:
            self._in_transaction(conn, lambda: self._index_some(conn, pending, stats))

    def _index_some(
        self, conn: sqlite3.Connection, pending: deque[tuple[bytes, str]], stats: UpdateStats
    ) -> None:
        read = files = 0
        # Read in the transaction: a big update of another indexer may have begun.
        sink = partial(self._write_terms.add_terms, conn) if terms_complete(conn) else None
        while pending and read < _BATCH_BYTES and files < _BATCH_FILES:
            key, path = pending.popleft()
            read += self._index_file(conn, key, path, stats, sink)
            files += 1

    def _in_transaction(self, conn: sqlite3.Connection, work: Callable[[], None]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            work()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _index_file(
        self,
        conn: sqlite3.Connection,
        key: bytes,
        path: str,
        stats: UpdateStats,
        sink: TextSink | None,
    ) -> int:
        """Bring one file up to date (inside the caller's transaction); bytes read."""
        sessions = self.file_format.row_sessions
        if sessions is not None and split_row_session_path(path):
            return self._index_row_session(conn, sessions, (key, path), stats, sink)
        try:
            fd = open_regular_fd(path)
        except OSError as exc:
            stats.skipped.append(f"{path}: {exc.strerror or exc}")
            return 0
        try:
            st = os.fstat(fd)
            # Re-read under the write lock: another indexer may have just done it.
            state = load_state(conn, key)
            # A compressed file is read whole whenever its stat changed (an archived
            # rollout does not grow; its offsets are in the decompressed text).
            action = "full" if is_compressed(key) else update_action(state, st, fd)
            if action == "touch" and state is not None:
                conn.execute(
                    "UPDATE files SET size = ?, mtime_ns = ? WHERE id = ?",
                    (st.st_size, st.st_mtime_ns, state.file_id),
                )
                stats.files_unchanged += 1
                return 0
            return self._index_lines(
                conn, key, fd, st, state, stats, sink, whole=action != "append"
            )
        except OSError as exc:
            stats.skipped.append(f"{path}: {exc.strerror or exc}")
            return 0
        finally:
            os.close(fd)

    def _index_row_session(
        self,
        conn: sqlite3.Connection,
        sessions: RowSessions,
        session: tuple[bytes, str],
        stats: UpdateStats,
        sink: TextSink | None,
    ) -> int:
        """Bring one row session up to date through its connector (inside the caller's
        transaction; `core.search_index.row_sessions`): read again only when its
        version changed. ``session``: its key and path. Returns the bytes of text
        indexed."""
        key, path = session
        try:
            # The stat first: a write after it changes the stat again, so is caught.
            st = session_stat(path)
            version = sessions.version(path)
            state = load_state(conn, key)
            stat = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if state is not None and state.head_hash == version:
                save_state(conn, state.file_id, (*stat, 0, version, 0, MODE_LEGACY))
                stats.files_unchanged += 1
                return 0
            rows = sessions.rows(path)
        except (NotASessionError, OSError) as exc:
            stats.skipped.append(f"{path}: {exc}")
            return 0
        if state is not None:
            kill_rows(conn, state.file_id)
        file_id = state.file_id if state is not None else new_file(conn, key)
        stats.entries_indexed += insert_all(conn, file_id, iter(rows), sink)
        save_state(conn, file_id, (*stat, 0, version, 0, MODE_LEGACY))
        stats.files_indexed += 1
        size = sum(len(row.text) for row in rows)
        stats.bytes_read += size
        return size

    def _index_lines(
        self,
        conn: sqlite3.Connection,
        key: bytes,
        fd: int,
        st: os.stat_result,
        state: FileState | None,
        stats: UpdateStats,
        sink: TextSink | None,
        *,
        whole: bool,
    ) -> int:
        """Index the file from its start (``whole``; its old rows die) or its new lines
        only; returns the bytes read."""
        start = 0 if whole or state is None else state.indexed_to
        compressed = is_compressed(key)
        lines = (
            ChunkedLines(zstd_chunks(fd))
            if compressed
            else ChunkedLines.of_file(fd, start, st.st_size)
        )
        file_format = self.file_format.of_file(key)  # (the file's name decides)
        if whole and state is not None:
            kill_rows(conn, state.file_id)
        file_id = state.file_id if state is not None else new_file(conn, key)
        try:
            if whole or state is None:  # (its first lines read here: its mode)
                mode, rows = file_format.whole_file_rows(lines)
            else:
                mode, rows = state.mode, file_format.appended_rows(lines)
            if self.between_rows is not None:
                rows = _calling_between(rows, self.between_rows)
            stats.entries_indexed += insert_all(conn, file_id, rows, sink)
        except (NotZstdData, TextPastItsBound, LineTooLong) as exc:
            # A compressed file that does not decompress, or expands past its bound (a
            # bomb: `read_chunks` stops there), or a line too long to hold. Its rows
            # so far die, and its stat is kept: not read again until it changes.
            kill_rows(conn, file_id)
            stats.skipped.append(f"{os.fsdecode(key)}: {exc}")
            mode = MODE_NOT_SESSION
        indexed_to = 0 if mode == MODE_NOT_SESSION else lines.complete_to
        head, tail = (0, 0) if compressed else fingerprints(fd, indexed_to)
        stat = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        save_state(conn, file_id, (*stat, indexed_to, head, tail, mode))
        if whole:
            stats.files_indexed += 1
        else:
            stats.files_appended += 1
        stats.bytes_read += lines.bytes_read
        return lines.bytes_read

    def _drop_files(
        self, conn: sqlite3.Connection, keys: Sequence[bytes], stats: UpdateStats
    ) -> None:
        for key in keys:
            state = load_state(conn, key)
            if state is not None:
                kill_rows(conn, state.file_id)
                conn.execute("DELETE FROM files WHERE id = ?", (state.file_id,))
                stats.files_removed += 1

    def _reset_if_needed(self, conn: sqlite3.Connection, root: str, stats: UpdateStats) -> None:
        """Start from empty when the root changed or dead rows pile up."""
        stored_root = get_meta(conn, "root")
        dead = int(get_meta(conn, "dead") or 0)
        reset = stored_root != root
        if not reset and dead > _MIN_DEAD_FOR_REBUILD:
            live = conn.execute(
                "SELECT count(*) FROM entries WHERE file_id IS NOT NULL"
            ).fetchone()[0]
            reset = dead > live // 2
        if not reset:
            return

        def clear() -> None:
            conn.execute("DELETE FROM entries")
            conn.execute("DELETE FROM files")
            conn.execute("DELETE FROM buckets")
            conn.execute("INSERT INTO fts(fts) VALUES('delete-all')")
            conn.execute("DELETE FROM terms")
            mark_terms_incomplete(conn)  # rebuilt from the empty index at the end
            set_meta(conn, "dead", 0)
            set_meta(conn, "root", root)

        self._in_transaction(conn, clear)
        stats.rebuilt = stored_root is not None

    # -- searching ------------------------------------------------------------------------

    def search(
        self, query: str, limit: int = 100, visible: Callable[[bytes], bool] | None = None
    ) -> list[Hit]:
        """Entries containing every word of ``query`` (see `parse_query`), newest first.

        Never raises: an unavailable index or a query without words gives ``[]``.
        Hits whose line changed on disk since it was indexed are left out, and so are
        hits in session files ``visible`` says no to (it gets the file's path below the
        sessions root): they do not count towards ``limit`` either.
        """
        try:
            limit = max(0, min(MAX_LIMIT, int(limit)))
        except (TypeError, ValueError, OverflowError):
            return []
        with self.stream(query, visible, batch=limit) as hits:
            return list(itertools.islice(hits, limit))

    @contextlib.contextmanager
    def stream(
        self, query: str, visible: Callable[[bytes], bool] | None = None, *, batch: int = 100
    ) -> Iterator[Iterator[Hit]]:
        """`search`'s hits one at a time, newest first, each line read back (and its
        snippet made) only when it is asked for: a caller that merges the hits of
        several indexes reads only the lines it shows. ``batch``: matches fetched from
        the index at a time (how many the caller expects to take). The index is held
        for searches until the block ends; never raises but through the block."""
        terms = parse_query(query)
        if not terms:
            yield iter(())
            return
        with self._read_lock:
            hits = self._guarded(self._hits(terms, visible, max(1, min(MAX_LIMIT, batch))))
            try:
                yield hits
            finally:
                hits.close()  # its open session files, now, not when it is collected

    def _guarded(self, hits: Iterator[Hit]) -> Generator[Hit, None, None]:
        """``hits``, ending quietly (logged; a corrupt index marked unavailable) on a
        database or file error."""
        try:
            yield from hits
        except Exception as exc:
            if is_corrupt(exc):
                self._mark_unavailable(f"corrupt search index: {exc}")
            else:
                log.exception("search index %s: search failed", self.path)

    def _hits(
        self, terms: list[QueryTerm], visible: Callable[[bytes], bool] | None, batch: int
    ) -> Iterator[Hit]:
        """The hits of ``terms`` (the caller holds the read lock)."""
        conn = self._reader
        if conn is None or self._unavailable is not None:
            return
        root = get_meta(conn, "root")
        if root is None:
            return
        expanded = self._expand_last_term(conn, terms)
        plan = None if expanded is None else plan_query(expanded)
        if plan is None:
            return
        finder = SnippetFinder(terms)
        reader = entry_reader(root, self.file_format)
        verifier = Verifier(plan.checks, reader) if plan.checks else None
        keep = None if verifier is None else verifier.keep
        try:
            for _, ts, entry_id, role, offset, length, crc, key, *indexed in matching_rows(
                conn, plan.match, batch, keep
            ):
                if visible is not None and not visible(key):
                    continue  # a session the one who asks may not read
                text = reader.text(key, entry_id, (offset, length, crc, *indexed))
                if text is None:
                    continue  # the line changed since it was indexed
                project, stem = split_key(key)
                yield Hit(ts, project, stem, entry_id, role, snippet(text, finder))
        finally:
            reader.close()
            if verifier is not None:
                verifier.close()

    def _expand_last_term(
        self, conn: sqlite3.Connection, terms: list[QueryTerm]
    ) -> list[QueryTerm] | None:
        """``terms`` with the prefix term's expansions looked up in the term list (see
        core.search_index.terms); None when no term starts with the prefix."""
        last = terms[-1]
        if not last.prefix:
            return terms
        expansions = expand_prefix(conn, self._read_terms, last.text)
        if expansions == ():
            return None
        return [*terms[:-1], last._replace(expansions=expansions)]


def _calling_between(rows: Iterable[Row], call: Callable[[], None]) -> Iterator[Row]:
    """``rows``, calling ``call`` before every `_ROWS_BETWEEN_CALLS`-th."""
    for count, row in enumerate(rows):
        if count % _ROWS_BETWEEN_CALLS == 0:
            call()
        yield row
